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
// simulated devices.
func BenchmarkDPStep(b *testing.B) {
	m, _, _ := guideModel([]int{784, 1024, 1024, 10}, 1, 4)
	_, x, y := guideModel([]int{784, 10}, 256, 5)
	for _, n := range []int{1, 2, 8} {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) {
			mesh := shard.NewMesh([]int{n}, []string{"dp"})
			tr := parallel.New(m, parallel.Config{Strategy: parallel.DP, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-3))})
			xs, ys := shard.Put(x, tr.BatchSharding()), shard.Put(y, tr.BatchSharding())
			tr.Step(xs, ys)
			for b.Loop() {
				tr.Step(xs, ys)
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/step")
		})
	}
}
