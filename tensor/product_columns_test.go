package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ProductColumnsInto writes columns [j0, j1) of a·b with the bits of
// MatMul(a, b) and of the product of any block of a's rows (what a device
// of few rows computes alone) where the columns are at least a kernel
// tile wide, within float rounding of float64's product always, and
// leaves out's other columns as they were.
func TestProductColumnsInto(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct {
		m, k, n, j0, j1 int
		rows            int  // a block of a's rows computed alone: the device's
		bits            bool // the columns are wide enough for the bits of MatMul
		tb              bool // a·bᵀ, b [n, k]
	}{
		{256, 784, 1024, 384, 512, 32, true, false},   // 8 devices' rows, rank 3's columns
		{256, 1024, 1024, 0, 128, 32, true, false},    // rank 0
		{256, 1024, 1024, 896, 1024, 32, true, false}, // the last rank: the gemm reads to b's end
		{64, 96, 200, 25, 57, 8, true, false},
		{40, 300, 64, 32, 64, 3, true, false},
		{5, 7, 9, 3, 8, 1, false, false}, // 5 columns: computed transposed, MatMul's 9 are not
		{1, 3, 4, 0, 4, 1, true, false},
		{12, 5, 6, 2, 2, 4, true, false},            // no columns: nothing written
		{256, 1024, 1024, 128, 192, 32, true, true}, // an input gradient dY·Wᵀ: the device's rows alone are computed transposed
		{256, 1024, 1024, 960, 1024, 32, true, true},
		{256, 128, 256, 0, 64, 2, true, true},
		{64, 40, 96, 32, 96, 8, true, true},
	} {
		t.Run(fmt.Sprintf("m%d_k%d_n%d_cols%d-%d_t%v", tc.m, tc.k, tc.n, tc.j0, tc.j1, tc.tb), func(t *testing.T) {
			a, b := normalTensor(r, tc.m, tc.k), normalTensor(r, tc.k, tc.n)
			if tc.tb {
				b = normalTensor(r, tc.n, tc.k)
			}
			out := normalTensor(r, tc.m, tc.n)
			before := out.Float32s()
			ProductColumnsInto(out, a, b, tc.tb, tc.j0, tc.j1)
			got, whole := out.Float32s(), MatMulT(a, b, false, tc.tb).Float32s()
			alone := MatMulT(Slice(a, []int{0, 0}, []int{tc.rows, tc.k}), b, false, tc.tb).Float32s()
			av, bv := a.Float32s(), b.Float32s()
			for i := range tc.m {
				for j := range tc.n {
					at := i*tc.n + j
					if j < tc.j0 || j >= tc.j1 {
						require.Equal(t, math.Float32bits(before[at]), math.Float32bits(got[at]), "(%d,%d) outside the columns", i, j)
						continue
					}
					if tc.bits {
						require.Equal(t, math.Float32bits(whole[at]), math.Float32bits(got[at]), "(%d,%d) against MatMul", i, j)
					}
					if tc.bits && i < tc.rows {
						require.Equal(t, math.Float32bits(alone[at]), math.Float32bits(got[at]), "(%d,%d) against the rows alone", i, j)
					}
					var s float64
					for q := range tc.k {
						bq := bv[q*tc.n+j]
						if tc.tb {
							bq = bv[j*tc.k+q]
						}
						s += float64(av[i*tc.k+q]) * float64(bq)
					}
					require.InDelta(t, s, float64(got[at]), 1e-4*(1+math.Sqrt(float64(tc.k))), "(%d,%d) against float64", i, j)
				}
			}
		})
	}
}

// ProductColumnsInto panics naming the op and its operands on shapes
// that do not multiply, an out of the wrong shape, columns out of range
// and dtypes other than float32.
func TestProductColumnsIntoPanics(t *testing.T) {
	a, b, out := Zeros(Float32, 4, 3), Zeros(Float32, 3, 5), Zeros(Float32, 4, 5)
	for _, tc := range []struct {
		name      string
		out, a, b *Tensor
		tb        bool
		j0, j1    int
		want      string
	}{
		{"inner dims", out, a, Zeros(Float32, 4, 5), false, 0, 5, "want a [m,k], b [k,n]"},
		{"transposed inner dims", out, a, b, true, 0, 5, "want a [m,k], b [k,n]"},
		{"out shape", Zeros(Float32, 4, 4), a, b, false, 0, 4, "want a [m,k], b [k,n]"},
		{"dtype", out, a, Zeros(Float64, 3, 5), false, 0, 5, "want float32 matrices"},
		{"rank", out, Zeros(Float32, 4, 3, 1), b, false, 0, 5, "want float32 matrices"},
		{"columns past n", out, a, b, false, 2, 6, "columns [2, 6)"},
		{"reversed", out, a, b, false, 3, 2, "columns [3, 2)"},
		{"nil", nil, a, b, false, 0, 5, "operand out is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				v := recover()
				require.NotNil(t, v)
				msg := fmt.Sprint(v)
				assert.Contains(t, msg, "tensor.ProductColumnsInto")
				assert.Contains(t, msg, tc.want)
			}()
			ProductColumnsInto(tc.out, tc.a, tc.b, tc.tb, tc.j0, tc.j1)
		})
	}
}
