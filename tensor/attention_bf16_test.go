package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// roundBF16 returns x's values rounded to bfloat16, as float32.
func roundBF16(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Convert(tensor.Convert(x, tensor.BFloat16), tensor.Float32)
}

// relErr is max |got - want| over max |want| (over 1 if want is 0).
func relErr(want []float64, got *tensor.Tensor) float64 {
	var d, m float64
	for i, g := range got.Float64s() {
		d = math.Max(d, math.Abs(g-want[i]))
		m = math.Max(m, math.Abs(want[i]))
	}
	if m == 0 {
		return d
	}
	return d / m
}

// TestDotProductAttentionAs compares attention with bfloat16 products,
// forward and gradients, with float64 loops on the operands rounded to
// bfloat16 (q, k, v and the output's cotangent g). What is left is the
// rounding of the weights and of their gradients as the kernel pairs them
// (2⁻⁹ relative each) and float32 sums: within 6e-3 of the largest value.
// q and k are scaled so that the logits span ±60: their rounding then
// moves the weights by several times that, so the float64 result on
// unrounded operands is further off — the products did round them.
func TestDotProductAttentionAs(t *testing.T) {
	cases := append([]attnCase{
		{B: 2, T: 64, S: 64, N: 4, H: 32, V: 32, causal: true},        // examples/moe's head
		{B: 1, T: 131, S: 131, N: 2, H: 32, V: 32, causal: true},      // ragged tail of queries and keys
		{B: 1, T: 67, S: 259, N: 2, H: 9, V: 7, mask: []int{67, 259}}, // odd H and V, odd last key block
	}, attnCases...)
	for i, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			q, k, v, mask := attnInputs(c, uint64(i))
			q, k = tensor.MulScalar(q, 3), tensor.MulScalar(k, 3)
			g := randF32(newRNG(uint64(200+i)), c.B, c.T, c.N, c.V)
			ref := attnRef(c, roundBF16(q), roundBF16(k), roundBF16(v), mask, roundBF16(g))
			unrounded := attnRef(c, q, k, v, mask, g)
			f := func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.DotProductAttentionAs(xs[0], xs[1], xs[2], mask, c.scale, c.causal, tensor.BFloat16)
			}
			out := f(ts(q, k, v))
			require.Equal(t, []int{c.B, c.T, c.N, c.V}, out.Shape())
			require.Equal(t, tensor.Float32, out.DType())
			gr := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Mul(f(xs), g)) }, ts(q, k, v))
			for j, x := range []struct {
				name      string
				ref, full []float64
				got       *tensor.Tensor
			}{{"out", ref.out, unrounded.out, out}, {"dq", ref.dq, unrounded.dq, gr[0]}, {"dk", ref.dk, unrounded.dk, gr[1]}, {"dv", ref.dv, unrounded.dv, gr[2]}} {
				e, eFull := relErr(x.ref, x.got), relErr(x.full, x.got)
				require.Less(t, e, 6e-3, "%s: relative error %.2g against the rounded operands' result", x.name, e)
				if c.T*c.S*c.H >= 1000 && j < 2 { // enough terms for the rounding to show
					require.Greater(t, eFull, 1.5*e, "%s: %.2g from the unrounded operands' result, %.2g from the rounded ones'", x.name, eFull, e)
				}
			}
			// Float32 is DotProductAttention.
			require.Equal(t, tensor.DotProductAttention(q, k, v, mask, c.scale, c.causal).Float32s(),
				tensor.DotProductAttentionAs(q, k, v, mask, c.scale, c.causal, tensor.Float32).Float32s())
		})
	}
}

// TestDotProductAttentionAsComposition: the fused backward in bfloat16
// agrees with its composition of ops (MatMulAs in bfloat16), which the
// second derivative runs.
func TestDotProductAttentionAsComposition(t *testing.T) {
	c := attnCase{B: 1, T: 5, S: 7, N: 2, H: 4, V: 3, causal: true}
	q, k, v, _ := attnInputs(c, 7)
	w := randF32(newRNG(8), c.B, c.T, c.N, c.V)
	loss := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Mul(tensor.DotProductAttentionAs(xs[0], xs[1], xs[2], nil, 0, true, tensor.BFloat16), w))
	}
	fused := grad(loss, ts(q, k, v))
	// Σ (∂loss/∂q)² traced: the VJP runs the composition, whose first
	// derivative is the same gradient.
	for j := range 3 {
		g := gradOf(loss, j)
		composed := g(ts(q, k, v))
		require.InDeltaSlice(t, fused[j].Float64s(), composed.Float64s(), 2e-2)
	}
}

func TestDotProductAttentionAsPanics(t *testing.T) {
	q := tensor.Zeros(tensor.Float32, 2, 3, 4, 5)
	requirePanic(t, "tensor.DotProductAttentionAs: f32[2,3,4,5], f32[2,3,4,5], f32[2,3,4,5]: compute dtype float16: want float32 operands and a compute dtype float32 or bfloat16",
		func() { tensor.DotProductAttentionAs(q, q, q, nil, 0, false, tensor.Float16) })
	b := tensor.Convert(q, tensor.BFloat16)
	requirePanic(t, "tensor.DotProductAttentionAs: bf16[2,3,4,5], bf16[2,3,4,5], bf16[2,3,4,5]: compute dtype bfloat16: want float32 operands and a compute dtype float32 or bfloat16",
		func() { tensor.DotProductAttentionAs(b, b, b, nil, 0, false, tensor.BFloat16) })
}
