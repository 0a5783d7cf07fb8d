package optim

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor"
)

// ReduceOnPlateauOptions are the optional parameters of ReduceOnPlateau.
// Zero fields take optax's defaults; use Zero for a literal 0 where it is
// allowed.
type ReduceOnPlateauOptions struct {
	// Factor multiplies the scale when the loss has plateaued (default
	// 0.1); it must be in (0, 1).
	Factor float64
	// Patience is the number of accumulated values without improvement
	// after which the scale is reduced (default 10).
	Patience int
	// RTol and ATol say what counts as an improvement: a value below
	// (1-RTol)·best - ATol (defaults 1e-4 and 0; not both 0, RTol <= 1).
	RTol, ATol float64
	// Cooldown is the number of accumulated values to wait after a
	// reduction before counting a plateau again (default 0).
	Cooldown int
	// AccumulationSize is the number of updates whose loss is averaged
	// into one value (default 1): set it to the steps of an epoch to
	// decide on epoch means.
	AccumulationSize int
	// MinScale is the smallest scale (default 0).
	MinScale float64
}

// ReduceOnPlateauState is the state of ReduceOnPlateau.
type ReduceOnPlateauState struct {
	// Scale is the factor the updates are multiplied by (f32[]).
	Scale *tensor.Tensor
	// BestValue is the best accumulated loss seen (f32[], +Inf at first).
	BestValue *tensor.Tensor
	// PlateauCount counts the accumulated values since the last
	// improvement (i32[]); CooldownCount the values left to wait (i32[]).
	PlateauCount, CooldownCount *tensor.Tensor
	// Count is the number of losses accumulated into AvgValue (i32[]).
	Count *tensor.Tensor
	// AvgValue is the running mean of the losses being accumulated (f32[]).
	AvgValue *tensor.Tensor
}

// ReduceOnPlateau returns a transform that multiplies the updates by a
// scale which drops by Factor when the loss stops improving
// (optax.contrib.reduce_on_plateau), chained after an optimizer:
//
//	opt := optim.Chain(optim.Adam(lr), optim.ReduceOnPlateau(optim.ReduceOnPlateauOptions{Patience: 5}))
//	model, state = optim.StepExtra(opt, model, grads, state, optim.Extra{Value: loss})
//
// Every update adds Extra.Value to a running mean; every AccumulationSize
// updates that mean v is compared with the best so far: if v <
// (1-RTol)·best - ATol it is the new best and the plateau count restarts,
// otherwise the count grows, and when it reaches Patience (outside a
// cooldown) the scale is multiplied by Factor (not below MinScale), the
// count restarts and a cooldown of Cooldown values begins. The scale
// applies from the update that decided it. Update without a Value panics.
//
// PyTorch's ReduceLROnPlateau reduces after Patience+1 bad values where
// this (as optax) reduces after Patience.
func ReduceOnPlateau(opts ...ReduceOnPlateauOptions) Transform {
	const op = "optim.ReduceOnPlateau"
	o := oneOpt(op, opts)
	r := &plateau{
		factor:   orDefault(o.Factor, 0.1),
		patience: o.Patience,
		rtol:     orDefault(o.RTol, 1e-4),
		atol:     orDefault(o.ATol, 0),
		cooldown: o.Cooldown,
		accum:    o.AccumulationSize,
		minScale: orDefault(o.MinScale, 0),
	}
	if r.patience == 0 {
		r.patience = 10
	}
	if r.accum == 0 {
		r.accum = 1
	}
	switch {
	case !(r.factor > 0 && r.factor < 1):
		panic(fmt.Sprintf("%s: Factor %v outside (0, 1)", op, r.factor))
	case r.patience < 0 || r.cooldown < 0 || r.accum < 0:
		panic(fmt.Sprintf("%s: Patience %d, Cooldown %d, AccumulationSize %d: want >= 0", op, o.Patience, o.Cooldown, o.AccumulationSize))
	case !(r.rtol >= 0 && r.atol >= 0) || r.rtol > 1:
		panic(fmt.Sprintf("%s: RTol %v, ATol %v: want 0 <= RTol <= 1 and ATol >= 0", op, r.rtol, r.atol))
	case r.rtol == 0 && r.atol == 0:
		panic(op + ": RTol and ATol are both 0: at least one must be positive")
	}
	checkNonNeg(op, "MinScale", r.minScale)
	return r
}

type plateau struct {
	factor, rtol, atol, minScale float64
	patience, cooldown, accum    int
}

func (r *plateau) Init(any) State {
	return ReduceOnPlateauState{
		Scale:         tensor.Scalar(1),
		BestValue:     tensor.Scalar(float32(math.Inf(1))),
		PlateauCount:  newCount(),
		CooldownCount: newCount(),
		Count:         newCount(),
		AvgValue:      tensor.Scalar(0),
	}
}

func (r *plateau) Update(grads any, state State, params any) (any, State) {
	return r.UpdateExtra(grads, state, params, Extra{})
}

// UpdateExtra reads extra.Value, the loss at the current parameters.
func (r *plateau) UpdateExtra(grads any, state State, _ any, extra Extra) (any, State) {
	const op = "optim.ReduceOnPlateau"
	rejectHalf(op, "update", grads)
	st := stateAs[ReduceOnPlateauState](op, state)
	value := needValue(op, extra)
	count := countValue(op, st.Count)
	plateauCount := countValue(op, st.PlateauCount)
	cooldown := countValue(op, st.CooldownCount)
	s := float32(scalarState(op, "Scale", st.Scale))
	best := float32(scalarState(op, "BestValue", st.BestValue))
	avg := float32(scalarState(op, "AvgValue", st.AvgValue))

	// The running mean in float32, as optax keeps it in the params' dtype.
	count++
	avg = (float32(count-1)*avg + float32(value)) / float32(count)
	if count == r.accum {
		if avg < float32((1-r.rtol)*float64(best)-r.atol) {
			best, plateauCount = avg, 0
		} else {
			plateauCount++
		}
		if cooldown > 0 {
			plateauCount, cooldown = 0, cooldown-1
		} else {
			reduce := plateauCount == r.patience
			if reduce {
				s *= float32(r.factor)
				plateauCount, cooldown = 0, r.cooldown
			} else {
				cooldown = 0
			}
			s = max(s, float32(r.minScale))
		}
		count, avg = 0, 0
	}
	ref := st.Count
	out := ReduceOnPlateauState{
		Scale:         scalarLike(float64(s), ref),
		BestValue:     scalarLike(float64(best), ref),
		PlateauCount:  intLike(plateauCount, ref),
		CooldownCount: intLike(cooldown, ref),
		Count:         intLike(count, ref),
		AvgValue:      scalarLike(float64(avg), ref),
	}
	return scaleTree(grads, float64(s)), out
}

// scalarState reads a float32 scalar of a state, panicking with the
// transform's name when it is missing (a zero-value state).
func scalarState(op, name string, x *tensor.Tensor) float64 {
	if x == nil {
		panic(fmt.Sprintf("%s: state has no %s; create it with Init", op, name))
	}
	if x.Size() != 1 {
		panic(fmt.Sprintf("%s: state %s is %v, want a scalar", op, name, x))
	}
	return x.Item()
}

// intLike returns an int32 scalar v marked as the same shard.Map block as
// ref.
func intLike(v int, ref *tensor.Tensor) *tensor.Tensor {
	r := tensor.ScalarInt(int32(min(v, math.MaxInt32)))
	if l := ref.Local(); l != nil {
		r = tensor.WithLocal(r, l)
	}
	return r
}
