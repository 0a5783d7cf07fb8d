package optim

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Loss scaling for float16 mixed precision (jmp's loss scales).
//
// float16 has five exponent bits: gradients below 2^-24 flush to zero and
// those above 65504 overflow. Multiplying the loss by a scale S before
// differentiation multiplies every cotangent by S, moving small gradients
// into float16's range; the float32 gradients of the master weights are
// then divided by S. A dynamic scale grows while gradients stay finite and
// shrinks (skipping the step) when they overflow. bfloat16 has float32's
// exponent range and needs no scaling.
//
//	var scale optim.LossScale = optim.NewDynamicLossScale(1 << 15)
//	for b := range batches {
//		_, grads := lossAndGrad(model, b, scale) // returns optim.ScaleLoss(scale, loss)
//		model, state, scale, _ = optim.StepScaled(opt, scale, model, grads, state)
//	}

// LossScale is a loss-scaling rule: the factor it multiplies the loss by,
// and how that factor changes after a step.
type LossScale interface {
	// Factor is the current scale.
	Factor() float32
	// Adjust returns the scale for the next step, given whether this
	// step's gradients were all finite.
	Adjust(finite bool) LossScale
}

// ScaleLoss returns loss multiplied by s's factor (in loss's dtype).
func ScaleLoss(s LossScale, loss *tensor.Tensor) *tensor.Tensor {
	if f := s.Factor(); f != 1 {
		return tensor.MulScalar(loss, f)
	}
	return loss
}

// Unscale returns grads divided by s's factor, leaf by leaf (nil and
// non-float leaves are kept).
func Unscale[M any](s LossScale, grads M) M {
	f := s.Factor()
	if f == 1 {
		return grads
	}
	return pytree.Map(grads, func(g *tensor.Tensor) *tensor.Tensor {
		if g == nil || !g.DType().IsFloat() {
			return g
		}
		return tensor.MulScalar(g, 1/f)
	})
}

// AllFinite reports whether every float leaf of tree is free of NaN and
// ±Inf (jmp.all_finite).
func AllFinite(tree any) bool {
	for _, x := range pytree.Leaves(tree) {
		if x == nil || !x.DType().IsFloat() || x.Size() == 0 {
			continue
		}
		if !tensor.All(tensor.IsFinite(x)).Bools()[0] {
			return false
		}
	}
	return true
}

// StepScaled is Step for gradients of a scaled loss: it unscales grads,
// applies the update only if they are all finite (otherwise params and
// state are returned unchanged, as jmp.select_tree does), and returns the
// adjusted loss scale and whether the step was applied.
func StepScaled[M any](tx Transform, s LossScale, params, scaledGrads M, state State) (M, State, LossScale, bool) {
	grads := Unscale(s, scaledGrads)
	finite := AllFinite(grads)
	next := s.Adjust(finite)
	if !finite {
		return params, state, next, false
	}
	p, st := Step(tx, params, grads, state)
	return p, st, next, true
}

// NoOpLossScale does not scale (factor 1).
type NoOpLossScale struct{}

// Factor returns 1.
func (NoOpLossScale) Factor() float32 { return 1 }

// Adjust returns the scale unchanged.
func (s NoOpLossScale) Adjust(bool) LossScale { return s }

// StaticLossScale scales by a fixed factor.
type StaticLossScale struct{ Scale float32 }

// Factor returns s.Scale.
func (s StaticLossScale) Factor() float32 { return s.Scale }

// Adjust returns the scale unchanged.
func (s StaticLossScale) Adjust(bool) LossScale { return s }

// DynamicLossScale is jmp.DynamicLossScale: after Period consecutive steps
// with finite gradients the scale is multiplied by Growth; a step with a
// non-finite gradient divides it by Growth (not below MinScale) and
// restarts the count. Zero fields take jmp's defaults: Period 2000,
// Growth 2, MinScale 1.
type DynamicLossScale struct {
	Scale    float32
	Counter  int
	Period   int
	Growth   float32
	MinScale float32
}

// NewDynamicLossScale returns a dynamic loss scale starting at initial,
// with jmp's defaults. It panics if initial is not positive and finite.
func NewDynamicLossScale(initial float32) DynamicLossScale {
	if !(initial > 0) || math.IsInf(float64(initial), 0) {
		panic(fmt.Sprintf("optim.NewDynamicLossScale: initial scale %v is not positive and finite", initial))
	}
	return DynamicLossScale{Scale: initial}
}

// Factor returns s.Scale.
func (s DynamicLossScale) Factor() float32 { return s.Scale }

// Adjust returns the scale after a step whose gradients were finite or
// not.
func (s DynamicLossScale) Adjust(finite bool) LossScale {
	period := s.Period
	if period <= 0 {
		period = 2000
	}
	growth := s.Growth
	if growth <= 0 {
		growth = 2
	}
	minScale := s.MinScale
	if minScale <= 0 {
		minScale = 1
	}
	if !finite {
		s.Scale = max(minScale, s.Scale/growth)
		s.Counter = 0
		return s
	}
	s.Counter++
	if s.Counter >= period {
		s.Scale *= growth
		s.Counter = 0
	}
	return s
}
