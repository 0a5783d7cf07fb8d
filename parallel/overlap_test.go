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
	"github.com/gonox/gonox/tensor"
)

// TestDPOverlapEqualsReduceAfterBackward: the DP step that starts each
// gradient's reduction during the backward pass trains to the same losses,
// parameters and optimizer state, bit for bit, as the step that reduces
// the gradients after it, with the same bytes sent (both unfolded: see
// TestFoldedGradients for the fold); Stats reports the
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
						ClipGlobalNorm: tc.clip, MicroBatches: tc.micro, ReduceAfterBackward: after, UnfoldedGradients: true})
					require.NoError(t, err)
					losses := stepAll(t, tr, batches)
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

// TestReduceDType: with Config.ReduceDType bfloat16 or float16 the DP
// step reduce-scatters its gradients in that dtype: half the bytes of the
// float32 step's reduce-scatters (the parameters' all-gather stays
// float32), and it trains to nearly the same losses and parameters, not
// the same bits. Other strategies and dtypes are refused.
func TestReduceDType(t *testing.T) {
	m, _ := guideModel(guideSizes, 16, 3)
	var batches []batch
	for i := range 3 {
		_, b := guideModel(guideSizes, 16, uint64(40+i))
		batches = append(batches, b)
	}
	mesh := shard.NewMesh([]int{4}, []string{"dp"})
	train := func(dt tensor.DType) ([]float64, nn.MLP, parallel.Stats) {
		tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh,
			Optimizer: optim.Adam(optim.Constant(1e-3)), ReduceDType: dt})
		require.NoError(t, err)
		losses := stepAll(t, tr, batches)
		st, err := tr.Stats(batches[0])
		require.NoError(t, err)
		return losses, tr.Params(), st
	}
	wantLoss, want, wantSt := train(0)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		gotLoss, got, gotSt := train(dt)
		assert.InDeltaSlice(t, wantLoss, gotLoss, 1e-3*wantLoss[0], "%v losses", dt)
		diff := maxAbsDiff(t, want, got)
		assert.Positive(t, diff, "%v: the gradients were rounded", dt)
		// Adam's steps are about 1e-3 each whatever the gradient's size:
		// a gradient near zero rounded to the other sign moves a
		// parameter 2e-3 the other way a step, at most.
		assert.LessOrEqual(t, diff, 2e-3*float64(len(batches)), "%v", dt)
		assert.Equal(t, wantSt.CommBytes["psum_scatter"], 2*gotSt.CommBytes["psum_scatter"], "%v: the reduce-scatters move half the bytes", dt)
		assert.Equal(t, wantSt.CommBytes["all_gather"], gotSt.CommBytes["all_gather"], "%v: the parameters' all-gather stays float32", dt)
	}
	for _, cfg := range []parallel.Config[nn.MLP, batch]{
		{Loss: mlpLoss, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-3)), ReduceDType: tensor.Float64},
		{Loss: mlpLoss, Mesh: mesh, Optimizer: optim.Adafactor(optim.Constant(1e-2)), ReduceDType: tensor.BFloat16},
		{Loss: mlpLoss, Mesh: mesh, Strategy: parallel.FSDP, Optimizer: optim.Adam(optim.Constant(1e-3)), ReduceDType: tensor.BFloat16},
	} {
		_, err := parallel.New(m, cfg)
		assert.ErrorContains(t, err, "Config.ReduceDType")
	}
}
