package optim

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// InitialGuess is where a line search starts.
type InitialGuess int

const (
	// GuessKeep starts from the step size the previous search found
	// (optax's "keep", the default of ScaleByZoomLinesearch).
	GuessKeep InitialGuess = iota
	// GuessOne starts from 1 (optax's "one", what LBFGS uses: its
	// direction is scaled to be a step already).
	GuessOne
)

// ZoomLinesearchOptions are the optional parameters of
// ScaleByZoomLinesearch. Zero fields take optax's defaults; use Zero for a
// literal 0.
type ZoomLinesearchOptions struct {
	// MaxLearningRate bounds the step size (default: none).
	MaxLearningRate float64
	// Tol is the tolerance on both conditions (default 0).
	Tol float64
	// IncreaseFactor multiplies the step size while looking for an
	// interval (default 2).
	IncreaseFactor float64
	// SlopeRTol is c1 of the sufficient decrease (Armijo) condition
	// (default 1e-4), CurvRTol c2 of the curvature condition (default
	// 0.9).
	SlopeRTol, CurvRTol float64
	// ApproxDecRTol is the tolerance of Hager and Zhang's approximate
	// decrease condition, used near a minimum (default 1e-6);
	// NoApproxDecrease turns it off (optax's approx_dec_rtol=None).
	ApproxDecRTol    float64
	NoApproxDecrease bool
	// StepsizePrecision is the interval length below which the zoom
	// stops once a step with sufficient decrease is known (default 1e-5).
	StepsizePrecision float64
	// InitialGuess is where each search starts (default GuessKeep).
	InitialGuess InitialGuess
}

// ZoomLinesearchInfo describes the last line search.
type ZoomLinesearchInfo struct {
	// NumLinesearchSteps is the number of points evaluated (i32[]).
	NumLinesearchSteps *tensor.Tensor
	// DecreaseError and CurvatureError say by how much the accepted step
	// violates each condition (f32[], 0 when it satisfies it).
	DecreaseError, CurvatureError *tensor.Tensor
}

// ZoomLinesearchState is the state of ScaleByZoomLinesearch.
type ZoomLinesearchState struct {
	// LearningRate is the step size the last search accepted (f32[], 1
	// at first).
	LearningRate *tensor.Tensor
	// Value and Grad are the loss and its gradient at the accepted point,
	// which are the parameters of the next step (f32[], +Inf at first,
	// and a tree like the params): ValueAndGradFromState reuses them.
	Value *tensor.Tensor
	Grad  any
	// Info describes the last search.
	Info ZoomLinesearchInfo
}

// ScaleByZoomLinesearch returns a transform that scales the incoming
// direction by a step size satisfying the strong Wolfe conditions, found
// by the zoom line search of Nocedal and Wright (Algorithms 3.5 and 3.6)
// with the approximate decrease condition of Hager and Zhang (2006), as
// optax.scale_by_zoom_linesearch:
//
//	f(x + η·d) <= f(x) + c1·η·⟨∇f(x), d⟩          (sufficient decrease)
//	|⟨∇f(x + η·d), d⟩| <= c2·|⟨∇f(x), d⟩|          (curvature)
//
// The search first grows η by IncreaseFactor until an interval holding an
// acceptable step is found, then zooms into it by cubic or quadratic
// interpolation or bisection. If maxSteps evaluations do not find one, it
// takes the best step with sufficient decrease seen, or the last one.
//
// It reads the loss: Update needs Extra.ValueAndGrad, which it calls once
// per point evaluated, at params + η·d, and Extra.Value and Extra.Grad, the
// loss and its gradient at params (without them it calls ValueAndGrad at
// params once more; StepExtra fills Grad). The loss and gradient at the
// accepted point are kept in the state for the next step
// (ValueAndGradFromState). The incoming updates are the direction d
// (descending: -∇f, or LBFGS's). It panics unless maxSteps >= 1.
func ScaleByZoomLinesearch(maxSteps int, opts ...ZoomLinesearchOptions) Transform {
	const op = "optim.ScaleByZoomLinesearch"
	if maxSteps < 1 {
		panic(fmt.Sprintf("%s: maxSteps %d, want >= 1", op, maxSteps))
	}
	o := oneOpt(op, opts)
	z := &zoom{
		maxSteps:  maxSteps,
		maxLR:     orDefault(o.MaxLearningRate, math.Inf(1)),
		tol:       orDefault(o.Tol, 0),
		increase:  orDefault(o.IncreaseFactor, 2),
		c1:        orDefault(o.SlopeRTol, 1e-4),
		c2:        orDefault(o.CurvRTol, 0.9),
		approx:    orDefault(o.ApproxDecRTol, 1e-6),
		useApprox: !o.NoApproxDecrease,
		precision: orDefault(o.StepsizePrecision, 1e-5),
		guess:     o.InitialGuess,
	}
	switch {
	case !(z.increase > 1):
		panic(fmt.Sprintf("%s: IncreaseFactor %v, want > 1", op, z.increase))
	case !(z.c1 > 0 && z.c1 < z.c2 && z.c2 < 1):
		panic(fmt.Sprintf("%s: SlopeRTol %v, CurvRTol %v: want 0 < SlopeRTol < CurvRTol < 1", op, z.c1, z.c2))
	case !(z.maxLR > 0):
		panic(fmt.Sprintf("%s: MaxLearningRate %v, want > 0", op, z.maxLR))
	case z.guess != GuessKeep && z.guess != GuessOne:
		panic(fmt.Sprintf("%s: unknown InitialGuess %d", op, int(z.guess)))
	}
	checkNonNeg(op, "Tol", z.tol)
	checkNonNeg(op, "ApproxDecRTol", z.approx)
	checkNonNeg(op, "StepsizePrecision", z.precision)
	return z
}

type zoom struct {
	maxSteps             int
	maxLR, tol, increase float64
	c1, c2, approx       float64
	useApprox            bool
	precision            float64
	guess                InitialGuess
}

func (z *zoom) Init(params any) State {
	rejectHalf("optim.ScaleByZoomLinesearch", "parameter", params)
	inf := float32(math.Inf(1))
	return ZoomLinesearchState{
		LearningRate: tensor.Scalar(1),
		Value:        tensor.Scalar(inf),
		Grad:         stateLike(params, 0),
		Info: ZoomLinesearchInfo{
			NumLinesearchSteps: newCount(),
			DecreaseError:      tensor.Scalar(inf),
			CurvatureError:     tensor.Scalar(inf),
		},
	}
}

func (z *zoom) Update(grads any, state State, params any) (any, State) {
	return z.UpdateExtra(grads, state, params, Extra{})
}

// UpdateExtra runs the line search along the direction grads; see
// ScaleByZoomLinesearch for what it reads from extra.
func (z *zoom) UpdateExtra(updates any, state State, params any, extra Extra) (any, State) {
	const op = "optim.ScaleByZoomLinesearch"
	rejectHalf(op, "update", updates)
	needParams(op, params)
	st := stateAs[ZoomLinesearchState](op, state)
	if extra.ValueAndGrad == nil {
		panic(op + ": Update needs the loss: call optim.UpdateExtra or optim.StepExtra with optim.Extra{Value: loss, ValueAndGrad: optim.ValueAndGradOf(lossAndGrad)}")
	}
	value, grad := extra.Value, extra.Grad
	if value == nil || grad == nil {
		value, grad = extra.ValueAndGrad(params)
	}
	guess := 1.0
	if z.guess == GuessKeep {
		guess = scalarState(op, "LearningRate", st.LearningRate)
	}
	s := z.search(params, updates, value.Item(), grad, guess, extra.ValueAndGrad)
	ref := st.LearningRate
	return scaleTree(updates, s.cur.stepsize), ZoomLinesearchState{
		LearningRate: scalarLike(s.cur.stepsize, ref),
		Value:        scalarLike(s.cur.value, ref),
		Grad:         s.cur.grad,
		Info: ZoomLinesearchInfo{
			NumLinesearchSteps: intLike(s.count, ref),
			DecreaseError:      scalarLike(s.decErr, ref),
			CurvatureError:     scalarLike(s.curvErr, ref),
		},
	}
}

// point is a step size with the loss, its gradient and the slope
// ⟨gradient, direction⟩ there.
type point struct {
	stepsize, value float64
	grad            any
	slope           float64
}

// search is optax's zoom line search: the state of the loop of
// zoom_linesearch, in float64 on the host.
type search struct {
	z                    *zoom
	params, updates      any
	vg                   func(any) (*tensor.Tensor, any)
	count                int
	guess                float64
	cur                  point // the last point evaluated
	valueInit, slopeInit float64
	decErr, curvErr      float64
	intervalFound        bool
	done, failed         bool
	low, high, cubicRef  point
	safe                 point
}

func (z *zoom) search(params, updates any, value float64, grad any, guess float64, vg func(any) (*tensor.Tensor, any)) *search {
	slope := vdot(updates, grad)
	start := point{stepsize: 0, value: value, grad: grad, slope: slope}
	s := &search{z: z, params: params, updates: updates, vg: vg, guess: guess, cur: start,
		valueInit: value, slopeInit: slope, decErr: math.Inf(1), curvErr: math.Inf(1),
		low: start, high: start, cubicRef: start, safe: start}
	for !s.done && !s.failed {
		if s.intervalFound {
			s.zoomInto()
		} else {
			s.searchInterval()
		}
		if s.failed {
			s.trySafeStep()
		}
	}
	return s
}

// at evaluates the loss, its gradient and the slope at params + η·d.
func (s *search) at(eta float64) point {
	step := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		p, d := xs[0], xs[1]
		if d == nil {
			return p
		}
		return tensor.Add(p, scale(d, eta))
	}, s.params, s.updates)
	v, g := s.vg(step)
	if v == nil || v.Size() != 1 {
		panic(fmt.Sprintf("optim.ScaleByZoomLinesearch: Extra.ValueAndGrad returned the loss %v, want a scalar", v))
	}
	return point{stepsize: eta, value: v.Item(), grad: g, slope: vdot(g, s.updates)}
}

// decreaseError says by how much p violates the sufficient decrease
// condition (or, near a minimum, Hager and Zhang's approximate one); NaN
// counts as +Inf.
func (s *search) decreaseError(p point) float64 {
	z := s.z
	e := p.value - s.valueInit - z.c1*p.stepsize*s.slopeInit
	if z.useApprox {
		a := p.slope - (2*z.c1-1)*s.slopeInit
		d := p.value - s.valueInit - z.approx*math.Abs(s.valueInit)
		e = nanMin(nanMax(a, d), e)
	}
	return positive(e)
}

// curvatureError says by how much p violates the curvature condition.
func (s *search) curvatureError(p point) float64 {
	return positive(math.Abs(p.slope) - s.z.c2*math.Abs(s.slopeInit))
}

func positive(e float64) float64 {
	if math.IsNaN(e) {
		return math.Inf(1)
	}
	return math.Max(e, 0)
}

// nanMax and nanMin propagate NaN as jnp.maximum and jnp.minimum do.
func nanMax(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return math.Max(a, b)
}

func nanMin(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return math.Min(a, b)
}

// searchInterval grows the step size until an interval containing an
// acceptable one is found (Nocedal and Wright's Algorithm 3.5).
func (s *search) searchInterval() {
	z := s.z
	prev := s.cur
	eta := z.increase * prev.stepsize
	if s.count == 0 {
		eta = s.guess
	}
	maxReached := eta >= z.maxLR
	eta = math.Min(eta, z.maxLR)
	p := s.at(eta)
	dec, curv := s.decreaseError(p), s.curvatureError(p)
	e := math.Max(dec, curv)
	if dec <= z.tol {
		s.safe = p
	}
	setHigh := dec > 0 || (p.value >= prev.value && s.count > 0)
	setLow := p.slope >= 0 && !setHigh
	s.low, s.high = prev, p
	if setLow {
		s.low, s.high = p, prev
	}
	s.intervalFound = setHigh || setLow || e <= z.tol
	s.done = e <= z.tol || (maxReached && !s.intervalFound)
	s.failed = s.count+1 >= z.maxSteps && !s.done
	s.cubicRef = s.low
	s.count++
	s.cur, s.decErr, s.curvErr = p, dec, curv
}

// zoomInto shrinks the interval [low, high] towards an acceptable step by
// cubic or quadratic interpolation or bisection (Algorithm 3.6).
func (s *search) zoomInto() {
	z := s.z
	low, high := s.low, s.high
	delta := math.Abs(high.stepsize - low.stepsize)
	left, right := math.Min(high.stepsize, low.stepsize), math.Max(high.stepsize, low.stepsize)
	tooSmall := delta <= z.precision
	middle := (low.stepsize + high.stepsize) / 2
	if c := cubicMin(low.stepsize, low.value, low.slope, high.stepsize, high.value, s.cubicRef.stepsize, s.cubicRef.value); c > left+0.2*delta && c < right-0.2*delta {
		middle = c
	} else if q := quadMin(low.stepsize, low.value, low.slope, high.stepsize, high.value); q > left+0.1*delta && q < right-0.1*delta {
		middle = q
	}
	p := s.at(middle)
	dec, curv := s.decreaseError(p), s.curvatureError(p)
	e := math.Max(dec, curv)
	if dec <= z.tol && p.value < s.safe.value {
		s.safe = p
	}
	s.done = e <= z.tol
	setHighToMiddle := dec > 0 || p.value >= low.value
	setHighToLow := p.slope*(high.stepsize-low.stepsize) >= 0 && !setHighToMiddle
	if setHighToMiddle {
		s.high = p
	}
	if setHighToLow {
		s.high = low
	}
	if !setHighToMiddle {
		s.low = p
	}
	s.cubicRef = low
	if setHighToMiddle || setHighToLow {
		s.cubicRef = high
	}
	failed := s.count+1 >= z.maxSteps || (tooSmall && s.safe.stepsize > 0)
	s.failed = failed && !s.done
	s.count++
	s.cur, s.decErr, s.curvErr = p, dec, curv
}

// trySafeStep falls back, when the search failed, on the best step with
// sufficient decrease seen (or on no step if even the first point was
// outside the loss's domain).
func (s *search) trySafeStep() {
	if s.safe.stepsize > 0 || math.IsInf(s.decErr, 1) {
		s.cur = s.safe
	}
}

// cubicMin returns the minimizer of the cubic through (a, fa) with slope
// fpa at a and through (b, fb) and (c, fc); NaN when there is none.
func cubicMin(a, fa, fpa, b, fb, c, fc float64) float64 {
	db, dc := b-a, c-a
	denom := (db * dc) * (db * dc) * (db - dc)
	rb, rc := fb-fa-fpa*db, fc-fa-fpa*dc
	A := (dc*dc*rb - db*db*rc) / denom
	B := (-dc*dc*dc*rb + db*db*db*rc) / denom
	radical := B*B - 3*A*fpa
	return a + (-B+math.Sqrt(radical))/(3*A)
}

// quadMin returns the minimizer of the quadratic through (a, fa) with
// slope fpa at a and through (b, fb).
func quadMin(a, fa, fpa, b, fb float64) float64 {
	db := b - a
	B := (fb - fa - fpa*db) / (db * db)
	return a - fpa/(2*B)
}

// vdot returns Σ a·b over the float32 leaves the two trees both have.
func vdot(a, b any) float64 {
	var sum *tensor.Tensor
	pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		x, y := xs[0], xs[1]
		if isFloat(x) && isFloat(y) {
			d := tensor.Sum(tensor.Mul(x, y))
			if sum == nil {
				sum = d
			} else {
				sum = tensor.Add(sum, d)
			}
		}
		return nil
	}, a, b)
	if sum == nil {
		return 0
	}
	return sum.Item()
}
