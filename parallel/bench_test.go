package parallel_test

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
)

// BenchmarkDPStep times a DP training step (forward, backward, Adam) of
// the MLP 784-1024-1024-10 on batches of 256 on meshes of 1, 2 and 8
// simulated devices, and its gradient phase alone.
func BenchmarkDPStep(b *testing.B) {
	m, _ := guideModel([]int{784, 1024, 1024, 10}, 1, 4)
	_, bt := guideModel([]int{784, 10}, 256, 5)
	for _, n := range []int{1, 2, 8} {
		mesh := shard.NewMesh([]int{n}, []string{"dp"})
		tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Strategy: parallel.DP, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-3))})
		if err != nil {
			b.Fatal(err)
		}
		placed := batch{shard.Put(bt.X, tr.BatchSharding()), shard.Put(bt.Y, tr.BatchSharding())}
		// step: the whole training step; grad: its loss and gradient alone
		// (forward, backward and the all-reduce, without the Adam update).
		for _, phase := range []struct {
			name string
			run  func() error
		}{
			{"step", func() error { _, err := tr.Step(placed); return err }},
			{"grad", func() error { _, _, err := tr.LossAndGrad(placed); return err }},
		} {
			b.Run(fmt.Sprintf("devices=%d/%s", n, phase.name), func(b *testing.B) {
				if err := phase.run(); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					_ = phase.run()
				}
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/step")
			})
		}
	}
}
