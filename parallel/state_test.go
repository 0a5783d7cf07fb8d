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

// cnn is a small convolutional classifier with batch normalisation, its
// channels named for tensor parallelism (nn.ConvAxes).
type cnn struct {
	C1, C2 nn.Conv
	B1, B2 nn.BatchNorm
	Pool   nn.AdaptivePool
	Head   nn.Linear
}

func newCNN(key tensor.Key, perDevice bool) cnn {
	k := key.Split(3)
	axes := nn.ConvAxes(2)
	return cnn{
		// No biases: a batch normalisation removes them (their gradient
		// is rounding noise, which Adam would amplify into steps).
		C1:   nn.NewConv2d(k[0], 2, 8, 3, nn.ConvOptions{Padding: nn.Padding(1), Axes: axes[0], NoBias: true}),
		C2:   nn.NewConv2d(k[1], 8, 4, 3, nn.ConvOptions{Axes: axes[1], NoBias: true}),
		B1:   nn.NewBatchNorm(8, nn.BatchNormOptions{Axis: nn.AxisMLP, Momentum: 0.9, PerDevice: perDevice}),
		B2:   nn.NewBatchNorm(4, nn.BatchNormOptions{Axis: nn.AxisEmbed, Momentum: 0.9, PerDevice: perDevice}),
		Pool: nn.NewAdaptiveAvgPool(1, 1),
		Head: nn.NewLinear(k[2], 4, 3, nn.LinearOptions{}),
	}
}

func (m cnn) Forward(x *tensor.Tensor, s nn.State) (*tensor.Tensor, nn.State) {
	h, s := m.B1.Forward(m.C1.Forward(x), s)
	h, s = m.B2.Forward(m.C2.Forward(tensor.Gelu(h)), s)
	h = tensor.Reshape(m.Pool.Forward(tensor.Gelu(h)), x.Dim(0), 4)
	return m.Head.Forward(h), s
}

func cnnLoss(m cnn, s nn.State, b batch, _ tensor.Key) (*tensor.Tensor, nn.State) {
	y, s := m.Forward(b.X, s)
	return mse(y, b.Y), s
}

// trainState trains the CNN for len(batches) steps and returns the losses,
// the parameters and the model state.
func trainState(t *testing.T, m cnn, s nn.State, st parallel.Strategy, mesh *shard.Mesh, batches []batch, micro int) ([]float64, cnn, nn.State) {
	t.Helper()
	tr, err := parallel.New(m, parallel.Config[cnn, batch]{
		StateLoss: cnnLoss, ModelState: s, Strategy: st, Mesh: mesh, MicroBatches: micro,
		Optimizer: optim.Adam(optim.Constant(1e-2)),
	})
	require.NoError(t, err)
	losses := stepAll(t, tr, batches)
	return losses, tr.Params(), tr.ModelState()
}

func cnnBatches(n int) []batch {
	var out []batch
	for _, k := range tensor.NewKey(11).Split(3) {
		k1, k2 := k.Split2()
		out = append(out, batch{tensor.Normal(k1, n, 2, 6, 6), tensor.Normal(k2, n, 3)})
	}
	return out
}

// Under every strategy and mesh, training a model with BatchNorm gives the
// single device's losses, parameters and running statistics: the
// statistics are those of the whole batch, and the state the trainer
// carries is the same.
func TestModelStateEqualsSingleDevice(t *testing.T) {
	m, s := nn.MakeWithState(newCNN(tensor.NewKey(5), false))
	batches := cnnBatches(16)
	baseL, baseP, baseS := trainState(t, m, s, parallel.Single, nil, batches, 1)
	// The running statistics moved.
	require.NotEqual(t, s.Values["batch_norm#1"][0].Float64s(), baseS.Values["batch_norm#1"][0].Float64s())
	for meshName, mesh := range meshes() {
		for _, st := range []parallel.Strategy{parallel.DP, parallel.FSDP, parallel.TP, parallel.FSDPTP} {
			t.Run(fmt.Sprintf("%s/%v", meshName, st), func(t *testing.T) {
				l, p, got := trainState(t, m, s, st, mesh, batches, 1)
				for i := range baseL {
					assert.InEpsilon(t, baseL[i], l[i], 1e-5, "step %d", i)
				}
				assert.Less(t, maxRelDiff(t, baseP, p), 1e-5, "parameters")
				assert.Less(t, maxRelDiff(t, baseS, got), 1e-5, "model state")
			})
		}
	}
}

// Micro-batches pass the state on in order: each normalises by its own
// statistics and updates the running ones, as consecutive batches would.
// On a mesh a micro-batch takes the same rows of every device's block (its
// examples differ from the host's micro-batch, though not its mean loss),
// so the single-device run it equals sees the rows in that order.
func TestModelStateMicroBatches(t *testing.T) {
	m, s := nn.MakeWithState(newCNN(tensor.NewKey(6), false))
	batches := cnnBatches(16)
	mesh := shard.NewMesh([]int{2}, []string{"dp"})
	// Devices hold rows [0,8) and [8,16); micro-batch i is rows [4i,4i+4) of each.
	order := []int{0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15}
	var host []batch
	for _, b := range batches {
		host = append(host, batch{takeRows(b.X, order), takeRows(b.Y, order)})
	}
	baseL, baseP, baseS := trainState(t, m, s, parallel.Single, nil, host, 2)
	for _, st := range []parallel.Strategy{parallel.DP, parallel.FSDP} {
		t.Run(st.String(), func(t *testing.T) {
			l, p, got := trainState(t, m, s, st, mesh, batches, 2)
			for i := range baseL {
				assert.InEpsilon(t, baseL[i], l[i], 1e-5, "step %d", i)
			}
			assert.Less(t, maxRelDiff(t, baseP, p), 1e-5)
			assert.Less(t, maxRelDiff(t, baseS, got), 1e-5)
		})
	}
	// Two micro-batches update the running statistics twice.
	_, _, one := trainState(t, m, s, parallel.Single, nil, batches[:1], 1)
	_, _, two := trainState(t, m, s, parallel.Single, nil, batches[:1], 2)
	assert.Greater(t, maxRelDiff(t, one, two), 1e-3)
}

func takeRows(x *tensor.Tensor, rows []int) *tensor.Tensor {
	parts := make([]*tensor.Tensor, len(rows))
	for i, r := range rows {
		parts[i] = tensor.SliceAxis(x, 0, r, r+1)
	}
	return tensor.Concat(0, parts...)
}

// With PerDevice statistics each data-parallel device normalises its rows
// by their own statistics, and the trainer averages the devices' running
// statistics.
func TestModelStatePerDevice(t *testing.T) {
	m, s := nn.MakeWithState(newCNN(tensor.NewKey(7), true))
	batches := cnnBatches(8)
	mesh := shard.NewMesh([]int{2}, []string{"dp"})
	_, _, got := trainState(t, m, s, parallel.DP, mesh, batches[:1], 1)
	// By hand: each half batch alone on one device, the states averaged.
	var halves []nn.State
	for i := range 2 {
		half := batch{tensor.SliceAxis(batches[0].X, 0, 4*i, 4*i+4), tensor.SliceAxis(batches[0].Y, 0, 4*i, 4*i+4)}
		_, s2 := m.Forward(half.X, s)
		halves = append(halves, s2)
	}
	want := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.MulScalar(tensor.Add(xs[0], xs[1]), 0.5)
	}, halves[0], halves[1])
	assert.Less(t, maxRelDiff(t, want, got), 1e-5)
}

func TestModelStateErrors(t *testing.T) {
	m, s := nn.MakeWithState(newCNN(tensor.NewKey(8), false))
	_, err := parallel.New(m, parallel.Config[cnn, batch]{
		Loss: func(m cnn, b batch) *tensor.Tensor { return tensor.Scalar(0) }, ModelState: s,
		Optimizer: optim.Adam(optim.Constant(1e-3)),
	})
	require.ErrorContains(t, err, "only carried for Config.StateLoss")
	tr, err := parallel.New(m, parallel.Config[cnn, batch]{
		Loss:      func(m cnn, b batch) *tensor.Tensor { return tensor.Scalar(0) },
		Optimizer: optim.Adam(optim.Constant(1e-3)),
	})
	require.NoError(t, err)
	require.ErrorContains(t, tr.SetModelState(s), "not a Config.StateLoss")
}

// A CNN trains by propagation under every sharded strategy without the
// gather fallback: every op it uses has a sharding rule.
func TestCNNNeedsNoFallback(t *testing.T) {
	m, s := nn.MakeWithState(newCNN(tensor.NewKey(9), false))
	mesh := shard.NewMesh([]int{2, 2}, []string{"dp", "tp"})
	b := cnnBatches(8)[0]
	for _, st := range []parallel.Strategy{parallel.FSDP, parallel.TP, parallel.FSDPTP} {
		t.Run(st.String(), func(t *testing.T) {
			tr, err := parallel.New(m, parallel.Config[cnn, batch]{StateLoss: cnnLoss, ModelState: s, Strategy: st, Mesh: mesh,
				Optimizer: optim.Adam(optim.Constant(1e-3))})
			require.NoError(t, err)
			stop := shard.Strict(mesh)
			defer stop()
			require.NotPanics(t, func() {
				_, err := tr.Step(b)
				require.NoError(t, err)
			})
		})
	}
}
