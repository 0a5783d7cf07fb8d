package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// TestLossesParity4Float32 runs each loss of losses_parity4.go in float32
// and compares it with the float64 result (float32 rounding), and checks a
// hand-worked value of each.
func TestLossesParity4Float32(t *testing.T) {
	x := []float64{0.3, -1.2, 2.5, 0.7, -0.4, 1.1}
	pm := []float64{1, -1, -1, 1, 1, -1}
	p := []float64{0.2, 0.9, 0.5, 0.01, 0.7, 0.4}
	q := []float64{0, 1, 0.3, 1, 0.5, 0}
	labels := tensor.FromInt32([]int32{2, 0, -1, 1, 1, 1}, 2, 3)
	f := func(dt tensor.DType, v []float64, shape ...int) *tensor.Tensor {
		return tensor.Convert(tensor.FromFloat64s(v, shape...), dt)
	}
	cases := []struct {
		name string
		fn   func(dt tensor.DType) *tensor.Tensor
		want float64 // hand-worked, ReduceSum
	}{
		// x where y = 1, max(0, 1 - x) where y = -1: 0.3+2.2+0+0.7-0.4+0.
		{"HingeEmbedding", func(dt tensor.DType) *tensor.Tensor {
			return nn.HingeEmbeddingLoss(f(dt, x, 6), f(dt, pm, 6), 1, nn.ReduceSum)
		}, 0.3 + 2.2 + 0.7 - 0.4},
		// Rows (1, 0) and (0, 1): cos 0 (y 1: 1 - 0), rows (1, 1) twice
		// (cos 1, y -1, margin 0.5: 0.5).
		{"CosineEmbedding", func(dt tensor.DType) *tensor.Tensor {
			return nn.CosineEmbeddingLoss(f(dt, []float64{1, 0, 1, 1}, 2, 2), f(dt, []float64{0, 1, 1, 1}, 2, 2),
				f(dt, []float64{1, -1}, 2), 0.5, nn.ReduceSum)
		}, 1 + 0.5},
		{"SoftMargin", func(dt tensor.DType) *tensor.Tensor {
			return nn.SoftMarginLoss(f(dt, []float64{0}, 1), f(dt, []float64{1}, 1), nn.ReduceSum)
		}, 0.6931471805599453},
		// Row 0: targets 2, 0; non-target 1: (1-(2.5+1.2)) ≤ 0 and
		// (1-(0.3+1.2)) ≤ 0: 0. Row 1: target 1 (three times), non-targets
		// 0 and 2: 3·(max(0, 1-(-0.4-0.7)) + max(0, 1-(-0.4-1.1)))/3.
		{"MultiLabelMargin", func(dt tensor.DType) *tensor.Tensor {
			return nn.MultiLabelMarginLoss(f(dt, x, 2, 3), labels, nn.ReduceSum)
		}, 2.1 + 2.5},
		{"MultiLabelSoftMargin", func(dt tensor.DType) *tensor.Tensor {
			return nn.MultiLabelSoftMarginLoss(f(dt, []float64{0, 0}, 1, 2), f(dt, []float64{1, 0}, 1, 2),
				nn.MultiLabelSoftMarginLossOptions{Reduction: nn.ReduceSum})
		}, 0.6931471805599453},
		// -log 0.8 - log 0.9 - log 0.5 - log 0.01 - 0.5·log 0.7 - 0.5·log 0.3 - log 0.6.
		{"BinaryCrossEntropy", func(dt tensor.DType) *tensor.Tensor {
			return nn.BinaryCrossEntropy(f(dt, p, 6), f(dt, q, 6), nn.BCEOptions{Reduction: nn.ReduceSum})
		}, 0.2231435513142098 + 0.10536051565782628 + 0.6931471805599453 + 4.605170185988091 +
			0.5*0.35667494393873245 + 0.5*1.2039728043259361 + 0.5108256237659907},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			y64, y32 := c.fn(tensor.Float64), c.fn(tensor.Float32)
			require.Equal(t, tensor.Float32, y32.DType())
			require.InDelta(t, c.want, y64.Float64s()[0], 1e-12)
			require.InDelta(t, c.want, float64(y32.Float32s()[0]), 1e-5*max(1, c.want))
		})
	}
}

// TestLossesParity4Hostile checks the panics of losses_parity4.go.
func TestLossesParity4Hostile(t *testing.T) {
	f3, f4, d3 := tensor.Zeros(tensor.Float32, 3), tensor.Zeros(tensor.Float32, 4), tensor.Zeros(tensor.Float64, 3)
	m23 := tensor.Zeros(tensor.Float32, 2, 3)
	for _, c := range []struct {
		fn   func()
		want string
	}{
		{func() { nn.HingeEmbeddingLoss(f3, f4, 1, nn.ReduceMean) }, "nn.HingeEmbeddingLoss: x f32[3], y f32[4]: want one shape"},
		{func() { nn.HingeEmbeddingLoss(f3, d3, 1, nn.ReduceMean) }, "nn.HingeEmbeddingLoss: x f32[3], y f64[3]: want float32 or float64 operands of one dtype"},
		{func() { nn.HingeEmbeddingLoss(f3, nil, 1, nn.ReduceMean) }, "nn.HingeEmbeddingLoss: nil y"},
		{func() { nn.HingeEmbeddingLoss(f3, f3, 1, nn.Reduction(7)) }, "unknown reduction Reduction(7)"},
		{func() { nn.CosineEmbeddingLoss(m23, m23, f3, 0, nn.ReduceMean) }, "nn.CosineEmbeddingLoss: x1 f32[2,3], x2 f32[2,3], y f32[3]: want x1, x2 [N, D]"},
		{func() { nn.SoftMarginLoss(m23, f3, nn.ReduceMean) }, "nn.SoftMarginLoss: x f32[2,3], y f32[3]: want one shape"},
		{func() { nn.MultiLabelMarginLoss(m23, tensor.Zeros(tensor.Int32, 2), nn.ReduceMean) }, "nn.MultiLabelMarginLoss: x f32[2,3], labels i32[2]: want x [N, C]"},
		{func() { nn.MultiLabelMarginLoss(m23, m23, nn.ReduceMean) }, "want x [N, C] or [C] and int32 labels"},
		{func() { nn.MultiLabelMarginLoss(f3, tensor.FromInt32([]int32{0, 3, -1}, 3), nn.ReduceMean) }, "label 3 at [1] out of range [-1,3)"},
		{func() { nn.MultiLabelMarginLoss(f3, nil, nn.ReduceMean) }, "nn.MultiLabelMarginLoss: nil labels"},
		{func() {
			nn.MultiLabelSoftMarginLoss(m23, m23, nn.MultiLabelSoftMarginLossOptions{Weights: f4})
		}, "nn.MultiLabelSoftMarginLoss: x f32[2,3], y f32[2,3]: weights f32[4] must be float32[3], one per class"},
		{func() { nn.BinaryCrossEntropy(f3, f4, nn.BCEOptions{}) }, "nn.BinaryCrossEntropy: p f32[3], targets f32[4]: want p and targets of one shape"},
		{func() { nn.BinaryCrossEntropy(f3, f3, nn.BCEOptions{Weight: f4}) }, "nn.BinaryCrossEntropy: p f32[3], targets f32[3], weight f32[4]: weight does not broadcast"},
		{func() { nn.BinaryCrossEntropy(f3, f3, nn.BCEOptions{PosWeight: f3}) }, "BCELoss has no pos_weight"},
		{func() { nn.BinaryCrossEntropy(f3, f3, nn.BCEOptions{Weight: d3}) }, "want float32 or float64 operands of one dtype"},
		{func() {
			nn.CTCLoss(tensor.Zeros(tensor.Float64, 1, 2, 3), tensor.Zeros(tensor.Float32, 1, 2), tensor.Zeros(tensor.Int32, 1, 1), tensor.Zeros(tensor.Float64, 1, 1))
		}, "nn.CTCLoss: logits f64[1,2,3], logitPaddings f32[1,2], labels i32[1,1], labelPaddings f64[1,1]: want paddings of logits' dtype"},
		{func() {
			nn.CTCLoss(tensor.Zeros(tensor.Int32, 1, 2, 3), tensor.Zeros(tensor.Float32, 1, 2), tensor.Zeros(tensor.Int32, 1, 1), tensor.Zeros(tensor.Float32, 1, 1))
		}, "want logits f32[B, T, K] or f64[B, T, K]"},
	} {
		requirePanicContains(t, c.fn, c.want)
	}
}
