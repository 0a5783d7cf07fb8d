package vec

import (
	"fmt"
	"testing"
)

// BenchmarkAdamStep is one AdamStep over a model's parameters (the MLP
// 64-128-10's 9 610) and over an ensemble's 8 stacked models (76 880), in
// place (p2, m2, v2 are p, m, v) and into three other slices, as an
// optimizer whose old values are still live writes it: ns/elem shows what
// the step costs beyond the kernel's arithmetic when its streams leave L2.
func BenchmarkAdamStep(b *testing.B) {
	c := &AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 1.1, C2: 1.001, Eps: 1e-8, Post: -1e-3}
	for _, n := range []int{9610, 8 * 9610} {
		for _, inPlace := range []bool{true, false} {
			b.Run(fmt.Sprintf("n=%d/in_place=%v", n, inPlace), func(b *testing.B) {
				mk := func() []float32 {
					s := make([]float32, n)
					for i := range s {
						s[i] = float32(i%7-3) * 0.01
					}
					return s
				}
				p, g, m, v := mk(), mk(), mk(), mk()
				p2, m2, v2 := p, m, v
				if !inPlace {
					p2, m2, v2 = mk(), mk(), mk()
				}
				for b.Loop() {
					AdamStep(p2, m2, v2, p, g, m, v, c)
					// The next step reads this one's results and writes
					// over the slices this one read, as a training loop
					// that recycles the old values' storage does.
					p, p2, m, m2, v, v2 = p2, p, m2, m, v2, v
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
			})
		}
	}
}
