package parallel_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
)

// TestDPOverlapEqualsReduceAfterBackward: the DP step that starts each
// gradient's reduction during the backward pass trains to the same losses,
// parameters and optimizer state, bit for bit, as the step that reduces
// the gradients after it, with the same bytes sent; Stats reports the
// step's time and the part of it spent waiting for collectives.
func TestDPOverlapEqualsReduceAfterBackward(t *testing.T) {
	m, _ := guideModel(guideSizes, 16, 3)
	var batches []batch
	for i := range 3 {
		_, b := guideModel(guideSizes, 16, uint64(40+i))
		batches = append(batches, b)
	}
	for _, tc := range []struct {
		name  string
		opt   optim.Transform
		clip  float64
		micro int
	}{
		{"adam", optim.Adam(optim.Constant(1e-3)), 0, 1},
		{"adam clipped", optim.Adam(optim.Constant(1e-3)), 0.05, 1},
		{"adam micro-batches", optim.Adam(optim.Constant(1e-3)), 0, 2},
		{"adafactor (host update)", optim.Adafactor(optim.Constant(1e-2)), 0, 1},
	} {
		for _, mesh := range zeroMeshes() {
			t.Run(fmt.Sprintf("%s/%v", tc.name, mesh.Shape()), func(t *testing.T) {
				train := func(after bool) ([]float64, *parallel.Trainer[nn.MLP, batch], parallel.Stats) {
					tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: tc.opt,
						ClipGlobalNorm: tc.clip, MicroBatches: tc.micro, ReduceAfterBackward: after})
					require.NoError(t, err)
					var losses []float64
					for _, b := range batches {
						l, err := tr.Step(b)
						require.NoError(t, err)
						losses = append(losses, l)
					}
					st, err := tr.Stats(batches[0])
					require.NoError(t, err)
					return losses, tr, st
				}
				wantLoss, want, wantSt := train(true)
				gotLoss, got, gotSt := train(false)
				assert.Equal(t, wantLoss, gotLoss)
				assert.Zero(t, maxAbsDiff(t, want.Params(), got.Params()), "parameters bit for bit")
				assert.Zero(t, maxAbsDiff(t, pytree.Map(want.State(), shard.Gather), pytree.Map(got.State(), shard.Gather)), "optimizer state bit for bit")
				assert.Equal(t, wantSt.CommBytes, gotSt.CommBytes)
				for _, st := range []parallel.Stats{wantSt, gotSt} {
					assert.Positive(t, st.StepTime)
					assert.LessOrEqual(t, st.ExposedComm, st.StepTime)
					if mesh.Size() > 1 {
						assert.Positive(t, st.ExposedComm, "the step waits for its collectives")
					}
				}
			})
		}
	}
}
