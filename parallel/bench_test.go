package parallel_test

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
)

// BenchmarkDPStep times a DP training step (forward, backward, Adam) of
// the MLP 784-1024-1024-10 on batches of 256 on meshes of 1, 2 and 8
// simulated devices, and its gradient phase alone.
func BenchmarkDPStep(b *testing.B) {
	m, _, _ := guideModel([]int{784, 1024, 1024, 10}, 1, 4)
	_, x, y := guideModel([]int{784, 10}, 256, 5)
	for _, n := range []int{1, 2, 8} {
		mesh := shard.NewMesh([]int{n}, []string{"dp"})
		tr := parallel.New(m, parallel.Config{Strategy: parallel.DP, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-3))})
		xs, ys := shard.Put(x, tr.BatchSharding()), shard.Put(y, tr.BatchSharding())
		// step: the whole training step; grad: its loss and gradient alone
		// (forward, backward and the all-reduce, without the Adam update).
		for _, phase := range []struct {
			name string
			run  func()
		}{
			{"step", func() { tr.Step(xs, ys) }},
			{"grad", func() { tr.LossAndGrad(xs, ys) }},
		} {
			b.Run(fmt.Sprintf("devices=%d/%s", n, phase.name), func(b *testing.B) {
				phase.run()
				for b.Loop() {
					phase.run()
				}
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/step")
			})
		}
	}
}
