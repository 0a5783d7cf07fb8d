package parallel

import (
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			for range 3 {
				_, err := tr.Step(placed)
				require.NoError(t, err)
			}
			// The collector empties the allocator cache (a sync.Pool) now
			// and then, and the step after that allocates afresh: the
			// figure is the least of a few windows of steps.
			const steps, windows = 3, 4
			perStep := int64(math.MaxInt64)
			for range windows {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for range steps {
					_, err := tr.Step(placed)
					require.NoError(t, err)
				}
				runtime.ReadMemStats(&after)
				perStep = min(perStep, int64(after.TotalAlloc-before.TotalAlloc)/steps)
			}
			t.Logf("%s: %d bytes per step, parameters %d bytes", c.name, perStep, paramBytes)
			// Any of the large leaves allocated afresh, even split over
			// the devices, would pass half the parameters' bytes.
			assert.Less(t, perStep, paramBytes/2, "a step allocates fresh storage for parameter-sized values")
		})
	}
}

// mapStep is a strategy's placement run as one shard.Map per step.
type mapStep struct{ Strategy }

func (m mapStep) Place(mesh *shard.Mesh, params any) (Placement, error) {
	p, err := m.Strategy.Place(mesh, params)
	p.MapStep = true
	return p, err
}
