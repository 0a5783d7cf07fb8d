package parallel_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/expert"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// poisoned returns b with v in the last row of X (NaN) or Y (an
// infinity): the rows of the last device under DP.
func poisoned(b batch, v float32) batch {
	bad := func(x *tensor.Tensor) *tensor.Tensor {
		d := x.Float32s()
		d[len(d)-1] = v
		return tensor.FromFloat32(d, x.Shape()...)
	}
	if math.IsNaN(float64(v)) {
		return batch{bad(b.X), b.Y}
	}
	return batch{b.X, bad(b.Y)}
}

// bitsEqual requires every leaf of a and b to hold the same bits.
func bitsEqual(t *testing.T, a, b any, what string) {
	t.Helper()
	la, lb := pytree.Leaves(a), pytree.Leaves(b)
	require.Len(t, lb, len(la), what)
	for i := range la {
		x, y := shard.Gather(la[i]).Float64s(), shard.Gather(lb[i]).Float64s()
		for j := range x {
			if math.Float64bits(x[j]) != math.Float64bits(y[j]) {
				t.Fatalf("%s: leaf %d element %d: %v, want %v", what, i, j, x[j], y[j])
			}
		}
	}
}

// TestStepSkipsNonFiniteLoss: a batch whose loss is NaN or infinite is an
// error wrapping ErrNonFiniteLoss, returned with the loss, and leaves the
// parameters and optimizer state as they were, bit for bit, on every path
// of Step (the host's update in the backward pass and after it,
// micro-batches, the DP step with its sharded update, DP with the update
// on the host, propagation); the steps after it are those of a run that
// never saw the batch.
func TestStepSkipsNonFiniteLoss(t *testing.T) {
	adam := func() optim.Transform { return optim.Adam(optim.Constant(1e-2)) }
	cases := []struct {
		name string
		cfg  parallel.Config[nn.MLP, batch]
		bad  float32
	}{
		{"host", parallel.Config[nn.MLP, batch]{}, float32(math.NaN())},
		{"host/inf", parallel.Config[nn.MLP, batch]{}, float32(math.Inf(1))},
		{"host/clip", parallel.Config[nn.MLP, batch]{ClipGlobalNorm: 1}, float32(math.NaN())},
		{"host/micro", parallel.Config[nn.MLP, batch]{MicroBatches: 2}, float32(math.NaN())},
		{"dp2", parallel.Config[nn.MLP, batch]{Mesh: shard.NewMesh([]int{2}, []string{"dp"}), Strategy: parallel.DP}, float32(math.NaN())},
		{"dp8/inf", parallel.Config[nn.MLP, batch]{Mesh: shard.NewMesh([]int{8}, []string{"dp"}), Strategy: parallel.DP}, float32(math.Inf(-1))},
		{"dp4/micro", parallel.Config[nn.MLP, batch]{Mesh: shard.NewMesh([]int{4}, []string{"dp"}), Strategy: parallel.DP, MicroBatches: 2}, float32(math.NaN())},
		{"dp2/host-update", parallel.Config[nn.MLP, batch]{Mesh: shard.NewMesh([]int{2}, []string{"dp"}), Strategy: parallel.DP,
			Optimizer: optim.Chain(optim.ClipByGlobalNorm(1), adam())}, float32(math.NaN())},
		{"fsdp", parallel.Config[nn.MLP, batch]{Mesh: shard.NewMesh([]int{4}, []string{"dp"}), Strategy: parallel.FSDP}, float32(math.NaN())},
		{"tp", parallel.Config[nn.MLP, batch]{Mesh: shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), Strategy: parallel.TP}, float32(math.Inf(1))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, a := guideModel([]int{8, 16, 4}, 16, 1)
			_, b := guideModel([]int{8, 16, 4}, 16, 2)
			_, d := guideModel([]int{8, 16, 4}, 16, 3)
			newTrainer := func() *parallel.Trainer[nn.MLP, batch] {
				cfg := c.cfg
				cfg.Loss = mlpLoss
				if cfg.Optimizer == nil {
					cfg.Optimizer = adam()
				}
				tr, err := parallel.New(m, cfg)
				require.NoError(t, err)
				return tr
			}
			want := newTrainer()
			stepAll(t, want, []batch{a, d})

			tr := newTrainer()
			stepAll(t, tr, []batch{a})
			params, state := tr.Params(), pytree.Map(tr.State(), shard.Gather)

			l, err := tr.Step(poisoned(b, c.bad))
			require.Error(t, err)
			assert.ErrorIs(t, err, parallel.ErrNonFiniteLoss)
			var nf *parallel.NonFiniteLossError
			require.True(t, errors.As(err, &nf), "%T %v", err, err)
			assert.Equal(t, 2, nf.Step)
			assert.True(t, math.IsNaN(l) || math.IsInf(l, 0), "loss %v", l)
			assert.Equal(t, math.IsNaN(l), math.IsNaN(nf.Loss))
			assert.Contains(t, err.Error(), "parallel: step 2: the loss is ")
			bitsEqual(t, tr.Params(), params, "parameters after the skipped step")
			bitsEqual(t, tr.State(), state, "optimizer state after the skipped step")

			stepAll(t, tr, []batch{d})
			bitsEqual(t, tr.Params(), want.Params(), "parameters after the next step")
			bitsEqual(t, tr.State(), want.State(), "optimizer state after the next step")

			// Eval and LossAndGrad report the loss as it is.
			l, err = tr.Eval(poisoned(b, c.bad))
			require.NoError(t, err)
			assert.False(t, !math.IsNaN(l) && !math.IsInf(l, 0), "Eval: %v", l)
		})
	}
}

// TestStepSkipsNonFiniteLossEP: under expert parallelism, where the loss
// of each device runs collectives (the ragged all-to-alls) before it is
// known, a NaN in one device's rows skips the step on every device too.
func TestStepSkipsNonFiniteLossEP(t *testing.T) {
	model, a := newMoENet(), moeBatch()
	b := batch{X: tensor.Normal(tensor.NewKey(21), 64, 6), Y: a.Y}
	d := batch{X: tensor.Normal(tensor.NewKey(22), 64, 6), Y: a.Y}
	for _, s := range []parallel.Strategy{parallel.EP, parallel.FSDPEP} {
		t.Run(s.String(), func(t *testing.T) {
			newTrainer := func() *parallel.Trainer[moeNet, batch] {
				cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}}
				tr, err := parallel.New(model, parallel.Config[moeNet, batch]{
					DeviceLoss: func(ctx *shard.Ctx, m moeNet, b batch, _ tensor.Key) *tensor.Tensor {
						return m.loss(b, func(l nn.MoE, h *tensor.Tensor) nn.MoEOutput { return expert.Forward(ctx, l, h, cfg) })
					},
					Optimizer: optim.Adam(optim.Constant(0.01)),
					Mesh:      shard.NewMesh([]int{2, 4}, []string{"dp", "ep"}), Strategy: s,
				})
				require.NoError(t, err)
				return tr
			}
			want := newTrainer()
			stepAll(t, want, []batch{a, d})
			tr := newTrainer()
			stepAll(t, tr, []batch{a})
			params := tr.Params()
			_, err := tr.Step(poisoned(b, float32(math.NaN())))
			require.ErrorIs(t, err, parallel.ErrNonFiniteLoss)
			bitsEqual(t, tr.Params(), params, "parameters after the skipped step")
			stepAll(t, tr, []batch{d})
			bitsEqual(t, tr.Params(), want.Params(), "parameters after the next step")
			bitsEqual(t, tr.State(), want.State(), "optimizer state after the next step")
		})
	}
}
