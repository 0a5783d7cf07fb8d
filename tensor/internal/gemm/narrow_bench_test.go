package gemm

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/internal/cputime"
)

// BenchmarkSgemmBatchNarrow is the narrow products of an ensemble of 8
// MLPs 64-128-10 at batch 16 (autodiff's BenchmarkEnsembleStep), 8 of
// each through one SgemmBatch: the classifier's forward product h·W
// (16×10 from k = 128), its input gradient dy·Wᵀ (16×128 from k = 10)
// and its weight gradient hᵀ·dy (128×10 from k = 16), all three computed
// as their transposes on AVX-512, in GFLOP per second and per CPU-second.
func BenchmarkSgemmBatchNarrow(b *testing.B) {
	for _, s := range []struct {
		name           string
		m, n, k        int
		transA, transB bool
	}{
		{"forward", 16, 10, 128, false, false},
		{"input_grad", 16, 128, 10, false, true},
		{"weight_grad", 128, 10, 16, true, false},
	} {
		b.Run(fmt.Sprintf("%s/m=%d/n=%d/k=%d", s.name, s.m, s.n, s.k), func(b *testing.B) {
			lda, ldb := s.k, s.n
			if s.transA {
				lda = s.m
			}
			if s.transB {
				ldb = s.k
			}
			const nb = 8
			a, bm, c := make([]float32, nb*s.m*s.k), make([]float32, nb*s.k*s.n), make([]float32, nb*s.m*s.n)
			for i := range a {
				a[i] = float32(i%13) * 0.1
			}
			for i := range bm {
				bm[i] = float32(i%7) * 0.1
			}
			offA, offB, offC := make([]int, nb), make([]int, nb), make([]int, nb)
			for t := range nb {
				offA[t], offB[t], offC[t] = t*s.m*s.k, t*s.k*s.n, t*s.m*s.n
			}
			cpu0 := cputime.Used().Seconds()
			for b.Loop() {
				SgemmBatch(s.transA, s.transB, s.m, s.n, s.k, 1, a, lda, offA, bm, ldb, offB, 0, c, s.n, offC)
			}
			flops := float64(2*s.m*s.n*s.k*nb) * float64(b.N)
			b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			if cpu := cputime.Used().Seconds() - cpu0; cpu > 0 {
				b.ReportMetric(flops/cpu/1e9, "GFLOP/cpu-s")
			}
		})
	}
}
