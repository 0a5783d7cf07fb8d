package parallel_test

import (
	"fmt"
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

// moeNet is a small model with a mixture-of-experts layer.
type moeNet struct {
	In  nn.Linear
	MoE nn.MoE
	Out nn.Linear
}

func newMoENet() moeNet {
	ks := tensor.NewKey(11).Split(3)
	return moeNet{
		In:  nn.NewLinear(ks[0], 6, 8, nn.LinearOptions{Axes: [2]string{nn.AxisMLP, nn.AxisEmbed}}),
		MoE: nn.NewMoE(ks[1], 8, 12, 8, nn.MoEOptions{CapacityFactor: 1, Activation: nn.Gelu, Axes: nn.DefaultMoEAxes()}),
		Out: nn.NewLinear(ks[2], 8, 5, nn.LinearOptions{Axes: [2]string{nn.AxisEmbed, nn.AxisVocab}}),
	}
}

// moeBatch is the EP tests' batch: 64 examples of 6 features, 5 classes.
func moeBatch() batch {
	const n = 64
	return batch{X: tensor.Normal(tensor.NewKey(12), n, 6), Y: tensor.Rem(tensor.Arange(n), tensor.ScalarInt(5))}
}

// loss runs the MoE with moe and adds its auxiliary loss.
func (m moeNet) loss(b batch, moe func(nn.MoE, *tensor.Tensor) nn.MoEOutput) *tensor.Tensor {
	h := m.In.Forward(b.X)
	o := moe(m.MoE, h)
	logits := m.Out.Forward(tensor.Add(h, o.Output))
	return tensor.Add(tensor.Mean(tensor.SoftmaxCrossEntropy(logits, b.Y)), tensor.MulScalar(o.AuxLoss, 0.1))
}

// Expert parallelism under the Trainer equals one device with the
// per-sender capacity rule (one sender per device), in loss and every
// gradient, on 1x8, 2x4 and 4x2 (dp×ep) meshes, with and without FSDP.
func TestEPEqualsSingleDevice(t *testing.T) {
	model, b := newMoENet(), moeBatch()
	single, err := parallel.New(model, parallel.Config[moeNet, batch]{
		Loss: func(m moeNet, b batch) *tensor.Tensor {
			return m.loss(b, func(l nn.MoE, h *tensor.Tensor) nn.MoEOutput { l.Senders = 8; return l.Forward(h) })
		},
		Optimizer: optim.SGD(optim.Constant(0.1)),
	})
	require.NoError(t, err)
	wantLoss, wantGrad, err := single.LossAndGrad(b)
	require.NoError(t, err)

	for _, c := range []struct {
		s      parallel.Strategy
		dp, ep int
	}{
		{parallel.EP, 1, 8}, {parallel.EP, 2, 4}, {parallel.EP, 4, 2},
		{parallel.FSDPEP, 2, 4}, {parallel.FSDPEP, 4, 2},
	} {
		t.Run(fmt.Sprintf("%v/%dx%d", c.s, c.dp, c.ep), func(t *testing.T) {
			mesh := shard.NewMesh([]int{c.dp, c.ep}, []string{"dp", "ep"})
			cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}}
			tr, err := parallel.New(model, parallel.Config[moeNet, batch]{
				DeviceLoss: func(ctx *shard.Ctx, m moeNet, b batch, _ tensor.Key) *tensor.Tensor {
					return m.loss(b, func(l nn.MoE, h *tensor.Tensor) nn.MoEOutput { return expert.Forward(ctx, l, h, cfg) })
				},
				Optimizer: optim.SGD(optim.Constant(0.1)),
				Mesh:      mesh, Strategy: c.s,
			})
			require.NoError(t, err)
			assert.Equal(t, []string{"dp", "ep"}, tr.DataAxes())
			up := tr.PlacedParams().MoE.Up.Type()
			if c.s == parallel.EP {
				assert.Equal(t, "float32[8@ep,8,12]", up)
			} else {
				assert.Contains(t, up, "8@ep")
				assert.Contains(t, up, "@dp")
			}
			l, g, err := tr.LossAndGrad(b)
			require.NoError(t, err)
			assert.InDelta(t, wantLoss, l, 1e-5)
			lw, lg := pytree.Leaves(wantGrad), pytree.Leaves(g)
			require.Len(t, lg, len(lw))
			for i := range lw {
				a, bb := lw[i].Float32s(), lg[i].Float32s()
				for j := range a {
					require.InDelta(t, a[j], bb[j], 1e-5, "leaf %d element %d", i, j)
				}
			}
			// A step trains: the loss goes down on the same batch.
			first, err := tr.Step(b)
			require.NoError(t, err)
			for range 5 {
				_, err = tr.Step(b)
				require.NoError(t, err)
			}
			after, err := tr.Eval(b)
			require.NoError(t, err)
			assert.Less(t, after, first)
			assert.False(t, math.IsNaN(after))
		})
	}
}

// EP with an elementwise optimizer takes the sharded update (ZeRO-1/2
// over the data axes, as DP: the replicated parameters' gradients
// reduce-scattered over every mesh axis, each device updating its block,
// the experts' gradients reduce-scattered over dp, each device updating
// its part of its experts): its steps equal the whole update on every
// device, which an optimizer that is not elementwise (a Chain) keeps, and
// each device holds a fraction of the optimizer state, the experts' split
// over ep and dp.
func TestEPShardedUpdate(t *testing.T) {
	model, b := newMoENet(), moeBatch()
	for _, c := range []struct{ dp, ep int }{{1, 8}, {2, 4}, {4, 2}} {
		t.Run(fmt.Sprintf("%dx%d", c.dp, c.ep), func(t *testing.T) {
			mesh := shard.NewMesh([]int{c.dp, c.ep}, []string{"dp", "ep"})
			cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}}
			newTrainer := func(opt optim.Transform) *parallel.Trainer[moeNet, batch] {
				tr, err := parallel.New(model, parallel.Config[moeNet, batch]{
					DeviceLoss: func(ctx *shard.Ctx, m moeNet, b batch, _ tensor.Key) *tensor.Tensor {
						return m.loss(b, func(l nn.MoE, h *tensor.Tensor) nn.MoEOutput { return expert.Forward(ctx, l, h, cfg) })
					},
					Optimizer: opt, Mesh: mesh, Strategy: parallel.EP,
				})
				require.NoError(t, err)
				return tr
			}
			sharded := newTrainer(optim.Adam(optim.Constant(1e-2)))
			whole := newTrainer(optim.Chain(optim.Adam(optim.Constant(1e-2))))
			for range 3 {
				want, err := whole.Step(b)
				require.NoError(t, err)
				got, err := sharded.Step(b)
				require.NoError(t, err)
				assert.InEpsilon(t, want, got, 1e-6)
			}
			assert.Less(t, maxRelDiff(t, whole.Params(), sharded.Params()), 1e-5)
			assert.Equal(t, "float32[8@ep,8,12]", sharded.PlacedParams().MoE.Up.Type())
			paths, leaves := pytree.LeavesWithPath(sharded.State())
			states := map[string]string{}
			for i, x := range leaves {
				states[paths[i].String()] = x.Type()
			}
			wantUp := "float32[8@(ep,dp),8,12]" // El = 8/ep experts a device, split over dp
			if c.dp == 1 {
				wantUp = "float32[8@ep,8,12]"
			}
			assert.Equal(t, wantUp, states["Mu.MoE.Up"])
			assert.Equal(t, wantUp, states["Nu.MoE.Up"])
			sw, err := whole.Stats(b)
			require.NoError(t, err)
			ss, err := sharded.Stats(b)
			require.NoError(t, err)
			assert.Less(t, ss.StateBytes, sw.StateBytes)
		})
	}
}

func TestEPErrors(t *testing.T) {
	model := newMoENet()
	dl := func(*shard.Ctx, moeNet, batch, tensor.Key) *tensor.Tensor { return nil }
	for _, c := range []struct {
		s    parallel.Strategy
		mesh *shard.Mesh
		want string
	}{
		{parallel.EP, shard.NewMesh([]int{8}, []string{"dp"}), `needs a mesh axis "ep"`},
		{parallel.FSDPEP, shard.NewMesh([]int{8}, []string{"ep"}), "needs a data axis besides"},
	} {
		_, err := parallel.New(model, parallel.Config[moeNet, batch]{DeviceLoss: dl, Optimizer: optim.SGD(optim.Constant(1)), Mesh: c.mesh, Strategy: c.s})
		require.ErrorContains(t, err, c.want)
	}
	// 8 experts do not split over ep=3.
	mesh := shard.NewMeshOn(shard.Devices()[:3], []int{3}, []string{"ep"})
	_, err := parallel.New(model, parallel.Config[moeNet, batch]{DeviceLoss: dl, Optimizer: optim.SGD(optim.Constant(1)), Mesh: mesh, Strategy: parallel.EP})
	require.Error(t, err)
	// A logical name EP has no rule for is an error naming it.
	bad := newMoENet()
	bad.Out.W = tensor.WithLogicalAxes(bad.Out.W, nn.AxisEmbed, "classes")
	_, err = parallel.New(bad, parallel.Config[moeNet, batch]{DeviceLoss: dl, Optimizer: optim.SGD(optim.Constant(1)),
		Mesh: shard.NewMesh([]int{2, 4}, []string{"dp", "ep"}), Strategy: parallel.EP})
	require.ErrorContains(t, err, `"classes"`)
}
