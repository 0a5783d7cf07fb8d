package gemm

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/internal/cputime"
)

// BenchmarkSgemmDirect measures, for the active float32 set on one
// goroutine, each product with B read in place (mode=inplace: every
// product reads B unpacked, or Bᵀ by single strips) against B packed into
// whole blocks (mode=packed), across rows of C and B's widths: what
// kernelSet.directMaxM and directAliasMaxM choose between (readsBInPlace).
// Alternate rounds with -count and compare the modes shape by shape:
//
//	go test -c -o /tmp/gemm.test ./tensor/internal/gemm
//	/tmp/gemm.test -test.run '^$' -test.bench 'SgemmDirect' -test.benchtime 100x -test.cpu 1 -test.count 2
func BenchmarkSgemmDirect(b *testing.B) {
	benchKernels(b)
	for _, m := range []int{32, 64, 96, 112, 128, 160} {
		for _, kn := range [][2]int{{1024, 1024}, {784, 1024}, {1024, 2048}, {1024, 784}, {1024, 768}, {1024, 512}} {
			for _, tb := range []bool{false, true} {
				// A·B: m×n from m×k and k×n; A·Bᵀ (an input gradient dY·Wᵀ):
				// m×k from m×n and k×n.
				s := benchShape{fmt.Sprintf("m%d_k%d_n%d/NN", m, kn[0], kn[1]), false, false, m, kn[1], kn[0]}
				if tb {
					s = benchShape{fmt.Sprintf("m%d_k%d_n%d/NT", m, kn[0], kn[1]), false, true, m, kn[0], kn[1]}
				}
				for _, inPlace := range []bool{true, false} {
					mode := "packed"
					if inPlace {
						mode = "inplace"
					}
					b.Run(s.name+"/mode="+mode, func(b *testing.B) { benchDirect(b, s, inPlace) })
				}
			}
		}
	}
}

func benchDirect(b *testing.B, s benchShape, inPlace bool) {
	prev := active
	ks := *prev
	ks.directMaxM, ks.directAliasMaxM = 0, 0
	if inPlace {
		ks.directMaxM = s.m
	}
	active = &ks
	b.Cleanup(func() { active = prev })
	a, bb, c, lda, ldb := benchOperands(s)
	cpu0 := cputime.Used().Seconds()
	for b.Loop() {
		gemmT(s.ta, s.tb, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n, 1)
	}
	flops := 2 * float64(s.m) * float64(s.n) * float64(s.k) * float64(b.N)
	if cpu := cputime.Used().Seconds() - cpu0; cpu > 0 {
		b.ReportMetric(flops/cpu/1e9, "GFLOP/cpu-s")
	}
}
