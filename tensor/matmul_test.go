package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/gonox/gonox/tensor"
)

// refMatMul computes op(a) @ op(b) with NumPy's batch broadcasting by naive
// loops in float64. Both operands have rank >= 2.
func refMatMul(a, b *tensor.Tensor, ta, tb bool) ([]float64, []int) {
	as, bs := a.Shape(), b.Shape()
	ra, rb := len(as), len(bs)
	m, k := as[ra-2], as[ra-1]
	if ta {
		m, k = k, m
	}
	k2, n := bs[rb-2], bs[rb-1]
	if tb {
		k2, n = n, k2
	}
	if k != k2 {
		panic("refMatMul: inner dims")
	}
	batch := refBroadcast(as[:ra-2], bs[:rb-2])
	shape := append(append([]int{}, batch...), m, n)
	av, bv := a.Float64s(), b.Float64s()
	out := make([]float64, numel(shape))
	for bi := 0; bi < numel(batch); bi++ {
		idx := unravel(bi, batch)
		oa := bcastIndex(idx, as[:ra-2]) * as[ra-2] * as[ra-1]
		ob := bcastIndex(idx, bs[:rb-2]) * bs[rb-2] * bs[rb-1]
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				s := 0.0
				for p := 0; p < k; p++ {
					var x, y float64
					if ta {
						x = av[oa+p*m+i]
					} else {
						x = av[oa+i*k+p]
					}
					if tb {
						y = bv[ob+j*k+p]
					} else {
						y = bv[ob+p*n+j]
					}
					s += x * y
				}
				out[(bi*m+i)*n+j] = s
			}
		}
	}
	return out, shape
}

func TestMatMul(t *testing.T) {
	rng := newRNG(20)
	tests := []struct {
		a, b, want []int
	}{
		{[]int{3, 4}, []int{4, 5}, []int{3, 5}},
		{[]int{1, 1}, []int{1, 1}, []int{1, 1}},
		{[]int{7, 13}, []int{13, 9}, []int{7, 9}},
		{[]int{2, 1, 3, 4}, []int{5, 4, 6}, []int{2, 5, 3, 6}},
		{[]int{2, 3, 4}, []int{2, 4, 5}, []int{2, 3, 5}},
		{[]int{1, 3, 4}, []int{4, 5}, []int{1, 3, 5}},
		{[]int{3, 4}, []int{2, 4, 5}, []int{2, 3, 5}},
		{[]int{2, 3, 4}, []int{1, 4, 5}, []int{2, 3, 5}},
		{[]int{4}, []int{4, 5}, []int{5}},
		{[]int{3, 4}, []int{4}, []int{3}},
		{[]int{4}, []int{4}, []int{}},
		{[]int{4}, []int{2, 4, 5}, []int{2, 5}},
		{[]int{2, 3, 4}, []int{4}, []int{2, 3}},
		{[]int{0, 4}, []int{4, 5}, []int{0, 5}},
		{[]int{3, 0}, []int{0, 5}, []int{3, 5}},
		{[]int{3, 4}, []int{4, 0}, []int{3, 0}},
		{[]int{0, 3, 4}, []int{4, 5}, []int{0, 3, 5}},
		{[]int{0}, []int{0}, []int{}},
		{[]int{2, 1, 3, 0}, []int{1, 4, 0, 2}, []int{2, 4, 3, 2}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v@%v", tt.a, tt.b), func(t *testing.T) {
			a, b := randF32(rng, tt.a...), randF32(rng, tt.b...)
			before := snapshot(a, b)
			got := tensor.MatMul(a, b)
			// Reference: promote 1-D operands NumPy's way and drop the
			// added dimensions.
			ea, eb := a, b
			if len(tt.a) == 1 {
				ea = tensor.Reshape(a, 1, tt.a[0])
			}
			if len(tt.b) == 1 {
				eb = tensor.Reshape(b, tt.b[0], 1)
			}
			want, _ := refMatMul(ea, eb, false, false)
			require.Equal(t, tt.want, got.Shape())
			requireClose(t, want, got, 1e-5, 1e-5)
			requireUnchanged(t, before)
			assert.False(t, sharesStorage(got, a) || sharesStorage(got, b))
		})
	}
}

func TestMatMulT(t *testing.T) {
	rng := newRNG(21)
	shapes := []struct{ a, b []int }{ // as stored, for transA=transB=false
		{[]int{3, 4}, []int{4, 5}},
		{[]int{2, 1, 3, 4}, []int{5, 4, 6}},
		{[]int{6, 5}, []int{5, 7}},
		{[]int{1, 1}, []int{1, 3}},
		{[]int{2, 0, 4}, []int{4, 3}},
	}
	swap := func(s []int) []int {
		c := append([]int{}, s...)
		c[len(c)-1], c[len(c)-2] = c[len(c)-2], c[len(c)-1]
		return c
	}
	for _, sh := range shapes {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v@%v/%v,%v", sh.a, sh.b, ta, tb), func(t *testing.T) {
					as, bs := sh.a, sh.b
					if ta {
						as = swap(as)
					}
					if tb {
						bs = swap(bs)
					}
					a, b := randF32(rng, as...), randF32(rng, bs...)
					before := snapshot(a, b)
					got := tensor.MatMulT(a, b, ta, tb)
					want, shape := refMatMul(a, b, ta, tb)
					require.Equal(t, shape, got.Shape())
					requireClose(t, want, got, 1e-5, 1e-5)
					requireUnchanged(t, before)
					// The same as transposing explicitly (up to summation order).
					ea, eb := a, b
					if ta {
						ea = tensor.T(a)
					}
					if tb {
						eb = tensor.T(b)
					}
					requireClose(t, tensor.MatMul(ea, eb).Float64s(), got, 1e-6, 1e-6)
				})
			}
		}
	}
}

// A larger product against gonum's blas32 directly, with every transpose
// combination.
func TestMatMulAgainstBLAS(t *testing.T) {
	rng := newRNG(22)
	const m, k, n = 67, 129, 45
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			ra, ca := m, k
			if ta {
				ra, ca = k, m
			}
			rb, cb := k, n
			if tb {
				rb, cb = n, k
			}
			a, b := randF32(rng, ra, ca), randF32(rng, rb, cb)
			c := blas32.General{Rows: m, Cols: n, Stride: n, Data: make([]float32, m*n)}
			tA, tB := blas.NoTrans, blas.NoTrans
			if ta {
				tA = blas.Trans
			}
			if tb {
				tB = blas.Trans
			}
			blas32.Gemm(tA, tB, 1,
				blas32.General{Rows: ra, Cols: ca, Stride: ca, Data: a.Float32s()},
				blas32.General{Rows: rb, Cols: cb, Stride: cb, Data: b.Float32s()}, 0, c)
			want := make([]float64, len(c.Data))
			for i, v := range c.Data {
				want[i] = float64(v)
			}
			requireClose(t, want, tensor.MatMulT(a, b, ta, tb), 1e-5, 1e-5, "transA=%v transB=%v", ta, tb)
		}
	}
}

func TestMatMulPanics(t *testing.T) {
	f := func(s ...int) *tensor.Tensor { return tensor.Zeros(tensor.Float32, s...) }
	tests := []struct {
		f   func()
		msg string
	}{
		{func() { tensor.MatMul(f(3, 4), f(5, 6)) }, "tensor.MatMul: f32[3,4] @ f32[5,6]: inner dims 4 != 5"},
		{func() { tensor.MatMul(f(3), f(4)) }, "tensor.MatMul: f32[3] @ f32[4]: inner dims 3 != 4"},
		{func() { tensor.MatMul(f(3), f(4, 5)) }, "tensor.MatMul: f32[3] @ f32[4,5]: inner dims 3 != 4"},
		{func() { tensor.MatMul(f(2, 3), f(4)) }, "tensor.MatMul: f32[2,3] @ f32[4]: inner dims 3 != 4"},
		{func() { tensor.MatMul(f(), f(3)) }, "tensor.MatMul: f32[] @ f32[3]: operands must have at least 1 dimension"},
		{func() { tensor.MatMul(tensor.Zeros(tensor.Int32, 2, 2), f(2, 2)) }, "tensor.MatMul: i32[2,2] @ f32[2,2]: operands must be float32"},
		{func() { tensor.MatMul(tensor.Zeros(tensor.Int32, 2), tensor.Zeros(tensor.Int32, 2)) }, "tensor.MatMul: i32[2] @ i32[2]: operands must be float32"},
		{func() { tensor.MatMul(f(2, 3, 4), f(5, 4, 6)) }, "tensor.MatMul: f32[2,3,4] @ f32[5,4,6]: batch dims [2] and [5] do not broadcast"},
		{func() { tensor.MatMul(f(3, 2, 3, 4), f(2, 5, 4, 6)) }, "tensor.MatMul: f32[3,2,3,4] @ f32[2,5,4,6]: batch dims [3 2] and [2 5] do not broadcast"},
		{func() { tensor.MatMulT(f(3, 4), f(5, 6), true, false) }, "tensor.MatMulT: f32[3,4] @ f32[5,6] (transA=true, transB=false): inner dims 3 != 5"},
		{func() { tensor.MatMulT(f(3, 4), f(3, 4), false, false) }, "tensor.MatMulT: f32[3,4] @ f32[3,4]: inner dims 4 != 3"},
		{func() { tensor.MatMulT(f(3), f(3, 4), false, false) }, "tensor.MatMulT: f32[3] @ f32[3,4]: operands need at least 2 dimensions"},
		{func() { tensor.MatMulT(f(2, 3), tensor.Zeros(tensor.Bool, 3, 2), false, true) }, "tensor.MatMulT: f32[2,3] @ bool[3,2] (transA=false, transB=true): operands must be float32"},
	}
	for _, tt := range tests {
		requirePanic(t, tt.msg, tt.f)
	}
}

func TestMatMulVJP(t *testing.T) {
	rng := newRNG(23)
	cases := []struct{ a, b []int }{
		{[]int{3, 4}, []int{4, 5}},
		{[]int{2, 1, 3, 4}, []int{5, 4, 2}},
		{[]int{2, 3, 4}, []int{4, 2}},
		{[]int{3, 4}, []int{2, 4, 2}},
		{[]int{1, 3, 4}, []int{2, 4, 2}},
		{[]int{4}, []int{4, 3}},
		{[]int{3, 4}, []int{4}},
		{[]int{4}, []int{4}},
		{[]int{4}, []int{2, 4, 3}},
		{[]int{2, 3, 4}, []int{4}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v@%v", c.a, c.b), func(t *testing.T) {
			a, b := randF32(rng, c.a...), randF32(rng, c.b...)
			checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.MatMul(xs[0], xs[1]) }, ts(a, b))
		})
	}
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			t.Run(fmt.Sprintf("T%v%v", ta, tb), func(t *testing.T) {
				as, bs := []int{2, 1, 3, 4}, []int{3, 4, 2}
				if ta {
					as = []int{2, 1, 4, 3}
				}
				if tb {
					bs = []int{3, 2, 4}
				}
				a, b := randF32(rng, as...), randF32(rng, bs...)
				f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.MatMulT(xs[0], xs[1], ta, tb) }
				checkGrad(t, f, ts(a, b))
				// Second order: the gradient of sum((A@B)²).
				sq := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Square(f(xs)) }
				checkGrad(t, gradOf(sq, 0), ts(a, b), autodiffOpts(1e-3, 0, 0))
				checkGrad(t, gradOf(sq, 1), ts(a, b), autodiffOpts(1e-3, 0, 0))
			})
		}
	}
	// Zero-size inner dimension: gradients are zeros of the operands' shapes.
	g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.MatMul(xs[0], xs[1]) },
		ts(tensor.Zeros(tensor.Float32, 3, 0), tensor.Zeros(tensor.Float32, 0, 2)))
	assert.Equal(t, []int{3, 0}, g[0].Shape())
	assert.Equal(t, []int{0, 2}, g[1].Shape())
}

// TestMatMulOuter: products of inner dimension 1 (outer products, a batch
// of them as per-example gradients make) for every layout of the operands
// and broadcast batch dimensions: each element is the one product a·b,
// rounded once.
func TestMatMulOuter(t *testing.T) {
	rng := newRNG(31)
	for _, c := range []struct {
		as, bs []int
		ta, tb bool
	}{
		{[]int{5, 1}, []int{1, 7}, false, false},
		{[]int{1, 5}, []int{1, 7}, true, false},
		{[]int{5, 1}, []int{7, 1}, false, true},
		{[]int{1, 5}, []int{7, 1}, true, true},
		{[]int{3, 5, 1}, []int{3, 1, 7}, false, false},
		{[]int{3, 1, 5}, []int{1, 7}, true, false},
		{[]int{2, 1, 5, 1}, []int{4, 1, 70}, false, false},
		{[]int{600, 64, 1}, []int{600, 1, 128}, false, false},
	} {
		a, b := randF32(rng, c.as...), randF32(rng, c.bs...)
		got := tensor.MatMulT(a, b, c.ta, c.tb)
		// The reference: op(a)·op(b) of the broadcast operands, in float64.
		oa, ob := a, b
		if c.ta {
			oa = tensor.T(a)
		}
		if c.tb {
			ob = tensor.T(b)
		}
		m, n := oa.Dim(-2), ob.Dim(-1)
		want := tensor.Mul(tensor.Reshape(oa, append(oa.Shape()[:oa.Rank()-1], 1)...), tensor.Reshape(ob, append(ob.Shape()[:ob.Rank()-2], 1, n)...))
		require.Equal(t, want.Shape(), got.Shape(), "%v", c)
		require.Equal(t, want.Float32s(), got.Float32s(), "%v: %d×1×%d", c, m, n)
	}
}

// TestMatMulBatchSplit: a batch of products too small for gemm to split,
// split over the cores by product, equals the products one by one bit for
// bit, with and without broadcast batch dimensions.
func TestMatMulBatchSplit(t *testing.T) {
	rng := newRNG(32)
	for _, c := range []struct{ as, bs []int }{
		{[]int{16, 32, 64}, []int{16, 64, 48}},
		{[]int{32, 64}, []int{16, 64, 48}},
		{[]int{4, 1, 32, 64}, []int{4, 64, 48}},
	} {
		a, b := randF32(rng, c.as...), randF32(rng, c.bs...)
		got := tensor.MatMul(a, b)
		bs := tensor.Unstack(tensor.Reshape(tensor.BroadcastTo(b, append(got.Shape()[:got.Rank()-2], 64, 48)...), -1, 64, 48), 0)
		as := tensor.Unstack(tensor.Reshape(tensor.BroadcastTo(a, append(got.Shape()[:got.Rank()-2], 32, 64)...), -1, 32, 64), 0)
		want := make([]*tensor.Tensor, len(as))
		for i := range as {
			want[i] = tensor.MatMul(as[i], bs[i])
		}
		require.Equal(t, tensor.Reshape(tensor.Stack(0, want...), got.Shape()...).Float32s(), got.Float32s(), "%v", c)
	}
}
