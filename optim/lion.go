package optim

import (
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// LionOptions are the optional hyperparameters of Lion. Zero fields take
// optax's defaults; use Zero for a literal 0.
type LionOptions struct {
	// B1 mixes the momentum and the current gradient into the update
	// direction (default 0.9).
	B1 float64
	// B2 is the decay of the momentum (default 0.99).
	B2 float64
	// WeightDecay is the decoupled weight decay rate (default 1e-3),
	// multiplied by the learning rate.
	WeightDecay float64
	// Mask selects the parameters that are decayed; nil decays every float
	// parameter.
	Mask pytree.Predicate
}

// LionState is the state of Lion.
type LionState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// Mu is the momentum, a tree like the params.
	Mu any
}

// Lion returns the Lion optimizer (Chen et al. 2023, optax.lion):
//
//	u = -lr(t-1) · (sign((1-b1)·g + b1·m) + wd·p)
//	m ← b2·m + (1-b2)·g
//
// Its updates have unit magnitude per element, so its learning rate is
// typically 3-10x smaller than AdamW's and its weight decay as much larger.
// Update needs params unless WeightDecay is Zero.
func Lion(lr Schedule, opts ...LionOptions) Transform {
	const op = "optim.Lion"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	l := &lion{
		lr:   lr,
		b1:   orDefault(o.B1, 0.9),
		b2:   orDefault(o.B2, 0.99),
		wd:   orDefault(o.WeightDecay, 1e-3),
		mask: o.Mask,
	}
	checkUnit(op, "B1", l.b1, true)
	checkUnit(op, "B2", l.b2, false)
	checkNonNeg(op, "WeightDecay", l.wd)
	return l
}

type lion struct {
	lr         Schedule
	b1, b2, wd float64
	mask       pytree.Predicate
}

func (l *lion) Init(params any) State {
	rejectHalf("optim.Lion", "parameter", params)
	return LionState{Count: newCount(), Mu: stateLike(params, 0)}
}

// lionRoles names the trees of lion.Update's walk.
var lionRoles = roles("gradients", "optimizer state's Mu", "parameters")

func (l *lion) Update(grads any, state State, params any) (any, State) {
	rejectHalf("optim.Lion", "gradient", grads)
	const op = "optim.Lion"
	st := stateAs[LionState](op, state)
	n := countValue(op, st.Count)
	lr := rateAt(op, l.lr, n)
	trees := []any{grads, st.Mu}
	if l.wd != 0 {
		needParams(op, params)
		trees = append(trees, selected(params, l.mask))
	}
	defer func() { sameStructure(op, recover(), lionRoles) }()
	r := mapMulti(2, func(xs []*tensor.Tensor) []*tensor.Tensor {
		g, m := xs[0], xs[1]
		if g == nil {
			return []*tensor.Tensor{nil, m}
		}
		noState(op, g, m)
		gradFits(op, g, m, st.Mu)
		u := tensor.Sign(tensor.Add(tensor.MulScalar(g, float32(1-l.b1)), tensor.MulScalar(m, float32(l.b1))))
		if l.wd != 0 && xs[2] != nil {
			u = tensor.Add(u, tensor.MulScalar(xs[2], float32(l.wd)))
		}
		return []*tensor.Tensor{scale(u, -lr), withAxesOf(ema(m, g, l.b2), m)}
	}, trees...)
	return r[0], LionState{Count: incCount(st.Count, n), Mu: r[1]}
}
