package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkFoldedAdam is one device's part of the DP step's folded weight
// gradient and its Adam update (the 784-1024-1024-10 MLP's 1024×1024
// weight on 2 devices: 2 terms of 128 rows, a part of 512 rows): "after"
// computes the part (SumProductsPart), then updates
// (AdamStepsIntoOverMoments); "blocks" updates each block of the part as
// it is computed (SumProductsPartThen, AdamStepIntoOverMomentsLater).
// Run it with -test.cpu 1: the products and the update then run on one
// goroutine, as inside shard.Map.
func BenchmarkFoldedAdam(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const k, m, n, rows = 128, 1024, 1024, 512
	ps := []*Tensor{normalTensor(r, k, m), normalTensor(r, k, m)}
	qs := []*Tensor{normalTensor(r, k, n), normalTensor(r, k, n)}
	p, mu, nu := normalTensor(r, rows, n), normalTensor(r, rows, n), Abs(normalTensor(r, rows, n))
	dst := Zeros(Float32, rows, n)
	c := AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 1, C2: 1, Eps: 1e-8, Post: -1e-3}
	for _, br := range []int{0, 48, 64, 96, 128} {
		name := "after"
		if br > 0 {
			name = fmt.Sprintf("blocks=%d", br)
		}
		b.Run(name, func(b *testing.B) {
			defer func(old int) { partBlockRows = old }(partBlockRows)
			partBlockRows = max(br, 1)
			for b.Loop() {
				if br == 0 {
					g := SumProductsPart(ps, qs, 0, 0, rows)
					_, m2, v2 := AdamStepsIntoOverMoments([]*Tensor{dst}, []*Tensor{p}, []*Tensor{g}, []*Tensor{mu}, []*Tensor{nu}, []AdamCoeffs{c})
					Donate(g, m2[0], v2[0])
					continue
				}
				_, m2, v2, step := AdamStepIntoOverMomentsLater(dst, p, mu, nu, c)
				SumProductsPartThen(ps, qs, 0, 0, rows, step)
				Donate(m2, v2)
			}
			b.ReportMetric(2*float64(2*k*rows*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
