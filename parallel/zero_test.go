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

// zeroMeshes are the meshes DP's sharded update is checked on: every mesh
// axis is a data axis under DP.
func zeroMeshes() []*shard.Mesh {
	out := []*shard.Mesh{}
	for _, n := range []int{1, 2, 4, 8} {
		out = append(out, shard.NewMesh([]int{n}, []string{"dp"}))
	}
	return append(out, shard.NewMesh([]int{2, 4}, []string{"dp", "tp"}), shard.NewMesh([]int{4, 2}, []string{"dp", "tp"}))
}

// shardedStateBytes is what device 0 holds of Adam's state (two moments
// and a count) when every float leaf with a first dimension of at least n
// that n divides is split along it, as DP's sharded update splits them
// (the guide's model has no leaf that would be split along another
// dimension).
func shardedStateBytes(m nn.MLP, n int) int64 {
	var b int64
	for _, x := range pytree.Leaves(m) {
		if x.Rank() > 1 && x.Dim(0) >= n && x.Dim(0)%n == 0 { // vectors are updated whole
			b += int64(x.Bytes() / n)
		} else {
			b += int64(x.Bytes())
		}
	}
	return 2*b + 4
}

// DP's Map step with the update sharded over the data axes (ZeRO-1/2)
// trains as one device does, for elementwise optimizers (sharded) and the
// others (updated on the host), with clipping and micro-batches; the
// state is split and counted so by Stats.
func TestDPShardedUpdateEqualsSingleDevice(t *testing.T) {
	m, _ := guideModel(guideSizes, 16, 1)
	m.Activation, m.FinalActivation = nn.Gelu, nil
	var batches []batch
	for i := range 3 {
		_, b := guideModel(guideSizes, 16, uint64(20+i))
		batches = append(batches, b)
	}
	noBias := pytree.Predicate(func(_ pytree.Path, x *tensor.Tensor) bool { return x.Rank() > 1 })
	for _, tc := range []struct {
		name    string
		opt     optim.Transform
		clip    float64
		micro   int
		sharded bool // the update runs on the devices' blocks
	}{
		{"adam", optim.Adam(optim.Constant(1e-3)), 0, 1, true},
		{"adamw", optim.AdamW(optim.Constant(1e-3), optim.AdamWOptions{WeightDecay: 0.1}), 0, 1, true},
		{"sgd momentum", optim.SGD(optim.Constant(1e-3), optim.SGDOptions{Momentum: 0.9}), 0, 1, true},
		{"lion", optim.Lion(optim.Constant(1e-4)), 0, 1, true},
		{"adagrad", optim.Adagrad(optim.Constant(1e-2)), 0, 1, true},
		{"amsgrad", optim.AMSGrad(optim.Constant(1e-3)), 0, 1, true},
		{"nadam", optim.NAdam(optim.Constant(1e-3)), 0, 1, true},
		{"adadelta", optim.Adadelta(optim.Constant(1)), 0, 1, true},
		{"adam clipped", optim.Adam(optim.Constant(1e-3)), 0.05, 1, true},
		{"adam micro-batches", optim.Adam(optim.Constant(1e-3)), 0, 2, true},
		{"adamw masked", optim.AdamW(optim.Constant(1e-3), optim.AdamWOptions{WeightDecay: 0.1, Mask: noBias}), 0, 1, false},
		{"adafactor", optim.Adafactor(optim.Constant(1e-2)), 0, 1, false},
		{"chain", optim.Chain(optim.ClipByGlobalNorm(0.05), optim.Adam(optim.Constant(1e-3))), 0, 1, false},
	} {
		train := func(t *testing.T, mesh *shard.Mesh) ([]float64, nn.MLP, parallel.Stats, *parallel.Trainer[nn.MLP, batch]) {
			s := parallel.Single
			if mesh != nil {
				s = parallel.DP
			}
			tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Strategy: s, Mesh: mesh,
				Optimizer: tc.opt, ClipGlobalNorm: tc.clip, MicroBatches: tc.micro})
			require.NoError(t, err)
			losses := stepAll(t, tr, batches)
			st, err := tr.Stats(batches[0])
			require.NoError(t, err)
			return losses, tr.Params(), st, tr
		}
		wantLoss, want, _, host := train(t, nil)
		for _, mesh := range zeroMeshes() {
			t.Run(fmt.Sprintf("%s/%v", tc.name, mesh.Shape()), func(t *testing.T) {
				losses, got, st, tr := train(t, mesh)
				require.Len(t, losses, len(wantLoss))
				for i := range losses {
					assert.InDelta(t, wantLoss[i], losses[i], 1e-5, "step %d", i)
				}
				assert.Less(t, maxAbsDiff(t, want, got), 1e-5)
				assert.NotEqual(t, m.Layers[0].W.Float32s(), got.Layers[0].W.Float32s(), "the parameters moved")

				// The state has the host's tree and values; only its
				// placement differs.
				gathered := pytree.Map(tr.State(), shard.Gather)
				assert.Less(t, maxRelDiff(t, host.State(), gathered), 1e-5)

				n := mesh.Size()
				full, _ := leafBytes(m)
				_, bias := leafBytes(m)
				if tc.sharded && tc.name == "adam" {
					assert.Equal(t, shardedStateBytes(m, n), st.StateBytes, "Adam's moments split over the %d data devices", n)
					if n > 1 {
						assert.Less(t, st.StateBytes, 2*(full+bias))
						assert.NotZero(t, st.CommBytes["psum_scatter"])
						assert.NotZero(t, st.CommBytes["all_gather"])
					}
				}
				if !tc.sharded && n > 1 {
					// Updated on the host: one all-reduce, no sharding.
					assert.Zero(t, st.CommBytes["psum_scatter"])
					assert.NotZero(t, st.CommBytes["psum"])
				}
				assert.Equal(t, full+bias, st.ParamBytes, "DP holds a full replica of the parameters")
			})
		}
	}
}

// A checkpoint of a DP trainer with a sharded update (its parameters and
// gathered state) restores into a fresh trainer on another mesh, which then
// takes the step the first one takes.
func TestDPShardedUpdateSetState(t *testing.T) {
	m, _ := guideModel(guideSizes, 16, 2)
	var batches []batch
	for i := range 3 {
		_, b := guideModel(guideSizes, 16, uint64(30+i))
		batches = append(batches, b)
	}
	cfg := func(mesh *shard.Mesh) parallel.Config[nn.MLP, batch] {
		return parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-3))}
	}
	a, err := parallel.New(m, cfg(shard.NewMesh([]int{8}, []string{"dp"})))
	require.NoError(t, err)
	for _, b := range batches[:2] {
		_, err := a.Step(b)
		require.NoError(t, err)
	}
	params, state := a.Params(), pytree.Map(a.State(), shard.Gather)

	b, err := parallel.New(m, cfg(shard.NewMesh([]int{2, 2}, []string{"dp", "tp"})))
	require.NoError(t, err)
	require.NoError(t, b.SetState(params, state))
	la, err := a.Step(batches[2])
	require.NoError(t, err)
	lb, err := b.Step(batches[2])
	require.NoError(t, err)
	assert.InDelta(t, la, lb, 1e-6)
	assert.Less(t, maxAbsDiff(t, a.Params(), b.Params()), 1e-6)
	assert.Less(t, maxAbsDiff(t, pytree.Map(a.State(), shard.Gather), pytree.Map(b.State(), shard.Gather)), 1e-6)

	// Bad input: no state, a state of another optimizer, a batch that
	// does not split over the devices.
	require.ErrorContains(t, b.SetState(params, nil), "nil optimizer state")
	require.Error(t, b.SetState(params, optim.Adafactor(optim.Constant(1e-2)).Init(params)))
	_, bad := guideModel(guideSizes, 6, 1)
	_, err = a.Step(bad)
	require.ErrorContains(t, err, "6 rows do not split evenly over the 8 devices")
}

// optim.Elementwise names the transforms DP's update may split.
func TestElementwiseTransforms(t *testing.T) {
	mask := pytree.Predicate(func(_ pytree.Path, x *tensor.Tensor) bool { return x.Rank() > 1 })
	for _, tc := range []struct {
		name string
		tx   optim.Transform
		want bool
	}{
		{"sgd", optim.SGD(optim.Constant(0.1)), true},
		{"adam", optim.Adam(optim.Constant(0.1)), true},
		{"adamw", optim.AdamW(optim.Constant(0.1)), true},
		{"lion", optim.Lion(optim.Constant(0.1)), true},
		{"adamw masked", optim.AdamW(optim.Constant(0.1), optim.AdamWOptions{Mask: mask}), false},
		{"adafactor", optim.Adafactor(optim.Constant(0.1)), false},
		{"chain", optim.Chain(optim.ClipByGlobalNorm(1), optim.SGD(optim.Constant(0.1))), false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, optim.Elementwise(tc.tx)) })
	}
}
