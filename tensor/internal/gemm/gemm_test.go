package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/kernels"
	"github.com/gonox/gonox/internal/testlong"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
)

// forEachSet runs f with Sgemm and Dgemm forced onto every kernel set this
// machine can run (on an AVX-512 machine: avx512, avx2 and go).
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

func TestKernelSetsAvailable(t *testing.T) {
	names := []string{}
	for _, s := range kernelSets() {
		names = append(names, s.name)
	}
	t.Logf("kernel sets on this machine: %v (default %s)", names, active.name)
	require.NoError(t, kernels.Err())
	require.Equal(t, kernels.Active().String(), active.name, "the set package kernels chose ($GONOX_KERNELS)")
	require.Equal(t, "go", names[len(names)-1])
	require.Equal(t, names[0], active.name)
	names64 := []string{}
	for _, s := range kernelSets64() {
		names64 = append(names64, s.name)
	}
	require.Equal(t, names, names64, "float64 sets")
	require.Equal(t, active.name, active64.name)
	_, ok := useKernels("nope")
	require.False(t, ok)
	for _, name := range names {
		restore, ok := useKernels(name)
		require.True(t, ok)
		require.Equal(t, name, active.name)
		require.Equal(t, name, active64.name)
		restore()
	}
}

// activeSet returns the kernel set Sgemm (T = float32) or Dgemm (float64)
// uses.
func activeSet[T elem]() *kernelSet[T] {
	if s, ok := any(active).(*kernelSet[T]); ok {
		return s
	}
	return any(active64).(*kernelSet[T])
}

// gemmT calls Sgemm or Dgemm.
func gemmT[T elem](ta, tb bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, threads int) {
	switch a := any(a).(type) {
	case []float32:
		Sgemm(ta, tb, m, n, k, float32(alpha), a, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc, threads)
	case []float64:
		Dgemm(ta, tb, m, n, k, float64(alpha), a, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc, threads)
	}
}

// epsilon is the unit roundoff of T: 2⁻²⁴ or 2⁻⁵³.
func epsilon[T elem]() float64 {
	if is64[T]() {
		return math.Ldexp(1, -53)
	}
	return math.Ldexp(1, -24)
}

// is64 reports whether T is float64.
func is64[T elem]() bool {
	_, ok := any(T(0)).(float64)
	return ok
}

// sameBits reports whether x and y have the same bits.
func sameBits[T elem](x, y T) bool {
	if x, ok := any(x).(float32); ok {
		return math.Float32bits(x) == math.Float32bits(any(y).(float32))
	}
	return math.Float64bits(float64(x)) == math.Float64bits(float64(y))
}

// gemmCase is one call of Sgemm or Dgemm with its operands.
type gemmCase[T elem] struct {
	ta, tb        bool
	m, n, k       int
	lda, ldb, ldc int
	alpha, beta   T
	a, b, c       []T
}

func (g gemmCase[T]) String() string {
	return fmt.Sprintf("%T: ta=%v tb=%v m=%d n=%d k=%d lda=%d ldb=%d ldc=%d alpha=%g beta=%g",
		g.alpha, g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.alpha, g.beta)
}

// newCase builds random float32 operands; pad adds that many extra columns
// to each stride.
func newCase(rng *rand.Rand, ta, tb bool, m, n, k, pad int, alpha, beta float32) gemmCase[float32] {
	return newCaseT(rng, ta, tb, m, n, k, pad, alpha, beta)
}

// newCaseT is newCase for either element type. The float64 operands have
// full 53-bit significands, so that no product is exact.
func newCaseT[T elem](rng *rand.Rand, ta, tb bool, m, n, k, pad int, alpha, beta T) gemmCase[T] {
	g := gemmCase[T]{ta: ta, tb: tb, m: m, n: n, k: k, alpha: alpha, beta: beta}
	ar, ac := m, k
	if ta {
		ar, ac = k, m
	}
	br, bc := k, n
	if tb {
		br, bc = n, k
	}
	g.lda, g.ldb, g.ldc = max(1, ac)+pad, max(1, bc)+pad, max(1, n)+pad
	_, is32 := any(alpha).(float32)
	// Padding past the columns of A and B holds NaN: kernels may read it
	// (into vector lanes that are never stored) but it must never reach C.
	fill := func(rows, cols, ld int) []T {
		x := make([]T, rows*ld)
		for i := range x {
			switch {
			case i%ld >= cols:
				x[i] = T(math.NaN())
			case is32:
				x[i] = T(rng.Float32()*2 - 1)
			default:
				x[i] = T(rng.Float64()*2 - 1)
			}
		}
		return x
	}
	g.a, g.b = fill(ar, ac, g.lda), fill(br, bc, g.ldb)
	g.c = fill(m, g.ldc, g.ldc) // padding of C is checked to stay untouched
	return g
}

// naive returns the result of the call computed to nearly twice the
// working precision of float64 (products split exactly with FMA, sums
// compensated), and, per element of C, the bound on the rounding error of
// a k-term dot product in T: (k+2)·u·(|alpha|·Σ|a||b| + |beta·c|), u the
// unit roundoff of T.
func (g *gemmCase[T]) naive() (want, tol []float64) {
	// op(A) row-major (m×k) and op(B) column-major (n×k), in float64.
	opA := make([]float64, g.m*g.k)
	opB := make([]float64, g.n*g.k)
	for p := 0; p < g.k; p++ {
		for i := 0; i < g.m; i++ {
			if g.ta {
				opA[i*g.k+p] = float64(g.a[p*g.lda+i])
			} else {
				opA[i*g.k+p] = float64(g.a[i*g.lda+p])
			}
		}
		for j := 0; j < g.n; j++ {
			if g.tb {
				opB[j*g.k+p] = float64(g.b[j*g.ldb+p])
			} else {
				opB[j*g.k+p] = float64(g.b[p*g.ldb+j])
			}
		}
	}
	want = make([]float64, g.m*g.n)
	tol = make([]float64, g.m*g.n)
	u := epsilon[T]() * float64(g.k+2)
	alpha, beta := float64(g.alpha), float64(g.beta)
	for i := 0; i < g.m; i++ {
		ai := opA[i*g.k : i*g.k+g.k]
		for j := 0; j < g.n; j++ {
			bj := opB[j*g.k : j*g.k+g.k]
			var s, comp, sa float64
			for p, x := range ai {
				prod := x * bj[p]
				perr := math.FMA(x, bj[p], -prod) // x·b = prod + perr exactly
				t := s + prod                     // TwoSum: s + prod = t + e
				bb := t - s
				e := (s - (t - bb)) + (prod - bb)
				s = t
				comp += e + perr
				sa += math.Abs(prod)
			}
			s += comp
			w := alpha * s
			e := math.Abs(alpha) * sa
			if g.beta != 0 {
				c := float64(g.c[i*g.ldc+j])
				w += beta * c
				e += math.Abs(beta * c)
			}
			want[i*g.n+j] = w
			tol[i*g.n+j] = u*e + 1e-300
		}
	}
	return want, tol
}

// gonum computes the call with gonum's blas32 or blas64 into a copy of C.
func (g gemmCase[T]) gonum() []T {
	c := append([]T(nil), g.c...)
	if g.m == 0 || g.n == 0 {
		return c
	}
	if g.k == 0 {
		for i := 0; i < g.m; i++ {
			for j := 0; j < g.n; j++ {
				if g.beta == 0 {
					c[i*g.ldc+j] = 0
				} else {
					c[i*g.ldc+j] *= g.beta
				}
			}
		}
		return c
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	ar, ac := g.m, g.k
	if g.ta {
		ta, ar, ac = blas.Trans, g.k, g.m
	}
	br, bc := g.k, g.n
	if g.tb {
		tb, br, bc = blas.Trans, g.n, g.k
	}
	switch a := any(g.a).(type) {
	case []float32:
		blas32.Gemm(ta, tb, float32(g.alpha),
			blas32.General{Rows: ar, Cols: ac, Stride: g.lda, Data: a},
			blas32.General{Rows: br, Cols: bc, Stride: g.ldb, Data: any(g.b).([]float32)},
			float32(g.beta),
			blas32.General{Rows: g.m, Cols: g.n, Stride: g.ldc, Data: any(c).([]float32)})
	case []float64:
		blas64.Gemm(ta, tb, float64(g.alpha),
			blas64.General{Rows: ar, Cols: ac, Stride: g.lda, Data: a},
			blas64.General{Rows: br, Cols: bc, Stride: g.ldb, Data: any(g.b).([]float64)},
			float64(g.beta),
			blas64.General{Rows: g.m, Cols: g.n, Stride: g.ldc, Data: any(c).([]float64)})
	}
	return c
}

// run calls Sgemm or Dgemm on a copy of C and returns it.
func (g gemmCase[T]) run(threads int) []T {
	c := append([]T(nil), g.c...)
	gemmT(g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc, threads)
	return c
}

// check runs the call with the given thread budget and compares the
// result to the accurate reference (within the rounding bound of T), to
// gonum (within twice it), and checks that the padding of C is untouched.
func (g gemmCase[T]) check(t *testing.T, threads int) []T {
	t.Helper()
	want, tol := g.naive()
	ref := g.gonum()
	c := g.run(threads)
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.ldc; j++ {
			got := c[i*g.ldc+j]
			if j >= g.n {
				if !sameBits(got, g.c[i*g.ldc+j]) {
					t.Fatalf("%v threads=%d: padding C[%d,%d] changed: %g -> %g", g, threads, i, j, g.c[i*g.ldc+j], got)
				}
				continue
			}
			w, e := want[i*g.n+j], tol[i*g.n+j]
			if d := math.Abs(float64(got) - w); !(d <= e) {
				t.Fatalf("%v threads=%d: C[%d,%d] = %g, want %g (error %g > bound %g)", g, threads, i, j, got, w, d, e)
			}
			if d := math.Abs(float64(got) - float64(ref[i*g.ldc+j])); !(d <= 2*e) {
				t.Fatalf("%v threads=%d: C[%d,%d] = %g, gonum %g (difference %g > %g)", g, threads, i, j, got, ref[i*g.ldc+j], d, 2*e)
			}
		}
	}
	return c
}

var edgeSizes = []int{1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 255, 257}

// The tests below are written once for both element types (testX[T]);
// TestSgemmX and TestDgemmX run them for float32 and float64.

func TestSgemmEdgeSizes(t *testing.T) { testEdgeSizes[float32](t) }
func TestDgemmEdgeSizes(t *testing.T) { testEdgeSizes[float64](t) }

func testEdgeSizes[T elem](t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		sizes := edgeSizes
		if !testlong.Enabled() {
			sizes = []int{1, 2, 3, 7, 16, 17, 31, 33, 65, 129}
		}
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, m := range sizes {
				// every m against a few n and k, and every n and k against a few m
				n := sizes[rng.IntN(len(sizes))]
				k := sizes[rng.IntN(len(sizes))]
				newCaseT[T](rng, tr[0], tr[1], m, n, k, 0, 1, 0).check(t, 1)
				newCaseT[T](rng, tr[0], tr[1], n, m, k, 0, 1, 0).check(t, 1)
				newCaseT[T](rng, tr[0], tr[1], k, n, m, 0, 1, 0).check(t, 1)
			}
		}
	})
}

func TestSgemmRandomShapes(t *testing.T) { testRandomShapes[float32](t) }
func TestDgemmRandomShapes(t *testing.T) { testRandomShapes[float64](t) }

func testRandomShapes[T elem](t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		iters := 300
		if !testlong.Enabled() {
			iters = 60
		}
		alphas := []T{1, -1, 0.5, 2.25}
		betas := []T{0, 1, -0.75, 3}
		for it := 0; it < iters; it++ {
			dim := func() int {
				if rng.IntN(3) == 0 {
					return edgeSizes[rng.IntN(len(edgeSizes))]
				}
				return 1 + rng.IntN(80)
			}
			g := newCaseT(rng, rng.IntN(2) == 0, rng.IntN(2) == 0, dim(), dim(), dim(), rng.IntN(3)*rng.IntN(9),
				alphas[rng.IntN(len(alphas))], betas[rng.IntN(len(betas))])
			g.check(t, 1)
		}
	})
}

// TestDgemmLargeK: k far beyond the k block, where the float64 rounding
// bound is tight enough to catch a lost or repeated block.
func TestDgemmLargeK(t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(41, 42))
		ks := []int{4099}
		if testlong.Enabled() {
			ks = append(ks, 20000)
		}
		for _, k := range ks {
			for _, tr := range [][2]bool{{false, false}, {true, true}} {
				newCaseT[float64](rng, tr[0], tr[1], 13, 19, k, 1, -1.5, 0.5).check(t, 1)
			}
		}
	})
}

// TestSgemmBlocking crosses the k and n block sizes (several k blocks, so beta
// must apply only to the first) and the direct/packed B threshold.
func TestSgemmBlocking(t *testing.T) { testBlocking[float32](t) }
func TestDgemmBlocking(t *testing.T) { testBlocking[float64](t) }

func testBlocking[T elem](t *testing.T) {
	if raceEnabled && testing.Short() {
		t.Skip("single-goroutine and slow under -race; runs without it")
	}
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		s := activeSet[T]()
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, sh := range [][3]int{
				{s.directMaxM, s.nc + 3*s.nr + 5, s.kc + 1},
				{s.directMaxM + 1, s.nc + 1, 2*s.kc + 3},
				{s.directMaxM, 1024, s.kc + 1}, // B's rows 4 KiB apart (readsBInPlace)
				{2*s.mr + 1, 2*s.nc - 1, 3 * s.kc},
				{3, 2*s.nc + s.nr/2 + 1, s.kc - 1},
			} {
				for _, beta := range []T{0, 0.5} {
					if !testlong.Enabled() && rng.IntN(2) == 0 {
						continue
					}
					newCaseT(rng, tr[0], tr[1], sh[0], sh[1], sh[2], 3, 1.5, beta).check(t, 1)
				}
			}
		}
	})
}

// TestSgemmNarrowTransposed covers runTransposed: a C narrower than the
// kernel's vectors, computed as Cᵀ.
func TestSgemmNarrowTransposed(t *testing.T) { testNarrowTransposed[float32](t) }
func TestDgemmNarrowTransposed(t *testing.T) { testNarrowTransposed[float64](t) }

func testNarrowTransposed[T elem](t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(23, 24))
		s := activeSet[T]()
		used := 0
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for n := 1; n <= s.mr; n++ {
				for _, m := range []int{s.nrHalf, 2 * s.nrHalf, 2*s.nrHalf + 1, 63, 100} {
					for _, k := range []int{1, 17, s.kc + 5} {
						g := newCaseT(rng, tr[0], tr[1], m, n, k, rng.IntN(2)*3, 1.25, []T{0, 0.5}[rng.IntN(2)])
						if s.useTransposed(&problem[T]{transA: tr[0], transB: tr[1], m: m, n: n, k: k}) {
							used++
						}
						g.check(t, 1)
					}
				}
			}
		}
		require.Positive(t, used, "no shape took the transposed path")
		require.True(t, s.useTransposed(&problem[T]{transA: false, m: 100, n: 1}))
		require.True(t, s.useTransposed(&problem[T]{transA: true, m: 100, n: 1}))
		require.False(t, s.useTransposed(&problem[T]{transA: true, m: 100, n: s.nrHalf}))
		// One vector of rows (a batch of 16 on AVX-512) only where measured.
		require.Equal(t, s.oneVectorM, s.useTransposed(&problem[T]{m: s.nrHalf, n: 1, k: 5}))
		require.False(t, s.useTransposed(&problem[T]{m: s.nrHalf + 1, n: 1, k: 5}))
	})
}

func TestSgemmStridesAndScalars(t *testing.T) { testStridesAndScalars[float32](t) }
func TestDgemmStridesAndScalars(t *testing.T) { testStridesAndScalars[float64](t) }

func testStridesAndScalars[T elem](t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, pad := range []int{1, 5, 37} {
				for _, ab := range [][2]T{{1, 0}, {1, 1}, {-2, 0.5}, {0.25, -1}, {0, 2}, {0, 0}, {1, 2}} {
					newCaseT(rng, tr[0], tr[1], 29, 47, 35, pad, ab[0], ab[1]).check(t, 1)
				}
			}
		}
	})
}

// TestSgemmBetaZeroOverwritesNaN: beta == 0 must overwrite C without reading
// it, for every tile shape, also when k == 0 or alpha == 0.
func TestSgemmBetaZeroOverwritesNaN(t *testing.T) { testBetaZeroOverwritesNaN[float32](t) }
func TestDgemmBetaZeroOverwritesNaN(t *testing.T) { testBetaZeroOverwritesNaN[float64](t) }

func testBetaZeroOverwritesNaN[T elem](t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 10))
		nan := T(math.NaN())
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, sh := range [][3]int{{1, 1, 1}, {13, 33, 5}, {12, 32, 300}, {16, 17, 3}, {5, 7, 0}, {70, 90, 40}} {
				for _, alpha := range []T{1, 0} {
					for _, beta := range []T{0, T(math.Copysign(0, -1))} {
						g := newCaseT(rng, tr[0], tr[1], sh[0], sh[1], sh[2], 2, alpha, beta)
						c := append([]T(nil), g.c...)
						for i := 0; i < g.m; i++ {
							for j := 0; j < g.n; j++ {
								c[i*g.ldc+j] = nan
							}
						}
						g.c = c
						out := g.check(t, 1)
						for i := 0; i < g.m; i++ {
							for j := 0; j < g.n; j++ {
								require.False(t, math.IsNaN(float64(out[i*g.ldc+j])), "%v: C[%d,%d] is NaN", g, i, j)
							}
						}
					}
				}
			}
		}
	})
}

func TestSgemmZeroDims(t *testing.T) { testZeroDims[float32](t) }
func TestDgemmZeroDims(t *testing.T) { testZeroDims[float64](t) }

func testZeroDims[T elem](t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 12))
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, sh := range [][3]int{{4, 5, 0}, {1, 1, 0}, {0, 5, 3}, {4, 0, 3}, {0, 0, 0}} {
				for _, beta := range []T{0, 1, 2} {
					newCaseT(rng, tr[0], tr[1], sh[0], sh[1], sh[2], 1, 1, beta).check(t, 1)
				}
			}
		}
		// Empty operands are accepted when a dimension is zero.
		gemmT[T](false, false, 0, 0, 0, 1, nil, 1, nil, 1, 0, nil, 1, 0)
		c := []T{1, 2, 3}
		gemmT(false, false, 1, 3, 0, 1, nil, 1, nil, 3, 0, c, 3, 0)
		require.Equal(t, []T{0, 0, 0}, c)
	})
}

// TestSgemmThreads runs problems big enough to be split across goroutines,
// with several thread budgets, and checks the result is bit-for-bit the one
// computed on one goroutine (each element is computed by the same kernel
// with the same summation order however C is split). Run it with -race.
func TestSgemmThreads(t *testing.T) { testThreads[float32](t) }
func TestDgemmThreads(t *testing.T) { testThreads[float64](t) }

func testThreads[T elem](t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(13, 14))
		shapes := [][3]int{{200, 300, 250}, {16, 1030, 900}, {1030, 24, 700}, {300, 5, 9000}}
		if active == goSet || raceEnabled || !testlong.Enabled() {
			shapes = [][3]int{{100, 300, 300}, {16, 1030, 520}, {1030, 24, 350}, {1030, 5, 1700}}
		}
		// Row blocks of whole cache lines of Aᵀ (the MoE weight gradients).
		shapes = append(shapes, [3]int{128, 128, 2048})
		if is64[T]() && !testlong.Enabled() {
			// The split across goroutines is the float32 code's; what
			// float64 adds is covered by one shape per method.
			shapes = [][3]int{{100, 300, 300}, {1030, 5, 1700}}
		}
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, sh := range shapes {
				require.GreaterOrEqual(t, 2*sh[0]*sh[1]*sh[2], parMinFlops, "shape %v too small to go parallel", sh)
				g := newCaseT[T](rng, tr[0], tr[1], sh[0], sh[1], sh[2], 1, 1, 0.5)
				var one []T
				if raceEnabled {
					// Under -race this test is about the goroutines; the
					// reference check of the result runs without -race.
					one = g.run(1)
				} else {
					one = g.check(t, 1)
				}
				for _, threads := range []int{0, 2, 3, -1} {
					require.Equal(t, one, g.run(threads), "%v threads=%d differs from threads=1", g, threads)
				}
			}
		}
	})
}

// TestSgemmConcurrentCalls runs parallel and serial calls from several
// goroutines at once (the pools and helper goroutines are shared).
func TestSgemmConcurrentCalls(t *testing.T) { testConcurrentCalls[float32](t) }
func TestDgemmConcurrentCalls(t *testing.T) { testConcurrentCalls[float64](t) }

func testConcurrentCalls[T elem](t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	var cases []gemmCase[T]
	for i := 0; i < 6; i++ {
		cases = append(cases, newCaseT[T](rng, i%2 == 0, i%3 == 0, 100+7*i, 300, 400, 0, 1, 0))
	}
	want := make([][]T, len(cases))
	for i, g := range cases {
		want[i] = g.check(t, 1)
	}
	errs := make(chan error, len(cases))
	for i, g := range cases {
		go func() {
			for rep := 0; rep < 3; rep++ {
				c := g.run(i % 3)
				for j := range c {
					if c[j] != want[i][j] {
						errs <- fmt.Errorf("%v: concurrent result differs at %d", g, j)
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range cases {
		require.NoError(t, <-errs)
	}
}

// TestSgemmMixedConcurrentCalls runs Sgemm and Dgemm at once from several
// goroutines: each element type has its own pools.
func TestSgemmMixedConcurrentCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	g32 := newCase(rng, false, false, 200, 300, 300, 0, 1, 0)
	g64 := newCaseT[float64](rng, false, true, 200, 300, 300, 0, 1, 0)
	w32, w64 := g32.check(t, 1), g64.check(t, 1)
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			for rep := 0; rep < 3; rep++ {
				if i%2 == 0 && !slices.Equal(g32.run(0), w32) {
					errs <- fmt.Errorf("goroutine %d: Sgemm differs", i)
					return
				}
				if i%2 == 1 && !slices.Equal(g64.run(0), w64) {
					errs <- fmt.Errorf("goroutine %d: Dgemm differs", i)
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < 4; i++ {
		require.NoError(t, <-errs)
	}
}

// TestSgemmNoGoroutineLeft: the pooled workers a parallel call uses exit
// shortly after the last call (workers.IdleExit).
func TestSgemmNoGoroutineLeft(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS >= 2")
	}
	g := newCase(rand.New(rand.NewPCG(17, 18)), false, false, 256, 512, 256, 0, 1, 0)
	g64 := newCaseT[float64](rand.New(rand.NewPCG(17, 18)), false, false, 256, 512, 256, 0, 1, 0)
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		Sgemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc, 0)
		Dgemm(g64.ta, g64.tb, g64.m, g64.n, g64.k, g64.alpha, g64.a, g64.lda, g64.b, g64.ldb, g64.beta, g64.c, g64.ldc, 0)
	}
	// The workers spin, then park, then exit after workers.IdleExit.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}

func TestSgemmNoAllocs(t *testing.T) { testNoAllocs[float32](t) }
func TestDgemmNoAllocs(t *testing.T) { testNoAllocs[float64](t) }

func testNoAllocs[T elem](t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(19, 20))
	// The last shape is big enough for the parallel path.
	require.GreaterOrEqual(t, 2*160*256*256, parMinFlops)
	for _, sh := range [][3]int{{16, 256, 128}, {100, 300, 70}, {160, 256, 256}} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}} {
			g := newCaseT[T](rng, tr[0], tr[1], sh[0], sh[1], sh[2], 0, 1, 0)
			for _, threads := range []int{1, 0} {
				f := func() {
					gemmT(g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc, threads)
				}
				f()
				allocs := testing.AllocsPerRun(10, f)
				// sync.Pool may drop a buffer at a GC; anything above that
				// is an allocation per call.
				require.Less(t, allocs, 0.5, "%v threads=%d: %v allocs per call", g, threads, allocs)
			}
		}
	}
}

func TestSgemmPanics(t *testing.T) {
	a := make([]float32, 6)
	require.PanicsWithValue(t, "gemm: negative dimension m=-1 n=2 k=3", func() {
		Sgemm(false, false, -1, 2, 3, 1, a, 3, a, 2, 0, a, 2, 1)
	})
	require.PanicsWithValue(t, "gemm: lda=2 < 3 columns of a", func() {
		Sgemm(false, false, 2, 2, 3, 1, a, 2, a, 2, 0, a, 2, 1)
	})
	require.PanicsWithValue(t, "gemm: len(b)=6 < 8 for 2×4 with stride 4", func() {
		Sgemm(false, true, 2, 2, 4, 1, make([]float32, 8), 4, a, 4, 0, a, 2, 1)
	})
	require.PanicsWithValue(t, "gemm: len(c)=6 < 11 for 2×5 with stride 6", func() {
		Sgemm(true, false, 2, 5, 1, 1, a, 2, a, 5, 0, a, 6, 1)
	})
}

func TestDgemmPanics(t *testing.T) {
	a := make([]float64, 6)
	require.PanicsWithValue(t, "gemm: negative dimension m=2 n=2 k=-3", func() {
		Dgemm(false, false, 2, 2, -3, 1, a, 3, a, 2, 0, a, 2, 1)
	})
	require.PanicsWithValue(t, "gemm: ldb=1 < 2 columns of b", func() {
		Dgemm(false, false, 2, 2, 3, 1, a, 3, a, 1, 0, a, 2, 1)
	})
	require.PanicsWithValue(t, "gemm: len(a)=6 < 8 for 4×2 with stride 2", func() {
		Dgemm(true, false, 2, 2, 4, 1, a, 2, make([]float64, 8), 2, 0, a, 2, 1)
	})
	require.PanicsWithValue(t, "gemm: ldc=1 < 2 columns of c", func() {
		Dgemm(false, false, 2, 2, 1, 1, a, 1, a, 2, 0, a, 1, 1)
	})
}

// TestTranspose checks every transposeFunc against the definition.
func TestTranspose(t *testing.T) {
	funcs := map[string]transposeFunc[float32]{"go": transposeGo[float32]}
	for _, s := range kernelSets() {
		funcs[s.name] = s.transpose
	}
	funcs64 := map[string]transposeFunc[float64]{"go": transposeGo[float64]}
	for _, s := range kernelSets64() {
		funcs64[s.name] = s.transpose
	}
	t.Run("float32", func(t *testing.T) { testTranspose(t, funcs) })
	t.Run("float64", func(t *testing.T) { testTranspose(t, funcs64) })
}

func testTranspose[T elem](t *testing.T, funcs map[string]transposeFunc[T]) {
	rng := rand.New(rand.NewPCG(21, 22))
	for name, f := range funcs {
		for _, rows := range []int{1, 3, 4, 5, 8, 9, 10, 16, 31, 32} {
			for _, cols := range []int{1, 3, 4, 7, 8, 9, 10, 17, 64, 70} {
				lds, ldd := cols+rng.IntN(3), rows+rng.IntN(3)
				src := make([]T, (rows-1)*lds+cols)
				for i := range src {
					src[i] = T(rng.Float64())
				}
				dst := make([]T, (cols-1)*ldd+rows)
				for i := range dst {
					dst[i] = -1
				}
				f(dst, ldd, src, lds, rows, cols)
				for j := 0; j < cols; j++ {
					for i := 0; i < ldd && j*ldd+i < len(dst); i++ {
						want := T(-1)
						if i < rows {
							want = src[i*lds+j]
						}
						require.Equal(t, want, dst[j*ldd+i], "%s rows=%d cols=%d dst[%d][%d]", name, rows, cols, j, i)
					}
				}
			}
		}
	}
}

func TestAlignedFloats(t *testing.T) {
	for n := 1; n < 40; n++ {
		x := alignedFloats[float32](n)
		require.Len(t, x, n)
		require.Zero(t, uintptr(unsafe.Pointer(&x[0]))%64)
		y := alignedFloats[float64](n)
		require.Len(t, y, n)
		require.Zero(t, uintptr(unsafe.Pointer(&y[0]))%64)
	}
}

// TestSgemmSmallMTransB covers op(A)·Bᵀ with a few rows of C, which is
// computed as its transpose (useTransposed): both op(A), several k blocks,
// padded strides, beta, one and several goroutines (bit-identical).
func TestSgemmSmallMTransB(t *testing.T) { testSmallMTransB[float32](t) }
func TestDgemmSmallMTransB(t *testing.T) { testSmallMTransB[float64](t) }

func testSmallMTransB[T elem](t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 10))
		s := activeSet[T]()
		if s.nr == s.nrHalf {
			t.Skip("one kernel width: no rows between the narrow and the wide width")
		}
		for _, ta := range []bool{false, true} {
			for _, m := range []int{s.nrHalf, s.nrHalf + 1, s.nr - 1, s.nr} {
				shapes := [][2]int{{2 * s.nrHalf, 7}, {2*s.nr + 1, 5}, {3*s.nr + 5, 2*s.kc + 3}, {1030, 300}}
				if testing.Short() {
					shapes = shapes[:3]
				}
				for _, sh := range shapes {
					n, k := sh[0], sh[1]
					g := newCaseT[T](rng, ta, true, m, n, k, rng.IntN(5), 1.5, -0.5)
					// m = nrHalf only with oneVectorM and n > NR.
					want := m > s.nrHalf || s.oneVectorM && n > s.nr
					require.Equal(t, want, s.useTransposed(&problem[T]{transA: ta, transB: true, m: m, n: n, k: k}),
						"m=%d n=%d k=%d takes the transposed path", m, n, k)
					c1 := g.check(t, 1)
					c2 := g.check(t, 2)
					require.Equal(t, c1, c2, "%v: the same bits on 1 and 2 goroutines", g)
				}
			}
		}
	})
}

// TestSgemmTransposedStore: the kernT kernels, which transpose their
// tiles of Cᵀ in registers and store them into C, give the bits of the
// tile buffer they replace, for every tile height (n = 1..MR), narrow and
// wide tiles (m = 16, 32 and 37: a wide tile and a narrow one), both
// flavours (op(A) = A and Aᵀ), beta zero or not and several k blocks, so
// runTransposed may mix the two (kernTWideMinMR) and a split across
// goroutines keeps the bits of one. The narrow kernels' tiles of 13 to 16
// rows (op(A)·Bᵀ from 16 rows, n from 33 to 64: tiles of 16 and the
// rest) give the bits of 12-row tiles through the buffer.
func TestSgemmTransposedStore(t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		s := activeSet[float32]()
		if s.kernT[0][0] == nil {
			t.Skip("no transposed-store kernels in this set")
		}
		buffered := *s
		buffered.kernT = [2][2][]kernFn[float32]{}
		rng := rand.New(rand.NewPCG(25, 26))
		for _, ta := range []bool{false, true} {
			for n := 1; n <= s.mr; n++ {
				for _, m := range []int{16, 32, 37} {
					for _, beta := range []float32{0, -0.75} {
						k := []int{7, s.kc + 9}[rng.IntN(2)]
						g := newCaseT(rng, ta, false, m, n, k, rng.IntN(3), 1.25, beta)
						require.True(t, s.useTransposed(&problem[float32]{transA: ta, m: m, n: n, k: k}) || !ta && 8*n > 5*s.nrHalf, "%v", g)
						c := g.check(t, 1)
						active = &buffered
						cb := g.run(1)
						active = s
						require.Equal(t, cb, c, "%v: kernT and the tile buffer", g)
					}
				}
			}
			for n := 33; n <= 64; n++ {
				beta := []float32{0, -0.75}[n%2]
				k := []int{7, 40, s.kc + 9}[rng.IntN(3)]
				g := newCaseT(rng, ta, true, 16, n, k, rng.IntN(3), 1.25, beta)
				require.True(t, s.useTransposed(&problem[float32]{transA: ta, transB: true, m: 16, n: n, k: k}), "%v", g)
				c := g.check(t, 1)
				active = &buffered
				cb := g.run(1)
				active = s
				require.Equal(t, cb, c, "%v: 16-row kernT tiles and the tile buffer", g)
			}
		}
	})
}

// A product 128 columns wide (a transformer's 2048×128 by 128×128) is too
// narrow for two column blocks of minTaskStrips strips: it splits by rows
// (it ran on one goroutine when the column rule rounded it to one block),
// with the bits of one goroutine.
// So do the MoE router's 4 MFLOP products with a side of 8 (the logits
// [2048,128]@[128,8], the input's gradient [2048,8]@[8,128] and the
// weight's [128,2048]@[2048,8]), split from parMinFlopsNarrow.
func TestSgemmNarrowSplitsRows(t *testing.T) {
	requireSplitsLikeOne(t, rand.New(rand.NewPCG(15, 16)), [3]int{2048, 128, 128}, [3]int{2048, 8, 128}, [3]int{2048, 128, 8}, [3]int{128, 8, 2048})
}

// requireSplitsLikeOne requires the float32 product of each m×n×k shape,
// each way of reading its operands (as they are, A transposed, B
// transposed), to be split on 2 goroutines, with the bits of 1.
func requireSplitsLikeOne(t *testing.T, rng *rand.Rand, shapes ...[3]int) {
	t.Helper()
	for _, sh := range shapes {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}} {
			g := newCaseT[float32](rng, tr[0], tr[1], sh[0], sh[1], sh[2], 0, 1, 0)
			one := g.run(1)
			before := parSplits.Load()
			require.Equal(t, one, g.run(2), "%v", g)
			require.Greater(t, parSplits.Load(), before, "%v: not split", g)
		}
	}
}

// Column blocks come in whole rounds of the goroutines when there are more
// blocks than goroutines, none narrower than minTaskStrips strips, and a
// product split that way (n = 384: 12 strips of 32 as 2 blocks of 6, not 3
// of 4) has the bits of one goroutine.
func TestColumnBlockStrips(t *testing.T) {
	for _, c := range []struct{ units, t, want int }{
		{12, 2, 6}, // 3 blocks of 4 → 2 of 6
		{8, 2, 4},
		{32, 2, 8},
		{25, 2, 7}, // 4 blocks
		{9, 2, 5},  // 3 blocks of 4 → 2 of 5 and 4
		{13, 2, 4}, // 4 blocks: whole rounds already
		{12, 4, 4}, // 3 blocks, fewer than the goroutines
		{12, 3, 4},
		{4, 2, 4},
	} {
		per := columnBlockStrips(c.units, c.t)
		require.Equal(t, c.want, per, "%d strips on %d goroutines", c.units, c.t)
		nt := (c.units + per - 1) / per
		require.True(t, nt <= c.t || nt%c.t == 0, "%d strips on %d goroutines: %d blocks", c.units, c.t, nt)
	}
	requireSplitsLikeOne(t, rand.New(rand.NewPCG(19, 20)), [3]int{2048, 384, 128}, [3]int{128, 384, 2048}, [3]int{256, 288, 128})
}

// A product split by rows packs op(B) once for all its goroutines
// (sharedB), strip by strip, k block by k block: the bits of one goroutine
// for whole and partial strips, several k blocks, B transposed or not, and
// the MoE model's shapes (its projections [2048,128]@[128,128] and the
// experts' weight gradients [256,640]ᵀ@[640,128]).
func TestSgemmSharedB(t *testing.T) { testSharedB[float32](t) }
func TestDgemmSharedB(t *testing.T) { testSharedB[float64](t) }

func testSharedB[T elem](t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(17, 18))
		// Kernel sets with strips narrower than 16 split these by columns
		// or not at all; the others share B for some of them.
		nr := active.nr
		if is64[T]() {
			nr = active64.nr
		}
		before := sharedBCalls.Load()
		for _, sh := range [][3]int{{2048, 128, 128}, {256, 128, 640}, {1030, 100, 530}, {300, 40, 257}} {
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				g := newCaseT[T](rng, tr[0], tr[1], sh[0], sh[1], sh[2], 3, 1, 0.5)
				one := g.check(t, 1)
				for _, threads := range []int{2, 3} {
					require.Equal(t, one, g.run(threads), "%v threads=%d", g, threads)
				}
			}
		}
		if nr >= 16 {
			require.Greater(t, sharedBCalls.Load(), before+3, "B not shared")
		}
	})
}
