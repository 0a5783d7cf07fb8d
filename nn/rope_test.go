package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// ropeRef rotates x [T, d] by hand in float64: pair (j, j+d/2) of position
// t by the angle t·theta^(-2j/d).
func ropeRef(x []float64, T, d int, theta float64) []float64 {
	out := make([]float64, len(x))
	h := d / 2
	for t := range T {
		for j := range h {
			ang := float64(t) * math.Pow(theta, -2*float64(j)/float64(d))
			a, b := x[t*d+j], x[t*d+h+j]
			out[t*d+j] = a*math.Cos(ang) - b*math.Sin(ang)
			out[t*d+h+j] = b*math.Cos(ang) + a*math.Sin(ang)
		}
	}
	return out
}

func TestRotaryPositionalEmbedding(t *testing.T) {
	const T, d = 7, 6
	x := randn(1, T, d)
	r := nn.RotaryPositionalEmbedding{EmbeddingSize: d}
	assert.InDeltaSlice(t, ropeRef(x.Float64s(), T, d, 10000), r.Forward(x).Float64s(), 2e-6)
	r2 := nn.RotaryPositionalEmbedding{EmbeddingSize: d, Theta: 500}
	assert.InDeltaSlice(t, ropeRef(x.Float64s(), T, d, 500), r2.Call(x, tensor.NewKey(0)).Float64s(), 2e-6)

	// Position 0 is the identity; a hand-worked position 1 with d = 2:
	// angle 1, (x0, x1) -> (x0 cos 1 - x1 sin 1, x1 cos 1 + x0 sin 1).
	y := nn.RotaryPositionalEmbedding{EmbeddingSize: 2}.Forward(tensor.FromFloat32([]float32{3, 4, 1, 0}, 2, 2)).Float64s()
	assert.InDeltaSlice(t, []float64{3, 4, math.Cos(1), math.Sin(1)}, y, 1e-6)

	// Relative positions: <rope(q)_m, rope(k)_n> depends on m-n only.
	q, k := randn(2, d), randn(3, d)
	at := func(v *tensor.Tensor, pos int) []float64 {
		rows := tensor.BroadcastTo(tensor.Reshape(v, 1, d), pos+1, d)
		return r.Forward(rows).Float64s()[pos*d:]
	}
	dot := func(a, b []float64) (s float64) {
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	assert.InDelta(t, dot(at(q, 2), at(k, 0)), dot(at(q, 5), at(k, 3)), 1e-5)

	// Batched heads [B, T, N, d] with positions along axis 1 equal one
	// [T, d] sequence per batch element and head.
	heads := randn(4, 2, T, 3, d)
	got := r.ForwardAxis(heads, 1)
	for b := range 2 {
		for n := range 3 {
			seq := tensor.Squeeze(tensor.SliceAxis(tensor.SliceAxis(heads, 0, b, b+1), 2, n, n+1), 0, 2)
			want := r.Forward(seq).Float64s()
			g := tensor.Squeeze(tensor.SliceAxis(tensor.SliceAxis(got, 0, b, b+1), 2, n, n+1), 0, 2).Float64s()
			require.InDeltaSlice(t, want, g, 1e-6)
		}
	}
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return r.ForwardAxis(xs[0], 1) }, heads)

	// bfloat16 input: the float32 result rounded.
	hb := tensor.Convert(heads, tensor.BFloat16)
	gb := r.ForwardAxis(hb, 1)
	assert.Equal(t, tensor.BFloat16, gb.DType())
	assert.InDeltaSlice(t, r.ForwardAxis(tensor.Convert(hb, tensor.Float32), 1).Float64s(), gb.Float64s(), 0.05)

	requirePanicContains(t, func() { nn.RotaryPositionalEmbedding{EmbeddingSize: 3}.Forward(x) },
		"nn.RotaryPositionalEmbedding: EmbeddingSize 3 must be positive and even")
	requirePanicContains(t, func() { nn.RotaryPositionalEmbedding{EmbeddingSize: 4}.Forward(x) },
		"nn.RotaryPositionalEmbedding: x f32[7,6]: want float [..., length, 4]")
	requirePanicContains(t, func() { r.ForwardAxis(x, -1) },
		"nn.RotaryPositionalEmbedding: x f32[7,6]: axis -1 is not a position axis (not the last)")
}

// RoPE in attention through ProcessHeads: it changes the result and the
// gradient flows through it.
func TestRotaryInAttention(t *testing.T) {
	const D, N = 8, 2
	a := nn.NewMultiHeadAttention(tensor.NewKey(6), D, N, nn.AttentionOptions{})
	rope := nn.RotaryPositionalEmbedding{EmbeddingSize: D / N}
	rot := func(q, k, v *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
		return rope.ForwardAxis(q, 1), rope.ForwardAxis(k, 1), v
	}
	x := randn(7, 1, 5, D)
	plain := a.Forward(x).Float64s()
	got := a.ForwardWith(x, x, x, nn.AttentionCall{ProcessHeads: rot}).Float64s()
	assert.NotEqual(t, plain, got)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
		return a.ForwardWith(xs[0], xs[0], xs[0], nn.AttentionCall{ProcessHeads: rot})
	}, x)
}
