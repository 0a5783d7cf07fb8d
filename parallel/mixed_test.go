package parallel_test

import (
	"fmt"
	"math"
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

// mixedRun is what a few Adam steps of a trainer leave: the losses, the
// host parameters, every leaf of the placed parameters and optimizer
// state, and device 0's bytes per collective kind in the last step.
type mixedRun struct {
	losses []float64
	params any
	grads  any
	leaves []*tensor.Tensor
	comm   map[string]int64
	// dataSize is the number of devices the data axes span.
	dataSize int
}

const lr = 1e-3

func trainMixed[M any](t *testing.T, m M, loss func(M, batch) *tensor.Tensor, s parallel.Strategy, mesh *shard.Mesh, batches []batch) mixedRun {
	t.Helper()
	tr, err := parallel.New(m, parallel.Config[M, batch]{
		Loss: loss, Strategy: s, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(lr)),
	})
	require.NoError(t, err)
	var r mixedRun
	_, g, err := tr.LossAndGrad(batches[0])
	require.NoError(t, err)
	r.grads = g
	for _, b := range batches {
		l, err := tr.Step(b)
		require.NoError(t, err)
		r.losses = append(r.losses, l)
	}
	st, err := tr.Stats(batches[0])
	require.NoError(t, err)
	r.params, r.comm = tr.Params(), st.CommBytes
	r.dataSize = 1
	if mesh != nil {
		r.dataSize = mesh.AxisSize(tr.DataAxes()...)
	}
	r.leaves = append(pytree.Leaves(tr.PlacedParams()), pytree.Leaves(tr.State())...)
	return r
}

// TestMixedPrecisionStrategies trains the MLP (nn.MLP.WithPolicy) and the
// transformer block (its loss casts it) with nn.MixedBFloat16 (float32
// master parameters, bf16 compute, float32 loss) under DP, FSDP, TP and
// FSDPTP, and FSDP on the Map step, on 2x4 and 8-device meshes, and checks
//
//   - losses of three Adam steps and gradients of the first batch against
//     the single-device mixed-precision run, within tolerances derived
//     from bf16's unit roundoff u = 2^-8 (the strategies sum partial
//     products in other orders and round them to bf16 at other points);
//   - that parameters and Adam's state stay float32 (the master copy);
//   - the bytes each collective moves per step against the same program
//     in float32: every collective on the activations and on the
//     parameters' gradients moves bf16 — FSDP's weight all-gathers (the
//     cast to bf16 runs on each shard, before the gather), the
//     reduce-scatters and all-reduces of gradients (which accumulate in
//     float32 and round once to bf16, then widen exactly to float32 for
//     the optimizer) and TP's all-reduces of partial activations — and
//     is charged half the bytes; the loss's all-reduce moves float32.
func TestMixedPrecisionStrategies(t *testing.T) {
	mlp, _ := guideModel(guideSizes, 16, 1)
	mlp.Activation, mlp.FinalActivation = nn.Gelu, nil
	mixedMLP := mlp.WithPolicy(nn.MixedBFloat16)
	blk := newBlock(tensor.NewKey(3), 32, 4, 4)
	// The block has no policy of its own: the loss casts it.
	blockMixed := func(m block, b batch) *tensor.Tensor {
		p := nn.MixedBFloat16
		return mse(nn.CastToOutput(p, nn.CastToCompute(p, m).Forward(nn.CastToCompute(p, b.X))), b.Y)
	}
	var mlpBatches, blockBatches []batch
	for i, k := range tensor.NewKey(7).Split(3) {
		_, b := guideModel(guideSizes, 16, uint64(10+i))
		mlpBatches = append(mlpBatches, b)
		k1, k2 := k.Split2()
		blockBatches = append(blockBatches, batch{tensor.Normal(k1, 16, 6, 32), tensor.Normal(k2, 16, 4)})
	}
	type model struct {
		name string
		// run trains in mixed precision, or in float32 if !mixed.
		run func(t *testing.T, mixed bool, s parallel.Strategy, mesh *shard.Mesh) mixedRun
	}
	const u = 0x1p-8 // bf16 unit roundoff
	for _, md := range []model{
		{"mlp", func(t *testing.T, mixed bool, s parallel.Strategy, mesh *shard.Mesh) mixedRun {
			if mixed {
				return trainMixed(t, mixedMLP, mlpLoss, s, mesh, mlpBatches)
			}
			return trainMixed(t, mlp, mlpLoss, s, mesh, mlpBatches)
		}},
		{"transformer block", func(t *testing.T, mixed bool, s parallel.Strategy, mesh *shard.Mesh) mixedRun {
			if mixed {
				return trainMixed(t, blk, blockMixed, s, mesh, blockBatches)
			}
			return trainMixed(t, blk, blockLoss, s, mesh, blockBatches)
		}},
	} {
		base := md.run(t, true, parallel.Single, nil)
		f32base := md.run(t, false, parallel.Single, nil)
		// bf16 compute is not float32 compute: the mixed run differs
		// from the float32 one by many roundoffs (so the comparisons
		// below, far tighter, see the bf16 arithmetic).
		// (The loss of the block, a mean over tokens behind attention
		// computed in float32 and rounded once, moves less than its
		// gradients: either shows it.)
		lossRel := math.Abs(base.losses[0]-f32base.losses[0]) / f32base.losses[0]
		require.Greater(t, max(lossRel, maxRelDiff(t, base.grads, f32base.grads)), u/16, md.name)
		testMixedStrategies(t, md.name, base, func(t *testing.T, mixed bool, s parallel.Strategy, mesh *shard.Mesh) mixedRun {
			return md.run(t, mixed, s, mesh)
		})
	}
}

func testMixedStrategies(t *testing.T, model string, base mixedRun, run func(t *testing.T, mixed bool, s parallel.Strategy, mesh *shard.Mesh) mixedRun) {
	const u = 0x1p-8 // bf16 unit roundoff
	for _, mesh := range []*shard.Mesh{shard.NewMesh([]int{2, 4}, []string{"dp", "tp"}), shard.NewMesh([]int{1, 8}, []string{"dp", "tp"})} {
		for _, s := range []parallel.Strategy{parallel.DP, parallel.FSDP, parallel.TP, parallel.FSDPTP, path{parallel.FSDP, true}} {
			name := fmt.Sprint(s)
			if p, ok := s.(path); ok {
				name = fmt.Sprintf("%v-map", p.Strategy)
			}
			t.Run(fmt.Sprintf("%s/%v/%s", model, mesh.Shape(), name), func(t *testing.T) {
				got := run(t, true, s, mesh)
				// The loss is a mean of squares of bf16 outputs: a few
				// roundoffs of each output, relative.
				for i := range base.losses {
					assert.InEpsilon(t, base.losses[i], got.losses[i], 4*u, "step %d", i)
				}
				// Gradients of the first batch: each element is a float32
				// sum rounded once to bf16 (u relative to the leaf's
				// largest); the strategies also round partial sums to bf16
				// before the cross-device sum (another u) and see
				// activations rounded at other points: 4u. (Zero gradients
				// or a missing cross-device sum are off by 1/2 to 1.)
				assert.Less(t, maxRelDiff(t, base.grads, got.grads), 4*u)
				// After Adam no tighter bound holds element by element: its
				// first update is lr·sign(g), so a gradient within
				// roundoff of zero may move its parameter by 2·lr a step.
				assert.Less(t, maxAbsDiff(t, base.params, got.params), 2*lr*float64(len(base.losses)))
				for _, x := range got.leaves {
					if x.DType().IsFloat() {
						require.Equal(t, tensor.Float32, x.DType(), "%v: parameters and optimizer state are float32", x)
					}
				}
				f32 := run(t, false, s, mesh)
				// The loss is float32: its all-reduce over the data axes
				// moves 4 bytes a device, 2(n-1)/n times.
				n := int64(got.dataSize)
				loss := 2 * (n - 1) * 4 / n
				require.NotEmpty(t, f32.comm)
				if p, ok := s.(path); ok && p.mapStep {
					// The Map step gathers the float32 master weights (the
					// cast runs in the loss, after the gather) and
					// reduce-scatters float32 gradients. (Its remat policy
					// keeps the bf16 casts of the gathered weights, so
					// backward does not gather again.)
					assert.Equal(t, f32.comm["psum_scatter"], got.comm["psum_scatter"])
					assert.Less(t, got.comm["all_gather"], f32.comm["all_gather"])
					return
				}
				if s == parallel.DP {
					// DP's sharded update reduce-scatters the float32
					// gradients of the float32 parameters (the cast runs
					// in the loss) and all-gathers the updated float32
					// blocks: the bytes of the float32 run.
					assert.Equal(t, f32.comm, got.comm)
					require.NotZero(t, got.comm["psum_scatter"])
					return
				}
				want := map[string]int64{}
				for kind, b := range f32.comm {
					if kind == "psum" {
						want[kind] = (b-loss)/2 + loss
					} else {
						want[kind] = b / 2
					}
				}
				if model == "transformer block" && mesh.AxisSize("tp") == 8 && (s == parallel.TP || s == parallel.FSDPTP) {
					// 4 heads over 8 devices: propagation picks another
					// plan for the bf16 graph (with its casts) than for the
					// float32 one — fewer bytes in all, though more of
					// them all-gathers.
					sum := func(m map[string]int64) (n int64) {
						for _, b := range m {
							n += b
						}
						return n
					}
					assert.LessOrEqual(t, sum(got.comm), sum(want), "float32 run %v", f32.comm)
					return
				}
				assert.Equal(t, want, got.comm, "float32 run %v", f32.comm)
			})
		}
	}
}

// maxAbsDiff is the largest |a-b| over all leaves.
func maxAbsDiff(t *testing.T, a, b any) float64 {
	t.Helper()
	worst := 0.0
	la, lb := pytree.Leaves(a), pytree.Leaves(b)
	require.Len(t, lb, len(la))
	for i := range la {
		x, y := la[i].Float64s(), lb[i].Float64s()
		for j := range x {
			worst = math.Max(worst, math.Abs(x[j]-y[j]))
		}
	}
	return worst
}
