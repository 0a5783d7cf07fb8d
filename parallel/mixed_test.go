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
	params nn.MLP
	grads  nn.MLP
	leaves []*tensor.Tensor
	comm   map[string]int64
	// dataSize is the number of devices the data axes span.
	dataSize int
}

const lr = 1e-3

func trainMixed(t *testing.T, m nn.MLP, s parallel.Strategy, mesh *shard.Mesh, batches []batch) mixedRun {
	t.Helper()
	tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{
		Loss: mlpLoss, Strategy: s, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(lr)),
	})
	require.NoError(t, err)
	var r mixedRun
	_, r.grads, err = tr.LossAndGrad(batches[0])
	require.NoError(t, err)
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

// TestMixedPrecisionStrategies trains the MLP with nn.MixedBFloat16
// (float32 master parameters, bf16 compute, float32 loss) under every
// shipped strategy on 2x4 and 8-device meshes, and checks
//
//   - losses and parameters against the single-device mixed-precision
//     run, within a tolerance derived from bf16's unit roundoff u = 2^-8
//     (the strategies sum partial products in other orders and round
//     them to bf16 at other points);
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
	var batches []batch
	for i := range 3 {
		_, b := guideModel(guideSizes, 16, uint64(10+i))
		batches = append(batches, b)
	}
	mixed := mlp.WithPolicy(nn.MixedBFloat16)
	base := trainMixed(t, mixed, parallel.Single, nil, batches)
	f32base := trainMixed(t, mlp, parallel.Single, nil, batches)
	const u = 0x1p-8 // bf16 unit roundoff
	// bf16 compute is not float32 compute: the mixed run differs from
	// the float32 one by many roundoffs (so the comparisons below, far
	// tighter, see the bf16 arithmetic).
	require.Greater(t, math.Abs(base.losses[0]-f32base.losses[0])/f32base.losses[0], u/16)

	for _, mesh := range []*shard.Mesh{shard.NewMesh([]int{2, 4}, []string{"dp", "tp"}), shard.NewMesh([]int{1, 8}, []string{"dp", "tp"})} {
		for _, s := range []parallel.Strategy{parallel.DP, parallel.FSDP, parallel.TP, parallel.FSDPTP, path{parallel.FSDP, true}} {
			name := fmt.Sprint(s)
			if p, ok := s.(path); ok {
				name = fmt.Sprintf("%v-map", p.Strategy)
			}
			t.Run(fmt.Sprintf("%v/%s", mesh.Shape(), name), func(t *testing.T) {
				got := trainMixed(t, mixed, s, mesh, batches)
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
				assert.Less(t, maxAbsDiff(t, base.params, got.params), 2*lr*float64(len(batches)))
				for _, x := range got.leaves {
					if x.DType().IsFloat() {
						require.Equal(t, tensor.Float32, x.DType(), "%v: parameters and optimizer state are float32", x)
					}
				}
				f32 := trainMixed(t, mlp, s, mesh, batches)
				// The loss is float32: its all-reduce over the data axes
				// moves 4 bytes a device, 2(n-1)/n times.
				n := int64(got.dataSize)
				loss := 2 * (n - 1) * 4 / n
				require.NotEmpty(t, f32.comm)
				if p, ok := s.(path); ok && p.mapStep {
					// The Map step gathers the float32 master weights (the
					// cast runs in the loss, after the gather) once, and
					// reduce-scatters float32 gradients.
					assert.Equal(t, f32.comm["psum_scatter"], got.comm["psum_scatter"])
					assert.Equal(t, f32.comm["all_gather"]/2, got.comm["all_gather"])
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
