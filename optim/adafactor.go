package optim

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// AdafactorOptions are the optional hyperparameters of Adafactor. Zero fields
// take optax's defaults; use Zero for a literal 0.
type AdafactorOptions struct {
	// MinDimSizeToFactor: a parameter's second moment is factored only if
	// its second-largest dimension has at least this size (default 128).
	MinDimSizeToFactor int
	// DecayRate sets the second-moment decay at update t (1, 2, ...):
	// 1 - t^-DecayRate (default 0.8).
	DecayRate float64
	// DecayOffset is subtracted from the step count in that decay, for
	// fine-tuning from a later step (default 0).
	DecayOffset int
	// NoParameterScale turns off the scaling of updates by the root mean
	// square of each parameter (optax's multiply_by_parameter_scale=False),
	// making the learning rate an absolute step size.
	NoParameterScale bool
	// ClippingThreshold clips each update block to this root mean square
	// (default 1); it must be positive. NoClipping turns clipping off
	// (optax's clipping_threshold=None). ClippingThreshold: Zero (a clip to
	// 0, which would zero every update) and NoClipping together with a
	// ClippingThreshold are ambiguous and panic.
	ClippingThreshold float64
	NoClipping        bool
	// Momentum, when set, keeps an exponential moving average of the
	// updates with this decay (optax's momentum, default none).
	Momentum float64
	// WeightDecayRate, when set, adds rate·param to the update after the
	// learning rate (so it is not scaled by it, as in optax), for the
	// parameters WeightDecayMask selects (nil: all).
	WeightDecayRate float64
	WeightDecayMask pytree.Predicate
	// Eps is added to the squared gradients (default 1e-30).
	Eps float64
	// NotFactored keeps full second moments for every parameter (optax's
	// factored=False).
	NotFactored bool
}

// AdafactorState is the state of Adafactor. For a factored parameter of
// shape S with largest dimension d0 and second-largest d1, VRow has shape S
// without d0 and VCol shape S without d1, and V is nil; for other
// parameters V has the parameter's shape and VRow, VCol are nil. Each keeps
// the logical axes of the dimensions it has.
type AdafactorState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// VRow, VCol and V are the second-moment statistics.
	VRow, VCol, V any
	// Momentum is the moving average of the updates; nil without Momentum.
	Momentum any
}

// Adafactor returns the Adafactor optimizer (Shazeer & Stern 2018) in
// optax's form (optax.adafactor). For a parameter of rank >= 2 whose two
// largest dimensions are both at least MinDimSizeToFactor, the second
// moment is kept as two factors: row and column means of g²+eps, from which
// the update is g/sqrt(v̂) with v̂ their outer product over the mean; other
// parameters keep a full moving average v of g²+eps and use g/sqrt(v). The
// decay at update t is 1 - (t-DecayOffset)^-DecayRate. Then, in optax's
// order: each block is clipped to root mean square ClippingThreshold,
// multiplied by lr(t-1) (when lr is not nil) and by max(rms(param), 1e-3)
// (unless NoParameterScale), averaged with Momentum, decayed by
// WeightDecayRate·param, and negated.
//
// lr may be nil, as optax's default learning_rate=None: the parameter
// scaling alone then sets the step size. Update needs params.
//
// Inside shard.Map the statistics (row and column means, block RMS) are
// computed over each device's block, not over the whole parameter.
func Adafactor(lr Schedule, opts ...AdafactorOptions) Transform {
	const op = "optim.Adafactor"
	if lr != nil {
		needSchedule(op, lr)
	}
	o := oneOpt(op, opts)
	a := &adafactor{
		lr:         lr,
		minDim:     o.MinDimSizeToFactor,
		decayRate:  orDefault(o.DecayRate, 0.8),
		offset:     o.DecayOffset,
		paramScale: !o.NoParameterScale,
		clip:       orDefault(o.ClippingThreshold, 1),
		momentum:   orDefault(o.Momentum, 0),
		wd:         orDefault(o.WeightDecayRate, 0),
		wdMask:     o.WeightDecayMask,
		eps:        orDefault(o.Eps, 1e-30),
		factored:   !o.NotFactored,
	}
	if a.minDim == 0 {
		a.minDim = 128
	}
	checkNonNeg(op, "ClippingThreshold", o.ClippingThreshold)
	switch {
	case o.ClippingThreshold == Zero:
		panic(op + ": ClippingThreshold Zero would clip every update to 0; set NoClipping to turn clipping off")
	case o.NoClipping && o.ClippingThreshold != 0:
		panic(fmt.Sprintf("%s: NoClipping with ClippingThreshold %v: set one or the other", op, o.ClippingThreshold))
	case o.NoClipping:
		a.clip = 0
	}
	checkNonNeg(op, "DecayRate", a.decayRate)
	checkUnit(op, "Momentum", a.momentum, false)
	checkNonNeg(op, "WeightDecayRate", a.wd)
	checkNonNeg(op, "Eps", a.eps)
	return a
}

type adafactor struct {
	lr                Schedule
	minDim            int
	decayRate         float64
	offset            int
	paramScale        bool
	clip              float64 // 0: no clipping
	momentum, wd, eps float64
	wdMask            pytree.Predicate
	factored          bool
}

// factoredDims returns the dimensions to factor over, the second largest d1
// and the largest d0 (ties go to the later dimension, as NumPy's stable
// argsort orders them), or ok=false if the parameter is not factored.
func (a *adafactor) factoredDims(shape []int) (d1, d0 int, ok bool) {
	if !a.factored || len(shape) < 2 {
		return 0, 0, false
	}
	idx := make([]int, len(shape))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return shape[idx[i]] < shape[idx[j]] })
	d1, d0 = idx[len(idx)-2], idx[len(idx)-1]
	if shape[d1] < a.minDim {
		return 0, 0, false
	}
	return d1, d0, true
}

// dropAxis returns x's logical axes without dimension d (nil if x has none).
func dropAxis(x *tensor.Tensor, d int) []string {
	ax := x.LogicalAxes()
	if ax == nil {
		return nil
	}
	return slices.Delete(slices.Clone(ax), d, d+1)
}

// zerosDropping returns zeros of p's shape without dimension d, with p's
// logical axes for the remaining dimensions and p's shard.Map mark.
func zerosDropping(p *tensor.Tensor, d int) *tensor.Tensor {
	shape := p.Shape()
	z := tensor.Zeros(tensor.Float32, slices.Delete(shape, d, d+1)...)
	if ax := dropAxis(p, d); ax != nil {
		z = tensor.WithLogicalAxes(z, ax...)
	}
	if l := p.Local(); l != nil {
		z = tensor.WithLocal(z, l)
	}
	return z
}

func (a *adafactor) Init(params any) State {
	rejectHalf("optim.Adafactor", "parameter", params)
	st := AdafactorState{Count: newCount()}
	r := mapMulti(3, func(xs []*tensor.Tensor) []*tensor.Tensor {
		p := xs[0]
		if !isFloat(p) {
			return []*tensor.Tensor{nil, nil, nil}
		}
		if d1, d0, ok := a.factoredDims(p.Shape()); ok {
			return []*tensor.Tensor{zerosDropping(p, d0), zerosDropping(p, d1), nil}
		}
		return []*tensor.Tensor{nil, nil, withAxesOf(like(p, 0), p)}
	}, params)
	st.VRow, st.VCol, st.V = r[0], r[1], r[2]
	if a.momentum != 0 {
		st.Momentum = stateLike(params, 0)
	}
	return st
}

// rms returns sqrt(mean(x²)) as a float32 scalar tensor.
func rms(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Sqrt(tensor.Mean(tensor.Square(x)))
}

// adafactorRoles names the trees of adafactor.Update's walk.
var adafactorRoles = roles("gradients", "optimizer state's VRow", "optimizer state's VCol", "optimizer state's V", "parameters")

func (a *adafactor) Update(grads any, state State, params any) (any, State) {
	const op = "optim.Adafactor"
	rejectHalf(op, "gradient", grads)
	needParams(op, params)
	st := stateAs[AdafactorState](op, state)
	n := countValue(op, st.Count)
	decay := 1 - math.Pow(float64(n-a.offset)+1, -a.decayRate)
	lr := 1.0
	if a.lr != nil {
		lr = rateAt(op, a.lr, n)
	}
	defer func() { sameStructure(op, recover(), adafactorRoles) }()
	r := mapMulti(4, func(xs []*tensor.Tensor) []*tensor.Tensor {
		g, vr, vc, v, p := xs[0], xs[1], xs[2], xs[3], xs[4]
		if g == nil {
			return []*tensor.Tensor{nil, vr, vc, v}
		}
		if p != nil {
			gradFits(op, g, p, params)
		}
		g2 := tensor.AddScalar(tensor.Square(g), float32(a.eps))
		var u, vr2, vc2, v2 *tensor.Tensor
		if d1, d0, ok := a.factoredDims(g.Shape()); ok {
			noState(op, g, vr, vc)
			vr2 = ema(vr, tensor.Mean(g2, d0), decay)
			vc2 = ema(vc, tensor.Mean(g2, d1), decay)
			rd1 := d1
			if d1 > d0 {
				rd1--
			}
			rowFactor := tensor.Rsqrt(tensor.Div(vr2, tensor.MeanKeep(vr2, rd1)))
			colFactor := tensor.Rsqrt(vc2)
			u = tensor.Mul(tensor.Mul(g, tensor.ExpandDims(rowFactor, d0)), tensor.ExpandDims(colFactor, d1))
		} else {
			noState(op, g, v)
			v2 = ema(v, g2, decay)
			u = tensor.Mul(g, tensor.Rsqrt(v2))
		}
		if a.clip != 0 {
			// u / max(1, rms(u)/threshold)
			den := tensor.Maximum(tensor.MulScalar(rms(u), float32(1/a.clip)), tensor.Scalar(1))
			u = tensor.Div(u, den)
		}
		u = scale(u, lr)
		if a.paramScale {
			u = tensor.Mul(u, tensor.Maximum(rms(p), tensor.Scalar(1e-3)))
		}
		return []*tensor.Tensor{u, withAxesOf(vr2, vr), withAxesOf(vc2, vc), withAxesOf(v2, v)}
	}, grads, st.VRow, st.VCol, st.V, params)
	out := AdafactorState{Count: incCount(st.Count, n), VRow: r[1], VCol: r[2], V: r[3]}
	updates := r[0]
	if a.momentum != 0 {
		m := mapMulti(2, func(xs []*tensor.Tensor) []*tensor.Tensor {
			u, m := xs[0], xs[1]
			if u == nil {
				return []*tensor.Tensor{nil, m}
			}
			noState(op, u, m)
			m2 := ema(m, u, a.momentum)
			return []*tensor.Tensor{m2, withAxesOf(m2, m)}
		}, updates, st.Momentum)
		updates, out.Momentum = m[0], m[1]
	}
	if a.wd != 0 {
		updates = addDecayed(updates, selected(params, a.wdMask), a.wd)
	}
	return scaleTree(updates, -1), out
}

// addDecayed returns u + wd·p for the leaves where both u and the selected
// param p are present, and u elsewhere.
func addDecayed(updates, sel any, wd float64) any {
	return pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		u, p := xs[0], xs[1]
		if u == nil || p == nil {
			return u
		}
		return tensor.Add(u, tensor.MulScalar(p, float32(wd)))
	}, updates, sel)
}
