package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSgemmAliasedBSameBits checks, for every float32 set, that a product
// whose B has rows 4 KiB apart (a 1024-wide weight) gives the same bits
// with B read in place, with B packed, and as the set chooses, at 32 and
// 64 rows of C: the choice aliasMaxM makes on Intel changes speed only.
// The k depth spans two k blocks and the result is checked against a
// float64 reference, so a packer that drops or misplaces elements fails.
func TestSgemmAliasedBSameBits(t *testing.T) {
	const n, k = 1024, 300
	rng := rand.New(rand.NewPCG(41, 42))
	fill := func(size int) []float32 {
		x := make([]float32, size)
		for i := range x {
			x[i] = float32(rng.Float64() - 0.5)
		}
		return x
	}
	for _, ks := range kernelSets() {
		for _, m := range []int{32, 64} {
			t.Run(fmt.Sprintf("%s/m=%d", ks.name, m), func(t *testing.T) {
				a, b := fill(m*k), fill(k*n)
				want := make([]float64, m*n)
				for i := range m {
					for l := range k {
						ail := float64(a[i*k+l])
						for j := range n {
							want[i*n+j] += ail * float64(b[l*n+j])
						}
					}
				}
				inPlace, packed := *ks, *ks
				inPlace.directMaxM, inPlace.directAliasMaxM = m, 0
				packed.directMaxM, packed.directAliasMaxM = 0, 0
				p := &problem[float32]{m: m, n: n, k: k, ldb: n}
				require.True(t, inPlace.readsBInPlace(p))
				require.False(t, packed.readsBInPlace(p))
				var got [3][]float32
				for i, s := range []*kernelSet[float32]{ks, &inPlace, &packed} {
					got[i] = make([]float32, m*n)
					gemm(s, false, false, m, n, k, 1, a, k, b, n, 0, got[i], n, 1)
				}
				for i := range want {
					require.InDelta(t, want[i], float64(got[2][i]), 1e-4, "packed, C[%d,%d]", i/n, i%n)
				}
				for i := range want {
					pi, ci, di := math.Float32bits(got[1][i]), math.Float32bits(got[2][i]), math.Float32bits(got[0][i])
					require.Equal(t, pi, ci, "in place against packed, C[%d,%d]", i/n, i%n)
					require.Equal(t, pi, di, "in place against the set's choice, C[%d,%d]", i/n, i%n)
				}
			})
		}
	}
}
