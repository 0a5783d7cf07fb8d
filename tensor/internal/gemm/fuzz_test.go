package gemm

import (
	"math/rand/v2"
	"testing"
)

// FuzzDgemm checks Dgemm on fuzzed shapes, transpositions, strides and
// scalars against the accurate reference and gonum's blas64, on the
// default kernel set (GONOX_KERNELS chooses another). The seeds run with
// every go test; explore with
//
//	go test -run '^$' -fuzz FuzzDgemm ./tensor/internal/gemm/
func FuzzDgemm(f *testing.F) {
	for i, s := range []struct {
		ta, tb  bool
		m, n, k uint16
		pad     uint8
		ab      uint8
	}{
		{false, false, 1, 1, 1, 0, 0},
		{false, true, 13, 17, 300, 1, 1},
		{true, false, 25, 9, 3, 5, 2},
		{true, true, 12, 16, 257, 0, 3},
		{false, false, 129, 33, 65, 2, 4},
		{false, true, 40, 3, 520, 0, 5},
	} {
		f.Add(s.ta, s.tb, s.m, s.n, s.k, s.pad, s.ab, uint64(i))
	}
	alphas := []float64{1, -1, 0.5, 2.25, 0, 1e-3}
	betas := []float64{0, 1, -0.75, 3, 0.5, 0}
	f.Fuzz(func(t *testing.T, ta, tb bool, m, n, k uint16, pad, ab uint8, seed uint64) {
		// Bound the work of one input (the reference is O(mnk)).
		m, n, k = m%300, n%300, k%1100
		if int(m)*int(n)*int(k) > 4<<20 {
			t.Skip("too large")
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		i := int(ab) % len(alphas)
		g := newCaseT(rng, ta, tb, int(m), int(n), int(k), int(pad%9), alphas[i], betas[(i+int(ab)/len(alphas))%len(betas)])
		g.check(t, 1)
	})
}
