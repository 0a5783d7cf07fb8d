package shard_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestOptimizerStepsShards: Adam (and AdamW, SGD with momentum) on
// FSDP-placed parameters keeps every moment sharded like its parameter,
// updates shard-wise with no communication, and three steps give the
// parameters of three host steps.
func TestOptimizerStepsShards(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	r := rand.New(rand.NewPCG(1, 1))
	model := annotateMLP(nn.NewMLP(tensor.NewKey(4), []int{16, 32, 32, 8}, nn.MLPOptions{}))
	x := randT(r, 16, 16)
	y := randT(r, 16, 8)
	loss := func(p nn.MLP, xy [2]*tensor.Tensor) *tensor.Tensor {
		return tensor.Mean(mse(p.Forward(xy[0]), xy[1]))
	}
	for _, tc := range []struct {
		name string
		tx   optim.Transform
	}{
		{"adam", optim.Adam(optim.Constant(1e-2))},
		{"adamw", optim.AdamW(optim.Constant(1e-2))},
		{"sgd momentum", optim.SGD(optim.Constant(1e-2), optim.SGDOptions{Momentum: 0.9})},
		{"clip then adam", optim.Chain(optim.ClipByGlobalNorm(0.05), optim.Adam(optim.Constant(1e-2)))},
		{"adafactor", optim.Adafactor(optim.Constant(1e-2))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hp, hs := model, tc.tx.Init(model)
			rules := stFSDPTP.rules(m)
			pp := shard.FilterShard(model, m, rules)
			ps := tc.tx.Init(pp)
			xy := [2]*tensor.Tensor{shard.Put(x, shard.NewSharding(m, shard.P("dp", nil))), shard.Put(y, shard.NewSharding(m, shard.P("dp", nil)))}
			for step := range 3 {
				_, hg := autodiff.ValueAndGradWith(loss)(hp, [2]*tensor.Tensor{x, y})
				hp, hs = optim.Step(tc.tx, hp, hg, hs)
				_, pg := autodiff.ValueAndGradWith(loss)(pp, xy)
				var comm shard.Comm
				stop := shard.Record(m, &comm)
				pp, ps = optim.Step(tc.tx, pp, pg, ps)
				stop()
				if tc.name == "adam" || tc.name == "adamw" || tc.name == "sgd momentum" {
					require.Zero(t, comm.Bytes(m.Devices()[0], ""), "step %d: the update moved data\n%s", step, comm.String())
				} else {
					// the global norm and Adafactor's row and column statistics sum over
					// sharded dimensions: scalars and vectors, never a parameter
					require.Less(t, comm.Bytes(m.Devices()[0], ""), int64(4*32*32), "step %d\n%s", step, comm.String())
					require.Zero(t, comm.Bytes(m.Devices()[0], "all_gather"), "step %d\n%s", step, comm.String())
				}
			}
			want, _ := pytree.Flatten(hp)
			got, _ := pytree.Flatten(pp)
			orig, _ := pytree.Flatten(shard.FilterShard(model, m, rules))
			for i := range want {
				requireClose(t, want[i], got[i], 1e-5, fmt.Sprintf("param %d", i))
				s0, _ := shard.ShardingOf(orig[i])
				s1, ok := shard.ShardingOf(got[i])
				require.True(t, ok && s0.Equal(s1), "param %d moved to %v", i, s1)
			}
			// the state's tensors are placed like the params they mirror
			for _, leaf := range pytree.Leaves(ps) {
				if leaf.Rank() == 2 {
					s, ok := shard.ShardingOf(leaf)
					require.True(t, ok, "state leaf %v is not placed", leaf)
					require.NotEmpty(t, s.Spec().Axes(), "state leaf %v is replicated", leaf)
				}
			}
		})
	}
}

// TestCheckpointOnPlacedModel: autodiff.Checkpoint (remat) of a placed MLP
// gives the gradients of the plain function, laid out like the params.
func TestCheckpointOnPlacedModel(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	r := rand.New(rand.NewPCG(2, 2))
	model := annotateMLP(nn.NewMLP(tensor.NewKey(4), []int{16, 32, 32, 8}, nn.MLPOptions{}))
	x, y := randT(r, 16, 16), randT(r, 16, 8)
	xs := shard.Put(x, shard.NewSharding(m, shard.P("dp", nil)))
	ys := shard.Put(y, shard.NewSharding(m, shard.P("dp", nil)))
	f := func(p nn.MLP) *tensor.Tensor { return tensor.Mean(mse(p.Forward(xs), ys)) }
	pp := shard.FilterShard(model, m, stFSDPTP.rules(m))
	want, wantG := autodiff.ValueAndGrad(f)(pp)
	defer shard.Strict(m)()
	for _, policy := range []autodiff.Policy{autodiff.NothingSaveable, autodiff.DotsSaveable} {
		got, gotG := autodiff.ValueAndGrad(autodiff.Checkpoint(f, policy))(pp)
		require.InDelta(t, want.Item(), got.Item(), 1e-6)
		requireGradsLike(t, wantG, gotG, pp, 1e-5, 1e-6)
	}
}

// TestResidualsOfPlacedModel: the residual report counts what every device
// keeps for the backward pass of a placed model: under DP each device
// keeps its share of the activations (the batch is split) and a whole
// replica of each weight; under FSDP, only shards of the weights.
func TestResidualsOfPlacedModel(t *testing.T) {
	m := shard.NewMesh([]int{8}, []string{"dp"})
	r := rand.New(rand.NewPCG(2, 3))
	model := annotateMLP(nn.NewMLP(tensor.NewKey(4), []int{16, 64, 64, 8}, nn.MLPOptions{}))
	x, y := randT(r, 64, 16), randT(r, 64, 8)
	host := autodiff.Residuals(func(p nn.MLP) *tensor.Tensor { return tensor.Mean(mse(p.Forward(x), y)) }, model)
	xs := shard.Put(x, shard.NewSharding(m, shard.P("dp", nil)))
	ys := shard.Put(y, shard.NewSharding(m, shard.P("dp", nil)))
	f := func(p nn.MLP) *tensor.Tensor { return tensor.Mean(mse(p.Forward(xs), ys)) }
	dp := autodiff.Residuals(f, shard.FilterShard(model, m, stDP.rules(m)))
	fsdp := autodiff.Residuals(f, shard.FilterShard(model, m, stFSDP.rules(m)))
	var local []*shard.Device // under mpirun, the report covers this process's devices
	for _, dev := range m.Devices() {
		if dev.IsLocal() {
			local = append(local, dev)
		}
	}
	for _, dev := range local {
		require.Contains(t, dp.ByDevice, dev.ID(), "%v", dp)
	}
	var wBytes int64
	for _, l := range model.Layers {
		wBytes += int64(l.W.Bytes())
	}
	for _, dev := range local {
		d, f := int64(dp.ByDevice[dev.ID()].Bytes), int64(fsdp.ByDevice[dev.ID()].Bytes)
		require.Greater(t, d, wBytes, "DP keeps whole weights on device %d", dev.ID())
		require.Less(t, d, int64(host.Bytes), "DP keeps a share of the activations on device %d", dev.ID())
		require.Less(t, f, d-wBytes/2, "FSDP keeps shards, not whole weights, on device %d\n%v\n%v", dev.ID(), dp, fsdp)
	}
}
