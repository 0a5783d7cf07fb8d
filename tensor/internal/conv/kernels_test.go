package conv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// forEachSet runs f with every kernel set this machine runs.
func forEachSet(t *testing.T, f func(t *testing.T)) {
	for _, s := range kernelSets() {
		t.Run(s.name, func(t *testing.T) {
			restore, ok := useKernels(s.name)
			require.True(t, ok)
			defer restore()
			f(t)
		})
	}
}

// The micro-kernels against scalar float64 loops over their definitions
// (gen_kernels.go), on random strides and offsets, with NaN around every
// operand so that a read outside the defined elements shows.
func TestIgemmKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	forEachSet(t, func(t *testing.T) {
		for _, kk := range active.igemm {
			for _, k := range []int{0, 1, 3, 17} {
				for _, acc := range []int{0, 1} {
					t.Run(fmt.Sprintf("%dx%d/k=%d/acc=%d", kk.mr, kk.nv, k, acc), func(t *testing.T) {
						cols := kk.cols()
						a := randSlice(rng, max(1, k*kk.mr))
						b := randSlice(rng, 4000)
						offs := make([]int, max(1, k))
						for p := range offs {
							offs[p] = 4 * rng.IntN(len(b)-cols)
						}
						ldc := cols + rng.IntN(5)
						c := randSlice(rng, kk.mr*ldc)
						c0 := append([]float32(nil), c...)
						kk.fn(k, &a[0], &b[0], &offs[0], &c[0], ldc, acc)
						for i := 0; i < kk.mr; i++ {
							for j := 0; j < ldc; j++ {
								if j >= cols {
									require.Equal(t, c0[i*ldc+j], c[i*ldc+j], "column past the tile written")
									continue
								}
								want, abs := 0.0, 0.0
								for p := 0; p < k; p++ {
									v := float64(a[p*kk.mr+i]) * float64(b[offs[p]/4+j])
									want += v
									abs += math.Abs(v)
								}
								if acc != 0 {
									want += float64(c0[i*ldc+j])
									abs += math.Abs(float64(c0[i*ldc+j]))
								}
								require.InDelta(t, want, c[i*ldc+j], float64(k+2)*0x1p-24*abs+1e-30, "C[%d][%d]", i, j)
							}
						}
					})
				}
			}
		}
	})
}

func TestDotKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	forEachSet(t, func(t *testing.T) {
		for _, kk := range active.dot {
			for _, sh := range [][5]int{{1, 1, 1, 0, 0}, {1, 3, 2, 5, 1}, {2, 2, 0, 3, 0}, {3, 4, 1, 0, 1}, {1, 0, 2, 0, 0}, {0, 2, 2, 2, 1}, {2, 5, 3, kk.w - 1, 0}, {2, 5, 3, kk.w - 1, 1}} {
				nsamp, rows, nvec, tail, acc := sh[0], sh[1], sh[2], sh[3], sh[4]
				t.Run(fmt.Sprintf("%dx%d/%v", kk.mr, kk.nr, sh), func(t *testing.T) {
					rowLen := nvec*kk.w + tail
					// A: samples of rows of mr channel rows; NaN between rows.
					lda := rowLen + 3 + rng.IntN(4)
					astep := kk.mr*lda + rng.IntN(3) // floats between row starts
					asampStep := rows*astep + rng.IntN(7)
					a := nanSlice(nsamp*asampStep + kk.mr*lda + 8)
					bstep := rowLen + 2 + rng.IntN(9)
					bsampStep := rows*bstep + 40 + rng.IntN(5)
					b := nanSlice(nsamp*bsampStep + 64)
					offs := make([]int, kk.nr)
					for j := range offs {
						offs[j] = 4 * rng.IntN(30)
					}
					// Fill the elements the kernel may read.
					for s := 0; s < nsamp; s++ {
						for r := 0; r < rows; r++ {
							for i := 0; i < kk.mr; i++ {
								for l := 0; l < rowLen; l++ {
									a[s*asampStep+r*astep+i*lda+l] = rng.Float32()*2 - 1
								}
							}
							for j := range offs {
								for l := 0; l < rowLen; l++ {
									b[s*bsampStep+r*bstep+offs[j]/4+l] = rng.Float32()*2 - 1
								}
							}
						}
					}
					ldc := kk.nr + 2
					c := randSlice(rng, kk.mr*ldc)
					c0 := append([]float32(nil), c...)
					full := nvec * kk.w
					kk.fn(nsamp, rows, nvec, tail, &a[0], lda, 4*(astep-full), 4*(asampStep-rows*astep),
						&b[0], &offs[0], 4*(bstep-full), 4*(bsampStep-rows*bstep), &c[0], ldc, acc)
					for i := 0; i < kk.mr; i++ {
						for j := 0; j < ldc; j++ {
							if j >= kk.nr {
								require.Equal(t, c0[i*ldc+j], c[i*ldc+j], "column past the tile written")
								continue
							}
							want, abs := 0.0, 0.0
							if acc != 0 { // the kernel adds to C
								want, abs = float64(c0[i*ldc+j]), math.Abs(float64(c0[i*ldc+j]))
							}
							for s := 0; s < nsamp; s++ {
								for r := 0; r < rows; r++ {
									for l := 0; l < rowLen; l++ {
										v := float64(a[s*asampStep+r*astep+i*lda+l]) * float64(b[s*bsampStep+r*bstep+offs[j]/4+l])
										want += v
										abs += math.Abs(v)
									}
								}
							}
							n := nsamp * rows * rowLen
							require.InDelta(t, want, c[i*ldc+j], float64(n+2)*0x1p-24*abs+1e-30, "C[%d][%d]", i, j)
						}
					}
				})
			}
		}
	})
}
