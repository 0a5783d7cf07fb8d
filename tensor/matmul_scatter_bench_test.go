package tensor

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gonox/gonox/internal/cputime"
)

// BenchmarkFoldedAdam is one device's part of the DP step's folded weight
// gradient and its Adam update (the 784-1024-1024-10 MLP's 1024×1024
// weight on 2 devices: 2 terms of 128 rows, a part of 512 rows): "after"
// computes the part (SumProductsPart), then updates
// (AdamStepsIntoOverMoments); "blocks" updates each block of the part as
// it is computed (SumProductsPartThen, AdamStepIntoOverMomentsLater).
// The operands are marked as a device's blocks, so each problem runs on
// one goroutine, as inside shard.Map; devices=2 runs two at once (the
// 2-device DP step), where the update's memory traffic meets the other
// core's.
func BenchmarkFoldedAdam(b *testing.B) {
	for _, devices := range []int{1, 2} {
		var probs []*foldedAdam
		for i := range devices {
			probs = append(probs, newFoldedAdam(uint64(i)))
		}
		for _, br := range []int{0, 48, 96, 128} {
			name := "after"
			if br > 0 {
				name = fmt.Sprintf("blocks=%d", br)
			}
			b.Run(fmt.Sprintf("devices=%d/%s", devices, name), func(b *testing.B) {
				defer func(old int) { partBlockRows = old }(partBlockRows)
				partBlockRows = max(br, 1)
				var wg sync.WaitGroup
				cpu0 := cputime.Used()
				for b.Loop() {
					for _, f := range probs {
						wg.Go(func() { f.run(br == 0) })
					}
					wg.Wait()
				}
				b.ReportMetric(float64(devices)*2*float64(2*foldK*foldRows*foldN)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric((cputime.Used()-cpu0).Seconds()/float64(b.N)*1e3, "cpu-ms/op")
			})
		}
	}
}

const foldK, foldM, foldN, foldRows = 128, 1024, 1024, 512

// foldedAdam is one device's operands of BenchmarkFoldedAdam, marked as
// a device's blocks (computed on the calling goroutine).
type foldedAdam struct {
	ps, qs         []*Tensor
	p, mu, nu, dst *Tensor
	c              AdamCoeffs
}

func newFoldedAdam(seed uint64) *foldedAdam {
	r := rand.New(rand.NewPCG(seed, 2))
	loc := &Local{}
	rnd := func(shape ...int) *Tensor {
		x := normalTensor(r, shape...)
		x.setLocal(loc)
		return x
	}
	f := &foldedAdam{
		ps: []*Tensor{rnd(foldK, foldM), rnd(foldK, foldM)}, qs: []*Tensor{rnd(foldK, foldN), rnd(foldK, foldN)},
		p: rnd(foldRows, foldN), mu: rnd(foldRows, foldN), nu: Abs(rnd(foldRows, foldN)), dst: Zeros(Float32, foldRows, foldN),
		c: AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 1, C2: 1, Eps: 1e-8, Post: -1e-3},
	}
	f.nu.setLocal(loc)
	return f
}

// run computes the part and its Adam step: after the part if after,
// else block by block.
func (f *foldedAdam) run(after bool) {
	if after {
		g := SumProductsPart(f.ps, f.qs, 0, 0, foldRows)
		_, m2, v2 := AdamStepsIntoOverMoments([]*Tensor{f.dst}, []*Tensor{f.p}, []*Tensor{g}, []*Tensor{f.mu}, []*Tensor{f.nu}, []AdamCoeffs{f.c})
		Donate(g, m2[0], v2[0])
		return
	}
	_, m2, v2, step := AdamStepIntoOverMomentsLater(f.dst, f.p, f.mu, f.nu, f.c)
	SumProductsPartThen(f.ps, f.qs, 0, 0, foldRows, step)
	Donate(m2, v2)
}
