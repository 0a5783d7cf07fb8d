package gemm

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/tensor/internal/vec"
)

// BenchmarkBgemmModes runs 1024³ products single-threaded with Sgemm and
// with each Bgemm kernel this machine has, alternating them within every
// iteration so that all see the same load, and reports each one's median
// GFLOP/s and its speed-up over Sgemm.
func BenchmarkBgemmModes(b *testing.B) {
	const sz = 1024
	ah, af := bf16Matrix(1, sz*sz)
	bh, bf := bf16Matrix(2, sz*sz)
	c := make([]float32, sz*sz)
	flops := 2.0 * sz * sz * sz
	best := bf16Level
	defer func() { bf16Level = best }()
	times := make([][]float64, best+2) // [0]: Sgemm, [1+level]: Bgemm
	for b.Loop() {
		t0 := time.Now()
		Sgemm(false, false, sz, sz, sz, 1, af, sz, bf, sz, 0, c, sz, 1)
		times[0] = append(times[0], time.Since(t0).Seconds())
		for lv := bfWiden; lv <= best; lv++ {
			bf16Level = lv
			t0 := time.Now()
			Bgemm(false, false, sz, sz, sz, ah, sz, bh, sz, c, sz, 1)
			times[1+lv] = append(times[1+lv], time.Since(t0).Seconds())
		}
	}
	m32 := medianOf(times[0])
	b.ReportMetric(flops/m32/1e9, "f32-GFLOP/s")
	for lv := bfWiden; lv <= best; lv++ {
		bf16Level = lv
		m := medianOf(times[1+lv])
		b.ReportMetric(flops/m/1e9, BF16Kernel()+"-GFLOP/s")
		b.ReportMetric(m32/m, BF16Kernel()+"-speedup")
	}
}

// bgemmShapes are the products of the MLP 784-1024-1024-10 step at batch
// 256 (forward NN, input gradient NT, weight gradient TN of each layer)
// and of examples/moe's default model (2048 tokens of width 128; an
// expert's 640 tokens through 128→256→128).
func bgemmShapes() []benchShape {
	var s []benchShape
	type layer struct{ m, k, n int }
	for _, l := range []layer{{256, 784, 1024}, {256, 1024, 1024}, {256, 1024, 10}, {2048, 128, 384}, {2048, 128, 128}, {640, 128, 256}, {640, 256, 128}} {
		s = append(s,
			benchShape{fmt.Sprintf("m%d_k%d_n%d/fwd_NN", l.m, l.k, l.n), false, false, l.m, l.n, l.k},
			benchShape{fmt.Sprintf("m%d_k%d_n%d/dX_NT", l.m, l.k, l.n), false, true, l.m, l.k, l.n},
			benchShape{fmt.Sprintf("m%d_k%d_n%d/dW_TN", l.m, l.k, l.n), true, false, l.k, l.n, l.m},
		)
	}
	return s
}

// BenchmarkBgemmShapes runs Sgemm and Bgemm alternately on each shape of
// bgemmShapes, single-threaded, each in blocks of about 2 ms, and reports
// both rates per second of process CPU time (time the process waited for
// a core does not count, so the figures hold on a shared machine) and
// their ratio, bf16 over f32 (speedup), and the ratio of BgemmMixed on the
// float32 operands, rounded as it reads them (mixed-speedup: MatMulAs's
// product):
//
//	go test ./tensor/internal/gemm -run '^$' -bench BgemmShapes -benchtime 20x
func BenchmarkBgemmShapes(b *testing.B) {
	for _, s := range bgemmShapes() {
		b.Run(s.name, func(b *testing.B) {
			af, bf, c, lda, ldb := benchOperands(s)
			ah, bh := make([]uint16, len(af)), make([]uint16, len(bf))
			vec.BF16FromF32(ah, af)
			vec.BF16FromF32(bh, bf)
			flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
			reps := max(1, int(2e-3*200e9/flops))
			var t32, t16, tMixed []float64
			timeIt := func(dst *[]float64, f func()) {
				t0 := cputime.Used()
				for range reps {
					f()
				}
				*dst = append(*dst, (cputime.Used()-t0).Seconds()/float64(reps))
			}
			for b.Loop() {
				timeIt(&t32, func() { Sgemm(s.ta, s.tb, s.m, s.n, s.k, 1, af, lda, bf, ldb, 0, c, s.n, 1) })
				timeIt(&t16, func() { Bgemm(s.ta, s.tb, s.m, s.n, s.k, ah, lda, bh, ldb, c, s.n, 1) })
				timeIt(&tMixed, func() {
					BgemmMixed(s.ta, s.tb, s.m, s.n, s.k, BF16Operand{F32: af}, lda, BF16Operand{F32: bf}, ldb, c, s.n, 1)
				})
			}
			m32, m16, mMixed := medianOf(t32), medianOf(t16), medianOf(tMixed)
			b.ReportMetric(flops/m32/1e9, "f32-GFLOP/cpu-s")
			b.ReportMetric(flops/m16/1e9, "bf16-GFLOP/cpu-s")
			b.ReportMetric(m32/m16, "speedup")
			b.ReportMetric(m32/mMixed, "mixed-speedup")
		})
	}
}

// medianOf returns the median of v.
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
