package optim

import (
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// AdadeltaOptions are the optional hyperparameters of Adadelta and
// ScaleByAdadelta. Zero fields take optax's defaults; use Zero for a
// literal 0.
type AdadeltaOptions struct {
	// Rho is the decay of both moving averages (default 0.9).
	Rho float64
	// Eps is added inside both square roots (default 1e-6).
	Eps float64
	// WeightDecay adds WeightDecay·param to the gradient before the
	// rescaling (coupled, L2-style decay, as optax and PyTorch do for
	// Adadelta); default 0. Adadelta only.
	WeightDecay float64
	// WeightDecayMask selects the decayed parameters; nil decays every
	// float parameter.
	WeightDecayMask pytree.Predicate
}

// AdadeltaState is the state of Adadelta and ScaleByAdadelta.
type AdadeltaState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// EG is the moving average of squared gradients, EX that of squared
	// updates, trees like the params.
	EG, EX any
}

// Adadelta returns the Adadelta optimizer (Zeiler 2012, optax.adadelta),
// which is also torch.optim.Adadelta: with g the gradient plus
// WeightDecay·param and ρ the decay,
//
//	E[g²] ← ρ·E[g²] + (1-ρ)·g²
//	Δ = sqrt(E[Δ²] + eps) / sqrt(E[g²] + eps) · g
//	E[Δ²] ← ρ·E[Δ²] + (1-ρ)·Δ²
//	u = -lr(t-1) · Δ
//
// The paper's Adadelta has no learning rate: pass Constant(1), PyTorch's
// default. Update needs params when WeightDecay is set.
func Adadelta(lr Schedule, opts ...AdadeltaOptions) Transform {
	const op = "optim.Adadelta"
	needSchedule(op, lr)
	return newAdadelta(op, lr, oneOpt(op, opts))
}

// ScaleByAdadelta returns Adadelta's rescaling alone, without weight decay
// and learning rate (optax.scale_by_adadelta). WeightDecay must be unset.
func ScaleByAdadelta(opts ...AdadeltaOptions) Transform {
	const op = "optim.ScaleByAdadelta"
	o := oneOpt(op, opts)
	if o.WeightDecay != 0 && o.WeightDecay != Zero {
		panic(op + ": WeightDecay is an option of Adadelta; chain AddDecayedWeights before ScaleByAdadelta")
	}
	return newAdadelta(op, nil, o)
}

type adadelta struct {
	op           string
	lr           Schedule
	rho, eps, wd float64
	mask         pytree.Predicate
}

func newAdadelta(op string, lr Schedule, o AdadeltaOptions) *adadelta {
	a := &adadelta{op: op, lr: lr, rho: orDefault(o.Rho, 0.9), eps: orDefault(o.Eps, 1e-6),
		wd: orDefault(o.WeightDecay, 0), mask: o.WeightDecayMask}
	checkUnit(op, "Rho", a.rho, false)
	checkNonNeg(op, "Eps", a.eps)
	checkNonNeg(op, "WeightDecay", a.wd)
	return a
}

func (a *adadelta) elementwise() bool { return a.mask == nil }

func (a *adadelta) Init(params any) State {
	rejectHalf(a.op, "parameter", params)
	return AdadeltaState{Count: newCount(), EG: stateLike(params, 0), EX: stateLike(params, 0)}
}

func (a *adadelta) Update(grads any, state State, params any) (any, State) {
	rejectHalf(a.op, "gradient", grads)
	st := stateAs[AdadeltaState](a.op, state)
	n := countValue(a.op, st.Count)
	post := learningRate(a.op, a.lr, n)
	var extras []any
	if a.wd != 0 {
		needParams(a.op, params)
		extras = []any{selected(params, a.mask)}
	}
	eps := float32(a.eps)
	u, s := leafStep(a.op, grads, []any{st.EG, st.EX}, extras, func(g *tensor.Tensor, s, x []*tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
		if len(x) > 0 {
			g = withDecay(g, x[0], a.wd)
		}
		eg := ema(s[0], tensor.Square(g), a.rho)
		d := tensor.Mul(tensor.Div(tensor.Sqrt(tensor.AddScalar(s[1], eps)), tensor.Sqrt(tensor.AddScalar(eg, eps))), g)
		ex := ema(s[1], tensor.Square(d), a.rho)
		return scale(d, post), []*tensor.Tensor{eg, ex}
	})
	return u, AdadeltaState{Count: incCount(st.Count, n), EG: s[0], EX: s[1]}
}
