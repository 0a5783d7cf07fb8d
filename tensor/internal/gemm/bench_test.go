package gemm

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/internal/kernels"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// Benchmarks report GFLOP/s (2·m·n·k per call). By default they use the
// best kernel set; GONOX_KERNELS=avx2 (or go) selects another, as for every
// kernel of package tensor.
//
//	go test -run '^$' -bench 'Sgemm' ./tensor/internal/gemm/

type benchShape struct {
	name    string
	ta, tb  bool
	m, n, k int
}

// benchShapes: the two large targets, then for each MLP layer X(m×k)·W(k×n)
// the three products of a training step: forward X·W (NN), input gradient
// dY·Wᵀ (NT: m×k from m×n and k×n) and weight gradient Xᵀ·dY (TN: k×n from
// m×k and m×n).
func benchShapes() []benchShape {
	s := []benchShape{
		{"1024x1024x1024", false, false, 1024, 1024, 1024},
		{"(1024x4096)@(4096x256)", false, false, 1024, 256, 4096},
	}
	type layer struct{ m, k, n int }
	var layers []layer
	for _, m := range []int{16, 1024} {
		for _, kn := range [][2]int{{32, 128}, {128, 256}, {256, 128}, {128, 4}} {
			layers = append(layers, layer{m, kn[0], kn[1]})
		}
	}
	for _, kn := range [][2]int{{784, 1024}, {1024, 1024}, {1024, 10}} {
		layers = append(layers, layer{256, kn[0], kn[1]})
	}
	// The MoE example's attention projections (2048 tokens of width 128:
	// the fused QKV and the output) and an expert's share of them (512
	// rows through its 128→256→128 MLP).
	layers = append(layers, layer{2048, 128, 128}, layer{2048, 128, 384},
		layer{512, 128, 256}, layer{512, 256, 128})
	// A data-parallel device's share of batch 256 on 8 and 2 devices.
	for _, m := range []int{32, 128} {
		layers = append(layers, layer{m, 1024, 1024})
	}
	for _, l := range layers {
		s = append(s,
			benchShape{fmt.Sprintf("mlp_m%d_k%d_n%d/fwd_NN", l.m, l.k, l.n), false, false, l.m, l.n, l.k},
			benchShape{fmt.Sprintf("mlp_m%d_k%d_n%d/dX_NT", l.m, l.k, l.n), false, true, l.m, l.k, l.n},
			benchShape{fmt.Sprintf("mlp_m%d_k%d_n%d/dW_TN", l.m, l.k, l.n), true, false, l.k, l.n, l.m},
		)
	}
	return s
}

func benchOperands(s benchShape) (a, b, c []float32, lda, ldb int) {
	return benchOperandsT[float32](s)
}

func benchOperandsT[T elem](s benchShape) (a, b, c []T, lda, ldb int) {
	rng := rand.New(rand.NewPCG(1, 1))
	fill := func(n int) []T {
		x := make([]T, n)
		for i := range x {
			x[i] = T(rng.Float64() - 0.5)
		}
		return x
	}
	lda, ldb = s.k, s.n
	if s.ta {
		lda = s.m
	}
	if s.tb {
		ldb = s.k
	}
	return fill(s.m * s.k), fill(s.k * s.n), fill(s.m * s.n), lda, ldb
}

// benchKernels fails the benchmark if GONOX_KERNELS names a set this
// machine cannot run (the set itself is chosen at start-up).
func benchKernels(b *testing.B) {
	if err := kernels.Err(); err != nil {
		b.Fatal(err)
	}
	// GONOX_GEMM_SMALLMNT=n sets smallMNT (0 turns the transposed small-m
	// A·Bᵀ path off).
	if v := os.Getenv("GONOX_GEMM_SMALLMNT"); v != "" {
		var n int
		if _, err := fmt.Sscanf(v, "%d", &n); err != nil || n < 0 {
			b.Fatalf("GONOX_GEMM_SMALLMNT=%q: want a count", v)
		}
		prev := smallMNT
		smallMNT = n
		b.Cleanup(func() { smallMNT = prev })
	}
	// GONOX_GEMM_STRIPAT=1 packs every strip of a transposed A (-1: none;
	// see stripsAT).
	if v := os.Getenv("GONOX_GEMM_STRIPAT"); v != "" {
		var n int
		if _, err := fmt.Sscanf(v, "%d", &n); err != nil {
			b.Fatalf("GONOX_GEMM_STRIPAT=%q: want -1, 0 or 1", v)
		}
		prev := stripATMode
		stripATMode = n
		b.Cleanup(func() { stripATMode = prev })
	}
	// GONOX_GEMM_TASKS=n sets the blocks per goroutine of parallel calls.
	if tp := os.Getenv("GONOX_GEMM_TASKS"); tp != "" {
		var n int
		if _, err := fmt.Sscanf(tp, "%d", &n); err != nil || n <= 0 {
			b.Fatalf("GONOX_GEMM_TASKS=%q: want a positive count", tp)
		}
		prev := tasksPerThread
		tasksPerThread = n
		b.Cleanup(func() { tasksPerThread = prev })
	}
	// GONOX_GEMM_BLOCKING=kc,nc overrides the blocking of the active set,
	// for measuring the choice of blocking parameters (GONOX_GEMM_BLOCKING64
	// that of the float64 set).
	override(b, &active, "GONOX_GEMM_BLOCKING", "GONOX_GEMM_PACKA", "GONOX_GEMM_DIRECT")
	override(b, &active64, "GONOX_GEMM_BLOCKING64", "GONOX_GEMM_PACKA64", "GONOX_GEMM_DIRECT64")
	b.Logf("kernel sets %s (float32), %s (float64)", active.name, active64.name)
}

// override replaces *set by a copy with the blocking the environment
// variable blocking names (kc,nc), packing of A on or off as packA says
// (0 or 1: kernelSet.packA), and directMaxM from direct, if set ("n": B
// in place up to n rows of C; "n,a": up to a rows when B's rows alias in
// L1, see readsBInPlace), until the end of the benchmark.
func override[T elem](b *testing.B, set **kernelSet[T], blocking, packA, direct string) {
	prev := *set
	s := *prev
	changed := false
	if bl := os.Getenv(blocking); bl != "" {
		var kc, nc int
		if _, err := fmt.Sscanf(bl, "%d,%d", &kc, &nc); err != nil || kc <= 0 || nc <= 0 {
			b.Fatalf("%s=%q: want kc,nc", blocking, bl)
		}
		s.kc, s.nc, changed = kc, nc/s.nr*s.nr, true
	}
	if v := os.Getenv(packA); v != "" {
		s.packA, changed = v == "1", true
	}
	if v := os.Getenv(direct); v != "" {
		s.directAliasMaxM = 0
		if n, _ := fmt.Sscanf(v, "%d,%d", &s.directMaxM, &s.directAliasMaxM); n == 0 {
			b.Fatalf("%s=%q: want a row count, or two (directMaxM,directAliasMaxM)", direct, v)
		}
		changed = true
	}
	if changed {
		*set = &s
		b.Cleanup(func() { *set = prev })
	}
}

func BenchmarkSgemm(b *testing.B) { benchGemm[float32](b) }

// BenchmarkDgemm is BenchmarkSgemm for float64 (Dgemm), on the same
// shapes:
//
//	go test -run '^$' -bench 'Dgemm/1024x1024x1024/threads=1' ./tensor/internal/gemm/
func BenchmarkDgemm(b *testing.B) { benchGemm[float64](b) }

func benchGemm[T elem](b *testing.B) {
	benchKernels(b)
	for _, s := range benchShapes() {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", s.name, threads), func(b *testing.B) {
				a, bb, c, lda, ldb := benchOperandsT[T](s)
				b.ReportAllocs()
				cpu0 := cputime.Used().Seconds()
				for b.Loop() {
					gemmT(s.ta, s.tb, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n, threads)
				}
				flops := 2 * float64(s.m) * float64(s.n) * float64(s.k) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				// Per second of CPU time: on a shared machine, time this
				// process was not running does not count (single-threaded
				// calls only: with threads > 1 it is the work per core).
				if cpu := cputime.Used().Seconds() - cpu0; cpu > 0 {
					b.ReportMetric(flops/cpu/1e9, "GFLOP/cpu-s")
				}
			})
		}
	}
}

// BenchmarkSgemmConcurrent runs one single-threaded product, or two at
// once on separate goroutines (as two devices of a data-parallel step
// multiply their half batches by the same replicated weight), and reports
// the total GFLOP/s: how well independent products share the cores.
func BenchmarkSgemmConcurrent(b *testing.B) {
	benchKernels(b)
	s := benchShape{"dp_half_batch", false, false, 128, 1024, 784}
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("%s/products=%d", s.name, n), func(b *testing.B) {
			a, bb, _, lda, ldb := benchOperands(s)
			cs := make([][]float32, n)
			for i := range cs {
				cs[i] = make([]float32, s.m*s.n)
			}
			for b.Loop() {
				var wg sync.WaitGroup
				for _, c := range cs {
					wg.Go(func() { Sgemm(s.ta, s.tb, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n, 1) })
				}
				wg.Wait()
			}
			b.ReportMetric(float64(n)*2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkGonum is the previous kernel (gonum blas32), for comparison.
func BenchmarkGonum(b *testing.B) {
	for _, s := range benchShapes()[:1] {
		b.Run(s.name, func(b *testing.B) {
			a, bb, c, lda, ldb := benchOperands(s)
			ta, tb := blas.NoTrans, blas.NoTrans
			for b.Loop() {
				blas32.Gemm(ta, tb, 1,
					blas32.General{Rows: s.m, Cols: s.k, Stride: lda, Data: a},
					blas32.General{Rows: s.k, Cols: s.n, Stride: ldb, Data: bb},
					0, blas32.General{Rows: s.m, Cols: s.n, Stride: s.n, Data: c})
			}
			b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkSgemmWeightGradient measures a weight gradient Xᵀ·dY of the
// batch-256 MLP 784-1024-1024-10 (X 256×m, dY 256×1024) three ways: with
// each strip of Xᵀ read in place ("in_place"), packed into an L1 panel
// just before its kernels ("panels", see stripsAT), and, as an upper
// bound, the same product from an A already stored as Xᵀ ("contiguous": A·B
// with A m×256, no packing of A at all):
//
//	go test -run '^$' -bench 'SgemmWeightGradient' -cpu 1 ./tensor/internal/gemm/
func BenchmarkSgemmWeightGradient(b *testing.B) {
	benchKernels(b)
	const n, k = 1024, 256
	for _, m := range []int{784, 1024} {
		for _, how := range []string{"in_place", "panels", "contiguous"} {
			b.Run(fmt.Sprintf("m=%d/%s", m, how), func(b *testing.B) {
				s := benchShape{"", how != "contiguous", false, m, n, k}
				prev := stripATMode
				defer func() { stripATMode = prev }()
				switch how {
				case "in_place":
					stripATMode = -1
				case "panels":
					stripATMode = 1
				}
				a, bb, c, lda, ldb := benchOperands(s)
				cpu0 := cputime.Used().Seconds()
				for b.Loop() {
					Sgemm(s.ta, false, m, n, k, 1, a, lda, bb, ldb, 0, c, n, 1)
				}
				flops := 2 * float64(m*n*k) * float64(b.N)
				if cpu := cputime.Used().Seconds() - cpu0; cpu > 0 {
					b.ReportMetric(flops/cpu/1e9, "GFLOP/cpu-s")
				}
			})
		}
	}
}
