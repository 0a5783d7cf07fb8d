package tensor_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gonox/gonox/tensor"
	"github.com/gonox/gonox/tensor/internal/gemm"
	"github.com/gonox/gonox/tensor/internal/vec"
)

var logCPU sync.Once

// logKernels prints, once per run, the CPU's model, its vector flags and
// the kernels the bf16 benchmarks use, so that figures can be quoted with
// them.
func logKernels(b *testing.B) {
	logCPU.Do(func() {
		model, flags := "unknown", ""
		if info, err := os.ReadFile("/proc/cpuinfo"); err == nil {
			for _, l := range strings.Split(string(info), "\n") {
				k, v, _ := strings.Cut(l, ":")
				switch strings.TrimSpace(k) {
				case "model name":
					model = strings.TrimSpace(v)
				case "flags":
					var keep []string
					for _, f := range strings.Fields(v) {
						if strings.HasPrefix(f, "avx") || strings.HasPrefix(f, "amx") || f == "f16c" || f == "fma" {
							keep = append(keep, f)
						}
					}
					flags = strings.Join(keep, " ")
				}
				if flags != "" && model != "unknown" {
					break
				}
			}
		}
		fmt.Printf("cpu: %s\nflags: %s\nkernels: bgemm=%s %s\n", model, flags, gemm.BF16Kernel(), vec.ConversionKernels())
	})
}

// BenchmarkMatMulHalf compares matrix products of bfloat16 operands (the
// result rounded to bf16, and the float32 accumulator of MatMulTo) with
// float32 in the same run; GFLOP/s counts 2·m·n·k.
func BenchmarkMatMulHalf(b *testing.B) {
	logKernels(b)
	for _, sz := range [][3]int{{1024, 1024, 1024}, {256, 784, 1024}} {
		m, k, n := sz[0], sz[1], sz[2]
		k1, k2 := tensor.NewKey(1).Split2()
		a32, b32 := tensor.Normal(k1, m, k), tensor.Normal(k2, k, n)
		abf, bbf := tensor.Convert(a32, tensor.BFloat16), tensor.Convert(b32, tensor.BFloat16)
		ahf, bhf := tensor.Convert(a32, tensor.Float16), tensor.Convert(b32, tensor.Float16)
		flops := 2 * float64(m*n*k)
		for _, c := range []struct {
			name string
			f    func()
		}{
			{"f32", func() { tensor.MatMul(a32, b32) }},
			{"bf16", func() { tensor.MatMul(abf, bbf) }},
			{"bf16-to-f32", func() { tensor.MatMulTo(abf, bbf, false, false, tensor.Float32) }},
			{"f16", func() { tensor.MatMul(ahf, bhf) }},
		} {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", m, k, n, c.name), func(b *testing.B) {
				for b.Loop() {
					c.f()
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkHalfElementwise measures the generic half path (widen, float32
// kernel, round) against the float32 op on f32[1024,1024].
func BenchmarkHalfElementwise(b *testing.B) {
	logKernels(b)
	k1, k2 := tensor.NewKey(2).Split2()
	x32, y32 := tensor.Normal(k1, 1024, 1024), tensor.Normal(k2, 1024, 1024)
	for _, dt := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
		x, y := tensor.Convert(x32, dt), tensor.Convert(y32, dt)
		for _, c := range []struct {
			name string
			f    func()
		}{
			{"add", func() { tensor.Add(x, y) }},
			{"gelu", func() { tensor.Gelu(x) }},
			{"sum", func() { tensor.Sum(x, 1) }},
			{"softmax", func() { tensor.Softmax(x, -1) }},
		} {
			b.Run(c.name+"/"+dt.Abbrev(), func(b *testing.B) {
				for b.Loop() {
					c.f()
				}
				b.ReportMetric(float64(b.N)*float64(x.Size())/b.Elapsed().Seconds()/1e9, "Gelem/s")
			})
		}
	}
}

// BenchmarkMatMulHalfRatio multiplies 1024×1024 matrices in float32 and
// in bfloat16 alternately, so that both see the same machine load, and
// reports the median time of each and the speed-up (float32 median /
// bf16 median) with the GFLOP/s of each.
func BenchmarkMatMulHalfRatio(b *testing.B) {
	logKernels(b)
	const n = 1024
	k1, k2 := tensor.NewKey(1).Split2()
	a32, b32 := tensor.Normal(k1, n, n), tensor.Normal(k2, n, n)
	abf, bbf := tensor.Convert(a32, tensor.BFloat16), tensor.Convert(b32, tensor.BFloat16)
	var t32, tbf []float64
	timeIt := func(dst *[]float64, f func()) {
		t0 := time.Now()
		f()
		*dst = append(*dst, time.Since(t0).Seconds())
	}
	for b.Loop() {
		timeIt(&t32, func() { tensor.MatMul(a32, b32) })
		timeIt(&tbf, func() { tensor.MatMul(abf, bbf) })
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	m32, mbf := median(t32), median(tbf)
	flops := 2.0 * n * n * n
	b.ReportMetric(flops/m32/1e9, "f32-GFLOP/s")
	b.ReportMetric(flops/mbf/1e9, "bf16-GFLOP/s")
	b.ReportMetric(m32/mbf, "speedup")
}
