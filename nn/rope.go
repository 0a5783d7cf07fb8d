package nn

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor"
)

// RotaryPositionalEmbedding applies rotary positional embeddings (RoPE,
// Su et al., "RoFormer", 2021), as eqx.nn.RotaryPositionalEmbedding does:
// the features of position t are split into two halves x1, x2 and rotated
// pair by pair,
//
//	out = x·cos(tθ) + rotate_half(x)·sin(tθ),  rotate_half(x) = [-x2, x1]
//
// with the frequencies θ_j = Theta^(-2j/EmbeddingSize), j < EmbeddingSize/2,
// each used for feature j of both halves. The angles are computed as
// Equinox computes them, in float32 (so that large positions round as
// they do there). It has no parameters; both fields are static, and the
// zero Theta means Equinox's 10 000.
//
// In attention it acts on the query and key heads through
// AttentionCall.ProcessHeads, positions running along the sequence axis 1
// of the [batch, length, heads, size] heads:
//
//	rope := nn.RotaryPositionalEmbedding{EmbeddingSize: 16}
//	rot := func(q, k, v *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
//		return rope.ForwardAxis(q, 1), rope.ForwardAxis(k, 1), v
//	}
//	y := mha.ForwardWith(x, x, x, nn.AttentionCall{ProcessHeads: rot})
type RotaryPositionalEmbedding struct {
	// EmbeddingSize is the number of features rotated, the size of the
	// last axis; it must be even.
	EmbeddingSize int
	// Theta is the base of the frequencies; 0 means 10 000.
	Theta float64
}

// Forward rotates x [..., length, EmbeddingSize], positions 0, 1, ...
// along axis -2 (Equinox's call on [seq_len, embedding_size]).
func (r RotaryPositionalEmbedding) Forward(x *tensor.Tensor) *tensor.Tensor {
	return r.ForwardAxis(x, -2)
}

// Call is Forward, ignoring key; it makes a RotaryPositionalEmbedding a
// Module.
func (r RotaryPositionalEmbedding) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor {
	return r.Forward(x)
}

// ForwardAxis rotates x [..., EmbeddingSize] with positions 0, 1, ... along
// axis (negative counts from the end; it may not be the last axis): the
// heads [batch, length, heads, size] of attention take axis 1.
func (r RotaryPositionalEmbedding) ForwardAxis(x *tensor.Tensor, axis int) *tensor.Tensor {
	d := r.EmbeddingSize
	if d <= 0 || d%2 != 0 {
		panic(fmt.Sprintf("nn.RotaryPositionalEmbedding: EmbeddingSize %d must be positive and even", d))
	}
	if x == nil || !x.DType().IsFloat() || x.Rank() < 2 || x.Dim(-1) != d {
		panic(fmt.Sprintf("nn.RotaryPositionalEmbedding: x %v: want float [..., length, %d]", x, d))
	}
	a := axis
	if a < 0 {
		a += x.Rank()
	}
	if a < 0 || a >= x.Rank()-1 {
		panic(fmt.Sprintf("nn.RotaryPositionalEmbedding: x %v: axis %d is not a position axis (not the last)", x, axis))
	}
	n := x.Dim(a)
	cos, sin := r.tables(n)
	// The tables [n, d] broadcast against x: position axis a, features
	// last, ones between.
	shape := make([]int, x.Rank()-a)
	for i := range shape {
		shape[i] = 1
	}
	shape[0], shape[len(shape)-1] = n, d
	c := tensor.Reshape(cos, shape...)
	s := tensor.Reshape(sin, shape...)
	if x.DType() != tensor.Float32 {
		c, s = tensor.Convert(c, x.DType()), tensor.Convert(s, x.DType())
	}
	halves := tensor.Split(x, -1, 2)
	rot := tensor.Concat(-1, tensor.Neg(halves[1]), halves[0])
	return tensor.Add(tensor.Mul(x, c), tensor.Mul(rot, s))
}

// tables returns cos(tθ) and sin(tθ) as f32[n, EmbeddingSize], each
// frequency twice (for both halves), computed as Equinox's
// precompute_freqs_cis does in float32.
func (r RotaryPositionalEmbedding) tables(n int) (*tensor.Tensor, *tensor.Tensor) {
	d := r.EmbeddingSize
	theta := r.Theta
	if theta == 0 {
		theta = 10000
	}
	h := d / 2
	freqs := make([]float32, h)
	for j := range freqs {
		e := float32(2*j) / float32(d)
		freqs[j] = 1 / float32(math.Pow(theta, float64(e)))
	}
	cos := make([]float32, n*d)
	sin := make([]float32, n*d)
	for t := range n {
		for j, f := range freqs {
			angle := float64(float32(t) * f)
			c, s := float32(math.Cos(angle)), float32(math.Sin(angle))
			cos[t*d+j], cos[t*d+h+j] = c, c
			sin[t*d+j], sin[t*d+h+j] = s, s
		}
	}
	return tensor.FromFloat32(cos, n, d), tensor.FromFloat32(sin, n, d)
}
