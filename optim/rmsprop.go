package optim

import (
	"math"

	"github.com/gonox/gonox/tensor"
)

// RMSPropOptions are the optional hyperparameters of RMSProp. Zero fields
// take optax's defaults; use Zero for a literal 0.
type RMSPropOptions struct {
	// Decay is the decay of the moving averages (default 0.9).
	Decay float64
	// Eps keeps the denominator away from zero (default 1e-8).
	Eps float64
	// EpsOutsideSqrt adds Eps outside the square root, 1/(sqrt(v)+eps),
	// instead of inside it, 1/sqrt(v+eps) (optax's eps_in_sqrt=False).
	EpsOutsideSqrt bool
	// InitialScale is the initial value of the second moment (default 0,
	// as in PyTorch; TF1 used 1).
	InitialScale float64
	// Centered divides by an estimate of the gradient's variance,
	// v - m², instead of its second moment (Graves 2013).
	Centered bool
	// BiasCorrection divides the moving averages by 1-decay^t, as Adam does.
	BiasCorrection bool
	// Momentum is the decay of a momentum trace applied after the learning
	// rate; 0 means none (optax's momentum=None).
	Momentum float64
	// Nesterov uses Nesterov momentum (needs Momentum > 0).
	Nesterov bool
}

// RMSPropState is the state of RMSProp.
type RMSPropState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// Nu is the moving average of squared gradients.
	Nu any
	// Mu is the moving average of gradients; nil unless Centered.
	Mu any
	// Trace is the momentum trace; nil without Momentum.
	Trace any
}

// RMSProp returns the RMSProp optimizer in optax's flexible form
// (optax.rmsprop): with d the decay,
//
//	v ← d·v + (1-d)·g²
//	m ← d·m + (1-d)·g                   (Centered only)
//	s = -lr(t-1) · g / sqrt(v - m² + eps)   (m = 0 unless Centered;
//	                                    sqrt(v - m²) + eps with EpsOutsideSqrt)
//
// and, with Momentum μ, a trace t ← s + μ·t whose new value is the update
// (s + μ·t, with the new t, under Nesterov). As in optax the trace follows
// the learning rate.
//
// torch.optim.RMSprop(lr, alpha, eps, momentum, centered) is RMSProp with
// Decay alpha (PyTorch's default 0.99, not 0.9), Eps eps and
// EpsOutsideSqrt set, Momentum and Centered; its weight_decay is
// AddDecayedWeights chained in front. With momentum and a learning rate
// that changes, the two differ: PyTorch's buffer holds g/sqrt(v) and is
// scaled by the current rate, this trace holds rate-scaled steps.
func RMSProp(lr Schedule, opts ...RMSPropOptions) Transform {
	const op = "optim.RMSProp"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	o.Decay = orDefault(o.Decay, 0.9)
	o.Eps = orDefault(o.Eps, 1e-8)
	o.InitialScale = orDefault(o.InitialScale, 0)
	checkUnit(op, "Decay", o.Decay, false)
	checkNonNeg(op, "Eps", o.Eps)
	checkNonNeg(op, "InitialScale", o.InitialScale)
	checkUnit(op, "Momentum", o.Momentum, false)
	if o.Nesterov && o.Momentum == 0 {
		panic(op + ": Nesterov needs Momentum > 0")
	}
	return &rmsprop{lr: lr, o: o}
}

type rmsprop struct {
	lr Schedule
	o  RMSPropOptions
}

func (r *rmsprop) Init(params any) State {
	rejectHalf("optim.RMSProp", "parameter", params)
	st := RMSPropState{Count: newCount(), Nu: stateLike(params, r.o.InitialScale)}
	if r.o.Centered {
		st.Mu = stateLike(params, 0)
	}
	if r.o.Momentum != 0 {
		st.Trace = stateLike(params, 0)
	}
	return st
}

// rmspropRoles names the trees of rmsprop.Update's walk.
var rmspropRoles = roles("gradients", "optimizer state's Nu", "optimizer state's Mu")

func (r *rmsprop) Update(grads any, state State, _ any) (any, State) {
	rejectHalf("optim.RMSProp", "gradient", grads)
	const op = "optim.RMSProp"
	st := stateAs[RMSPropState](op, state)
	n := countValue(op, st.Count)
	lr := rateAt(op, r.lr, n)
	o := r.o
	bc := 1.0
	if o.BiasCorrection {
		bc = 1 - math.Pow(o.Decay, float64(n)+1)
	}
	mu := st.Mu
	if !o.Centered {
		mu = st.Nu // a placeholder tree of the right structure, not read
	}
	defer func() { sameStructure(op, recover(), rmspropRoles) }()
	res := mapMulti(3, func(xs []*tensor.Tensor) []*tensor.Tensor {
		g, nu, m := xs[0], xs[1], xs[2]
		if g == nil {
			return []*tensor.Tensor{nil, nu, m}
		}
		noState(op, g, nu, m)
		gradFits(op, g, nu, st.Nu)
		nu2 := ema(nu, tensor.Square(g), o.Decay)
		v := scale(nu2, 1/bc)
		var m2 *tensor.Tensor
		if o.Centered {
			m2 = ema(m, g, o.Decay)
			v = tensor.Sub(v, tensor.Square(scale(m2, 1/bc)))
		}
		var s *tensor.Tensor
		if o.EpsOutsideSqrt {
			s = tensor.Div(g, tensor.AddScalar(tensor.Sqrt(v), float32(o.Eps)))
		} else {
			s = tensor.Mul(g, tensor.Rsqrt(tensor.AddScalar(v, float32(o.Eps))))
		}
		return []*tensor.Tensor{scale(s, -lr), withAxesOf(nu2, nu), withAxesOf(m2, m)}
	}, grads, st.Nu, mu)
	out := RMSPropState{Count: incCount(st.Count, n), Nu: res[1]}
	if o.Centered {
		out.Mu = res[2]
	}
	updates := res[0]
	if o.Momentum != 0 {
		updates, out.Trace = traceStep(op, updates, st.Trace, o.Momentum, o.Nesterov, 1)
	}
	return updates, out
}
