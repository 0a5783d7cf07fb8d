package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// TestShrinkKinks: at ±lambd and at the threshold the gradient is 0, as
// PyTorch's; Softmin is Softmax of -x; String names the new activations.
func TestShrinkKinks(t *testing.T) {
	x := tensor.FromFloat32([]float32{-0.5, 0.5, 0.2, 1}, 4)
	grad := func(f nn.Activation) []float32 {
		return autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(f(x)) })(x).Float32s()
	}
	assert.Equal(t, []float32{0, 0, 0, 1}, grad(nn.HardShrink))
	assert.Equal(t, []float32{0, 0, 0, 1}, grad(nn.SoftShrink))
	assert.Equal(t, []float32{0, 1, 0, 1}, grad(nn.Threshold(0.2, 7)))
	assert.Equal(t, []float32{7, 0.5, 7, 1}, nn.Threshold(0.2, 7)(x).Float32s())
	assert.Equal(t, []float32{0, 0, 0, 0.5}, nn.SoftShrink(x).Float32s())

	m := tensor.FromFloat64s([]float64{1, 2, 3, -1, 0, 4}, 2, 3)
	assert.Equal(t, tensor.Softmax(tensor.Neg(m), -1).Float64s(), nn.Softmin(m).Float64s())
	assert.Equal(t, tensor.Softmax(tensor.Neg(m), 0).Float64s(), nn.SoftminAxis(-2)(m).Float64s())
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return nn.Softmin(xs[0]) }, tensor.Convert(m, tensor.Float32))
	for name, f := range map[string]nn.Activation{"Softmin": nn.Softmin, "HardShrink": nn.HardShrink,
		"SoftShrink": nn.SoftShrink, "TanhShrink": nn.TanhShrink} {
		assert.Equal(t, name, f.String())
	}
	for _, c := range []struct {
		name string
		f    func()
		msg  string
	}{
		{"HardShrinkWith", func() { nn.HardShrinkWith(-1) }, "nn.HardShrinkWith: lambd -1 must be >= 0"},
		{"SoftShrinkWith", func() { nn.SoftShrinkWith(math.NaN()) }, "nn.SoftShrinkWith: lambd NaN must be >= 0"},
		{"Threshold", func() { nn.Threshold(math.NaN(), 0) }, "nn.Threshold: threshold is NaN"},
		{"Softmin axis", func() { nn.SoftminAxis(2)(m) }, "nn.Softmin: x f64[2,3], axis 2: want a float x with that axis"},
		{"Softmin int", func() { nn.Softmin(tensor.FromInt32([]int32{1, 2}, 2)) }, "nn.Softmin: x i32[2], axis -1: want a float x with that axis"},
		{"Softmin nil", func() { nn.Softmin(nil) }, "nn.Softmin"},
	} {
		t.Run(c.name, func(t *testing.T) { requirePanicContains(t, c.f, c.msg) })
	}
}

// TestTorchLosses32: the PyTorch-style losses (checked in float64 by
// TestTorchParity3) run in float32 too, with gradients that pass
// CheckGrad; hand-worked values for the simplest.
func TestTorchLosses32(t *testing.T) {
	a := randn(1, 4, 3)
	b := randn(2, 4, 3)
	c := randn(3, 4, 3)
	v := tensor.AddScalar(tensor.Abs(randn(4, 4, 3)), 0.1)
	sgn := tensor.FromFloat32([]float32{1, -1, 1, -1}, 4)
	labels := tensor.FromInt32([]int32{0, 2, 1, 1}, 4)
	counts := tensor.FromFloat32([]float32{0, 1, 2, 3, 5, 0, 1, 2, 7, 1, 0, 4}, 4, 3)
	w := tensor.FromFloat32([]float32{0.5, 1, 2}, 3)
	type fn = func(xs []*tensor.Tensor) *tensor.Tensor
	cases := []struct {
		name string
		f    fn
		xs   []*tensor.Tensor
	}{
		{"MarginRankingLoss", func(xs []*tensor.Tensor) *tensor.Tensor {
			return nn.MarginRankingLoss(xs[0], xs[1], sgn, 0.3, nn.ReduceNone)
		}, []*tensor.Tensor{randn(5, 4), randn(6, 4)}},
		{"TripletMarginLoss", func(xs []*tensor.Tensor) *tensor.Tensor {
			return nn.TripletMarginLoss(xs[0], xs[1], xs[2], 1, nn.TripletMarginOptions{Swap: true, Reduction: nn.ReduceNone})
		}, []*tensor.Tensor{a, b, c}},
		{"TripletMarginLoss p3", func(xs []*tensor.Tensor) *tensor.Tensor {
			return nn.TripletMarginLoss(xs[0], xs[1], xs[2], 2, nn.TripletMarginOptions{P: 3})
		}, []*tensor.Tensor{a, b, c}},
		{"PoissonNLLLoss", func(xs []*tensor.Tensor) *tensor.Tensor {
			return nn.PoissonNLLLoss(xs[0], counts, nn.PoissonNLLOptions{Full: true, Reduction: nn.ReduceNone})
		}, []*tensor.Tensor{a}},
		{"PoissonNLLLoss rate", func(xs []*tensor.Tensor) *tensor.Tensor {
			return nn.PoissonNLLLoss(xs[0], counts, nn.PoissonNLLOptions{Rate: true, Reduction: nn.ReduceSum})
		}, []*tensor.Tensor{v}},
		{"GaussianNLLLoss", func(xs []*tensor.Tensor) *tensor.Tensor {
			return nn.GaussianNLLLoss(xs[0], xs[1], xs[2], nn.GaussianNLLOptions{Full: true, Reduction: nn.ReduceNone})
		}, []*tensor.Tensor{a, b, v}},
		{"MultiMarginLoss", func(xs []*tensor.Tensor) *tensor.Tensor {
			return nn.MultiMarginLoss(xs[0], labels, 1, nn.MultiMarginOptions{P: 2, Weights: w, Reduction: nn.ReduceNone})
		}, []*tensor.Tensor{a}},
		{"PairwiseDistance", func(xs []*tensor.Tensor) *tensor.Tensor { return nn.PairwiseDistance(xs[0], xs[1], 2, 1e-6) },
			[]*tensor.Tensor{a, b}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.f(c.xs)
			require.Equal(t, tensor.Float32, got.DType())
			for _, v := range got.Float64s() {
				require.False(t, math.IsNaN(v) || math.IsInf(v, 0))
			}
			checkGrad(t, c.f, c.xs...)
		})
	}

	// Hand-worked: max(0, -y(x1-x2) + m).
	x1, x2 := tensor.FromFloat64s([]float64{1, 0, 2}, 3), tensor.FromFloat64s([]float64{0, 1, 2}, 3)
	y := tensor.FromFloat64s([]float64{1, 1, -1}, 3)
	assert.InDeltaSlice(t, []float64{0, 1.5, 0.5}, nn.MarginRankingLoss(x1, x2, y, 0.5, nn.ReduceNone).Float64s(), 1e-15)
	assert.InDelta(t, 2.0/3, nn.MarginRankingLoss(x1, x2, y, 0.5, nn.ReduceMean).Item(), 1e-15)
	// Multi-margin, row x = [1, 0, 2], y = 0, margin 1: (max(0, 1-1+0) + max(0, 1-1+2))/3.
	assert.InDelta(t, 2.0/3, nn.MultiMarginLoss(x1, tensor.ScalarInt(0), 1, nn.MultiMarginOptions{}).Item(), 1e-15)
	// Pairwise distance with p = 1 and eps 0: |1-0| + |0-1| + 0.
	assert.InDelta(t, 2.0, nn.PairwiseDistance(x1, x2, 1, 0).Item(), 1e-15)
	// Gaussian NLL with var below eps: the clamped value, the unclamped gradient.
	mu, obs := tensor.FromFloat64s([]float64{0}, 1), tensor.FromFloat64s([]float64{1}, 1)
	dv := autodiff.Grad(func(v *tensor.Tensor) *tensor.Tensor {
		return nn.GaussianNLLLoss(mu, obs, v, nn.GaussianNLLOptions{Eps: 0.5})
	})(tensor.FromFloat64s([]float64{0.25}, 1))
	assert.InDelta(t, 0.5*(1/0.5-1/(0.5*0.5)), dv.Float64s()[0], 1e-15, "½(1/v - d²/v²) at the clamped v")
}

func TestTorchLossPanics(t *testing.T) {
	f := tensor.Zeros(tensor.Float32, 2, 3)
	d := tensor.Zeros(tensor.Float64, 2, 3)
	for _, c := range []struct {
		name string
		f    func()
		msg  string
	}{
		{"margin shapes", func() { nn.MarginRankingLoss(f, f, tensor.Zeros(tensor.Float32, 2), 0, nn.ReduceMean) },
			"nn.MarginRankingLoss: x1 f32[2,3], x2 f32[2,3], y f32[2]: want one shape"},
		{"margin dtypes", func() { nn.MarginRankingLoss(f, d, f, 0, nn.ReduceMean) },
			"nn.MarginRankingLoss: x1 f32[2,3], x2 f64[2,3], y f32[2,3]: want float32 or float64 operands of one dtype"},
		{"margin reduction", func() { nn.MarginRankingLoss(f, f, f, 0, 3) }, "nn.MarginRankingLoss: x1 f32[2,3], x2 f32[2,3], y f32[2,3]: unknown reduction Reduction(3)"},
		{"margin nil", func() { nn.MarginRankingLoss(f, nil, f, 0, 0) }, "nn.MarginRankingLoss: nil x2"},
		{"pairwise p", func() { nn.PairwiseDistance(f, f, 0, 0) }, "nn.PairwiseDistance: x1 f32[2,3], x2 f32[2,3]: p 0 must be > 0"},
		{"pairwise broadcast", func() { nn.PairwiseDistance(f, tensor.Zeros(tensor.Float32, 4), 2, 0) },
			"nn.PairwiseDistance: f32[2,3] and f32[4]: shapes do not broadcast"},
		{"pairwise int", func() { nn.PairwiseDistance(tensor.Zeros(tensor.Int32, 3), tensor.Zeros(tensor.Int32, 3), 2, 0) },
			"nn.PairwiseDistance: x1 i32[3], x2 i32[3]: want float32 or float64 operands of one dtype"},
		{"triplet shapes", func() { nn.TripletMarginLoss(f, f, tensor.Zeros(tensor.Float32, 3), 1, nn.TripletMarginOptions{}) },
			"nn.TripletMarginLoss: anchor f32[2,3], positive f32[2,3], negative f32[3]: want one shape [..., D]"},
		{"triplet p", func() { nn.TripletMarginLoss(f, f, f, 1, nn.TripletMarginOptions{P: -1}) }, "P -1 must be > 0 (0 means 2)"},
		{"poisson shapes", func() { nn.PoissonNLLLoss(f, tensor.Zeros(tensor.Float32, 3), nn.PoissonNLLOptions{}) },
			"nn.PoissonNLLLoss: input f32[2,3], target f32[3]: want one shape"},
		{"poisson eps", func() { nn.PoissonNLLLoss(f, f, nn.PoissonNLLOptions{Eps: -1}) }, "Eps -1 must be >= 0 (0 means 1e-8)"},
		{"gaussian var", func() { nn.GaussianNLLLoss(f, f, tensor.Zeros(tensor.Float32, 3), nn.GaussianNLLOptions{}) },
			"nn.GaussianNLLLoss: input f32[2,3], target f32[2,3], var f32[3]: var must have input's shape, or it with a last axis of 1, or without its last axis"},
		{"gaussian target", func() { nn.GaussianNLLLoss(f, tensor.Zeros(tensor.Float32, 2), f, nn.GaussianNLLOptions{}) },
			"input and target must have one shape"},
		{"gaussian eps", func() { nn.GaussianNLLLoss(f, f, f, nn.GaussianNLLOptions{Eps: math.NaN()}) }, "Eps NaN must be >= 0 (0 means 1e-6)"},
		{"multi labels", func() { nn.MultiMarginLoss(f, tensor.FromInt32([]int32{0, 1, 2}, 3), 1, nn.MultiMarginOptions{}) },
			"nn.MultiMarginLoss: x f32[2,3], labels i32[3]: want x [N, C] or [C] and int32 labels [N] or []"},
		{"multi label range", func() { nn.MultiMarginLoss(f, tensor.FromInt32([]int32{0, 3}, 2), 1, nn.MultiMarginOptions{}) },
			"nn.MultiMarginLoss: x f32[2,3], labels i32[2]: label 3 at [1] out of range [0,3)"},
		{"multi p", func() { nn.MultiMarginLoss(f, tensor.FromInt32([]int32{0, 1}, 2), 1, nn.MultiMarginOptions{P: 3}) }, "P 3 must be 1 or 2"},
		{"multi weights", func() {
			nn.MultiMarginLoss(f, tensor.FromInt32([]int32{0, 1}, 2), 1, nn.MultiMarginOptions{Weights: tensor.Ones(tensor.Float32, 2)})
		}, "weights f32[2] must be float32[3], one per class"},
		{"multi nil labels", func() { nn.MultiMarginLoss(f, nil, 1, nn.MultiMarginOptions{}) }, "nn.MultiMarginLoss: nil labels"},
	} {
		t.Run(c.name, func(t *testing.T) { requirePanicContains(t, c.f, c.msg) })
	}
}
