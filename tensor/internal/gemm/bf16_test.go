package gemm

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/tensor/internal/vec"
)

// bf16Matrix returns rows×cols random bfloat16 values (bits) in [-2, 2)
// and their float32 values.
func bf16Matrix(seed uint64, n int) ([]uint16, []float32) {
	h := make([]uint16, n)
	f := make([]float32, n)
	s := seed*0x9e3779b97f4a7c15 + 1
	for i := range h {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		v := float32(int64(s%4096)-2048) / 1024
		h[i] = uint16(half.FromFloat32BF(v))
		f[i] = half.BFloat16(h[i]).Float32()
	}
	return h, f
}

// TestBgemm compares Bgemm with a float64 product of the (exactly
// widened) operands, for every transposition, sizes around the tile and
// block edges, odd k, strides wider than the rows, and both kernels.
func TestBgemm(t *testing.T) {
	var modes []int
	for lv := bfWiden; lv <= bf16Level; lv++ {
		modes = append(modes, lv)
	}
	defer func(v int) { bf16Level = v }(bf16Level)
	sizes := [][3]int{{1, 1, 1}, {12, 32, 2}, {30, 40, 64}, {13, 33, 3}, {25, 70, 515}, {7, 100, 1025}, {40, 33, 64}, {130, 520, 17}, {5, 1056, 1050}, {33, 40, 31}, {300, 70, 96}, {64, 130, 700}}
	for _, kern := range modes {
		bf16Level = kern
		for _, sz := range sizes {
			m, n, k := sz[0], sz[1], sz[2]
			for _, tr := range [][3]bool{{false, false, false}, {false, true, false}, {true, false, false}, {true, true, false}, {false, true, true}} {
				ta, tb, tight := tr[0], tr[1], tr[2]
				name := fmt.Sprintf("%s/%dx%dx%d/ta=%v,tb=%v,tight=%v", BF16Kernel(), m, n, k, ta, tb, tight)
				t.Run(name, func(t *testing.T) {
					ar, ac := m, k
					if ta {
						ar, ac = k, m
					}
					br, bc := k, n
					if tb {
						br, bc = n, k
					}
					lda, ldb, ldc := ac+3, bc+1, n+2
					off := 0
					if tight { // strides k: pairs read in place when k is even
						lda, ldb = ac, bc
					}
					if k == 64 { // an odd offset: pairs not 4-byte aligned, copied
						off = 1
					}
					ah, af := bf16Matrix(uint64(m*7+k), ar*lda+off)
					bh, bf := bf16Matrix(uint64(n*5+k), br*ldb+off)
					ah, af, bh, bf = ah[off:], af[off:], bh[off:], bf[off:]
					// NaN between the rows: a kernel that reads past a
					// row's end (into k's padding) would spread it.
					for r := 0; r < ar; r++ {
						for j := ac; j < lda && r*lda+j < len(ah); j++ {
							ah[r*lda+j] = 0x7fc0
						}
					}
					for r := 0; r < br; r++ {
						for j := bc; j < ldb && r*ldb+j < len(bh); j++ {
							bh[r*ldb+j] = 0x7fc0
						}
					}
					c := make([]float32, m*ldc)
					for i := range c {
						c[i] = float32(math.NaN()) // beta = 0: never read
					}
					Bgemm(ta, tb, m, n, k, ah, lda, bh, ldb, c, ldc, 0)
					A := func(i, p int) float64 {
						if ta {
							return float64(af[p*lda+i])
						}
						return float64(af[i*lda+p])
					}
					B := func(p, j int) float64 {
						if tb {
							return float64(bf[j*ldb+p])
						}
						return float64(bf[p*ldb+j])
					}
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							want, abs := 0.0, 0.0
							for p := 0; p < k; p++ {
								want += A(i, p) * B(p, j)
								abs += math.Abs(A(i, p) * B(p, j))
							}
							// float32 accumulation: |error| ≤ k·2^-24·Σ|a·b| (plus slack).
							tol := float64(k+2)*0x1p-24*abs + 1e-30
							require.InDelta(t, want, float64(c[i*ldc+j]), tol, "C[%d,%d]", i, j)
						}
						for j := n; j < ldc && i < m-1; j++ {
							require.True(t, math.IsNaN(float64(c[i*ldc+j])), "C[%d,%d] past n written", i, j)
						}
					}
				})
			}
		}
	}
}

func TestBgemmPanics(t *testing.T) {
	require.PanicsWithValue(t, "gemm: len(a)=3 < 4 for 2×2 with stride 2", func() {
		Bgemm(false, false, 2, 2, 2, make([]uint16, 3), 2, make([]uint16, 4), 2, make([]float32, 4), 2, 1)
	})
}

// BenchmarkBgemm measures the bfloat16 product against Sgemm on the same
// sizes in the same run (GFLOP/s; the ratio is the figure to quote).
func BenchmarkBgemm(b *testing.B) {
	for _, sz := range []int{256, 1024} {
		m, n, k := sz, sz, sz
		ah, af := bf16Matrix(1, m*k)
		bh, bf := bf16Matrix(2, k*n)
		c := make([]float32, m*n)
		flops := 2 * float64(m) * float64(n) * float64(k)
		for _, threads := range []int{1, 0} {
			b.Run(fmt.Sprintf("f32/%d/threads=%d", sz, threads), func(b *testing.B) {
				for b.Loop() {
					Sgemm(false, false, m, n, k, 1, af, k, bf, n, 0, c, n, threads)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
			b.Run(fmt.Sprintf("bf16-%s/%d/threads=%d", BF16Kernel(), sz, threads), func(b *testing.B) {
				for b.Loop() {
					Bgemm(false, false, m, n, k, ah, k, bh, n, c, n, threads)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestBgemmMixed checks that float32 operands of BgemmMixed are rounded to
// bfloat16 as vec.BF16FromF32 rounds them: the product equals, bit for
// bit, Bgemm's on the rounded operands, for every transposition, odd and
// even k, tight and padded strides, and every kernel.
func TestBgemmMixed(t *testing.T) {
	best := bf16Level
	defer func() { bf16Level = best }()
	for lv := bfWiden; lv <= best; lv++ {
		bf16Level = lv
		for _, sz := range [][3]int{{13, 40, 7}, {30, 70, 64}, {140, 33, 130}, {400, 20, 9}, {20, 416, 10}} {
			m, n, k := sz[0], sz[1], sz[2]
			for _, tr := range [][3]bool{{false, false, false}, {false, true, true}, {true, false, false}, {true, true, false}, {false, false, true}} {
				ta, tb, tight := tr[0], tr[1], tr[2]
				t.Run(fmt.Sprintf("%s/%dx%dx%d/ta=%v,tb=%v,tight=%v", BF16Kernel(), m, n, k, ta, tb, tight), func(t *testing.T) {
					ar, ac, br, bc := m, k, k, n
					if ta {
						ar, ac = k, m
					}
					if tb {
						br, bc = n, k
					}
					lda, ldb := ac+1, bc+2
					if tight {
						lda, ldb = ac, bc
					}
					_, af := bf16Matrix(3, ar*lda)
					_, bf := bf16Matrix(4, br*ldb)
					for i := range af { // not bf16 values: rounding matters
						af[i] *= 1 + 0x1p-11*float32(i%7)
					}
					for i := range bf {
						bf[i] *= 1 - 0x1p-12*float32(i%5)
					}
					ah, bh := make([]uint16, len(af)), make([]uint16, len(bf))
					vec.BF16FromF32(ah, af)
					vec.BF16FromF32(bh, bf)
					want := make([]float32, m*n)
					Bgemm(ta, tb, m, n, k, ah, lda, bh, ldb, want, n, 1)
					for _, ops := range [][2]BF16Operand{{{F32: af}, {Bits: bh}}, {{Bits: ah}, {F32: bf}}, {{F32: af}, {F32: bf}}} {
						got := make([]float32, m*n)
						BgemmMixed(ta, tb, m, n, k, ops[0], lda, ops[1], ldb, got, n, 0)
						require.Equal(t, want, got)
					}
				})
			}
		}
	}
}

// TestInterleave16 checks interleave16 (the pairs of two bfloat16 rows,
// lo in the low half) against its definition for lengths that take each
// kernel (lockstep up to 128 values, one row then the other beyond) and
// the scalar tail, on every kernel level this machine runs.
func TestInterleave16(t *testing.T) {
	best := bf16Level
	defer func() { bf16Level = best }()
	lo, _ := bf16Matrix(7, 400)
	hi, _ := bf16Matrix(8, 400)
	for lv := bfWiden; lv <= best; lv++ {
		bf16Level = lv
		for _, n := range []int{0, 1, 15, 16, 17, 127, 128, 129, 144, 255, 256, 384, 400} {
			d := make([]uint32, n+1)
			d[n] = 0xdeadbeef
			interleave16(d[:n], lo[:n], hi[:n])
			for j := range n {
				require.Equal(t, uint32(lo[j])|uint32(hi[j])<<16, d[j], "%s n=%d j=%d", BF16Kernel(), n, j)
			}
			require.Equal(t, uint32(0xdeadbeef), d[n], "%s n=%d: wrote past the end", BF16Kernel(), n)
		}
	}
}

// TestBgemmPairs compares BgemmPairs with a float64 product of the pairs'
// values, with alpha and beta, for every transposition, strides wider than
// the rows and kernel levels this machine runs (the widening fallback
// included).
func TestBgemmPairs(t *testing.T) {
	best := bf16Level
	defer func() { bf16Level = best }()
	for lv := bfWiden; lv <= best; lv++ {
		bf16Level = lv
		for _, sz := range [][3]int{{1, 1, 1}, {64, 128, 16}, {13, 40, 7}, {128, 32, 64}, {33, 17, 33}} {
			m, n, kp := sz[0], sz[1], sz[2]
			for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				ta, tb := tr[0], tr[1]
				t.Run(fmt.Sprintf("%s/%dx%dx%d/ta=%v,tb=%v", BF16Kernel(), m, n, kp, ta, tb), func(t *testing.T) {
					ar, ac, br, bc := m, kp, kp, n
					if ta {
						ar, ac = kp, m
					}
					if tb {
						br, bc = n, kp
					}
					lda, ldb := ac+3, bc+1
					ah, af := bf16Matrix(5, 2*ar*lda)
					bh, bf := bf16Matrix(6, 2*br*ldb)
					a, b := make([]uint32, ar*lda), make([]uint32, br*ldb)
					for i := range a {
						a[i] = uint32(ah[2*i]) | uint32(ah[2*i+1])<<16
					}
					for i := range b {
						b[i] = uint32(bh[2*i]) | uint32(bh[2*i+1])<<16
					}
					at := func(i, q, h int) float64 { // value 2q+h of row i of op(A)
						if ta {
							return float64(af[2*(q*lda+i)+h])
						}
						return float64(af[2*(i*lda+q)+h])
					}
					bt := func(q, j, h int) float64 {
						if tb {
							return float64(bf[2*(j*ldb+q)+h])
						}
						return float64(bf[2*(q*ldb+j)+h])
					}
					ldc := n + 2
					_, c0 := bf16Matrix(7, m*ldc)
					for _, ab := range [][2]float32{{1, 0}, {1, 1}, {0.5, 1}, {-2, 0.25}} {
						alpha, beta := ab[0], ab[1]
						c := append([]float32(nil), c0...)
						if beta == 0 {
							for i := range c {
								c[i] = float32(math.NaN()) // not read
							}
						}
						BgemmPairs(ta, tb, m, n, kp, alpha, a, lda, b, ldb, beta, c, ldc, 1)
						for i := range m {
							for j := range n {
								var s float64
								for q := range kp {
									s += at(i, q, 0)*bt(q, j, 0) + at(i, q, 1)*bt(q, j, 1)
								}
								want := float64(alpha)*s + float64(beta)*float64(c0[i*ldc+j])
								require.InDelta(t, want, float64(c[i*ldc+j]), 1e-5*float64(2*kp)*4, "C(%d,%d) alpha %g beta %g", i, j, alpha, beta)
							}
						}
					}
				})
			}
		}
	}
}

// TestBgemmThreadsSameBits checks that Bgemm and BgemmMixed give the same
// bits on two goroutines as on one, on every kernel level, for products
// that split by rows (several blocks a goroutine: B packed once is reused
// only within one block of k) and by columns, with one block of k and
// with several.
func TestBgemmThreadsSameBits(t *testing.T) {
	best := bf16Level
	defer func() { bf16Level = best }()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for lv := bfWiden; lv <= best; lv++ {
		bf16Level = lv
		for _, sz := range [][3]int{{300, 70, 700}, {300, 70, 96}, {64, 300, 1100}, {70, 500, 130}, {520, 40, 600}} {
			m, n, k := sz[0], sz[1], sz[2]
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}} {
				ta, tb := tr[0], tr[1]
				t.Run(fmt.Sprintf("%s/%dx%dx%d/ta=%v,tb=%v", BF16Kernel(), m, n, k, ta, tb), func(t *testing.T) {
					lda, ldb := k, n
					if ta {
						lda = m
					}
					if tb {
						ldb = k
					}
					ah, af := bf16Matrix(11, m*k)
					bh, bf := bf16Matrix(12, k*n)
					for _, ops := range [][2]BF16Operand{{{Bits: ah}, {Bits: bh}}, {{F32: af}, {Bits: bh}}, {{Bits: ah}, {F32: bf}}} {
						one, two := make([]float32, m*n), make([]float32, m*n)
						BgemmMixed(ta, tb, m, n, k, ops[0], lda, ops[1], ldb, one, n, 1)
						for range 3 { // the helper joins late or early
							BgemmMixed(ta, tb, m, n, k, ops[0], lda, ops[1], ldb, two, n, 2)
							require.Equal(t, one, two)
						}
					}
				})
			}
		}
	}
}
