package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// Recycling returns f's outputs bit for bit, and recycle donates every
// intermediate — of differentiable ops and of integer ones (an argmax) and
// inside a checkpoint — but neither the inputs, nor the outputs, nor the
// values computed from the batch alone; the next pass reuses the storage.
func TestRecycling(t *testing.T) {
	k := tensor.NewKey(4).Split(3)
	w := tensor.Normal(k[0], 64, 128)
	v := tensor.Normal(k[1], 128, 8)
	x := tensor.Normal(k[2], 32, 64)
	var h, idx, inner, xs *tensor.Tensor
	f := func(in []*tensor.Tensor) []*tensor.Tensor {
		xs = tensor.MulScalar(x, 2) // the batch alone: not recorded
		h = tensor.Relu(tensor.MatMul(xs, in[0]))
		idx = tensor.ArgMax(h, 1)
		inner = tensor.Remat(func(in []*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Tanh(tensor.MatMul(in[0], in[1]))}
		}, nil, h, in[1])[0]
		return []*tensor.Tensor{tensor.Mean(tensor.Mul(inner, inner)), tensor.Take(in[1], idx, 0)}
	}
	want := f([]*tensor.Tensor{w, v})
	out, recycle := tensor.Recycling(f, w, v)
	require.Len(t, out, 2)
	for i := range want {
		assert.False(t, out[i].IsTraced())
		for j, g := range out[i].Float32s() {
			require.Equal(t, math.Float32bits(want[i].Float32s()[j]), math.Float32bits(g), "output %d element %d", i, j)
		}
	}
	assert.False(t, h.IsDonated(), "donated before recycle")
	hits := tensor.CacheHits()
	recycle()
	recycle() // once only
	for name, x := range map[string]*tensor.Tensor{"relu": h, "argmax": idx, "checkpoint": inner} {
		assert.True(t, x.IsDonated(), "%s was not donated", name)
	}
	for _, x := range append([]*tensor.Tensor{w, v, xs}, out...) {
		require.False(t, x.IsDonated())
	}
	out2, recycle2 := tensor.Recycling(f, w, v)
	assert.Greater(t, tensor.CacheHits(), hits, "the second pass reused nothing")
	assert.Equal(t, out[0].Float32s(), out2[0].Float32s())
	recycle2()
}
