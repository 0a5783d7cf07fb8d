package optim

import (
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// leafSumSquares returns Σx² over the whole of a parameter as a float32
// scalar. Inside shard.Map, with psum set, a block's sum is summed over the
// mesh axes the block varies over, so a sharded parameter counts all its
// blocks (as GlobalNorm does for a tree).
func leafSumSquares(x *tensor.Tensor, psum PsumFunc) *tensor.Tensor {
	s := tensor.Sum(tensor.Square(x))
	if psum != nil {
		if axes := x.Local().AxisNames(); len(axes) > 0 {
			s = psum(s, axes...)
		}
	}
	return s
}

// TrustRatioOptions are the optional parameters of ScaleByTrustRatio.
// Zero fields take optax's defaults; use Zero for a literal 0.
type TrustRatioOptions struct {
	// MinNorm is a lower bound for both norms (default 0, no bound).
	MinNorm float64
	// TrustCoefficient multiplies the ratio (default 1).
	TrustCoefficient float64
	// Eps is added to the update's norm (default 0).
	Eps float64
	// Psum, inside shard.Map, is c.Psum: the norms are then those of the
	// whole parameter and update, not of the device's blocks.
	Psum PsumFunc
}

// ScaleByTrustRatio returns a transform that scales the update of each
// parameter by its trust ratio (You et al. 2017, optax.scale_by_trust_ratio):
//
//	u · coef·max(‖p‖, minNorm) / (max(‖u‖, minNorm) + eps)
//
// with ‖·‖ the L2 norm of the whole leaf; the ratio is 1 where either norm
// is 0. It is the layer-wise part of LARS and LAMB. Its state is
// EmptyState; Update needs params.
func ScaleByTrustRatio(opts ...TrustRatioOptions) Transform {
	const op = "optim.ScaleByTrustRatio"
	tr := newTrust(op, oneOpt(op, opts))
	return Stateless(func(u, params any) any {
		rejectHalf(op, "update", u)
		needParams(op, params)
		return pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
			if xs[0] == nil || xs[1] == nil {
				return xs[0]
			}
			return tr.apply(xs[0], xs[1])
		}, u, params)
	})
}

type trust struct {
	minNorm, coef, eps float64
	psum               PsumFunc
}

func newTrust(op string, o TrustRatioOptions) trust {
	t := trust{minNorm: orDefault(o.MinNorm, 0), coef: orDefault(o.TrustCoefficient, 1), eps: orDefault(o.Eps, 0), psum: o.Psum}
	checkNonNeg(op, "MinNorm", t.minNorm)
	checkNonNeg(op, "TrustCoefficient", t.coef)
	checkNonNeg(op, "Eps", t.eps)
	return t
}

// apply returns u scaled by its trust ratio against the parameter p. The
// ratio is a scalar tensor, so nothing is read back to the host.
func (t trust) apply(u, p *tensor.Tensor) *tensor.Tensor {
	pn := tensor.Sqrt(leafSumSquares(p, t.psum))
	un := tensor.Sqrt(leafSumSquares(u, t.psum))
	zero := tensor.Scalar(0)
	if t.minNorm != 0 {
		m := tensor.Scalar(float32(t.minNorm))
		pn, un = tensor.Maximum(pn, m), tensor.Maximum(un, m)
	}
	ratio := tensor.Div(pn, tensor.AddScalar(un, float32(t.eps)))
	if t.coef != 1 {
		ratio = tensor.MulScalar(ratio, float32(t.coef))
	}
	degenerate := tensor.LogicalOr(tensor.Equal(pn, zero), tensor.Equal(un, zero))
	ratio = tensor.Where(degenerate, tensor.Scalar(1), ratio)
	return tensor.Mul(u, ratio)
}

// LambOptions are the optional hyperparameters of Lamb. Zero fields take
// optax's defaults; use Zero for a literal 0.
type LambOptions struct {
	// B1, B2 and EpsRoot are as in Adam; Eps defaults to 1e-6.
	B1, B2, Eps, EpsRoot float64
	// WeightDecay is added to the Adam direction before the trust ratio
	// (default 0), for the parameters Mask selects (nil: all).
	WeightDecay float64
	Mask        pytree.Predicate
	// Psum, inside shard.Map, is c.Psum (see TrustRatioOptions).
	Psum PsumFunc
}

// Lamb returns the LAMB optimizer (You et al. 2020, optax.lamb): the Adam
// direction plus weight decay, scaled per parameter by its trust ratio
// ‖p‖/‖d‖ (ScaleByTrustRatio with its defaults), then by -lr:
//
//	d = m̂/(sqrt(v̂ + epsRoot) + eps) + wd·p
//	u = -lr(t-1) · ‖p‖/‖d‖ · d            (ratio 1 where a norm is 0)
//
// The state is an AdamState. Update needs params.
func Lamb(lr Schedule, opts ...LambOptions) Transform {
	const op = "optim.Lamb"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	eps := o.Eps
	if eps == 0 {
		eps = 1e-6 // optax.lamb's default, not Adam's
	}
	l := &lamb{
		lr:    lr,
		adam:  newAdam(op, nil, AdamOptions{B1: o.B1, B2: o.B2, Eps: eps, EpsRoot: o.EpsRoot}, 0, nil),
		wd:    orDefault(o.WeightDecay, 0),
		mask:  o.Mask,
		trust: newTrust(op, TrustRatioOptions{Psum: o.Psum}),
	}
	checkNonNeg(op, "WeightDecay", l.wd)
	return l
}

type lamb struct {
	lr    Schedule
	adam  *adam
	wd    float64
	mask  pytree.Predicate
	trust trust
}

func (l *lamb) Init(params any) State { return l.adam.Init(params) }

func (l *lamb) Update(grads any, state State, params any) (any, State) {
	const op = "optim.Lamb"
	needParams(op, params)
	n := countValue(op, stateAs[AdamState](op, state).Count)
	d, st := l.adam.Update(grads, state, nil)
	lr := rateAt(op, l.lr, n)
	u := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		d, p, sel := xs[0], xs[1], xs[2]
		if d == nil {
			return nil
		}
		if l.wd != 0 {
			d = withDecay(d, sel, l.wd)
		}
		return scale(l.trust.apply(d, p), -lr)
	}, d, params, selected(params, l.mask))
	return u, st
}

// LarsOptions are the optional hyperparameters of Lars. Zero fields take
// optax's defaults; use Zero for a literal 0.
type LarsOptions struct {
	// WeightDecay is added to the gradient before the trust ratio (default
	// 0), for the parameters WeightDecayMask selects (nil: all).
	WeightDecay     float64
	WeightDecayMask pytree.Predicate
	// TrustCoefficient multiplies the trust ratio (default 0.001), Eps is
	// added to the update's norm in it (default 0).
	TrustCoefficient, Eps float64
	// TrustRatioMask selects the parameters scaled by their trust ratio
	// (nil: all); the others keep their gradient (biases and norm scales
	// are commonly left out).
	TrustRatioMask pytree.Predicate
	// Momentum is the decay of the momentum trace (default 0.9; Zero for
	// none), Nesterov its Nesterov form.
	Momentum float64
	Nesterov bool
	// Psum, inside shard.Map, is c.Psum (see TrustRatioOptions).
	Psum PsumFunc
}

// LarsState is the state of Lars.
type LarsState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// Trace is the momentum trace, a tree like the params; nil without
	// momentum.
	Trace any
}

// Lars returns the LARS optimizer (You et al. 2017, optax.lars): weight
// decay added to the gradient, a per-parameter trust ratio, the learning
// rate, then momentum on the scaled update:
//
//	d = g + wd·p
//	s = -lr(t-1) · coef·‖p‖/(‖d‖ + eps) · d     (ratio 1 where a norm is 0)
//	tr ← s + μ·tr,  u = tr                      (s + μ·tr with Nesterov)
//
// As in optax the trace follows the learning rate. Update needs params.
func Lars(lr Schedule, opts ...LarsOptions) Transform {
	const op = "optim.Lars"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	coef := o.TrustCoefficient
	if coef == 0 {
		coef = 0.001 // optax.lars's default, not ScaleByTrustRatio's
	}
	l := &lars{
		lr:       lr,
		wd:       orDefault(o.WeightDecay, 0),
		wdMask:   o.WeightDecayMask,
		trMask:   o.TrustRatioMask,
		trust:    newTrust(op, TrustRatioOptions{TrustCoefficient: coef, Eps: o.Eps, Psum: o.Psum}),
		momentum: orDefault(o.Momentum, 0.9),
		nesterov: o.Nesterov,
	}
	checkNonNeg(op, "WeightDecay", l.wd)
	checkUnit(op, "Momentum", l.momentum, false)
	if l.nesterov && l.momentum == 0 {
		panic(op + ": Nesterov needs Momentum > 0")
	}
	return l
}

type lars struct {
	lr             Schedule
	wd             float64
	wdMask, trMask pytree.Predicate
	trust          trust
	momentum       float64
	nesterov       bool
}

func (l *lars) Init(params any) State {
	rejectHalf("optim.Lars", "parameter", params)
	st := LarsState{Count: newCount()}
	if l.momentum != 0 {
		st.Trace = stateLike(params, 0)
	}
	return st
}

func (l *lars) Update(grads any, state State, params any) (any, State) {
	const op = "optim.Lars"
	rejectHalf(op, "gradient", grads)
	needParams(op, params)
	st := stateAs[LarsState](op, state)
	n := countValue(op, st.Count)
	lr := rateAt(op, l.lr, n)
	defer func() { sameStructure(op, recover(), gradParamRoles) }()
	s := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		g, p, decayed, trusted := xs[0], xs[1], xs[2], xs[3]
		if g == nil {
			return nil
		}
		if p != nil {
			gradFits(op, g, p, params)
		}
		if l.wd != 0 {
			g = withDecay(g, decayed, l.wd)
		}
		if trusted != nil {
			g = l.trust.apply(g, p)
		}
		return scale(g, -lr)
	}, grads, params, selected(params, l.wdMask), selected(params, l.trMask))
	out := LarsState{Count: incCount(st.Count, n)}
	if l.momentum == 0 {
		return s, out
	}
	u, tr := traceStep(op, s, st.Trace, l.momentum, l.nesterov, 1)
	out.Trace = tr
	return u, out
}
