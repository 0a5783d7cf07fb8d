package optim

import (
	"fmt"
	"math"
	"slices"
)

// WarmupConstant returns a linear warmup from init to peak over
// warmupSteps steps, then peak (optax.warmup_constant_schedule). It is
// Linear(init, peak, warmupSteps, 0).
func WarmupConstant(init, peak float64, warmupSteps int) Schedule {
	return Linear(init, peak, warmupSteps, 0)
}

// WarmupExponentialDecay returns a linear warmup from init to peak over
// warmupSteps steps followed by Exponential(peak, transitionSteps,
// decayRate, opts...) counted from the end of the warmup
// (optax.warmup_exponential_decay_schedule). Its TransitionBegin delays the
// decay further, and its End bounds it.
func WarmupExponentialDecay(init, peak float64, warmupSteps, transitionSteps int, decayRate float64, opts ...ExponentialOptions) Schedule {
	return Join([]Schedule{
		Linear(init, peak, warmupSteps, 0),
		Exponential(peak, transitionSteps, decayRate, opts...),
	}, []int{warmupSteps})
}

// Interpolation is how PiecewiseInterpolate goes from one value to the
// next.
type Interpolation int

const (
	// InterpolateLinear goes along a straight line.
	InterpolateLinear Interpolation = iota
	// InterpolateCosine goes along half a cosine: end + (start-end)·½(1 + cos(π·pct)).
	InterpolateCosine
)

// String returns "linear" or "cosine".
func (k Interpolation) String() string {
	switch k {
	case InterpolateLinear:
		return "linear"
	case InterpolateCosine:
		return "cosine"
	}
	return fmt.Sprintf("Interpolation(%d)", int(k))
}

// PiecewiseInterpolate returns a schedule that starts at init and, at each
// boundary, has reached the previous value times that boundary's scale,
// interpolating between boundaries (optax.piecewise_interpolate_schedule):
// with {100: 10, 200: 0.1}, the value goes from init at step 0 to 10·init at
// step 100 and back to init at step 200, and stays there. Before the first
// boundary the schedule interpolates from step 0. It panics on a negative
// scale or an unknown Interpolation.
func PiecewiseInterpolate(kind Interpolation, init float64, boundariesAndScales map[int]float64) Schedule {
	const op = "optim.PiecewiseInterpolate"
	interp := interpolator(op, kind)
	bounds := []int{0}
	for b, s := range boundariesAndScales {
		if !(s >= 0) {
			panic(fmt.Sprintf("%s: scale %v at step %d is negative", op, s, b))
		}
		bounds = append(bounds, b)
	}
	slices.Sort(bounds[1:])
	values := []float64{init}
	for _, b := range bounds[1:] {
		values = append(values, values[len(values)-1]*boundariesAndScales[b])
	}
	return func(step int) float64 {
		last := len(bounds) - 1
		if step >= bounds[last] {
			return values[last]
		}
		// Every interval holding the step contributes, as optax sums them
		// (at most one does, the intervals being disjoint).
		v := 0.0
		for i := range last {
			if bounds[i] <= step && step < bounds[i+1] {
				size := max(bounds[i+1]-bounds[i], 1)
				v += interp(values[i], values[i+1], float64(step-bounds[i])/float64(size))
			}
		}
		return v
	}
}

func interpolator(op string, kind Interpolation) func(start, end, pct float64) float64 {
	switch kind {
	case InterpolateLinear:
		return func(start, end, pct float64) float64 { return (end-start)*pct + start }
	case InterpolateCosine:
		return func(start, end, pct float64) float64 { return end + (start-end)/2*(math.Cos(math.Pi*pct)+1) }
	}
	panic(fmt.Sprintf("%s: unknown %v", op, kind))
}

// OneCycleOptions are the optional parameters of LinearOneCycle and
// CosineOneCycle. Zero fields take optax's defaults.
type OneCycleOptions struct {
	// PctStart is the fraction of the steps spent rising to the peak
	// (default 0.3).
	PctStart float64
	// PctFinal is the fraction of the steps after which LinearOneCycle's
	// final decay starts (default 0.85); CosineOneCycle has no such phase.
	PctFinal float64
	// DivFactor sets the starting value, peak/DivFactor (default 25).
	DivFactor float64
	// FinalDivFactor sets the final value: LinearOneCycle ends at
	// start/FinalDivFactor, CosineOneCycle at start/FinalDivFactor as well
	// (default 1e4).
	FinalDivFactor float64
}

func (o OneCycleOptions) withDefaults(op string, transitionSteps int) OneCycleOptions {
	if transitionSteps <= 0 {
		panic(fmt.Sprintf("%s: transitionSteps %d, want > 0", op, transitionSteps))
	}
	o.PctStart = orDefault(o.PctStart, 0.3)
	o.PctFinal = orDefault(o.PctFinal, 0.85)
	o.DivFactor = orDefault(o.DivFactor, 25)
	o.FinalDivFactor = orDefault(o.FinalDivFactor, 1e4)
	if !(o.DivFactor > 0) || !(o.FinalDivFactor > 0) {
		panic(fmt.Sprintf("%s: DivFactor %v and FinalDivFactor %v must be positive", op, o.DivFactor, o.FinalDivFactor))
	}
	return o
}

// LinearOneCycle returns the one-cycle schedule of Smith & Topin (2018) with
// linear pieces (optax.linear_onecycle_schedule): from peak/DivFactor up to
// peak at PctStart·transitionSteps, back down to peak/DivFactor at
// PctFinal·transitionSteps, then down to peak/DivFactor/FinalDivFactor at
// transitionSteps, and constant after. The fractions of steps are rounded
// down. It panics unless transitionSteps > 0.
//
// PyTorch's OneCycleLR(total_steps=T, pct_start=p, anneal_strategy="linear",
// three_phase=True) places each boundary a step earlier: it peaks at step
// p·T-1, is back at the start at 2·p·T-2 and ends at T-1. Its rates are
// LinearOneCycle(T-1, max_lr) with PctStart (p·T-0.5)/(T-1) and PctFinal
// (2·p·T-1.5)/(T-1) (testdata/torch_optim.py checks this).
func LinearOneCycle(transitionSteps int, peak float64, opts ...OneCycleOptions) Schedule {
	const op = "optim.LinearOneCycle"
	o := oneOpt(op, opts).withDefaults(op, transitionSteps)
	bs := map[int]float64{}
	bs[int(o.PctStart*float64(transitionSteps))] = o.DivFactor
	bs[int(o.PctFinal*float64(transitionSteps))] = 1 / o.DivFactor
	bs[transitionSteps] = 1 / o.FinalDivFactor
	return PiecewiseInterpolate(InterpolateLinear, peak/o.DivFactor, bs)
}

// CosineOneCycle returns the one-cycle schedule of Smith & Topin (2018) with
// cosine pieces (optax.cosine_onecycle_schedule): from peak/DivFactor up to
// peak at PctStart·transitionSteps (rounded down), then down to
// peak/DivFactor/FinalDivFactor at transitionSteps, and constant after.
// PctFinal is not used. It panics unless transitionSteps > 0.
//
// PyTorch's OneCycleLR(total_steps=T, pct_start=p) (cosine, two phases)
// places the boundaries a step earlier: it peaks at step p·T-1 and ends at
// T-1. Its rates are CosineOneCycle(T-1, max_lr) with PctStart
// (p·T-0.5)/(T-1) (testdata/torch_optim.py checks this). With
// three_phase=True they are PiecewiseInterpolate(InterpolateCosine,
// max_lr/div_factor, {p·T-1: div_factor, 2·p·T-2: 1/div_factor, T-1:
// 1/final_div_factor}) (testdata/torch_parity3.py checks this).
func CosineOneCycle(transitionSteps int, peak float64, opts ...OneCycleOptions) Schedule {
	const op = "optim.CosineOneCycle"
	o := oneOpt(op, opts).withDefaults(op, transitionSteps)
	bs := map[int]float64{}
	bs[int(o.PctStart*float64(transitionSteps))] = o.DivFactor
	bs[transitionSteps] = 1 / (o.DivFactor * o.FinalDivFactor)
	return PiecewiseInterpolate(InterpolateCosine, peak/o.DivFactor, bs)
}

// SGDRCycle is one cycle of SGDR: a WarmupCosineDecay(Init, Peak,
// WarmupSteps, DecaySteps, End).
type SGDRCycle struct {
	Init, Peak              float64
	WarmupSteps, DecaySteps int
	End                     float64
}

// SGDR returns stochastic gradient descent with warm restarts (Loshchilov &
// Hutter 2017, optax.sgdr_schedule): the cycles run one after another, each
// a WarmupCosineDecay starting at its own step 0 and lasting its
// DecaySteps. After the last cycle the value stays at its End. It panics
// if there is no cycle or a cycle is not a valid WarmupCosineDecay.
func SGDR(cycles ...SGDRCycle) Schedule {
	if len(cycles) == 0 {
		panic("optim.SGDR: no cycles")
	}
	var schedules []Schedule
	var boundaries []int
	step := 0
	for _, c := range cycles {
		schedules = append(schedules, WarmupCosineDecay(c.Init, c.Peak, c.WarmupSteps, c.DecaySteps, c.End))
		step += c.DecaySteps
		boundaries = append(boundaries, step)
	}
	return Join(schedules, boundaries[:len(boundaries)-1])
}

// CyclicMode is the policy of Cyclic: PyTorch's CyclicLR mode.
type CyclicMode int

const (
	// CyclicTriangular repeats the same triangle (mode="triangular").
	CyclicTriangular CyclicMode = iota
	// CyclicTriangular2 halves the triangle's height every cycle
	// (mode="triangular2").
	CyclicTriangular2
	// CyclicExpRange scales the height by Gamma^step, step counted from
	// the start (mode="exp_range").
	CyclicExpRange
)

// String returns PyTorch's name of the mode.
func (m CyclicMode) String() string {
	switch m {
	case CyclicTriangular:
		return "triangular"
	case CyclicTriangular2:
		return "triangular2"
	case CyclicExpRange:
		return "exp_range"
	}
	return fmt.Sprintf("CyclicMode(%d)", int(m))
}

// CyclicOptions are the optional parameters of Cyclic. The zero value is
// PyTorch's default: a triangle as long down as up.
type CyclicOptions struct {
	// StepsDown is step_size_down, the steps from the peak back to the
	// base; 0 means stepsUp.
	StepsDown int
	// Mode is mode; the zero value is CyclicTriangular.
	Mode CyclicMode
	// Gamma is gamma, CyclicExpRange's decay per step, in (0, 1]; 0 means
	// 1 (PyTorch's default). The other modes ignore it.
	Gamma float64
}

// Cyclic returns the cyclical learning rate of Smith (2017), as
// torch.optim.lr_scheduler.CyclicLR(base_lr=base, max_lr=peak,
// step_size_up=stepsUp, ...) stepped after every update: the rate climbs
// linearly from base to peak over stepsUp steps, falls back over
// StepsDown, and repeats, with the height peak-base scaled per cycle
// (CyclicTriangular2: 1, ½, ¼, ...) or per step (CyclicExpRange:
// Gamma^step). With x the position in the cycle of step n,
//
//	rate(n) = base + (peak - base)·h(x)·scale
//
// where h rises from 0 to 1 and falls back to 0. PyTorch's CyclicLR also
// cycles the momentum by default; that is cycle_momentum=False here (no
// momentum schedule). It panics unless stepsUp > 0, StepsDown >= 0 and Gamma is in
// [0, 1], or on an unknown mode.
func Cyclic(base, peak float64, stepsUp int, opts ...CyclicOptions) Schedule {
	const op = "optim.Cyclic"
	o := oneOpt(op, opts)
	if stepsUp <= 0 || o.StepsDown < 0 {
		panic(fmt.Sprintf("%s: stepsUp %d and StepsDown %d: want stepsUp > 0 and StepsDown >= 0", op, stepsUp, o.StepsDown))
	}
	if !(o.Gamma >= 0 && o.Gamma <= 1) {
		panic(fmt.Sprintf("%s: Gamma %v outside (0, 1] (0 means 1)", op, o.Gamma))
	}
	down := o.StepsDown
	if down == 0 {
		down = stepsUp
	}
	gamma := orDefault(o.Gamma, 1)
	var scale func(cycle float64, step int) float64
	switch o.Mode {
	case CyclicTriangular:
		scale = func(float64, int) float64 { return 1 }
	case CyclicTriangular2:
		scale = func(cycle float64, _ int) float64 { return 1 / math.Pow(2, cycle-1) }
	case CyclicExpRange:
		scale = func(_ float64, step int) float64 { return math.Pow(gamma, float64(step)) }
	default:
		panic(fmt.Sprintf("%s: unknown %v", op, o.Mode))
	}
	total := float64(stepsUp + down)
	ratio := float64(stepsUp) / total
	return func(step int) float64 {
		// PyTorch's formula, in its order of operations.
		cycle := math.Floor(1 + float64(step)/total)
		x := 1 + float64(step)/total - cycle
		var h float64
		if x <= ratio {
			h = x / ratio
		} else {
			h = (x - 1) / (ratio - 1)
		}
		return base + (peak-base)*h*scale(cycle, step)
	}
}
