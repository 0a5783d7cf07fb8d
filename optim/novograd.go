package optim

import (
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// NovogradOptions are the optional hyperparameters of Novograd. Zero fields
// take optax's defaults; use Zero for a literal 0.
type NovogradOptions struct {
	// B1 is the decay of the first moment (default 0.9), B2 that of the
	// per-parameter second moment (default 0.25).
	B1, B2 float64
	// Eps is added outside the square root (default 1e-6), EpsRoot inside
	// (default 0).
	Eps, EpsRoot float64
	// WeightDecay adds WeightDecay·param to the normalized gradient
	// (default 0).
	WeightDecay float64
	// Psum, inside shard.Map, is c.Psum: the norm of each gradient is then
	// that of the whole parameter's gradient, not of the device's block.
	Psum PsumFunc
}

// NovogradState is the state of Novograd.
type NovogradState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// Mu is the first moment, a tree like the params.
	Mu any
	// Nu is the second moment of each parameter's gradient norm: one f32[]
	// scalar per float parameter.
	Nu any
}

// Novograd returns the NovoGrad optimizer (Ginsburg et al. 2019,
// optax.novograd), whose second moment is one scalar per parameter, the
// moving average of its gradient's squared norm:
//
//	ν ← ‖g‖²                          at the first update
//	ν ← b2·ν + (1-b2)·‖g‖²            after
//	m ← d                             at the first update, b1·m + d after,
//	    d = g/(sqrt(ν + epsRoot) + eps) + wd·p
//	u = -lr(t-1) · m
//
// Update needs params when WeightDecay is set.
func Novograd(lr Schedule, opts ...NovogradOptions) Transform {
	const op = "optim.Novograd"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	n := &novograd{lr: lr, b1: orDefault(o.B1, 0.9), b2: orDefault(o.B2, 0.25), eps: orDefault(o.Eps, 1e-6),
		epsRoot: orDefault(o.EpsRoot, 0), wd: orDefault(o.WeightDecay, 0), psum: o.Psum}
	checkUnit(op, "B1", n.b1, false)
	checkUnit(op, "B2", n.b2, false)
	checkNonNeg(op, "Eps", n.eps)
	checkNonNeg(op, "EpsRoot", n.epsRoot)
	checkNonNeg(op, "WeightDecay", n.wd)
	return n
}

type novograd struct {
	lr                       Schedule
	b1, b2, eps, epsRoot, wd float64
	psum                     PsumFunc
}

func (n *novograd) Init(params any) State {
	rejectHalf("optim.Novograd", "parameter", params)
	nu := pytree.Map(params, func(p *tensor.Tensor) *tensor.Tensor {
		if !isFloat(p) {
			return nil
		}
		return scalarLike(0, p)
	})
	return NovogradState{Count: newCount(), Mu: stateLike(params, 0), Nu: nu}
}

func (n *novograd) Update(grads any, state State, params any) (any, State) {
	const op = "optim.Novograd"
	rejectHalf(op, "gradient", grads)
	st := stateAs[NovogradState](op, state)
	c := countValue(op, st.Count)
	var extras []any
	if n.wd != 0 {
		needParams(op, params)
		extras = []any{params}
	}
	post := -rateAt(op, n.lr, c)
	first := c == 0
	u, s := leafStep(op, grads, []any{st.Mu, st.Nu}, extras, func(g *tensor.Tensor, s, x []*tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
		sq := leafSumSquares(g, n.psum)
		nu := sq
		if !first {
			nu = ema(s[1], sq, n.b2)
		}
		d := tensor.Div(g, adamDenominator(nu, n.eps, n.epsRoot))
		if len(x) > 0 {
			d = withDecay(d, x[0], n.wd)
		}
		mu := d
		if !first {
			mu = tensor.Add(tensor.MulScalar(s[0], float32(n.b1)), d)
		}
		return scale(mu, post), []*tensor.Tensor{mu, nu}
	})
	return u, NovogradState{Count: incCount(st.Count, c), Mu: s[0], Nu: s[1]}
}
