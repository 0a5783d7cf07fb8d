package tensor_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/tensor"
)

// Unit roundoffs: half an ulp of 1 relative to the value.
const (
	uBF16 = 0x1p-8
	uF16  = 0x1p-11
)

func unitRoundoff(dt tensor.DType) float64 {
	if dt == tensor.BFloat16 {
		return uBF16
	}
	return uF16
}

// refRound rounds v to dt with internal/half (integer bit arithmetic) and
// returns the bits.
func refRound(dt tensor.DType, v float32) uint16 {
	if dt == tensor.BFloat16 {
		return uint16(half.FromFloat32BF(v))
	}
	return uint16(half.FromFloat32(v))
}

func TestHalfDTypeNames(t *testing.T) {
	for _, c := range []struct {
		dt           tensor.DType
		short, long  string
		size         int
		str, typeStr string
	}{
		{tensor.BFloat16, "bf16", "bfloat16", 2, "bf16[3,4]", "bfloat16[3,4]"},
		{tensor.Float16, "f16", "float16", 2, "f16[3,4]", "float16[3,4]"},
	} {
		x := tensor.Zeros(c.dt, 3, 4)
		require.Equal(t, c.short, c.dt.Abbrev())
		require.Equal(t, c.long, c.dt.String())
		require.Equal(t, c.size, c.dt.Size())
		require.True(t, c.dt.IsFloat())
		require.Equal(t, c.str, x.String())
		require.Equal(t, c.typeStr, x.Type())
		require.Equal(t, 24, x.Bytes())
	}
}

// convertInputs are float32 values covering rounding edge cases.
var convertInputs = []uint32{
	0, 0x80000000, 1, 0x807fffff, 0x00008000, 0x00018000, // float32 subnormals, bf16 ties among them
	0x3f800000, 0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, // 1, ties, above, below
	0x7f7fffff, 0xff7f8000, 0x7f800000, 0xff800000, // max (rounds to Inf in bf16), -Inf
	0x7fc00001, 0xff812345, 0x7fa00000, // NaNs with payloads
	0x477fe000, 0x477fefff, 0x477ff000, 0x47800000, // f16: 65504, just below the Inf tie, the tie, 65536
	0x33800000, 0x33000000, 0x33000001, 0x387fc000, // f16 subnormals, 2^-25 tie
	0x3dcccccd, 0xc0200000, // 0.1, -2.5
}

func TestConvertMatchesReference(t *testing.T) {
	in := make([]float32, 0, 3*len(convertInputs))
	for _, b := range convertInputs {
		in = append(in, math.Float32frombits(b))
	}
	// A long tensor too, so that the vector kernels (and their parallel
	// split) run, not only the scalar tail.
	for i := 0; i < 5000; i++ {
		in = append(in, math.Float32frombits(uint32(i)*858993+12345))
	}
	x := tensor.FromFloat32(in)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		h := tensor.Convert(x, dt)
		require.Equal(t, dt, h.DType())
		bits := h.Bits16()
		for i, v := range in {
			require.Equal(t, refRound(dt, v), bits[i], "%v of %#08x", dt, math.Float32bits(v))
		}
		// Widening is exact: every half value comes back as itself.
		w := tensor.Convert(h, tensor.Float32).Float32s()
		for i := range in {
			want := half.BFloat16(bits[i]).Float32()
			if dt == tensor.Float16 {
				want = half.Float16(bits[i]).Float32()
			}
			if want != want {
				require.True(t, math.IsNaN(float64(w[i])))
				continue
			}
			require.Equal(t, math.Float32bits(want), math.Float32bits(w[i]))
		}
	}
	// bf16 <-> f16 through float32 (exact widening, one rounding).
	b := tensor.Convert(tensor.FromFloat32([]float32{1e-6, 70000, 3.140625}), tensor.BFloat16)
	f := tensor.Convert(b, tensor.Float16)
	require.Equal(t, "f16[3]", f.String())
	require.Equal(t, []float64{float64(half.Float16(refRound(tensor.Float16, half.BFloat16(refRound(tensor.BFloat16, 1e-6)).Float32())).Float32()), math.Inf(1), 3.140625}, f.Float64s())
}

func TestHalfConstructorsAndPrinting(t *testing.T) {
	x32 := tensor.FromFloat32([]float32{0.1, 1, -2.5, float32(math.NaN()), float32(math.Inf(-1)), 300}, 2, 3)
	x := tensor.Convert(x32, tensor.BFloat16)
	// Printed like the float32 values: the shortest decimal that reads
	// back as the bf16 value (0.1, not 0.10009766).
	require.Equal(t, "[[ 0.1    1 -2.5]\n [ nan -inf  300]]", fmt.Sprintf("%g", x))
	require.Equal(t, fmt.Sprintf("%g", x32), fmt.Sprintf("%g", x))
	require.Equal(t, fmt.Sprintf("%.3f", x32), fmt.Sprintf("%.3f", x))
	require.Equal(t, 0.10009765625, x.At(0, 0)) // the bf16 value nearest 0.1
	h := tensor.Convert(tensor.FromFloat32([]float32{0.1, 65519, 65520}), tensor.Float16)
	// 65504 is the largest float16; 65500 is the shortest decimal that
	// reads back as it (NumPy prints float16(65504) as 65500.0 too).
	require.Equal(t, "[  0.1 65500   inf]", fmt.Sprintf("%g", h))
	require.Equal(t, 65504.0, h.At(1))
	require.Equal(t, []float64{1.5, 1.5}, tensor.Full(tensor.BFloat16, 1.5, 2).Float64s())
	require.Equal(t, []float64{1, 1, 1}, tensor.Ones(tensor.Float16, 3).Float64s())
	require.Equal(t, []uint16{0x3f80, 0xbfc0}, tensor.FromBits16(tensor.BFloat16, []uint16{0x3f80, 0xbfc0}).Bits16())
	require.Equal(t, []float64{1, -1.5}, tensor.FromBits16(tensor.BFloat16, []uint16{0x3f80, 0xbfc0}, 2).Float64s())
	require.Equal(t, 2.0, tensor.FromBits16(tensor.Float16, []uint16{0x4000}, 1, 1).Item())
	requirePanic(t, "tensor.FromBits16: dtype float32 is not bfloat16 or float16", func() { tensor.FromBits16(tensor.Float32, nil) })
	requirePanic(t, "Tensor.Bits16: f32[1] is float32, want bfloat16 or float16", func() { tensor.FromFloat32([]float32{1}).Bits16() })
	requirePanic(t, "tensor.Convert: i32[2] to bfloat16: both dtypes must be float32, float64, bfloat16 or float16 (use tensor.AsType)", func() {
		tensor.Convert(tensor.Arange(2), tensor.BFloat16)
	})
	// AsType goes through float32 for integers, and is Convert between floats.
	require.Equal(t, []float64{0, 1, 2}, tensor.AsType(tensor.Arange(3), tensor.BFloat16).Float64s())
	require.Equal(t, []int32{-2, 300}, tensor.AsType(tensor.Convert(tensor.FromFloat32([]float32{-2.5, 300}), tensor.Float16), tensor.Int32).Int32s())
}

// TestHalfOpsRoundOnce checks the generic path: an op on half operands
// gives exactly the float32 op on the widened operands, rounded once.
func TestHalfOpsRoundOnce(t *testing.T) {
	rng := newRNG(3)
	a32 := randF32(rng, 4, 5)
	b32 := randRange(rng, 0.5, 2, 4, 5)
	v32 := randF32(rng, 5)
	ops := []struct {
		name string
		f    func(a, b, v *tensor.Tensor) *tensor.Tensor
	}{
		{"add", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Add(a, v) }},
		{"mul", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Mul(a, b) }},
		{"div", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Div(a, b) }},
		{"exp", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Exp(a) }},
		{"tanh", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Tanh(a) }},
		{"gelu", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Gelu(a) }},
		{"sum", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Sum(a, 1) }},
		{"mean", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Mean(a) }},
		{"max", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Max(a, 0) }},
		{"softmax", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Softmax(a, -1) }},
		{"logsumexp", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.LogSumExp(a, 1) }},
		{"biasact", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.BiasAct(a, v, tensor.ActRelu) }},
		{"transpose", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Transpose(a, 1, 0) }},
		{"reshape", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Reshape(a, 20) }},
		{"concat", func(a, b, v *tensor.Tensor) *tensor.Tensor { return tensor.Concat(0, a, b) }},
	}
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		a, b, v := tensor.Convert(a32, dt), tensor.Convert(b32, dt), tensor.Convert(v32, dt)
		wa, wb, wv := tensor.Convert(a, tensor.Float32), tensor.Convert(b, tensor.Float32), tensor.Convert(v, tensor.Float32)
		for _, op := range ops {
			got := op.f(a, b, v)
			want := op.f(wa, wb, wv)
			require.Equal(t, dt, got.DType(), "%s %v", op.name, dt)
			require.Equal(t, want.Shape(), got.Shape())
			wf := want.Float32s()
			bits := got.Bits16()
			for i := range wf {
				require.Equal(t, refRound(dt, wf[i]), bits[i], "%s %v element %d", op.name, dt, i)
			}
		}
		// Comparisons and argmax keep their dtypes.
		require.Equal(t, tensor.Bool, tensor.Greater(a, b).DType())
		require.Equal(t, tensor.Greater(wa, wb).Bools(), tensor.Greater(a, b).Bools())
		require.Equal(t, tensor.ArgMax(wa, 1).Int32s(), tensor.ArgMax(a, 1).Int32s())
	}
}

// TestHalfReductionsAccumulateInFloat32: a sum of bf16 values is
// accumulated in float32 and rounded once. Accumulating in bfloat16
// would stall at 256 (256 + 1 rounds back to 256).
func TestHalfReductionsAccumulateInFloat32(t *testing.T) {
	ones := tensor.Ones(tensor.BFloat16, 1000)
	require.Equal(t, 1000.0, tensor.Sum(ones).Item())
	acc := half.FromFloat32BF(0)
	for i := 0; i < 1000; i++ {
		acc = half.FromFloat32BF(acc.Float32() + 1)
	}
	require.Equal(t, float32(256), acc.Float32(), "the naive bfloat16 accumulation this test guards against")
	require.Equal(t, 1000.0, tensor.MatMul(tensor.Ones(tensor.BFloat16, 1, 1000), tensor.Ones(tensor.BFloat16, 1000, 1)).Item())
	// The gradient of a broadcast bias (unbroadcast: a Sum over the batch)
	// too.
	g := grad(func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Add(tensor.Zeros(tensor.BFloat16, 1000, 2), xs[0])
	}, ts(tensor.Zeros(tensor.BFloat16, 2)))
	require.Equal(t, tensor.BFloat16, g[0].DType())
	require.Equal(t, []float64{1000, 1000}, g[0].Float64s())
}

func TestHalfDTypeMismatchPanics(t *testing.T) {
	b := tensor.Zeros(tensor.BFloat16, 2, 2)
	f := tensor.Zeros(tensor.Float32, 2, 2)
	requirePanic(t, "tensor.MatMul: bf16[2,2] @ f32[2,2]: dtypes differ; convert one with tensor.Convert", func() { tensor.MatMul(b, f) })
	requirePanic(t, "tensor.MatMul: i32[2,2] @ bf16[2,2]: operands must be float32", func() { tensor.MatMul(tensor.Zeros(tensor.Int32, 2, 2), b) })
	requirePanic(t, "tensor.Add: bf16[2,2] + f32[2,2]: dtypes differ; convert one with tensor.AsType", func() { tensor.Add(b, f) })
	// A float32 scalar is weakly typed: it takes the other operand's type.
	require.Equal(t, "bf16[2,2]", tensor.MulScalar(b, 0.5).String())
	require.Equal(t, "f16[2]", tensor.Sub(tensor.Scalar(1), tensor.Zeros(tensor.Float16, 2)).String())
	gs := grad(func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Mul(tensor.Ones(tensor.BFloat16, 3), xs[0]))
	}, ts(tensor.Scalar(2)))
	require.Equal(t, "f32[]", gs[0].String())
	require.Equal(t, 3.0, gs[0].Item())
	requirePanic(t, "tensor.MatMulTo: bf16[2,2] @ bf16[2,2]: result dtype int32 is not a float dtype", func() {
		tensor.MatMulTo(b, b, false, false, tensor.Int32)
	})
}

// halfMatmulTol bounds |bf16/f16 matmul - float64 product of the operands|:
// float32 accumulation (k·2^-24·Σ|ab|) plus the final rounding (u·|c|).
func requireMatmulClose(t *testing.T, a, b, c *tensor.Tensor, ta, tb bool, u float64) {
	t.Helper()
	af, bf := a.Float64s(), b.Float64s()
	m, k := a.Dim(0), a.Dim(1)
	if ta {
		m, k = k, m
	}
	n := b.Dim(1)
	if tb {
		n = b.Dim(0)
	}
	A := func(i, p int) float64 {
		if ta {
			return af[p*m+i]
		}
		return af[i*k+p]
	}
	B := func(p, j int) float64 {
		if tb {
			return bf[j*k+p]
		}
		return bf[p*n+j]
	}
	got := c.Float64s()
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			want, abs := 0.0, 0.0
			for p := 0; p < k; p++ {
				want += A(i, p) * B(p, j)
				abs += math.Abs(A(i, p) * B(p, j))
			}
			tol := float64(k+2)*0x1p-24*abs + u*math.Abs(want) + 1e-30
			require.InDelta(t, want, got[i*n+j], tol, "C[%d,%d]", i, j)
		}
	}
}

func TestHalfMatMul(t *testing.T) {
	rng := newRNG(9)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			ta, tb := tr[0], tr[1]
			sa, sb := []int{13, 70}, []int{70, 37}
			if ta {
				sa = []int{70, 13}
			}
			if tb {
				sb = []int{37, 70}
			}
			a := tensor.Convert(randF32(rng, sa...), dt)
			b := tensor.Convert(randF32(rng, sb...), dt)
			c := tensor.MatMulT(a, b, ta, tb)
			require.Equal(t, dt, c.DType())
			requireMatmulClose(t, a, b, c, ta, tb, unitRoundoff(dt))
			c32 := tensor.MatMulTo(a, b, ta, tb, tensor.Float32)
			require.Equal(t, tensor.Float32, c32.DType())
			requireMatmulClose(t, a, b, c32, ta, tb, 0)
			// The rounded product is the float32 accumulator rounded once.
			require.Equal(t, tensor.Convert(c32, dt).Bits16(), c.Bits16())
		}
	}
	// Batched, broadcasting.
	a := tensor.Convert(randF32(rng, 2, 1, 5, 6), tensor.BFloat16)
	b := tensor.Convert(randF32(rng, 3, 6, 4), tensor.BFloat16)
	c := tensor.MatMul(a, b)
	require.Equal(t, "bf16[2,3,5,4]", c.String())
	want := tensor.MatMulTo(a, b, false, false, tensor.Float32)
	require.Equal(t, tensor.Convert(want, tensor.BFloat16).Bits16(), c.Bits16())
	w32 := tensor.MatMul(tensor.Convert(a, tensor.Float32), tensor.Convert(b, tensor.Float32))
	requireClose(t, w32.Float64s(), want, 1e-5, 1e-5)
}

// TestHalfGradients compares gradients computed in bf16/f16 with those of
// the same function in float32 on the same (exactly widened) inputs. The
// tolerance is derived from the unit roundoff u: each op rounds its
// result and each VJP its cotangents once, so a chain of d ops is off by
// about d·u relative, on values whose scale is that of the gradient.
func TestHalfGradients(t *testing.T) {
	rng := newRNG(5)
	x32 := randF32(rng, 6, 8)
	w32 := randF32(rng, 8, 4)
	bias32 := randF32(rng, 4)
	lbl := tensor.FromInts([]int{0, 3, 1, 2, 2, 1})
	fns := []struct {
		name  string
		depth float64 // roundings along the longest chain
		f     func(xs []*tensor.Tensor) *tensor.Tensor
	}{
		{"mlp-xent", 10, func(xs []*tensor.Tensor) *tensor.Tensor {
			h := tensor.BiasAct(tensor.MatMul(xs[0], xs[1]), xs[2], tensor.ActGelu)
			return tensor.Convert(tensor.Mean(tensor.SoftmaxCrossEntropy(tensor.Convert(h, tensor.Float32), lbl)), tensor.Float32)
		}},
		{"tanh-softmax-sum", 8, func(xs []*tensor.Tensor) *tensor.Tensor {
			y := tensor.Softmax(tensor.Tanh(tensor.MatMul(xs[0], xs[1])), -1)
			return tensor.Sum(tensor.Mul(y, tensor.Exp(tensor.Sub(xs[2], tensor.Max(xs[2])))))
		}},
		{"norm-like", 10, func(xs []*tensor.Tensor) *tensor.Tensor {
			h := tensor.MatMul(xs[0], xs[1])
			mu := tensor.MeanKeep(h, -1)
			d := tensor.Sub(h, mu)
			r := tensor.Rsqrt(tensor.AddScalar(tensor.MeanKeep(tensor.Square(d), -1), 1e-3))
			return tensor.Sum(tensor.Mul(tensor.Mul(d, r), xs[2]))
		}},
	}
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		xs := ts(tensor.Convert(x32, dt), tensor.Convert(w32, dt), tensor.Convert(bias32, dt))
		wide := ts(tensor.Convert(xs[0], tensor.Float32), tensor.Convert(xs[1], tensor.Float32), tensor.Convert(xs[2], tensor.Float32))
		u := unitRoundoff(dt)
		for _, fn := range fns {
			gh := grad(fn.f, xs)
			g32 := grad(fn.f, wide)
			for i := range xs {
				require.Equal(t, dt, gh[i].DType(), "%s: cotangent %d", fn.name, i)
				want := g32[i].Float64s()
				scale := 0.0
				for _, v := range want {
					scale = math.Max(scale, math.Abs(v))
				}
				got := gh[i].Float64s()
				for j := range want {
					require.InDelta(t, want[j], got[j], fn.depth*u*scale, "%s %v: d/dx%d[%d]", fn.name, dt, i, j)
				}
			}
		}
	}
}

// TestConvertGradient: the VJP of Convert converts the cotangent back,
// exactly when widening (the float32 cotangent of a bf16 input is rounded
// once to bf16).
func TestConvertGradient(t *testing.T) {
	x := tensor.Convert(tensor.FromFloat32([]float32{1, 2, 3}), tensor.BFloat16)
	g := grad(func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.MulScalar(tensor.Square(tensor.Convert(xs[0], tensor.Float32)), 1.0/3))
	}, ts(x))
	require.Equal(t, tensor.BFloat16, g[0].DType())
	want := []float64{2.0 / 3, 4.0 / 3, 2}
	for i, v := range g[0].Float64s() {
		require.Equal(t, float64(half.FromFloat32BF(float32(want[i])).Float32()), v)
	}
	// Second derivative through Convert.
	gg := grad(func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(grad(func(ys []*tensor.Tensor) *tensor.Tensor {
			return tensor.Sum(tensor.Mul(tensor.Square(tensor.Convert(ys[0], tensor.Float32)), tensor.Convert(ys[0], tensor.Float32)))
		}, xs)[0])
	}, ts(tensor.FromFloat32([]float32{1, 2})))
	require.Equal(t, []float32{6, 12}, gg[0].Float32s()) // d/dx Σ 3x² = 6x
}

// TestMatMulAs: a float32 operand of MatMulAs is rounded to the compute
// dtype as Convert rounds it (the product equals, bit for bit, MatMulTo
// on the converted operand), and the cotangent of a float32 operand is
// the float32 accumulator of the product in the compute dtype, not
// rounded to it.
func TestMatMulAs(t *testing.T) {
	rng := newRNG(11)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			ta, tb := tr[0], tr[1]
			sa, sb := []int{13, 70}, []int{70, 37}
			if ta {
				sa = []int{70, 13}
			}
			if tb {
				sb = []int{37, 70}
			}
			x := tensor.Convert(randF32(rng, sa...), dt)
			w := randF32(rng, sb...) // not representable in dt
			for _, out := range []tensor.DType{tensor.Float32, dt} {
				got := tensor.MatMulAs(x, w, ta, tb, dt, out)
				require.Equal(t, out, got.DType())
				want := tensor.MatMulTo(x, tensor.Convert(w, dt), ta, tb, out)
				require.Equal(t, want.Float64s(), got.Float64s(), "%v ta=%v tb=%v out=%v", dt, ta, tb, out)
			}
			r := randF32(rng, 13, 37)
			gw := grad(func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Mul(tensor.MatMulAs(x, xs[0], ta, tb, dt, tensor.Float32), r))
			}, ts(w))[0]
			require.Equal(t, tensor.Float32, gw.DType())
			rh := tensor.Convert(r, dt)
			var want *tensor.Tensor
			if tb {
				want = tensor.MatMulTo(rh, x, true, ta, tensor.Float32)
			} else {
				want = tensor.MatMulTo(x, rh, !ta, false, tensor.Float32)
			}
			require.Equal(t, want.Float64s(), gw.Float64s(), "%v ta=%v tb=%v: d/dw", dt, ta, tb)
		}
	}
	requirePanic(t, "tensor.MatMulAs: f16[2,2] @ f32[2,2]: operand float16 is neither float32 nor the compute dtype bfloat16", func() {
		tensor.MatMulAs(tensor.Zeros(tensor.Float16, 2, 2), tensor.Zeros(tensor.Float32, 2, 2), false, false, tensor.BFloat16, tensor.Float32)
	})
}
