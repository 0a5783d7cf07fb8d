package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// TestEmbeddingBagHand checks the three modes on hand-worked float32 bags,
// an empty bag among them, and [B, L] indices.
func TestEmbeddingBagHand(t *testing.T) {
	w := tensor.FromFloat32([]float32{1, 2, 3, -4, -5, 6, 0.5, 0}, 4, 2)
	ids := tensor.FromInt32([]int32{0, 1, 2, 3, 3}, 5)
	offsets := tensor.FromInt32([]int32{0, 2, 2}, 3) // bags {0, 1}, {}, {2, 3, 3}
	for _, c := range []struct {
		mode nn.BagMode
		want []float32
	}{
		{nn.BagSum, []float32{4, -2, 0, 0, -4, 6}},
		{nn.BagMean, []float32{2, -1, 0, 0, -4.0 / 3, 2}},
		{nn.BagMax, []float32{3, 2, 0, 0, 0.5, 6}},
	} {
		y := nn.EmbeddingBag{W: w, Mode: c.mode}.Forward(ids, offsets, nil)
		require.Equal(t, []int{3, 2}, y.Shape(), "%v", c.mode)
		require.InDeltaSlice(t, c.want, y.Float32s(), 1e-6, "%v", c.mode)
	}
	psw := tensor.FromFloat32([]float32{2, 1, 1, 0.5, 0.5}, 5)
	y := nn.EmbeddingBag{W: w}.Forward(ids, offsets, psw)
	require.Equal(t, []float32{5, 0, 0, 0, -4.5, 6}, y.Float32s())
	y = nn.EmbeddingBag{W: w, Mode: nn.BagMean}.Forward(tensor.FromInt32([]int32{0, 1, 3, 3}, 2, 2), nil, nil)
	require.Equal(t, []float32{2, -1, 0.5, 0}, y.Float32s())
	e := nn.NewEmbeddingBag(tensor.NewKey(1), 5, 3, nn.BagMax)
	require.Equal(t, []int{5, 3}, e.W.Shape())
	require.Equal(t, "max", e.Mode.String())
}

// TestEmbeddingBagHostile checks EmbeddingBag's panics.
func TestEmbeddingBagHostile(t *testing.T) {
	w := tensor.Zeros(tensor.Float32, 4, 2)
	ids := tensor.FromInt32([]int32{0, 1, 2}, 3)
	for _, c := range []struct {
		fn   func()
		want string
	}{
		{func() { nn.EmbeddingBag{}.Forward(ids, nil, nil) }, "nn.EmbeddingBag: nil W"},
		{func() { nn.EmbeddingBag{W: w}.Forward(ids, nil, nil) }, "nn.EmbeddingBag: W f32[4,2], indices i32[3]: want indices i32[B, L] without offsets"},
		{func() { nn.EmbeddingBag{W: w}.Forward(ids, tensor.FromInt32([]int32{1}, 1), nil) }, "offsets must start at 0"},
		{func() { nn.EmbeddingBag{W: w}.Forward(ids, tensor.FromInt32([]int32{0, 2, 1}, 3), nil) }, "offset 1 at [2]"},
		{func() { nn.EmbeddingBag{W: w}.Forward(ids, tensor.FromInt32([]int32{0, 4}, 2), nil) }, "offset 4 at [1]"},
		{func() { nn.EmbeddingBag{W: w}.Forward(tensor.FromInt32([]int32{0, 4}, 1, 2), nil, nil) }, "index 4 at [0,1] outside [0, 4)"},
		{func() { nn.EmbeddingBag{W: w}.Forward(tensor.Zeros(tensor.Float32, 2, 2), nil, nil) }, "want int32 indices"},
		{func() {
			nn.EmbeddingBag{W: w, Mode: nn.BagMean}.Forward(ids, tensor.FromInt32([]int32{0}, 1), tensor.Ones(tensor.Float32, 3))
		}, "perSampleWeights need mode sum, not mean"},
		{func() {
			nn.EmbeddingBag{W: w}.Forward(ids, tensor.FromInt32([]int32{0}, 1), tensor.Ones(tensor.Float64, 3))
		}, "perSampleWeights f64[3]: want perSampleWeights of indices' shape and W's dtype"},
		{func() { nn.EmbeddingBag{W: w, Mode: 7}.Forward(ids, nil, nil) }, "unknown mode BagMode(7)"},
		{func() { nn.NewEmbeddingBag(tensor.NewKey(1), -1, 2, nn.BagSum) }, "nn.NewEmbeddingBag: negative size"},
		{func() { nn.EmbeddingBag{W: w}.Forward(nil, nil, nil) }, "nn.EmbeddingBag"},
		{func() {
			nn.EmbeddingBag{W: w, IncludeLastOffset: true}.Forward(ids, tensor.FromInt32([]int32{0, 2}, 2), nil)
		}, "with IncludeLastOffset the last offset must be 3"},
		{func() { nn.EmbeddingBag{W: w, IncludeLastOffset: true}.Forward(ids, tensor.FromInt32(nil, 0), nil) }, "the last offset must be 3"},
		{func() {
			nn.EmbeddingBag{W: w, IncludeLastOffset: true}.Forward(tensor.FromInt32([]int32{0, 1}, 1, 2), nil, nil)
		}, "IncludeLastOffset needs indices i32[M] and offsets i32[B+1]"},
		{func() { nn.EmbeddingBag{W: w, PaddingIdx: 1}.Forward(ids, tensor.FromInt32([]int32{0}, 1), nil) }, "PaddingIdx 1 is set but Padding is off"},
		{func() {
			nn.EmbeddingBag{W: w, Padding: true, PaddingIdx: 4}.Forward(ids, tensor.FromInt32([]int32{0}, 1), nil)
		}, "padding index 4 outside [-4, 4)"},
		{func() { nn.EmbeddingBag{W: w, MaxNorm: -1}.Forward(ids, tensor.FromInt32([]int32{0}, 1), nil) }, "nn.EmbeddingBag: MaxNorm -1 must be >= 0"},
	} {
		requirePanicContains(t, c.fn, c.want)
	}
}
