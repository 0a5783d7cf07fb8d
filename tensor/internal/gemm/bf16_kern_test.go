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

// moeShape is one product of examples/moe's bf16 step as the tensor
// package calls BgemmMixed: its transposes, sizes, which operands are
// float32 (rounded as the product reads them) and the threads it asks.
type moeShape struct {
	name           string
	ta, tb         bool
	m, n, k        int
	aF32, bF32     bool
	threadsPerCall int
}

// moeShapes are the products of examples/moe's default model under
// -dtype bf16 (2048 tokens of width 128, 4 heads; 8 experts 128→256→128
// with about 512 tokens each; a head of 91 characters), traced from
// BgemmMixed's calls: the projections' forward (NN), input gradient (NT)
// and weight gradient (TN), an expert's (ragged: 527 rows, threads 1 as
// the ragged product runs its groups in parallel) and the head's.
func moeShapes() []moeShape {
	return []moeShape{
		{"proj_fwd_2048x128x128", false, false, 2048, 128, 128, true, true, 0},
		{"proj_dX_2048x128x128", false, true, 2048, 128, 128, false, true, 0},
		{"proj_dW_128x128x2048", true, false, 128, 128, 2048, true, false, 0},
		{"exp1_fwd_527x256x128", false, false, 527, 256, 128, true, true, 1},
		{"exp1_dX_527x128x256", false, true, 527, 128, 256, false, true, 1},
		{"exp1_dW_128x256x527", true, false, 128, 256, 527, true, false, 0},
		{"exp2_fwd_527x128x256", false, false, 527, 128, 256, false, true, 1},
		{"exp2_dX_527x256x128", false, true, 527, 256, 128, false, true, 1},
		{"exp2_dW_256x128x527", true, false, 256, 128, 527, false, false, 0},
		{"head_fwd_2048x91x128", false, false, 2048, 91, 128, true, true, 0},
		{"head_dX_2048x128x91", false, true, 2048, 128, 91, false, true, 0},
		{"head_dW_128x91x2048", true, false, 128, 91, 2048, true, false, 0},
	}
}

// BenchmarkBgemmMoE runs each product of moeShapes with every Bgemm
// kernel this machine has (amx, avx512bf16, widen) and with Sgemm on the
// float32 operands, alternating them, and reports each one's median rate
// per second of process CPU time and wall time: with -cpu 2 the products
// that ask for all threads split their work over two goroutines.
//
//	go test ./tensor/internal/gemm -run '^$' -bench BgemmMoE -benchtime 20x -cpu 1,2
func BenchmarkBgemmMoE(b *testing.B) {
	best := bf16Level
	defer func() { bf16Level = best }()
	levels := []int{bfWiden}
	if bf16NoAMX == bfAVX512 {
		levels = append(levels, bfAVX512)
	}
	if best == bfAMX {
		levels = append(levels, bfAMX)
	}
	for _, s := range moeShapes() {
		b.Run(s.name, func(b *testing.B) {
			bs := benchShape{s.name, s.ta, s.tb, s.m, s.n, s.k}
			af, bf, c, lda, ldb := benchOperands(bs)
			ah, bh := make([]uint16, len(af)), make([]uint16, len(bf))
			vec.BF16FromF32(ah, af)
			vec.BF16FromF32(bh, bf)
			opA, opB := BF16Operand{Bits: ah}, BF16Operand{Bits: bh}
			if s.aF32 {
				opA = BF16Operand{F32: af}
			}
			if s.bF32 {
				opB = BF16Operand{F32: bf}
			}
			flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
			reps := max(1, int(2e-3*200e9/flops))
			cpu := make([][]float64, len(levels)+1)
			wall := make([][]float64, len(levels)+1)
			timeIt := func(i int, f func()) {
				t0, w0 := cputime.Used(), time.Now()
				for range reps {
					f()
				}
				cpu[i] = append(cpu[i], (cputime.Used()-t0).Seconds()/float64(reps))
				wall[i] = append(wall[i], time.Since(w0).Seconds()/float64(reps))
			}
			for b.Loop() {
				timeIt(0, func() { Sgemm(s.ta, s.tb, s.m, s.n, s.k, 1, af, lda, bf, ldb, 0, c, s.n, s.threadsPerCall) })
				for i, lv := range levels {
					bf16Level = lv
					timeIt(i+1, func() { BgemmMixed(s.ta, s.tb, s.m, s.n, s.k, opA, lda, opB, ldb, c, s.n, s.threadsPerCall) })
				}
				bf16Level = best
			}
			b.ReportMetric(flops/medianOf(cpu[0])/1e9, "f32-GFLOP/cpu-s")
			b.ReportMetric(flops/medianOf(wall[0])/1e9, "f32-GFLOP/s")
			for i, lv := range levels {
				name := [...]string{"widen", "avx512bf16", "amx"}[lv]
				b.ReportMetric(flops/medianOf(cpu[i+1])/1e9, name+"-GFLOP/cpu-s")
				b.ReportMetric(flops/medianOf(wall[i+1])/1e9, name+"-GFLOP/s")
			}
		})
	}
}

// BenchmarkBgemmPairsAttention runs BgemmPairs on the products of fused
// bf16 attention's blocks at examples/moe's size (64 queries × 64 keys,
// heads of 32 features: 16 pairs), one thread, with every kernel level
// this machine has, alternating them, and reports each one's median rate
// per CPU-second:
//
//	go test ./tensor/internal/gemm -run '^$' -bench BgemmPairsAttention -benchtime 20x
func BenchmarkBgemmPairsAttention(b *testing.B) {
	best := bf16Level
	defer func() { bf16Level = best }()
	levels := []int{bfWiden}
	if bf16NoAMX == bfAVX512 {
		levels = append(levels, bfAVX512)
	}
	if best == bfAMX {
		levels = append(levels, bfAMX)
	}
	type shape struct {
		name        string
		ta, tb      bool
		m, n, kp    int
		alpha, beta float32
	}
	for _, s := range []shape{
		{"scores_QKt_64x64x16", false, true, 64, 64, 16, 0.18, 0},
		{"out_PV_64x32x32", false, false, 64, 32, 32, 1, 1},
		{"dV_PtdO_64x32x32", true, false, 64, 32, 32, 1, 1},
		{"dP_dOVt_64x64x16", false, true, 64, 64, 16, 1, 0},
	} {
		b.Run(s.name, func(b *testing.B) {
			ar, ac, br, bc := s.m, s.kp, s.kp, s.n
			if s.ta {
				ar, ac = s.kp, s.m
			}
			if s.tb {
				br, bc = s.n, s.kp
			}
			ah, _ := bf16Matrix(1, 2*ar*ac)
			bh, _ := bf16Matrix(2, 2*br*bc)
			a, bb := u32of(ah), u32of(bh)
			c := make([]float32, s.m*s.n)
			flops := 4 * float64(s.m) * float64(s.n) * float64(s.kp)
			const reps = 2000
			cpu := make([][]float64, len(levels))
			for b.Loop() {
				for i, lv := range levels {
					bf16Level = lv
					t0 := cputime.Used()
					for range reps {
						BgemmPairs(s.ta, s.tb, s.m, s.n, s.kp, s.alpha, a, ac, bb, bc, s.beta, c, s.n, 1)
					}
					cpu[i] = append(cpu[i], (cputime.Used()-t0).Seconds()/reps)
				}
				bf16Level = best
			}
			for i, lv := range levels {
				name := [...]string{"widen", "avx512bf16", "amx"}[lv]
				b.ReportMetric(flops/medianOf(cpu[i])/1e9, name+"-GFLOP/cpu-s")
			}
		})
	}
}
