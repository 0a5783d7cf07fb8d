package f64

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// BenchmarkKernels reports ns per element of the float64 kernels on a
// slice that stays in L1 (4096 elements) and one that does not (1M):
//
//	go test -run '^$' -bench Kernels ./tensor/internal/vec/f64/
func BenchmarkKernels(b *testing.B) {
	unary := []struct {
		name string
		f    func(dst, src []float64)
	}{
		{"Exp", Exp}, {"Log", Log}, {"Tanh", Tanh}, {"Sigmoid", Sigmoid}, {"Gelu", Gelu},
		{"GeluExact", GeluExact}, {"Silu", Silu}, {"Softplus", Softplus}, {"Relu", Relu},
		{"math.Exp", func(dst, src []float64) {
			for i, v := range src {
				dst[i] = math.Exp(v)
			}
		}},
		{"AddVV", func(dst, src []float64) { AddVV(dst, src, src) }},
		{"MulVS", func(dst, src []float64) { MulVS(dst, src, 1.5) }},
		{"Sum", func(dst, src []float64) { dst[0] = Sum(src) }},
		{"Max", func(dst, src []float64) { dst[0] = Max(src) }},
	}
	for _, n := range []int{4096, 1 << 20} {
		rng := rand.New(rand.NewPCG(1, 1))
		src := make([]float64, n)
		for i := range src {
			src[i] = rng.Float64()*20 - 10
		}
		dst := make([]float64, n)
		for _, u := range unary {
			b.Run(fmt.Sprintf("%s/n=%d", u.name, n), func(b *testing.B) {
				for b.Loop() {
					u.f(dst, src)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
			})
		}
	}
}
