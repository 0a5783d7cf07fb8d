package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// raggedRef computes ragged_dot with one MatMul per group over slices,
// rows past the groups left 0.
func raggedRef(x, w *tensor.Tensor, sizes []int) *tensor.Tensor {
	m, n := x.Dim(0), w.Dim(2)
	parts := []*tensor.Tensor{}
	off := 0
	for g, s := range sizes {
		if s > 0 {
			xg := tensor.SliceAxis(x, 0, off, off+s)
			parts = append(parts, tensor.MatMul(xg, tensor.Squeeze(tensor.SliceAxis(w, 0, g, g+1), 0)))
		}
		off += s
	}
	if off < m {
		parts = append(parts, tensor.Zeros(tensor.Float32, m-off, n))
	}
	return tensor.Concat(0, parts...)
}

func TestRaggedDotMatchesPerGroupMatMul(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m, k  int
		n     int
		sizes []int
	}{
		{"even", 12, 5, 7, []int{3, 3, 3, 3}},
		{"empty groups", 9, 4, 3, []int{0, 5, 0, 4}},
		{"padding rows", 10, 6, 2, []int{2, 1, 3}},
		{"all empty", 4, 3, 5, []int{0, 0}},
		{"one group", 33, 17, 19, []int{33}},
		{"large", 300, 64, 48, []int{100, 0, 57, 143}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := newRNG(3)
			x := randF32(rng, tc.m, tc.k)
			w := randF32(rng, len(tc.sizes), tc.k, tc.n)
			gs := tensor.FromInts(tc.sizes)
			got := tensor.RaggedDot(x, w, gs)
			require.Equal(t, []int{tc.m, tc.n}, got.Shape())
			want := raggedRef(x, w, tc.sizes)
			require.InDeltaSlice(t, want.Float32s(), got.Float32s(), 1e-4)
		})
	}
}

// TestRaggedDotHalf checks that bf16 and f16 operands compute in float32
// and round once: the result is the rounded float32 result of the widened
// operands.
func TestRaggedDotHalf(t *testing.T) {
	rng := newRNG(5)
	sizes := []int{3, 0, 5}
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		x := tensor.Convert(randF32(rng, 9, 6), dt)
		w := tensor.Convert(randF32(rng, 3, 6, 4), dt)
		got := tensor.RaggedDot(x, w, tensor.FromInts(sizes))
		require.Equal(t, dt, got.DType())
		want := tensor.Convert(tensor.RaggedDot(tensor.Convert(x, tensor.Float32), tensor.Convert(w, tensor.Float32), tensor.FromInts(sizes)), dt)
		require.Equal(t, tensor.Convert(want, tensor.Float32).Float32s(), tensor.Convert(got, tensor.Float32).Float32s(), "%v", dt)
	}
}

// TestRaggedDotGradFloat64 compares the VJP with the gradient of
// L = Σ c ⊙ ragged_dot(x, w) worked out in float64: dx_g = c_g w_gᵀ,
// dw_g = x_gᵀ c_g, 0 for rows past the groups.
func TestRaggedDotGradFloat64(t *testing.T) {
	rng := newRNG(5)
	m, k, n := 11, 4, 3
	sizes := []int{3, 0, 5, 1} // 2 rows of padding
	x, w, c := randF32(rng, m, k), randF32(rng, len(sizes), k, n), randF32(rng, m, n)
	gs := tensor.FromInts(sizes)
	tr := tensor.NewTrace()
	tx, tw := tr.Leaf(x), tr.Leaf(w)
	y := tensor.RaggedDot(tx, tw, gs)
	grads := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{c}, []*tensor.Tensor{tx, tw}, false)
	xd, wd, cd := x.Float32s(), w.Float32s(), c.Float32s()
	dx := make([]float64, m*k)
	dw := make([]float64, len(sizes)*k*n)
	off := 0
	for g, s := range sizes {
		for r := off; r < off+s; r++ {
			for i := range k {
				for j := range n {
					dx[r*k+i] += float64(cd[r*n+j]) * float64(wd[g*k*n+i*n+j])
					dw[g*k*n+i*n+j] += float64(xd[r*k+i]) * float64(cd[r*n+j])
				}
			}
		}
		off += s
	}
	require.InDeltaSlice(t, dx, toF64(grads[0].Float32s()), 1e-5)
	require.InDeltaSlice(t, dw, toF64(grads[1].Float32s()), 1e-5)
}

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, e := range v {
		out[i] = float64(e)
	}
	return out
}

func TestRaggedDotCheckGrad(t *testing.T) {
	rng := newRNG(7)
	x, w := randF32(rng, 10, 3), randF32(rng, 3, 3, 4)
	gs := tensor.FromInts([]int{4, 0, 5})
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.RaggedDot(xs[0], xs[1], gs) }
	require.NoError(t, autodiff.CheckGrad(f, []*tensor.Tensor{x, w}, autodiff.CheckOptions{}))
	// Second order: the VJP is built from ragged ops (ragged_dot with a
	// transposed weight and ragged_outer), whose own VJPs this checks.
	sq := func(xs []*tensor.Tensor) *tensor.Tensor {
		tr := tensor.NewTrace()
		a, b := tr.Leaf(xs[0]), tr.Leaf(xs[1])
		l := tensor.Sum(tensor.Square(tensor.RaggedDot(a, b, gs)))
		g := tensor.Backward(tr, []*tensor.Tensor{l}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{a, b}, true)
		return tensor.Concat(0, tensor.Reshape(g[0], -1), tensor.Reshape(g[1], -1))
	}
	require.NoError(t, autodiff.CheckGrad(sq, []*tensor.Tensor{x, w}, autodiff.CheckOptions{Rtol: 2e-2, Atol: 2e-2}))
}

func TestRaggedDotPanics(t *testing.T) {
	x, w := tensor.Zeros(tensor.Float32, 4, 3), tensor.Zeros(tensor.Float32, 2, 3, 5)
	for _, tc := range []struct {
		want string
		f    func()
	}{
		{"tensor.RaggedDot: f32[4,3] @ f32[2,4,5], group sizes i32[2]: inner dims 3 != 4",
			func() { tensor.RaggedDot(x, tensor.Zeros(tensor.Float32, 2, 4, 5), tensor.FromInts([]int{1, 1})) }},
		{"tensor.RaggedDot: f32[4,3] @ f32[3,5], group sizes i32[2]: want f32[m,k] and f32[g,k,n] (or both bf16 or f16)",
			func() { tensor.RaggedDot(x, tensor.Zeros(tensor.Float32, 3, 5), tensor.FromInts([]int{1, 1})) }},
		{"tensor.RaggedDot: f32[4,3] @ f32[2,3,5], group sizes i32[3]: group sizes must be i32[2]",
			func() { tensor.RaggedDot(x, w, tensor.FromInts([]int{1, 1, 1})) }},
		{"tensor.RaggedDot: group sizes [3 2] sum to 5 > 4 rows",
			func() { tensor.RaggedDot(x, w, tensor.FromInts([]int{3, 2})) }},
		{"tensor.RaggedDot: group 1 has negative size -1",
			func() { tensor.RaggedDot(x, w, tensor.FromInts([]int{1, -1})) }},
	} {
		requirePanic(t, tc.want, tc.f)
	}
}

// BenchmarkRaggedDot compares the grouped product of m rows split over g
// groups with one dense MatMul of the same m×k×n size (the anchor, which
// does the same number of flops): the ratio of their GFLOP/s is the cost
// of grouping. Run with
//
//	go test ./tensor -run '^$' -bench 'RaggedDot|DenseAnchor' -benchtime 2s
func BenchmarkRaggedDot(b *testing.B) {
	for _, s := range []struct{ m, k, n, g int }{
		{2048, 128, 512, 8},  // MoE up-projection: 8 experts, width 128
		{2048, 512, 128, 8},  // its down-projection
		{4096, 256, 1024, 4}, // fewer, larger experts
	} {
		name := fmt.Sprintf("%dx%dx%d/g=%d", s.m, s.k, s.n, s.g)
		rng := newRNG(1)
		x, w := randF32(rng, s.m, s.k), randF32(rng, s.g, s.k, s.n)
		// Uneven groups, as routing produces: sizes ∝ 1..g.
		sizes := make([]int, s.g)
		tot := s.g * (s.g + 1) / 2
		left := s.m
		for i := range sizes {
			sizes[i] = s.m * (i + 1) / tot
			left -= sizes[i]
		}
		sizes[s.g-1] += left
		gs := tensor.FromInts(sizes)
		flops := 2 * float64(s.m) * float64(s.k) * float64(s.n)
		b.Run("ragged/"+name, func(b *testing.B) {
			for b.Loop() {
				tensor.RaggedDot(x, w, gs)
			}
			reportGFLOPs(b, flops)
		})
		b.Run("dense/"+name, func(b *testing.B) {
			w0 := tensor.Squeeze(tensor.SliceAxis(w, 0, 0, 1), 0)
			for b.Loop() {
				tensor.MatMul(x, w0)
			}
			reportGFLOPs(b, flops)
		})
	}
}
