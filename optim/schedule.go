package optim

import (
	"fmt"
	"math"
	"slices"
)

// Schedule maps a step count to a value, usually a learning rate
// (optax.Schedule). Optimizers call it with the number of updates made so
// far: 0 for the first update, 1 for the second, and so on.
//
// Schedules are plain functions of the step, computed in float64 on the
// host; any func(int) float64 is one, so custom schedules need no type.
// Optimizers panic on a learning rate that is NaN or infinite (at
// construction for step 0, at the update for a later step); see the
// package documentation.
type Schedule func(step int) float64

// Constant returns a schedule that is v at every step (optax.constant_schedule).
// It panics if v is NaN or infinite: no rate or hyperparameter can be.
func Constant(v float64) Schedule {
	if !finite(v) {
		panic(fmt.Sprintf("optim.Constant: %v, want a finite value", v))
	}
	return func(int) float64 { return v }
}

// Linear returns a schedule that goes linearly from init to end over
// transitionSteps steps starting at step transitionBegin
// (optax.linear_schedule):
//
//	init                                       step < begin
//	init + (end-init)·(step-begin)/steps        begin <= step < begin+steps
//	end                                        step >= begin+steps
//
// A transitionSteps <= 0 gives the constant init, and a negative
// transitionBegin counts as 0, as in optax.
func Linear(init, end float64, transitionSteps, transitionBegin int) Schedule {
	return Polynomial(init, end, 1, transitionSteps, transitionBegin)
}

// Polynomial returns a schedule that goes from init to end over
// transitionSteps steps starting at transitionBegin along a polynomial of the
// given power (optax.polynomial_schedule):
//
//	(init-end)·(1 - (step-begin)/steps)^power + end
//
// with step-begin clipped to [0, steps]. A transitionSteps <= 0 gives the
// constant init, and a negative transitionBegin counts as 0.
func Polynomial(init, end, power float64, transitionSteps, transitionBegin int) Schedule {
	if transitionSteps <= 0 {
		return Constant(init)
	}
	transitionBegin = max(transitionBegin, 0)
	return func(step int) float64 {
		c := min(max(step-transitionBegin, 0), transitionSteps)
		frac := 1 - float64(c)/float64(transitionSteps)
		return (init-end)*math.Pow(frac, power) + end
	}
}

// CosineDecay returns a schedule that decays from init to alpha·init along
// half a cosine over decaySteps steps and then stays there
// (optax.cosine_decay_schedule with exponent 1):
//
//	init·((1-alpha)·½(1 + cos(π·min(step, decaySteps)/decaySteps)) + alpha)
//
// Up to decaySteps it is PyTorch's CosineAnnealingLR(T_max=decaySteps,
// eta_min=alpha·init); after it, PyTorch's rate turns back up along the
// cosine while this one stays at alpha·init. It panics unless
// decaySteps > 0.
func CosineDecay(init float64, decaySteps int, alpha float64) Schedule {
	if decaySteps <= 0 {
		panic(fmt.Sprintf("optim.CosineDecay: decaySteps %d, want > 0", decaySteps))
	}
	return func(step int) float64 {
		c := float64(min(step, decaySteps))
		cos := 0.5 * (1 + math.Cos(math.Pi*c/float64(decaySteps)))
		return init * ((1-alpha)*cos + alpha)
	}
}

// WarmupCosineDecay returns a linear warmup from init to peak over
// warmupSteps followed by a cosine decay from peak to end
// (optax.warmup_cosine_decay_schedule). decaySteps is the length of the whole
// schedule, warmup included: the cosine runs for decaySteps-warmupSteps steps
// and the value is end from step decaySteps on. At step warmupSteps the value
// is peak.
//
// It panics unless decaySteps > warmupSteps >= 0.
func WarmupCosineDecay(init, peak float64, warmupSteps, decaySteps int, end float64) Schedule {
	if warmupSteps < 0 || decaySteps <= warmupSteps {
		panic(fmt.Sprintf("optim.WarmupCosineDecay: warmupSteps %d, decaySteps %d: want 0 <= warmupSteps < decaySteps (decaySteps includes the warmup)", warmupSteps, decaySteps))
	}
	alpha := 0.0
	if peak != 0 {
		alpha = end / peak
	}
	return Join(
		[]Schedule{Linear(init, peak, warmupSteps, 0), CosineDecay(peak, decaySteps-warmupSteps, alpha)},
		[]int{warmupSteps},
	)
}

// ExponentialOptions are the optional parameters of Exponential.
type ExponentialOptions struct {
	// TransitionBegin is the step at which the decay starts; before it the
	// value is init. Negative counts as 0.
	TransitionBegin int
	// Staircase decays in discrete jumps every transitionSteps steps
	// (the exponent is rounded down to an integer).
	Staircase bool
	// End bounds the value: from below when decayRate < 1, from above when
	// decayRate > 1. It applies only when HasEnd is set, since 0 is a valid
	// bound.
	End    float64
	HasEnd bool
}

// Exponential returns an exponential decay (optax.exponential_decay):
//
//	init·decayRate^((step-begin)/transitionSteps)    step > begin
//	init                                             step <= begin
//
// with the exponent rounded down when Staircase is set, and the value clipped
// at End when HasEnd is set. A transitionSteps <= 0 or a decayRate of 0 gives
// the constant init, as in optax.
func Exponential(init float64, transitionSteps int, decayRate float64, opts ...ExponentialOptions) Schedule {
	o := oneOpt("optim.Exponential", opts)
	if transitionSteps <= 0 || decayRate == 0 {
		return Constant(init)
	}
	begin := max(o.TransitionBegin, 0)
	return func(step int) float64 {
		d := step - begin
		v := init
		if d > 0 {
			p := float64(d) / float64(transitionSteps)
			if o.Staircase {
				p = math.Floor(p)
			}
			v = init * math.Pow(decayRate, p)
		}
		if o.HasEnd {
			if decayRate < 1 {
				v = math.Max(v, o.End)
			} else {
				v = math.Min(v, o.End)
			}
		}
		return v
	}
}

// PiecewiseConstant returns init multiplied by the scale of every boundary
// the step has reached (optax.piecewise_constant_schedule): with
// {100: 0.1, 200: 0.1}, the value is init before step 100, init/10 from step
// 100 and init/100 from step 200. It panics on a negative scale.
func PiecewiseConstant(init float64, boundariesAndScales map[int]float64) Schedule {
	bounds := make([]int, 0, len(boundariesAndScales))
	for b, s := range boundariesAndScales {
		if !(s >= 0) {
			panic(fmt.Sprintf("optim.PiecewiseConstant: scale %v at step %d is negative", s, b))
		}
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	scales := make([]float64, len(bounds))
	for i, b := range bounds {
		scales[i] = boundariesAndScales[b]
	}
	return func(step int) float64 {
		v := init
		for i, b := range bounds {
			if step < b {
				break
			}
			v *= scales[i]
		}
		return v
	}
}

// Join runs schedules one after another (optax.join_schedules): schedules[0]
// until boundaries[0], then schedules[1] until boundaries[1], and so on.
// Boundaries are absolute steps; each schedule after the first is called
// with the steps since its boundary, so it starts at its own step 0. It panics
// unless there is one boundary fewer than schedules, the boundaries increase,
// and no schedule is nil.
func Join(schedules []Schedule, boundaries []int) Schedule {
	if len(schedules) == 0 || len(boundaries) != len(schedules)-1 {
		panic(fmt.Sprintf("optim.Join: %d schedules and %d boundaries, want one boundary fewer than schedules", len(schedules), len(boundaries)))
	}
	for i, s := range schedules {
		if s == nil {
			panic(fmt.Sprintf("optim.Join: schedule %d is nil", i))
		}
	}
	for i := 1; i < len(boundaries); i++ {
		if boundaries[i] < boundaries[i-1] {
			panic(fmt.Sprintf("optim.Join: boundaries %v do not increase", boundaries))
		}
	}
	schedules, boundaries = slices.Clone(schedules), slices.Clone(boundaries)
	return func(step int) float64 {
		i := 0
		for i < len(boundaries) && step >= boundaries[i] {
			i++
		}
		if i == 0 {
			return schedules[0](step)
		}
		return schedules[i](step - boundaries[i-1])
	}
}
