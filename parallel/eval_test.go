package parallel

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/expert"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// evalCase is a trainer configuration Eval's tests run on every strategy.
type evalCase struct {
	name     string
	mesh     *shard.Mesh
	strategy Strategy
	micro    int
}

// evalCases are the host, the Map strategies (DP's step, the Map step of
// sharded parameters) and the strategies that run by propagation.
func evalCases() []evalCase {
	return []evalCase{
		{"host", nil, nil, 1},
		{"dp=2", shard.NewMesh([]int{2}, []string{"dp"}), DP, 1},
		{"dp=2,micro=2", shard.NewMesh([]int{2}, []string{"dp"}), DP, 2},
		{"fsdp=2", shard.NewMesh([]int{2}, []string{"dp"}), FSDP, 1},
		{"tp=2,dp=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), TP, 1},
		{"map,fsdp=2,tp=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), mapStep{FSDPTP}, 1},
	}
}

// evalMLP is the model, batch and loss of Eval's tests: activations of
// 256 rows by 512 (512 KiB each), larger than the parameters.
func evalMLP() (nn.MLP, donateBatch, func(nn.MLP, donateBatch) *tensor.Tensor) {
	k := tensor.NewKey(9).Split(3)
	sizes := []int{64, 512, 512, 8}
	model := nn.NewMLP(k[0], sizes, nn.MLPOptions{Axes: nn.MegatronAxes(len(sizes) - 1)})
	b := donateBatch{tensor.Normal(k[1], 256, sizes[0]), tensor.Normal(k[2], 256, sizes[len(sizes)-1])}
	return model, b, func(m nn.MLP, b donateBatch) *tensor.Tensor { return tensor.MSE(m.Forward(b.X), b.Y) }
}

// Eval's recycling changes no number: the losses of evaluations between
// steps are bit for bit those of an Eval that recycles nothing (as Eval
// was before), on every strategy, and the steps after them too.
func TestEvalRecyclingLosses(t *testing.T) {
	model, b, loss := evalMLP()
	for _, c := range evalCases() {
		t.Run(c.name, func(t *testing.T) {
			run := func(donate bool) []float64 {
				defer func(old bool) { donateSteps = old }(donateSteps)
				donateSteps = donate
				tr, err := New(model, Config[nn.MLP, donateBatch]{Loss: loss, Optimizer: optim.Adam(optim.Constant(1e-2)), Mesh: c.mesh, Strategy: c.strategy, MicroBatches: c.micro})
				require.NoError(t, err)
				return evalStepLosses(t, tr, b, 3)
			}
			want, got := run(false), run(true)
			require.Len(t, got, len(want))
			for i := range want {
				assert.Equal(t, math.Float64bits(want[i]), math.Float64bits(got[i]), "loss %d: %v, want %v", i, got[i], want[i])
			}
		})
	}
}

// In steady state an evaluation allocates no activation afresh: its
// intermediates go back to the allocator cache once the loss is read
// (tensor.Recycling), and the next evaluation (or step) reuses them.
// Without the recycling an Eval here allocated 1.1 MB on the host (its two
// hidden activations) to 5.8 MB (the Map step of FSDP×TP, with gathered
// weights); with it 11 KB to 170 KB.
func TestEvalReusesStorage(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops what it is given at random under -race")
	}
	model, b, loss := evalMLP()
	const activation = 256 * 512 * 4
	for _, c := range evalCases() {
		t.Run(c.name, func(t *testing.T) {
			tr, err := New(model, Config[nn.MLP, donateBatch]{Loss: loss, Optimizer: optim.Adam(optim.Constant(1e-3)), Mesh: c.mesh, Strategy: c.strategy, MicroBatches: c.micro})
			require.NoError(t, err)
			placed := b
			if c.mesh != nil {
				placed = donateBatch{shard.Put(b.X, tr.BatchSharding()), shard.Put(b.Y, tr.BatchSharding())}
			}
			perEval := leastBytesPerStep(t, func() {
				_, err := tr.Eval(placed)
				require.NoError(t, err)
			})
			t.Logf("%s: %d bytes per Eval", c.name, perEval)
			assert.Less(t, perEval, int64(activation/2), "an Eval allocates fresh storage for an activation")
		})
	}
}

// Expert parallelism's evaluation recycles too: inside the Map, after
// the ragged all-to-all, whose operands the devices donate only once the
// Map has returned. What is left (1.1-1.3 MB against 6.9-15.5 MB without
// the recycling) is what a step leaves too (TestEPReusesStorage): the
// zeroed buffers expert.Forward hands the ragged all-to-all and the routed
// copies of the tokens.
func TestEPEvalRecycling(t *testing.T) {
	ks := tensor.NewKey(11).Split(5)
	model := epNet{
		In:  nn.NewLinear(ks[0], 64, 256, nn.LinearOptions{Axes: [2]string{nn.AxisMLP, nn.AxisEmbed}}),
		MoE: nn.NewMoE(ks[1], 256, 512, 8, nn.MoEOptions{CapacityFactor: 1, Activation: nn.Gelu, Axes: nn.DefaultMoEAxes()}),
		Out: nn.NewLinear(ks[2], 256, 5, nn.LinearOptions{Axes: [2]string{nn.AxisEmbed, nn.AxisVocab}}),
	}
	const rows = 256
	b := epBatch{tensor.Normal(ks[3], rows, 64), tensor.Rem(tensor.Arange(rows), tensor.ScalarInt(5))}
	cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}}
	for _, c := range []struct {
		s      Strategy
		dp, ep int
	}{{EP, 1, 2}, {FSDPEP, 2, 2}} {
		t.Run(fmt.Sprintf("%v/%dx%d", c.s, c.dp, c.ep), func(t *testing.T) {
			newTrainer := func() *Trainer[epNet, epBatch] {
				tr, err := New(model, Config[epNet, epBatch]{
					DeviceLoss: func(ctx *shard.Ctx, m epNet, b epBatch, _ tensor.Key) *tensor.Tensor {
						h := m.In.Forward(b.X)
						o := expert.Forward(ctx, m.MoE, h, cfg)
						logits := m.Out.Forward(tensor.Add(h, o.Output))
						return tensor.Add(tensor.Mean(tensor.SoftmaxCrossEntropy(logits, b.Y)), tensor.MulScalar(o.AuxLoss, 0.1))
					},
					Optimizer: optim.Adam(optim.Constant(1e-3)),
					Mesh:      shard.NewMesh([]int{c.dp, c.ep}, []string{"dp", "ep"}), Strategy: c.s,
				})
				require.NoError(t, err)
				return tr
			}
			run := func(donate bool) []float64 {
				defer func(old bool) { donateSteps = old }(donateSteps)
				donateSteps = donate
				return evalStepLosses(t, newTrainer(), b, 2)
			}
			assert.Equal(t, run(false), run(true))
			if raceEnabled {
				return
			}
			tr := newTrainer()
			placed := epBatch{shard.Put(b.X, tr.BatchSharding()), shard.Put(b.Y, tr.BatchSharding())}
			perEval := leastBytesPerStep(t, func() {
				_, err := tr.Eval(placed)
				require.NoError(t, err)
			})
			t.Logf("%v %dx%d: %d bytes per Eval", c.s, c.dp, c.ep, perEval)
			var paramBytes int64
			for _, x := range pytree.Leaves(model) {
				paramBytes += int64(x.Bytes())
			}
			assert.Less(t, perEval, paramBytes/4, "an Eval allocates fresh storage for its activations")
		})
	}
}

// evalStepLosses runs n rounds of Eval then Step on b and returns the
// losses in that order.
func evalStepLosses[M, B any](t *testing.T, tr *Trainer[M, B], b B, n int) []float64 {
	t.Helper()
	var losses []float64
	for range n {
		l, err := tr.Eval(b)
		require.NoError(t, err)
		s, err := tr.Step(b)
		require.NoError(t, err)
		losses = append(losses, l, s)
	}
	return losses
}
