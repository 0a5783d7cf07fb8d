package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/tensor"
)

// groupRows returns rows [off, off+s) of x and w[g].
func groupRows(x, w *tensor.Tensor, g, off, s int) (*tensor.Tensor, *tensor.Tensor) {
	return tensor.SliceAxis(x, 0, off, off+s), tensor.Squeeze(tensor.SliceAxis(w, 0, g, g+1), 0)
}

// TestRaggedDotAs: each group of RaggedDotAs is the product of MatMulAs
// on that group's rows (the float32 accumulator of the product of the
// operands rounded to the compute dtype), rows past the groups are 0, the
// cotangents are float32 and are the accumulators of the products of the
// rounded cotangent with the rounded operands; and the result is within
// the compute dtype's rounding of RaggedDot's. Under GONOX_KERNELS=go
// and avx2 the bfloat16 products run on widened operands.
func TestRaggedDotAs(t *testing.T) {
	rng := newRNG(31)
	sizes := []int{9, 0, 17, 6} // 32 of 35 rows, one empty group
	m, k, n := 35, 40, 24
	x, w := randF32(rng, m, k), randF32(rng, len(sizes), k, n)
	r := randF32(rng, m, n)
	gs := tensor.FromInts(sizes)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		got := tensor.RaggedDotAs(x, w, gs, dt)
		require.Equal(t, tensor.Float32, got.DType())
		grads := grad(func(xs []*tensor.Tensor) *tensor.Tensor {
			return tensor.Sum(tensor.Mul(tensor.RaggedDotAs(xs[0], xs[1], gs, dt), r))
		}, ts(x, w))
		gx, gw := grads[0].Float32s(), grads[1].Float32s()
		require.Equal(t, tensor.Float32, grads[0].DType())
		require.Equal(t, tensor.Float32, grads[1].DType())
		y, f32 := got.Float32s(), tensor.RaggedDot(x, w, gs).Float32s()
		off := 0
		for g, s := range sizes {
			if s == 0 {
				require.Zero(t, tensor.Sum(tensor.Abs(tensor.SliceAxis(grads[1], 0, g, g+1))).Item(), "%v: empty group %d", dt, g)
				continue
			}
			xg, wg := groupRows(x, w, g, off, s)
			rg := tensor.SliceAxis(r, 0, off, off+s)
			want := tensor.MatMulAs(xg, wg, false, false, dt, tensor.Float32).Float32s()
			require.InDeltaSlice(t, want, y[off*n:(off+s)*n], 1e-5, "%v group %d", dt, g)
			wantX := tensor.MatMulAs(rg, wg, false, true, dt, tensor.Float32).Float32s()
			require.InDeltaSlice(t, wantX, gx[off*k:(off+s)*k], 1e-5, "%v group %d: d/dx", dt, g)
			wantW := tensor.MatMulAs(xg, rg, true, false, dt, tensor.Float32).Float32s()
			require.InDeltaSlice(t, wantW, gw[g*k*n:(g+1)*k*n], 1e-5, "%v group %d: d/dw", dt, g)
			off += s
		}
		for i := off * n; i < m*n; i++ {
			require.Zero(t, y[i], "row past the groups")
		}
		for i := off * k; i < m*k; i++ {
			require.Zero(t, gx[i], "d/dx of a row past the groups")
		}
		// Each product rounds two operands: |Δ| ≤ 2u·Σ|x||w| + float32
		// accumulation, Σ|x||w| ≤ k for entries in [-1, 1).
		bound := 2*unitRoundoff(dt)*float64(k) + 1e-4
		for i := range y {
			require.InDelta(t, f32[i], y[i], bound, "%v: element %d against float32", dt, i)
		}
	}
	// Computed in float32 it is RaggedDot.
	require.Equal(t, tensor.RaggedDot(x, w, gs).Float32s(), tensor.RaggedDotAs(x, w, gs, tensor.Float32).Float32s())
	requirePanic(t, "tensor.RaggedDotAs: bf16[35,40] @ f32[4,40,24] in bfloat16: want float32 operands and a compute dtype float32, bfloat16 or float16", func() {
		tensor.RaggedDotAs(tensor.Convert(x, tensor.BFloat16), w, gs, tensor.BFloat16)
	})
	requirePanic(t, "tensor.RaggedDotAs: f32[35,40] @ f32[4,40,24] in float64: want float32 operands and a compute dtype float32, bfloat16 or float16", func() {
		tensor.RaggedDotAs(x, w, gs, tensor.Float64)
	})
}

// TestProductAsGrad: computed in float32, the As products' gradients and
// second derivatives against finite differences in float64 (the code
// paths of the half products but for the gemm kernel).
func TestProductAsGrad(t *testing.T) {
	rng := newRNG(87)
	gs := tensor.FromInt32([]int32{2, 3}, 2)
	opts := autodiffOpts(1e-3, 1e-3, 1e-2)
	for _, tc := range []struct {
		f  func(xs []*tensor.Tensor) *tensor.Tensor
		in []*tensor.Tensor
	}{
		{func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.RaggedDotAs(xs[0], xs[1], gs, tensor.Float32) },
			ts(randF32(rng, 6, 3), randF32(rng, 2, 3, 4))},
		{func(xs []*tensor.Tensor) *tensor.Tensor {
			return tensor.ActRaggedDotAs(tensor.ActGelu, xs[0], xs[1], gs, tensor.Float32)
		}, ts(randF32(rng, 6, 3), randF32(rng, 2, 3, 4))},
		{func(xs []*tensor.Tensor) *tensor.Tensor {
			return tensor.ActMatMulAs(tensor.ActGelu, xs[0], xs[1], tensor.Float32)
		}, ts(randF32(rng, 2, 4, 3), randF32(rng, 3, 5))},
	} {
		checkGrad(t, tc.f, tc.in, opts)
		checkGrad(t, gradOf(tc.f, 0), tc.in, opts)
		checkGrad(t, gradOf(tc.f, 1), tc.in, opts)
	}
}

// TestActProductAs: ActMatMulAs and ActRaggedDotAs are the half products
// of the activation (MatMulAs, RaggedDotAs of act(x)) in value and
// gradient, without keeping act(x).
func TestActProductAs(t *testing.T) {
	rng := newRNG(88)
	gs := tensor.FromInt32([]int32{20, 0, 30}, 3)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		for _, tc := range []struct {
			name     string
			fused    func(x, w *tensor.Tensor) *tensor.Tensor
			composed func(x, w *tensor.Tensor) *tensor.Tensor
			xShape   []int
			wShape   []int
		}{
			{"ActMatMulAs", func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.ActMatMulAs(tensor.ActGelu, x, w, dt) },
				func(x, w *tensor.Tensor) *tensor.Tensor {
					return tensor.MatMulAs(tensor.Gelu(x), w, false, false, dt, tensor.Float32)
				}, []int{2, 30, 48}, []int{48, 20}},
			{"ActRaggedDotAs", func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.ActRaggedDotAs(tensor.ActGelu, x, w, gs, dt) },
				func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.RaggedDotAs(tensor.Gelu(x), w, gs, dt) },
				[]int{56, 48}, []int{3, 48, 20}},
		} {
			x, w := randF32(rng, tc.xShape...), randF32(rng, tc.wShape...)
			got, want := tc.fused(x, w), tc.composed(x, w)
			require.Equal(t, tensor.Float32, got.DType())
			require.InDeltaSlice(t, want.Float32s(), got.Float32s(), 1e-5, "%v %s", dt, tc.name)
			r := tensor.Normal(tensor.NewKey(5), got.Shape()...)
			loss := func(f func(x, w *tensor.Tensor) *tensor.Tensor) func(xs []*tensor.Tensor) *tensor.Tensor {
				return func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Mul(f(xs[0], xs[1]), r)) }
			}
			g, gc := grad(loss(tc.fused), ts(x, w)), grad(loss(tc.composed), ts(x, w))
			for i := range g {
				require.Equal(t, tensor.Float32, g[i].DType())
				require.InDeltaSlice(t, gc[i].Float32s(), g[i].Float32s(), 1e-4*math.Sqrt(float64(x.Dim(-1))), "%v %s: d/d%d", dt, tc.name, i)
			}
		}
	}
	requirePanic(t, "tensor.ActMatMulAs: f32[2,3] @ f32[3,4] in int32: want float32 operands and a compute dtype float32, bfloat16 or float16", func() {
		tensor.ActMatMulAs(tensor.ActGelu, tensor.Zeros(tensor.Float32, 2, 3), tensor.Zeros(tensor.Float32, 3, 4), tensor.Int32)
	})
}

// BenchmarkProductAs times the products of examples/moe's step in bf16
// from float32 operands (MatMulAs, RaggedDotAs) against the same products
// in float32, in one run: forward, input gradient (transposed weight) and
// weight gradient (transposed input) of a 2048×128×128 projection, and
// of the experts' products (8 groups of 512 rows, 128×256, and the second
// product 256×128 applying GELU; with the gradients, the forward product
// and one gradient product). Run with
//
//	go test ./tensor -run '^$' -bench ProductAs -benchtime 50x -cpu 1
func BenchmarkProductAs(b *testing.B) {
	rng := newRNG(1)
	x, w, g := randF32(rng, 2048, 128), randF32(rng, 128, 128), randF32(rng, 2048, 128)
	xe, we, ge := randF32(rng, 4096, 128), randF32(rng, 8, 128, 256), randF32(rng, 4096, 256)
	wd := randF32(rng, 8, 256, 128)
	gs := tensor.FromInts([]int{512, 512, 512, 512, 512, 512, 512, 512})
	bf := tensor.BFloat16
	for _, c := range []struct {
		name  string
		flops int
		f     func(compute tensor.DType) *tensor.Tensor
	}{
		{"proj", 2 * 2048 * 128 * 128, func(c tensor.DType) *tensor.Tensor { return tensor.MatMulAs(x, w, false, false, c, tensor.Float32) }},
		{"proj_dx", 2 * 2048 * 128 * 128, func(c tensor.DType) *tensor.Tensor { return tensor.MatMulAs(g, w, false, true, c, tensor.Float32) }},
		{"proj_dw", 2 * 2048 * 128 * 128, func(c tensor.DType) *tensor.Tensor { return tensor.MatMulAs(x, g, true, false, c, tensor.Float32) }},
		{"experts", 2 * 4096 * 128 * 256, func(c tensor.DType) *tensor.Tensor { return tensor.RaggedDotAs(xe, we, gs, c) }},
		{"experts_act", 2 * 4096 * 256 * 128, func(c tensor.DType) *tensor.Tensor {
			return tensor.ActRaggedDotAs(tensor.ActGelu, ge, wd, gs, c)
		}},
		// The forward product and one gradient product each.
		{"experts_fwd_dx", 4 * 4096 * 128 * 256, func(c tensor.DType) *tensor.Tensor { return raggedVJP(xe, we, gs, ge, c, 0) }},
		{"experts_fwd_dw", 4 * 4096 * 128 * 256, func(c tensor.DType) *tensor.Tensor { return raggedVJP(xe, we, gs, ge, c, 1) }},
		// The forward product and both gradient products (the cotangent
		// rounded once for both).
		{"proj_fwd_bwd", 6 * 2048 * 128 * 128, func(c tensor.DType) *tensor.Tensor {
			return bothVJP(func(x, w *tensor.Tensor) *tensor.Tensor {
				return tensor.MatMulAs(x, w, false, false, c, tensor.Float32)
			}, x, w, g)
		}},
		{"experts_fwd_bwd", 6 * 4096 * 128 * 256, func(c tensor.DType) *tensor.Tensor {
			return bothVJP(func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.RaggedDotAs(x, w, gs, c) }, xe, we, ge)
		}},
	} {
		for _, dt := range []tensor.DType{tensor.Float32, bf} {
			b.Run(c.name+"/"+dt.String(), func(b *testing.B) {
				cpu0 := cputime.Used()
				for b.Loop() {
					c.f(dt)
				}
				cpu := (cputime.Used() - cpu0).Seconds()
				b.ReportMetric(float64(c.flops)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(float64(c.flops)*float64(b.N)/cpu/1e9, "GFLOP/cpu-s")
			})
		}
	}
}

// bothVJP returns the cotangents g pulls back through f to x and w,
// stacked.
func bothVJP(f func(x, w *tensor.Tensor) *tensor.Tensor, x, w, g *tensor.Tensor) *tensor.Tensor {
	tr := tensor.NewTrace()
	lx, lw := tr.Leaf(x), tr.Leaf(w)
	gr := tensor.Backward(tr, []*tensor.Tensor{f(lx, lw)}, []*tensor.Tensor{g}, []*tensor.Tensor{lx, lw}, false)
	return tensor.Concat(0, tensor.Reshape(gr[0], -1), tensor.Reshape(gr[1], -1))
}

// raggedVJP returns the cotangent g pulls back through RaggedDotAs to x
// (i = 0) or w (i = 1).
func raggedVJP(x, w, gs, g *tensor.Tensor, compute tensor.DType, i int) *tensor.Tensor {
	tr := tensor.NewTrace()
	in := []*tensor.Tensor{x, w}
	in[i] = tr.Leaf(in[i])
	y := tensor.RaggedDotAs(in[0], in[1], gs, compute)
	return tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{g}, in[i:i+1], false)[0]
}

// TestProductAsRoundOnce: a backward pass that asks for both cotangents
// of an As product rounds the output's cotangent to bfloat16 once for
// both gradient products; the cotangents are bit for bit those computed
// one at a time, where each product rounds it as it reads it (odd widths,
// groups starting at odd rows, batched rows included), and MatMulAs's
// are those of the products of the converted operands.
func TestProductAsRoundOnce(t *testing.T) {
	rng := newRNG(89)
	gs := tensor.FromInt32([]int32{9, 0, 17, 6}, 4)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		for _, tc := range []struct {
			name   string
			f      func(x, w *tensor.Tensor) *tensor.Tensor
			xShape []int
			wShape []int
		}{
			{"MatMulAs", func(x, w *tensor.Tensor) *tensor.Tensor {
				return tensor.MatMulAs(x, w, false, false, dt, tensor.Float32)
			},
				[]int{35, 40}, []int{40, 24}},
			{"MatMulAs batched odd", func(x, w *tensor.Tensor) *tensor.Tensor {
				return tensor.MatMulAs(x, w, false, false, dt, tensor.Float32)
			}, []int{2, 7, 41}, []int{41, 23}},
			{"MatMulAs transposed", func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.MatMulAs(x, w, true, true, dt, tensor.Float32) },
				[]int{40, 35}, []int{24, 40}},
			{"ActMatMulAs", func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.ActMatMulAs(tensor.ActGelu, x, w, dt) },
				[]int{2, 30, 48}, []int{48, 20}},
			{"RaggedDotAs", func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.RaggedDotAs(x, w, gs, dt) },
				[]int{35, 40}, []int{4, 40, 24}},
			{"RaggedDotAs odd", func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.RaggedDotAs(x, w, gs, dt) },
				[]int{35, 41}, []int{4, 41, 23}},
			{"ActRaggedDotAs", func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.ActRaggedDotAs(tensor.ActGelu, x, w, gs, dt) },
				[]int{35, 48}, []int{4, 48, 20}},
		} {
			x, w := randF32(rng, tc.xShape...), randF32(rng, tc.wShape...)
			g := randF32(rng, tc.f(x, w).Shape()...)
			vjp := func(leaves ...int) []*tensor.Tensor {
				tr := tensor.NewTrace()
				in := []*tensor.Tensor{x, w}
				var ls []*tensor.Tensor
				for _, i := range leaves {
					in[i] = tr.Leaf(in[i])
					ls = append(ls, in[i])
				}
				y := tc.f(in[0], in[1])
				return tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{g}, ls, false)
			}
			both := vjp(0, 1)
			for i := range 2 {
				one := vjp(i)[0]
				require.Equal(t, tensor.Float32, both[i].DType())
				require.Equal(t, one.Float32s(), both[i].Float32s(), "%v %s: d/d%d", dt, tc.name, i)
			}
			if tc.name == "MatMulAs" {
				// Against the products of the converted operands.
				c := func(x *tensor.Tensor) *tensor.Tensor { return tensor.Convert(x, dt) }
				f32 := tensor.Float32
				require.Equal(t, tensor.MatMulTo(c(x), c(w), false, false, f32).Float32s(), tc.f(x, w).Float32s(), "%v %s", dt, tc.name)
				require.Equal(t, tensor.MatMulTo(c(g), c(w), false, true, f32).Float32s(), both[0].Float32s(), "%v %s: d/dx", dt, tc.name)
				require.Equal(t, tensor.MatMulTo(c(x), c(g), true, false, f32).Float32s(), both[1].Float32s(), "%v %s: d/dw", dt, tc.name)
			}
		}
	}
}

// TestActProductAsRoundsActivation: ActMatMulAs and ActRaggedDotAs in
// bfloat16, which round act(x) to bfloat16 as they compute it on the
// AVX-512 BF16 and AMX kernels (never storing the float32 act(x)), give
// the bits of the product of the float32 activation, which the product
// rounds as it reads it, values and gradients (their backward pass
// recomputes act(x) in bfloat16 too); over several chunks and
// goroutines' shares.
func TestActProductAsRoundsActivation(t *testing.T) {
	rng := newRNG(90)
	bf := tensor.BFloat16
	for _, tc := range []struct {
		name           string
		fused, compose func(x, w *tensor.Tensor) *tensor.Tensor
		xShape, wShape []int
	}{
		{"ActMatMulAs", func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.ActMatMulAs(tensor.ActGelu, x, w, bf) },
			func(x, w *tensor.Tensor) *tensor.Tensor {
				return tensor.MatMulAs(tensor.Gelu(x), w, false, false, bf, tensor.Float32)
			}, []int{3, 300, 64}, []int{64, 16}},
		{"ActRaggedDotAs", func(x, w *tensor.Tensor) *tensor.Tensor {
			return tensor.ActRaggedDotAs(tensor.ActGelu, x, w, tensor.FromInt32([]int32{500, 0, 401}, 3), bf)
		}, func(x, w *tensor.Tensor) *tensor.Tensor {
			return tensor.RaggedDotAs(tensor.Gelu(x), w, tensor.FromInt32([]int32{500, 0, 401}, 3), bf)
		}, []int{1000, 63}, []int{3, 63, 16}},
	} {
		x, w := randF32(rng, tc.xShape...), randF32(rng, tc.wShape...)
		require.Equal(t, tc.compose(x, w).Float32s(), tc.fused(x, w).Float32s(), tc.name)
		r := randF32(rng, tc.fused(x, w).Shape()...)
		loss := func(f func(x, w *tensor.Tensor) *tensor.Tensor) func(xs []*tensor.Tensor) *tensor.Tensor {
			return func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Mul(f(xs[0], xs[1]), r)) }
		}
		g, gc := grad(loss(tc.fused), ts(x, w)), grad(loss(tc.compose), ts(x, w))
		for i := range g {
			require.Equal(t, gc[i].Float32s(), g[i].Float32s(), "%s: d/d%d", tc.name, i)
		}
	}
}
