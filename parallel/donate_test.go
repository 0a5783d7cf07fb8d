package parallel

import (
	"fmt"
	"math"
	"runtime"
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

type donateBatch struct{ X, Y *tensor.Tensor }

// Step's donation changes no number: parameters after several steps are
// bit for bit those without it, on the host, with DP on a mesh and with
// the strategies that run by sharding propagation; the parameters and
// state handed out by Params and State stay valid.
func TestStepDonation(t *testing.T) {
	k := tensor.NewKey(3).Split(3)
	// Logical axes for the tensor-parallel strategies; the others ignore
	// them.
	model := nn.NewMLP(k[0], []int{8, 32, 4}, nn.MLPOptions{Axes: nn.MegatronAxes(2)})
	b := donateBatch{tensor.Normal(k[1], 16, 8), tensor.Normal(k[2], 16, 4)}
	loss := func(m nn.MLP, b donateBatch) *tensor.Tensor { return tensor.MSE(m.Forward(b.X), b.Y) }
	cases := []struct {
		name     string
		mesh     *shard.Mesh
		strategy Strategy
		micro    int
	}{
		{"host", nil, nil, 1},
		{"dp=2", shard.NewMesh([]int{2}, []string{"dp"}), DP, 1},
		// DP's sharded update donates each device's gradients after the
		// reduce-scatter and the reduced blocks after the update.
		{"dp=8", shard.NewMesh([]int{8}, []string{"dp"}), DP, 1},
		{"dp=2,tp=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), DP, 1},
		// Sharding propagation: placed intermediates, cotangents and
		// moved blocks are recycled as well.
		{"fsdp=2", shard.NewMesh([]int{2}, []string{"dp"}), FSDP, 1},
		{"tp=2,dp=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), TP, 1},
		{"fsdp=2,tp=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), FSDPTP, 1},
		// The micro-batches' losses, gradients and running sums.
		{"host,micro=2", nil, nil, 2},
		{"dp=2,micro=2", shard.NewMesh([]int{2}, []string{"dp"}), DP, 2},
		{"fsdp=2,tp=2,micro=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), FSDPTP, 2},
		// The Map step with sharded parameters (Placement.MapStep, as EP
		// runs): gathers inside a checkpoint, whose recorded and
		// recomputed values and reduce-scattered cotangents are recycled.
		{"map,fsdp=2", shard.NewMesh([]int{2}, []string{"dp"}), mapStep{FSDP}, 1},
		{"map,fsdp=2,tp=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), mapStep{FSDPTP}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := func(donate bool) ([][]float32, []float64, int64) {
				hits := tensor.CacheHits()
				defer func(old bool) { donateSteps = old }(donateSteps)
				donateSteps = donate
				cfg := Config[nn.MLP, donateBatch]{Loss: loss, Optimizer: optim.Adam(optim.Constant(1e-2)), Mesh: c.mesh, MicroBatches: c.micro}
				if c.strategy != nil {
					cfg.Strategy = c.strategy
				}
				tr, err := New(model, cfg)
				require.NoError(t, err)
				var losses []float64
				var seen nn.MLP
				var seenWant [][]float32
				for i := range 5 {
					l, err := tr.Step(b)
					require.NoError(t, err)
					losses = append(losses, l)
					if i == 1 {
						seen = tr.Params()
						_ = tr.State()
						for _, x := range pytree.Leaves(seen) {
							seenWant = append(seenWant, x.Float32s())
						}
					}
				}
				for i, x := range pytree.Leaves(seen) {
					require.False(t, x.IsDonated(), "a parameter handed out by Params was donated")
					assert.Equal(t, seenWant[i], x.Float32s())
				}
				for _, x := range pytree.Leaves(model) {
					require.False(t, x.IsDonated(), "the model given to New was donated")
				}
				var out [][]float32
				for _, x := range pytree.Leaves(tr.Params()) {
					out = append(out, x.Float32s())
				}
				return out, losses, tensor.CacheHits() - hits
			}
			want, wantLoss, _ := run(false)
			got, gotLoss, hits := run(true)
			assert.Positive(t, hits, "nothing donated was reused")
			require.Len(t, got, len(want))
			for i := range want {
				for j := range want[i] {
					require.Equal(t, math.Float32bits(want[i][j]), math.Float32bits(got[i][j]), "leaf %d element %d", i, j)
				}
			}
			assert.Equal(t, wantLoss, gotLoss)
		})
	}
}

// In steady state a step allocates no buffer the size of a parameter: the
// gradients, activations, reductions, optimizer moments and new parameters
// reuse the storage the previous steps donated (tensor.Donate), for each
// strategy and with logical axes on the parameters (whose named headers
// must not keep storage from the cache). What remains per step is small:
// graph nodes, headers and tensors below the cache's minimum size (about
// 150 KB per device and step here).
func TestStepReusesStorage(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops what it is given at random under -race")
	}
	k := tensor.NewKey(5).Split(3)
	sizes := []int{256, 1024, 1024, 16}
	model := nn.NewMLP(k[0], sizes, nn.MLPOptions{Axes: nn.MegatronAxes(len(sizes) - 1)})
	b := donateBatch{tensor.Normal(k[1], 32, sizes[0]), tensor.Normal(k[2], 32, sizes[len(sizes)-1])}
	loss := func(m nn.MLP, b donateBatch) *tensor.Tensor { return tensor.MSE(m.Forward(b.X), b.Y) }
	var paramBytes int64
	for _, x := range pytree.Leaves(model) {
		paramBytes += int64(x.Bytes())
	}
	cases := []struct {
		name     string
		mesh     *shard.Mesh
		strategy Strategy
		micro    int
	}{
		{"dp=1", shard.NewMesh([]int{1}, []string{"dp"}), DP, 1},
		{"dp=2", shard.NewMesh([]int{2}, []string{"dp"}), DP, 1},
		{"dp=8", shard.NewMesh([]int{8}, []string{"dp"}), DP, 1},
		{"host", nil, nil, 1},
		// Sharding propagation.
		{"fsdp=2", shard.NewMesh([]int{2}, []string{"dp"}), FSDP, 1},
		{"dp=2,tp=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), TP, 1},
		{"fsdp=2,tp=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), FSDPTP, 1},
		// Micro-batches: their losses, gradients and running sums.
		{"host,micro=2", nil, nil, 2},
		{"dp=2,micro=2", shard.NewMesh([]int{2}, []string{"dp"}), DP, 2},
		{"dp=8,micro=2", shard.NewMesh([]int{8}, []string{"dp"}), DP, 2},
		{"fsdp=2,micro=2", shard.NewMesh([]int{2}, []string{"dp"}), FSDP, 2},
		{"fsdp=2,tp=2,micro=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), FSDPTP, 2},
		// The Map step with sharded parameters (Placement.MapStep, as EP
		// runs): gathers inside a checkpoint, whose recorded and
		// recomputed values and reduce-scattered cotangents are recycled.
		{"map,fsdp=2", shard.NewMesh([]int{2}, []string{"dp"}), mapStep{FSDP}, 1},
		{"map,fsdp=2,tp=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), mapStep{FSDPTP}, 1},
		{"map,dp=2,tp=2", shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), mapStep{TP}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := New(model, Config[nn.MLP, donateBatch]{Loss: loss, Optimizer: optim.Adam(optim.Constant(1e-3)), Mesh: c.mesh, Strategy: c.strategy, MicroBatches: c.micro})
			require.NoError(t, err)
			placed := b
			if c.mesh != nil {
				placed = donateBatch{shard.Put(b.X, tr.BatchSharding()), shard.Put(b.Y, tr.BatchSharding())}
			}
			perStep := leastBytesPerStep(t, func() {
				_, err := tr.Step(placed)
				require.NoError(t, err)
			})
			t.Logf("%s: %d bytes per step, parameters %d bytes", c.name, perStep, paramBytes)
			// Any of the large leaves allocated afresh, even split over
			// the devices, would pass half the parameters' bytes.
			assert.Less(t, perStep, paramBytes/2, "a step allocates fresh storage for parameter-sized values")
		})
	}
}

// leastBytesPerStep runs step three times, then returns the bytes it
// allocates per call in the steady state. The collector empties the
// allocator cache (a sync.Pool) now and then, and the step after that
// allocates afresh: the figure is the least of a few windows of steps.
func leastBytesPerStep(t *testing.T, step func()) int64 {
	t.Helper()
	for range 3 {
		step()
	}
	const steps, windows = 3, 4
	perStep := int64(math.MaxInt64)
	for range windows {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range steps {
			step()
		}
		runtime.ReadMemStats(&after)
		perStep = min(perStep, int64(after.TotalAlloc-before.TotalAlloc)/steps)
	}
	return perStep
}

// mapStep is a strategy's placement run as one shard.Map per step.
type mapStep struct{ Strategy }

func (m mapStep) Place(mesh *shard.Mesh, params any) (Placement, error) {
	p, err := m.Strategy.Place(mesh, params)
	p.MapStep = true
	return p, err
}

// epNet is a small model with a mixture-of-experts layer, large enough
// that a buffer allocated afresh every step shows.
type epNet struct {
	In  nn.Linear
	MoE nn.MoE
	Out nn.Linear
}

type epBatch struct{ X, Y *tensor.Tensor }

// Expert parallelism recycles across steps too: the ragged all-to-all
// borrows its operands and results rather than pinning them, and the
// allocator cache serves the routing-dependent sizes from size classes.
// What is left is the zeroed output buffers expert.Forward hands the
// ragged all-to-all (a checkpoint may replay the call with them) and the
// routed copies of the tokens. Before, a step allocated 2.5-8 times the
// parameters' bytes.
func TestEPReusesStorage(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops what it is given at random under -race")
	}
	ks := tensor.NewKey(11).Split(5)
	model := epNet{
		In:  nn.NewLinear(ks[0], 64, 256, nn.LinearOptions{Axes: [2]string{nn.AxisMLP, nn.AxisEmbed}}),
		MoE: nn.NewMoE(ks[1], 256, 512, 8, nn.MoEOptions{CapacityFactor: 1, Activation: nn.Gelu, Axes: nn.DefaultMoEAxes()}),
		Out: nn.NewLinear(ks[2], 256, 5, nn.LinearOptions{Axes: [2]string{nn.AxisEmbed, nn.AxisVocab}}),
	}
	var paramBytes int64
	for _, x := range pytree.Leaves(model) {
		paramBytes += int64(x.Bytes())
	}
	const rows = 256
	b := epBatch{tensor.Normal(ks[3], rows, 64), tensor.Rem(tensor.Arange(rows), tensor.ScalarInt(5))}
	for _, c := range []struct {
		s      Strategy
		dp, ep int
	}{{EP, 1, 2}, {EP, 2, 2}, {FSDPEP, 2, 2}} {
		t.Run(fmt.Sprintf("%v/%dx%d", c.s, c.dp, c.ep), func(t *testing.T) {
			mesh := shard.NewMesh([]int{c.dp, c.ep}, []string{"dp", "ep"})
			cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}}
			tr, err := New(model, Config[epNet, epBatch]{
				DeviceLoss: func(ctx *shard.Ctx, m epNet, b epBatch, _ tensor.Key) *tensor.Tensor {
					h := m.In.Forward(b.X)
					o := expert.Forward(ctx, m.MoE, h, cfg)
					logits := m.Out.Forward(tensor.Add(h, o.Output))
					return tensor.Add(tensor.Mean(tensor.SoftmaxCrossEntropy(logits, b.Y)), tensor.MulScalar(o.AuxLoss, 0.1))
				},
				Optimizer: optim.Adam(optim.Constant(1e-3)),
				Mesh:      mesh, Strategy: c.s,
			})
			require.NoError(t, err)
			placed := epBatch{shard.Put(b.X, tr.BatchSharding()), shard.Put(b.Y, tr.BatchSharding())}
			perStep := leastBytesPerStep(t, func() {
				_, err := tr.Step(placed)
				require.NoError(t, err)
			})
			t.Logf("%v %dx%d: %d bytes per step, parameters %d bytes", c.s, c.dp, c.ep, perStep, paramBytes)
			assert.Less(t, perStep, paramBytes*3/2)
		})
	}
}
