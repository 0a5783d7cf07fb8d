package optim

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// This file holds the variants of Adam that keep a step count and two
// moments: AMSGrad, Adamax, RAdam, AdaBelief, Yogi, and NAdam, which is Adam
// with Nesterov momentum. Each is one pass per leaf in float32 tensor ops;
// the learning rate and bias corrections are float64 scalars.

// AMSGradOptions are the optional hyperparameters of AMSGrad. Zero fields
// take optax's defaults; use Zero for a literal 0.
type AMSGradOptions struct {
	// B1, B2 are the decays of the first and second moments (defaults 0.9
	// and 0.999).
	B1, B2 float64
	// Eps is added outside the square root (default 1e-8), EpsRoot inside
	// (default 0).
	Eps, EpsRoot float64
	// NoBiasCorrectionMu and NoBiasCorrectionNu turn off the bias
	// correction of the first and of the second moment (optax's
	// bias_correction_mu/nu=False).
	NoBiasCorrectionMu, NoBiasCorrectionNu bool
}

// AMSGradState is the state of AMSGrad.
type AMSGradState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// Mu and Nu are the first and second moments; NuMax is the running
	// maximum of the (bias-corrected) second moment. Trees like the params.
	Mu, Nu, NuMax any
}

// AMSGrad returns the AMSGrad optimizer (Reddi et al. 2018, optax.amsgrad):
// Adam whose denominator uses the largest bias-corrected second moment seen
// so far,
//
//	m ← b1·m + (1-b1)·g,  v ← b2·v + (1-b2)·g²
//	v̂max ← max(v̂max, v/(1-b2^t))
//	u = -lr(t-1) · (m/(1-b1^t)) / (sqrt(v̂max + epsRoot) + eps)
//
// PyTorch's Adam(amsgrad=True) takes the maximum of the raw v and
// bias-corrects it afterwards, which differs from optax's rule followed
// here.
func AMSGrad(lr Schedule, opts ...AMSGradOptions) Transform {
	const op = "optim.AMSGrad"
	needSchedule(op, lr)
	return newAMSGrad(op, lr, oneOpt(op, opts))
}

func newAMSGrad(op string, lr Schedule, o AMSGradOptions) *variant {
	v := newVariant(op, vAMSGrad, lr, o.B1, o.B2, o.Eps, 1e-8, o.EpsRoot)
	v.noBiasMu, v.noBiasNu = o.NoBiasCorrectionMu, o.NoBiasCorrectionNu
	return v
}

// AdamaxOptions are the optional hyperparameters of Adamax and AdamaxW.
// Zero fields take optax's defaults; use Zero for a literal 0.
type AdamaxOptions struct {
	// B1 is the decay of the first moment (default 0.9), B2 that of the
	// infinity norm (default 0.999).
	B1, B2 float64
	// Eps is added to |g| in the infinity norm (default 1e-8).
	Eps float64
	// WeightDecay is AdamaxW's decoupled weight decay (default 1e-4; Adamax
	// refuses it), multiplied by the learning rate, for the parameters Mask
	// selects (nil: all).
	WeightDecay float64
	Mask        pytree.Predicate
}

// Adamax returns the Adamax optimizer (Kingma & Ba 2015, section 7.1;
// optax.adamax, and torch.optim.Adamax): Adam with the infinity norm in
// place of the second moment,
//
//	m ← b1·m + (1-b1)·g
//	ν ← max(b2·ν, |g| + eps)
//	u = -lr(t-1) · (m/(1-b1^t)) / ν
//
// The state is an AdamState whose Nu holds ν.
func Adamax(lr Schedule, opts ...AdamaxOptions) Transform {
	const op = "optim.Adamax"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	if o.WeightDecay != 0 || o.Mask != nil {
		panic(op + ": WeightDecay and Mask are options of AdamaxW")
	}
	return newVariant(op, vAdamax, lr, o.B1, o.B2, o.Eps, 1e-8, 0)
}

// AdamaxW returns Adamax with decoupled weight decay (optax.adamaxw):
// u = -lr(t-1)·(adamax(g) + wd·p). Update needs params.
func AdamaxW(lr Schedule, opts ...AdamaxOptions) Transform {
	const op = "optim.AdamaxW"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	v := newVariant(op, vAdamax, lr, o.B1, o.B2, o.Eps, 1e-8, 0)
	v.setDecay(o.WeightDecay, 1e-4, o.Mask)
	return v
}

// RAdamOptions are the optional hyperparameters of RAdam. Zero fields take
// optax's defaults; use Zero for a literal 0.
type RAdamOptions struct {
	// B1, B2, Eps (default 1e-8) and EpsRoot (default 0) are as in Adam.
	B1, B2, Eps, EpsRoot float64
	// Threshold is the length of the approximated simple moving average
	// from which the adaptive step is used (default 5); it must be at
	// least 4, where the rectification term is real.
	Threshold float64
	// Nesterov uses Nesterov momentum, as in NAdam.
	Nesterov bool
}

// RAdam returns the Rectified Adam optimizer (Liu et al. 2020,
// optax.radam). With ρ∞ = 2/(1-b2) - 1 and, at update t,
// ρt = ρ∞ - 2t·b2^t/(1-b2^t):
//
//	u = -lr(t-1) · r·m̂/(sqrt(v̂ + epsRoot) + eps)    when ρt >= Threshold
//	u = -lr(t-1) · m̂                                otherwise
//	r = sqrt((ρt-4)(ρt-2)ρ∞ / ((ρ∞-4)(ρ∞-2)ρt))
//
// with m̂, v̂ Adam's bias-corrected moments. torch.optim.RAdam puts eps
// outside the bias correction, sqrt(1-b2^t)/(sqrt(v) + eps); with Eps Zero
// the two agree. The state is an AdamState.
func RAdam(lr Schedule, opts ...RAdamOptions) Transform {
	const op = "optim.RAdam"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	return newRAdam(op, lr, o)
}

func newRAdam(op string, lr Schedule, o RAdamOptions) *variant {
	v := newVariant(op, vRAdam, lr, o.B1, o.B2, o.Eps, 1e-8, o.EpsRoot)
	v.nesterov = o.Nesterov
	v.threshold = orDefault(o.Threshold, 5)
	if !(v.threshold >= 4) {
		panic(fmt.Sprintf("%s: Threshold %v below 4: the rectification sqrt((ρt-4)(ρt-2)...) is not real there", op, v.threshold))
	}
	return v
}

// AdaBeliefOptions are the optional hyperparameters of AdaBelief. Zero
// fields take optax's defaults; use Zero for a literal 0.
type AdaBeliefOptions struct {
	// B1, B2 are the decays of the moments (defaults 0.9 and 0.999).
	B1, B2 float64
	// Eps is added outside the square root (default 1e-16), EpsRoot to the
	// second moment at every update (default 1e-16). The paper's values
	// are 1e-8 and 0.
	Eps, EpsRoot float64
	// WeightDecay is a decoupled weight decay multiplied by the learning
	// rate (default 0), for the parameters WeightDecayMask selects (nil:
	// all).
	WeightDecay     float64
	WeightDecayMask pytree.Predicate
	// Nesterov uses Nesterov momentum, as in NAdam.
	Nesterov bool
}

// AdaBelief returns the AdaBelief optimizer (Zhuang et al. 2020,
// optax.adabelief): Adam whose second moment tracks the squared deviation
// of the gradient from its moving average,
//
//	m ← b1·m + (1-b1)·g
//	s ← b2·s + (1-b2)·(g - m)² + epsRoot
//	u = -lr(t-1) · ((m/(1-b1^t)) / (sqrt(s/(1-b2^t)) + eps) + wd·p)
//
// The state is an AdamState whose Nu holds s.
func AdaBelief(lr Schedule, opts ...AdaBeliefOptions) Transform {
	const op = "optim.AdaBelief"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	v := newBelief(op, lr, o)
	v.setDecay(o.WeightDecay, 0, o.WeightDecayMask)
	return v
}

func newBelief(op string, lr Schedule, o AdaBeliefOptions) *variant {
	v := newVariant(op, vBelief, lr, o.B1, o.B2, o.Eps, 1e-16, 0)
	v.epsRoot = orDefault(o.EpsRoot, 1e-16)
	checkNonNeg(op, "EpsRoot", v.epsRoot)
	v.nesterov = o.Nesterov
	return v
}

// YogiOptions are the optional hyperparameters of Yogi. Zero fields take
// optax's defaults; use Zero for a literal 0.
type YogiOptions struct {
	// B1, B2 are the decays of the moments (defaults 0.9 and 0.999).
	B1, B2 float64
	// Eps is added outside the square root (default 1e-3), EpsRoot inside
	// (default 0).
	Eps, EpsRoot float64
	// InitialAccumulatorValue is the starting value of both moments
	// (default 1e-6).
	InitialAccumulatorValue float64
}

// Yogi returns the Yogi optimizer (Zaheer et al. 2018, optax.yogi): Adam
// whose second moment moves additively towards g²,
//
//	m ← b1·m + (1-b1)·g
//	v ← v - (1-b2)·sign(v - g²)·g²
//	u = -lr(t-1) · (m/(1-b1^t)) / (sqrt(v/(1-b2^t) + epsRoot) + eps)
//
// Both moments start at InitialAccumulatorValue. The state is an
// AdamState.
func Yogi(lr Schedule, opts ...YogiOptions) Transform {
	const op = "optim.Yogi"
	needSchedule(op, lr)
	return newYogi(op, lr, oneOpt(op, opts))
}

func newYogi(op string, lr Schedule, o YogiOptions) *variant {
	v := newVariant(op, vYogi, lr, o.B1, o.B2, o.Eps, 1e-3, o.EpsRoot)
	v.init = orDefault(o.InitialAccumulatorValue, 1e-6)
	checkNonNeg(op, "InitialAccumulatorValue", v.init)
	return v
}

// NAdam returns Adam with Nesterov momentum (Dozat 2016, optax.nadam): Adam
// with opts.Nesterov set. PyTorch's torch.optim.NAdam uses a momentum decay
// schedule that optax does not; this follows optax.
func NAdam(lr Schedule, opts ...AdamOptions) Transform {
	const op = "optim.NAdam"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	o.Nesterov = true
	return newAdam(op, lr, o, 0, nil)
}

// NAdamW returns AdamW with Nesterov momentum (optax.nadamw): AdamW with
// opts.Nesterov set. Update needs params.
func NAdamW(lr Schedule, opts ...AdamWOptions) Transform {
	const op = "optim.NAdamW"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	wd := orDefault(o.WeightDecay, 1e-4)
	checkNonNeg(op, "WeightDecay", wd)
	return newAdam(op, lr, AdamOptions{B1: o.B1, B2: o.B2, Eps: o.Eps, EpsRoot: o.EpsRoot, Nesterov: true}, wd, o.Mask)
}

type variantKind int

const (
	vAMSGrad variantKind = iota
	vAdamax
	vRAdam
	vBelief
	vYogi
)

// variant is one of the Adam variants; kind selects the rule.
type variant struct {
	op                   string
	kind                 variantKind
	lr                   Schedule
	b1, b2, eps, epsRoot float64
	nesterov             bool
	noBiasMu, noBiasNu   bool
	threshold            float64 // RAdam
	init                 float64 // Yogi's initial moments
	wd                   float64
	mask                 pytree.Predicate
}

func newVariant(op string, kind variantKind, lr Schedule, b1, b2, eps, defEps, epsRoot float64) *variant {
	v := &variant{op: op, kind: kind, lr: lr,
		b1: orDefault(b1, 0.9), b2: orDefault(b2, 0.999), eps: orDefault(eps, defEps), epsRoot: orDefault(epsRoot, 0)}
	checkUnit(op, "B1", v.b1, false)
	checkUnit(op, "B2", v.b2, false)
	checkNonNeg(op, "Eps", v.eps)
	checkNonNeg(op, "EpsRoot", v.epsRoot)
	return v
}

// setDecay sets a decoupled weight decay (def when wd is 0).
func (v *variant) setDecay(wd, def float64, mask pytree.Predicate) {
	v.wd, v.mask = orDefault(wd, def), mask
	checkNonNeg(v.op, "WeightDecay", v.wd)
}

func (v *variant) elementwise() bool { return v.mask == nil }

func (v *variant) Init(params any) State {
	rejectHalf(v.op, "parameter", params)
	if v.kind == vAMSGrad {
		return AMSGradState{Count: newCount(), Mu: stateLike(params, 0), Nu: stateLike(params, 0), NuMax: stateLike(params, 0)}
	}
	return AdamState{Count: newCount(), Mu: stateLike(params, v.init), Nu: stateLike(params, v.init)}
}

func (v *variant) Update(grads any, state State, params any) (any, State) {
	rejectHalf(v.op, "gradient", grads)
	var count *tensor.Tensor
	var moments []any
	if v.kind == vAMSGrad {
		st := stateAs[AMSGradState](v.op, state)
		count, moments = st.Count, []any{st.Mu, st.Nu, st.NuMax}
	} else {
		st := stateAs[AdamState](v.op, state)
		count, moments = st.Count, []any{st.Mu, st.Nu}
	}
	n := countValue(v.op, count)
	var extras []any
	if v.wd != 0 {
		needParams(v.op, params)
		extras = []any{selected(params, v.mask)}
	}
	t := n + 1
	post := learningRate(v.op, v.lr, n)
	u, s := leafStep(v.op, grads, moments, extras, func(g *tensor.Tensor, s, x []*tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
		d, s2 := v.direction(g, s, t)
		if len(x) > 0 {
			d = withDecay(d, x[0], v.wd)
		}
		return scale(d, post), s2
	})
	c := incCount(count, n)
	if v.kind == vAMSGrad {
		return u, AMSGradState{Count: c, Mu: s[0], Nu: s[1], NuMax: s[2]}
	}
	return u, AdamState{Count: c, Mu: s[0], Nu: s[1]}
}

// direction returns the variant's update direction (before weight decay
// and learning rate) for gradient g at update t, and the new moments.
func (v *variant) direction(g *tensor.Tensor, s []*tensor.Tensor, t int) (*tensor.Tensor, []*tensor.Tensor) {
	mu := ema(s[0], g, v.b1)
	switch v.kind {
	case vAMSGrad:
		nu := ema(s[1], tensor.Square(g), v.b2)
		mhat, nuEff := mu, nu
		if !v.noBiasMu {
			mhat = scale(mu, 1/biasCorrection(v.b1, t))
		}
		if !v.noBiasNu {
			nuEff = scale(nu, 1/biasCorrection(v.b2, t))
		}
		numax := tensor.Maximum(s[2], nuEff)
		return tensor.Div(mhat, adamDenominator(numax, v.eps, v.epsRoot)), []*tensor.Tensor{mu, nu, numax}
	case vAdamax:
		nu := tensor.Maximum(tensor.AddScalar(tensor.Abs(g), float32(v.eps)), tensor.MulScalar(s[1], float32(v.b2)))
		return tensor.Div(scale(mu, 1/biasCorrection(v.b1, t)), nu), []*tensor.Tensor{mu, nu}
	case vRAdam:
		nu := ema(s[1], tensor.Square(g), v.b2)
		mhat := firstMoment(mu, g, v.b1, t, v.nesterov)
		roInf := 2/(1-v.b2) - 1
		b2t := math.Pow(v.b2, float64(t))
		ro := roInf - 2*float64(t)*b2t/(1-b2t)
		if !(ro >= v.threshold) {
			return mhat, []*tensor.Tensor{mu, nu}
		}
		r := math.Sqrt((ro - 4) * (ro - 2) * roInf / ((roInf - 4) * (roInf - 2) * ro))
		vhat := scale(nu, 1/biasCorrection(v.b2, t))
		return scale(tensor.Div(mhat, adamDenominator(vhat, v.eps, v.epsRoot)), r), []*tensor.Tensor{mu, nu}
	case vBelief:
		nu := ema(s[1], tensor.Square(tensor.Sub(g, mu)), v.b2)
		if v.epsRoot != 0 {
			nu = tensor.AddScalar(nu, float32(v.epsRoot))
		}
		mhat := firstMoment(mu, g, v.b1, t, v.nesterov)
		vhat := scale(nu, 1/biasCorrection(v.b2, t))
		return tensor.Div(mhat, adamDenominator(vhat, v.eps, 0)), []*tensor.Tensor{mu, nu}
	default: // vYogi
		g2 := tensor.Square(g)
		nu := tensor.Sub(s[1], tensor.Mul(tensor.MulScalar(tensor.Sign(tensor.Sub(s[1], g2)), float32(1-v.b2)), g2))
		mhat := scale(mu, 1/biasCorrection(v.b1, t))
		vhat := scale(nu, 1/biasCorrection(v.b2, t))
		return tensor.Div(mhat, adamDenominator(vhat, v.eps, v.epsRoot)), []*tensor.Tensor{mu, nu}
	}
}

// ScaleByAMSGrad returns AMSGrad's rescaling alone, without the learning
// rate and sign (optax.scale_by_amsgrad).
func ScaleByAMSGrad(opts ...AMSGradOptions) Transform {
	const op = "optim.ScaleByAMSGrad"
	return newAMSGrad(op, nil, oneOpt(op, opts))
}

// ScaleByAdamax returns Adamax's rescaling alone (optax.scale_by_adamax).
// WeightDecay and Mask must be unset.
func ScaleByAdamax(opts ...AdamaxOptions) Transform {
	const op = "optim.ScaleByAdamax"
	o := oneOpt(op, opts)
	if o.WeightDecay != 0 || o.Mask != nil {
		panic(op + ": WeightDecay and Mask are options of AdamaxW")
	}
	return newVariant(op, vAdamax, nil, o.B1, o.B2, o.Eps, 1e-8, 0)
}

// ScaleByRAdam returns RAdam's rescaling alone (optax.scale_by_radam).
func ScaleByRAdam(opts ...RAdamOptions) Transform {
	const op = "optim.ScaleByRAdam"
	return newRAdam(op, nil, oneOpt(op, opts))
}

// ScaleByBelief returns AdaBelief's rescaling alone
// (optax.scale_by_belief). WeightDecay and WeightDecayMask must be unset.
func ScaleByBelief(opts ...AdaBeliefOptions) Transform {
	const op = "optim.ScaleByBelief"
	o := oneOpt(op, opts)
	if o.WeightDecay != 0 || o.WeightDecayMask != nil {
		panic(op + ": WeightDecay and WeightDecayMask are options of AdaBelief")
	}
	return newBelief(op, nil, o)
}

// ScaleByYogi returns Yogi's rescaling alone (optax.scale_by_yogi).
func ScaleByYogi(opts ...YogiOptions) Transform {
	const op = "optim.ScaleByYogi"
	return newYogi(op, nil, oneOpt(op, opts))
}
