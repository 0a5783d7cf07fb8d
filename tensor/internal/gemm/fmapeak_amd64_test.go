//go:build amd64 && !noasm

package gemm

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/internal/kernels"
)

// mlp256StepFLOP is the floating-point work of the products of one
// training step of the MLP 784-1024-1024-10 on 256 rows (nn's
// BenchmarkMLPStep, issue 31): per layer the forward product and the
// weight gradient, and the input gradient of the second and third layers.
const mlp256StepFLOP = 2 * 256 * (2*784*1024 + 3*1024*1024 + 3*1024*10)

// reportRate reports GFLOP/s, GFLOP per CPU-second and
// mlp256-floor-cpu-ms, the CPU time the products of one batch-256 MLP
// step (2 448 MFLOP) would take at that rate, for flop operations done
// since the CPU time was cpu0 (cputime.Used, in seconds).
func reportRate(b *testing.B, flop, cpu0 float64) {
	b.ReportMetric(flop/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu := cputime.Used().Seconds() - cpu0; cpu > 0 {
		b.ReportMetric(flop/cpu/1e9, "GFLOP/cpu-s")
		b.ReportMetric(mlp256StepFLOP*cpu/flop*1e3, "mlp256-floor-cpu-ms")
	}
}

// BenchmarkFMAPeak measures this core's float32 FMA peak: a loop of
// independent FMAs on registers only (no loads, no stores, enough
// accumulators to cover the FMA latency on every port), AVX-512 (16 lanes)
// and AVX2 (8 lanes). No kernel can run faster. Its mlp256-floor-cpu-ms is
// the floor of nn's BenchmarkMLPStep/sizes=[784_1024_1024_10]/batch=256
// on one core: its products at that rate and nothing else. Run it on one
// core, alternated with the step (the VM's clock moves between runs):
//
//	go test -c -o /tmp/gemm.test ./tensor/internal/gemm
//	/tmp/gemm.test -test.run '^$' -test.bench 'FMAPeak|KernelInCache' -test.benchtime 2000x -test.cpu 1
func BenchmarkFMAPeak(b *testing.B) {
	const iters = 1 << 16 // iterations of the loop per call
	for _, c := range []struct {
		name string
		set  kernels.Set
		loop func(int)
		flop int // per iteration
	}{
		{"avx512", kernels.AVX512, fmaLoop512, 24 * 16 * 2},
		{"avx2", kernels.AVX2, fmaLoop256, 12 * 8 * 2},
	} {
		b.Run(c.name, func(b *testing.B) {
			if !kernels.Has(c.set) {
				b.Skipf("kernel set %v not available (GONOX_KERNELS, or the CPU)", c.set)
			}
			c.loop(iters) // warm up
			b.ResetTimer()
			cpu0 := cputime.Used().Seconds()
			for b.Loop() {
				c.loop(iters)
			}
			reportRate(b, float64(c.flop)*iters*float64(b.N), cpu0)
		})
	}
}

// BenchmarkKernelInCache measures the AVX-512 float32 12×32 kernel (the
// column flavour, reading a packed A panel, as for a weight gradient) on
// operands in cache, k = 256, between BenchmarkFMAPeak and
// BenchmarkSgemm: "L1" calls it again and again on one 12×256 panel of A
// and one 256×32 strip of B (48 KiB L1d: both stay there), its own rate;
// "L2" walks one packed 256×1024 block of B (1 MiB, in L2) strip by
// strip under the same panel, as run's innermost loop does, so B streams
// from L2 into L1. The gap from L2 to BenchmarkSgemm is packing, A and C
// traffic; the gap from the peak to L1 is the kernel's loads and
// bookkeeping.
func BenchmarkKernelInCache(b *testing.B) {
	if !kernels.Has(kernels.AVX512) {
		b.Skip("no AVX-512 (GONOX_KERNELS, or the CPU)")
	}
	const k, n = 256, 1024
	kern := avx512Kernels[flavC][1][12]
	a := alignedFloats[float32](12 * k)
	bb := alignedFloats[float32](k * n)
	c := alignedFloats[float32](12 * n)
	for i := range a {
		a[i] = 1.0 / 1024
	}
	for i := range bb {
		bb[i] = 1.0 / 2048
	}
	for _, strips := range []int{1, n / 32} {
		name := "L1"
		if strips > 1 {
			name = "L2"
		}
		b.Run(name, func(b *testing.B) {
			const reps = 32 // kernel calls per op
			cpu0 := cputime.Used().Seconds()
			for b.Loop() {
				for r := range reps {
					jr := r % strips * 32
					kern(k, &a[0], 12, &bb[jr*k], 32, &c[jr], n, 1, 1, 32)
				}
			}
			reportRate(b, float64(2*12*32*k*reps)*float64(b.N), cpu0)
		})
	}
}

// BenchmarkKernelDepth calls the AVX-512 float32 12×32 kernels, both
// flavours (fl=0: A a packed panel, as for a weight gradient; fl=1: A's
// rows in place, 272 floats apart), again and again on one A and one B
// strip in L1 with k = 32 ... 256 (beta = 1, as for every k block after the
// first), the same FLOP per op. Its rates fit time(k) = a per-call cost + k
// times the cost of one k step, separating the call, C's load and store
// and the pipeline's fill and drain from the rate of the k loop itself.
func BenchmarkKernelDepth(b *testing.B) {
	if !kernels.Has(kernels.AVX512) {
		b.Skip("no AVX-512 (GONOX_KERNELS, or the CPU)")
	}
	const kmax, n = 256, 1024
	for _, fl := range []int{flavC, flavR} {
		as := 12
		if fl == flavR {
			as = kmax + 16
		}
		a := alignedFloats[float32](12 * (kmax + 16))
		bb := alignedFloats[float32](kmax * 32)
		c := alignedFloats[float32](12 * n)
		for i := range a {
			a[i] = 1.0 / 1024
		}
		for i := range bb {
			bb[i] = 1.0 / 2048
		}
		kern := avx512Kernels[fl][1][12]
		for _, k := range []int{32, 64, 128, 256} {
			b.Run(fmt.Sprintf("fl=%d/k=%d", fl, k), func(b *testing.B) {
				reps := 32 * kmax / k // kernel calls per op
				cpu0 := cputime.Used().Seconds()
				for b.Loop() {
					for range reps {
						kern(k, &a[0], as, &bb[0], 32, &c[0], n, 1, 1, 32)
					}
				}
				reportRate(b, float64(2*12*32*k*reps)*float64(b.N), cpu0)
			})
		}
	}
}
