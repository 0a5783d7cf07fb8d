package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSgemmATStripsSameBits checks, for every float32 set, that a weight
// gradient's product Aᵀ·B gives the same bits with each strip of Aᵀ
// packed into a panel just before its kernels (stripsAT), with Aᵀ read in
// place, and as the set chooses: the panels change where A is read from,
// not the order of the sums. The shapes have A's rows 4 KiB apart (m =
// 1024) or not, edge tiles (m = 1000: tileRows' split tiles), k over two k
// blocks, C narrower than the rule's 8 strips, and 2 goroutines (each
// choosing for its own block of C); results are checked
// against a float64 reference, so a packer that drops or misplaces
// elements fails.
func TestSgemmATStripsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	fill := func(size int) []float32 {
		x := make([]float32, size)
		for i := range x {
			x[i] = float32(rng.Float64() - 0.5)
		}
		return x
	}
	for _, ks := range kernelSets() {
		for _, sh := range []struct{ m, lda, n, k int }{
			{1024, 1024, 8 * ks.nr, 300},
			{1000, 1003, 8*ks.nr + 5, 257},
			{150, 153, 9 * ks.nr, 64},
			{200, 200, 2 * ks.nr, 20},
		} {
			m, lda, n, k := sh.m, sh.lda, sh.n, sh.k
			t.Run(fmt.Sprintf("%s/m=%d/lda=%d/n=%d/k=%d", ks.name, m, lda, n, k), func(t *testing.T) {
				a, b := fill(k*lda), fill(k*n)
				strips, inPlace := *ks, *ks
				strips.packA, strips.packATStrips = false, true
				inPlace.packA, inPlace.packATStrips = false, false
				p := &problem[float32]{transA: true, m: m, n: n, k: k, lda: lda, ldb: n}
				require.False(t, strips.readsBInPlace(p))
				require.Equal(t, n >= stripATMinStrips*ks.nr, strips.stripsAT(p, n))
				require.False(t, inPlace.stripsAT(p, n))
				prev := stripATMode
				defer func() { stripATMode = prev }()
				var got [4][]float32
				for i, s := range []*kernelSet[float32]{&inPlace, &strips, ks, ks} {
					if i == 1 {
						stripATMode = 1 // panels also where C is narrow
					}
					threads := 1
					if i == 3 {
						threads = 2 // blocks of C narrower than the rule's
					}
					got[i] = make([]float32, m*n)
					gemm(s, true, false, m, n, k, 1, a, lda, b, n, 0, got[i], n, threads)
					stripATMode = prev
				}
				for i := range m {
					for j := range n {
						var want float64
						for l := range k {
							want += float64(a[l*lda+i]) * float64(b[l*n+j])
						}
						require.InDelta(t, want, float64(got[1][i*n+j]), 1e-4, "panels, C[%d,%d]", i, j)
					}
				}
				for i := range got[0] {
					pi, si, ci, ti := math.Float32bits(got[0][i]), math.Float32bits(got[1][i]), math.Float32bits(got[2][i]), math.Float32bits(got[3][i])
					require.Equal(t, pi, si, "in place against panels, C[%d,%d]", i/n, i%n)
					require.Equal(t, pi, ci, "in place against the set's choice, C[%d,%d]", i/n, i%n)
					require.Equal(t, pi, ti, "in place against the set's choice on 2 goroutines, C[%d,%d]", i/n, i%n)
				}
			})
		}
	}
}
