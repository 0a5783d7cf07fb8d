package gemm

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSgemmBatch(t *testing.T) { forEachSet(t, testBatch[float32]) }
func TestDgemmBatch(t *testing.T) { forEachSet(t, testBatch[float64]) }

// testBatch: each product of a batch equals the accurate reference within
// the rounding bound, and has the bits of the lone call on the same
// operands, with operands shared by the batch (offsets repeated) or not,
// for the shapes of an ensemble's MLP 64-128-10 at batch 16 and a few
// others.
func testBatch[T elem](t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := [][3]int{{16, 128, 64}, {16, 10, 128}, {16, 128, 10}, {128, 10, 16}, {1, 1, 1}, {7, 33, 300}}
	for _, s := range shapes {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, share := range []string{"none", "a", "b"} {
				pad := rng.IntN(2) * 3
				beta := T(rng.IntN(2)) / 2
				testBatchCase(t, rng, tr[0], tr[1], s[0], s[1], s[2], pad, share, T(1.5), beta)
			}
		}
	}
}

func testBatchCase[T elem](t *testing.T, rng *rand.Rand, ta, tb bool, m, n, k, pad int, share string, alpha, beta T) {
	const nb = 3
	cases := make([]gemmCase[T], nb)
	for i := range cases {
		cases[i] = newCaseT(rng, ta, tb, m, n, k, pad, alpha, beta)
		if share == "a" && i > 0 {
			cases[i].a = cases[0].a
		}
		if share == "b" && i > 0 {
			cases[i].b = cases[0].b
		}
	}
	// The batch's operands end to end (a shared one once).
	var a, b, c []T
	offA, offB, offC := make([]int, nb), make([]int, nb), make([]int, nb)
	for i, g := range cases {
		if share != "a" || i == 0 {
			a = append(a, g.a...)
		}
		if share != "b" || i == 0 {
			b = append(b, g.b...)
		}
		offA[i], offB[i], offC[i] = len(a)-len(g.a), len(b)-len(g.b), len(c)
		c = append(c, g.c...)
	}
	ext := func(x []T, rows, cols, ld int) []T { return x[:(rows-1)*ld+cols] }
	ar, ac, br, bc := m, k, k, n
	if ta {
		ar, ac = k, m
	}
	if tb {
		br, bc = n, k
	}
	gemmBatch(activeSet[T](), ta, tb, m, n, k, alpha, a, cases[0].lda, offA, b, cases[0].ldb, offB, beta, c, cases[0].ldc, offC)
	for i, g := range cases {
		got := c[offC[i] : offC[i]+len(g.c)]
		// The lone call, on operands that end with their matrices as the
		// batch's members do.
		lone := append([]T(nil), g.c...)
		gemmT(ta, tb, m, n, k, alpha, ext(g.a, ar, ac, g.lda), g.lda, ext(g.b, br, bc, g.ldb), g.ldb, beta, lone, g.ldc, 1)
		want, tol := g.naive()
		for r := range m {
			for j := range g.ldc {
				x := got[r*g.ldc+j]
				if !sameBits(x, lone[r*g.ldc+j]) {
					t.Fatalf("%v share=%s member %d: C[%d,%d] = %g, lone call %g", g, share, i, r, j, x, lone[r*g.ldc+j])
				}
				if j >= n {
					continue // padding: the lone call's, unchanged
				}
				if d := math.Abs(float64(x) - want[r*n+j]); !(d <= tol[r*n+j]) {
					t.Fatalf("%v share=%s member %d: C[%d,%d] = %g, want %g (error %g > bound %g)", g, share, i, r, j, x, want[r*n+j], d, tol[r*n+j])
				}
			}
		}
	}
}

func TestGemmBatchPanics(t *testing.T) {
	a, b, c := make([]float32, 4), make([]float32, 4), make([]float32, 4)
	require.PanicsWithValue(t, "gemm: batch offsets of lengths 1, 2 and 1 for a, b and c", func() {
		SgemmBatch(false, false, 2, 2, 2, 1, a, 2, []int{0}, b, 2, []int{0, 0}, 0, c, 2, []int{0})
	})
	require.Panics(t, func() { // a member past the end of c
		SgemmBatch(false, false, 2, 2, 2, 1, a, 2, []int{0, 0}, b, 2, []int{0, 0}, 0, c, 2, []int{0, 2})
	})
}
