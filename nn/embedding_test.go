package nn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

func TestEmbeddingForward(t *testing.T) {
	e := nn.NewEmbedding(tensor.NewKey(0), 5, 3, nn.EmbeddingOptions{})
	require.Equal(t, []int{5, 3}, e.W.Shape())
	// Equinox's default: a standard normal table.
	assert.Equal(t, tensor.Normal(tensor.NewKey(0), 5, 3).Float32s(), e.W.Float32s())
	ids := tensor.FromInt32([]int32{4, 0, 4, 2, 1, 3}, 2, 3)
	y := e.Forward(ids)
	require.Equal(t, []int{2, 3, 3}, y.Shape())
	w := toMat(e.W)
	var want []float64
	for _, id := range ids.Ints() {
		want = append(want, w[id]...)
	}
	assert.Equal(t, want, y.Float64s())
	assert.Equal(t, y.Float32s(), e.Call(ids, tensor.NewKey(1)).Float32s())
	// A scalar id gives one vector.
	assert.Equal(t, w[2], e.Forward(tensor.ScalarInt(2)).Float64s())
}

func TestEmbeddingGrad(t *testing.T) {
	e := nn.NewEmbedding(tensor.NewKey(0), 4, 2, nn.EmbeddingOptions{Init: nn.Ones})
	ids := tensor.FromInt32([]int32{1, 3, 1, 1})
	_, g := autodiff.ValueAndGrad(func(e nn.Embedding) *tensor.Tensor { return tensor.Sum(e.Forward(ids)) })(e)
	// Row 1 is used three times, row 3 once, rows 0 and 2 never.
	assert.Equal(t, []float32{0, 0, 3, 3, 0, 0, 1, 1}, g.W.Float32s())
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return nn.Embedding{W: xs[0]}.Forward(ids) }, randn(1, 4, 2))
}

func TestEmbeddingAttend(t *testing.T) {
	e := nn.NewEmbedding(tensor.NewKey(0), 6, 4, nn.EmbeddingOptions{})
	x := randn(1, 2, 3, 4)
	got := e.Attend(x)
	require.Equal(t, []int{2, 3, 6}, got.Shape())
	w := toMat(e.W)
	rows := toMat(tensor.Reshape(x, 6, 4))
	var want []float64
	for _, r := range rows {
		for _, v := range w {
			s := 0.0
			for j := range r {
				s += r[j] * v[j]
			}
			want = append(want, s)
		}
	}
	assert.InDeltaSlice(t, want, got.Float64s(), 1e-5)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return nn.Embedding{W: xs[0]}.Attend(xs[1]) }, e.W, x)
	assert.Equal(t, []int{6}, e.Attend(randn(2, 4)).Shape())
}

func TestEmbeddingPanics(t *testing.T) {
	e := nn.NewEmbedding(tensor.NewKey(0), 5, 3, nn.EmbeddingOptions{})
	requirePanicContains(t, func() { e.Forward(tensor.FromFloat32([]float32{1})) }, "nn.Embedding: ids f32[1]: want int32 ids")
	requirePanicContains(t, func() { e.Forward(tensor.FromInt32([]int32{0, 5}, 1, 2)) }, "nn.Embedding: ids i32[1,2]: id 5 at flat index 1 is outside [0, 5)")
	requirePanicContains(t, func() { e.Forward(tensor.FromInt32([]int32{-1})) }, "id -1 at flat index 0")
	requirePanicContains(t, func() { e.Attend(randn(0, 2, 4)) }, "nn.Embedding.Attend: x f32[2,4], W f32[5,3]: last dim of x must be 3")
	requirePanicContains(t, func() { nn.NewEmbedding(tensor.NewKey(0), -1, 3, nn.EmbeddingOptions{}) }, "nn.NewEmbedding: negative size vocab=-1 dim=3")
}
