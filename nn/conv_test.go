package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func TestConvConstruction(t *testing.T) {
	c := nn.NewConv2d(tensor.NewKey(1), 6, 8, 3, nn.ConvOptions{Groups: 2, Stride: []int{2}, Padding: nn.Padding(1), Axes: nn.ConvAxes(1)[0]})
	assert.Equal(t, []int{8, 3, 3, 3}, c.Weight.Shape())
	assert.Equal(t, []int{8}, c.Bias.Shape())
	assert.Equal(t, []int{2, 2}, c.Stride)
	assert.Equal(t, []int{1, 1}, c.Dilation)
	assert.Equal(t, 6, c.In())
	assert.Equal(t, 8, c.Out())
	assert.Equal(t, []string{nn.AxisMLP, nn.AxisEmbed, "", ""}, c.Weight.LogicalAxes())
	assert.Equal(t, []string{nn.AxisMLP}, c.Bias.LogicalAxes())
	// Equinox's initialisation: uniform in ±1/√(in/groups · k·k).
	lim := 1 / math.Sqrt(3*9)
	for _, v := range append(c.Weight.Float64s(), c.Bias.Float64s()...) {
		require.LessOrEqual(t, math.Abs(v), lim)
	}
	y := c.Forward(tensor.Zeros(tensor.Float32, 2, 6, 7, 7))
	assert.Equal(t, []int{2, 8, 4, 4}, y.Shape())
	// One example without a batch dimension.
	assert.Equal(t, []int{8, 4, 4}, c.Forward(tensor.Zeros(tensor.Float32, 6, 7, 7)).Shape())

	ct := nn.NewConvTranspose2d(tensor.NewKey(2), 4, 6, 3, nn.ConvTransposeOptions{Stride: []int{2}, Padding: nn.Padding(1), OutputPadding: []int{1}, Groups: 2})
	assert.Equal(t, []int{4, 3, 3, 3}, ct.Weight.Shape())
	assert.Equal(t, []int{6}, ct.Bias.Shape())
	assert.Equal(t, []int{2, 6, 10, 10}, ct.Forward(tensor.Zeros(tensor.Float32, 2, 4, 5, 5)).Shape())

	assert.Equal(t, [][2]string{{nn.AxisMLP, nn.AxisEmbed}, {nn.AxisEmbed, nn.AxisMLP}, {nn.AxisMLP, nn.AxisEmbed}}, nn.ConvAxes(3))
}

// ForwardAct gives the values of act(Forward) bit for bit and its
// gradients within rounding, fused (Relu, Gelu) or not (Softplus), with
// and without a bias, batched and for one example.
func TestConvForwardActEqualsComposition(t *testing.T) {
	k := tensor.NewKey(4).Split(3)
	x, g := tensor.Normal(k[1], 2, 3, 6, 5), tensor.Normal(k[2], 2, 4, 6, 5)
	for _, act := range []struct {
		name string
		f    nn.Activation
	}{{"relu", nn.Relu}, {"gelu", nn.Gelu}, {"softplus", nn.Softplus}, {"nil", nil}} {
		for _, noBias := range []bool{false, true} {
			c := nn.NewConv2d(k[0], 3, 4, 3, nn.ConvOptions{Padding: nn.Padding(1), NoBias: noBias})
			run := func(fused bool, x, g *tensor.Tensor) []*tensor.Tensor {
				tr := tensor.NewTrace()
				lc := c
				lx, lw := tr.Leaf(x), tr.Leaf(c.Weight)
				lc.Weight = lw
				wrt := []*tensor.Tensor{lx, lw}
				if !noBias {
					lc.Bias = tr.Leaf(c.Bias)
					wrt = append(wrt, lc.Bias)
				}
				var y *tensor.Tensor
				if fused {
					y = lc.ForwardAct(lx, act.f)
				} else if y = lc.Forward(lx); act.f != nil {
					y = act.f(y)
				}
				gs := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{g}, wrt, false)
				return append([]*tensor.Tensor{tensor.StopGradient(y)}, gs...)
			}
			for _, one := range []bool{false, true} {
				x, g := x, g
				if one {
					x = tensor.Squeeze(tensor.Slice(x, []int{0, 0, 0, 0}, []int{1, 3, 6, 5}), 0)
					g = tensor.Squeeze(tensor.Slice(g, []int{0, 0, 0, 0}, []int{1, 4, 6, 5}), 0)
				}
				want, got := run(false, x, g), run(true, x, g)
				require.Equal(t, want[0].Shape(), got[0].Shape())
				require.Equal(t, want[0].Float64s(), got[0].Float64s(), "%s noBias=%v one=%v: values", act.name, noBias, one)
				for i := 1; i < len(want); i++ {
					require.InDeltaSlice(t, want[i].Float64s(), got[i].Float64s(), 1e-5, "%s noBias=%v one=%v: gradient %d", act.name, noBias, one, i)
				}
			}
		}
	}
}

func TestConvPanics(t *testing.T) {
	k := tensor.NewKey(1)
	requirePanicContains(t, func() { nn.NewConv(k, 3, 4, nil, nn.ConvOptions{}) }, "nn.NewConv: kernel []: want 1 to 3 spatial dimensions")
	requirePanicContains(t, func() { nn.NewConv2d(k, 3, 4, 3, nn.ConvOptions{Groups: 2}) }, "nn.NewConv: 3 to 4 channels in 2 groups")
	requirePanicContains(t, func() { nn.NewConv2d(k, 3, 4, 0, nn.ConvOptions{}) }, "kernel [0 0]: want positive sizes")
	requirePanicContains(t, func() { nn.NewConv2d(k, 3, 4, 3, nn.ConvOptions{Stride: []int{1, 2, 3}}) }, "stride [1 2 3]: want one value or 2")
	requirePanicContains(t, func() { nn.NewConv2d(k, 3, 4, 3, nn.ConvOptions{Padding: nn.Padding(1, 2, 3)}) }, "padding [[1 1] [2 2] [3 3]]: want one pair or 2")
	requirePanicContains(t, func() { nn.NewConvTranspose2d(k, 3, 4, 3, nn.ConvTransposeOptions{Padding: tensor.SamePadding}) }, "padding SAME: want explicit pairs or VALID")
	c := nn.NewConv2d(k, 3, 4, 3, nn.ConvOptions{})
	requirePanicContains(t, func() { c.Forward(tensor.Zeros(tensor.Float32, 2, 5, 7, 7)) }, "nn.Conv: x f32[2,5,7,7], kernel f32[4,3,3,3]: want x [N, 3, 2 spatial dimensions]")
	requirePanicContains(t, func() { nn.NewMaxPool(nil, nn.PoolOptions{}) }, "nn.NewMaxPool: kernel []")
	requirePanicContains(t, func() { nn.NewMaxPool2d(2, nn.PoolOptions{ExcludePad: true}) }, "ExcludePad is for average pooling")
	requirePanicContains(t, func() { nn.NewAdaptiveAvgPool(0) }, "want positive output sizes")
	requirePanicContains(t, func() { nn.NewGroupNorm(3, 4, nn.GroupNormOptions{}) }, "nn.NewGroupNorm: 3 groups of 4 channels")
	requirePanicContains(t, func() { nn.NewBatchNorm(4, nn.BatchNormOptions{Momentum: 1}) }, "momentum 1 is not in [0, 1)")
}

func TestPool(t *testing.T) {
	x := tensor.FromFloat32([]float32{
		1, 2, 3, 4,
		5, 6, 7, 8,
		9, 10, 11, 12,
		13, 14, 15, 16,
	}, 1, 1, 4, 4)
	// Equinox's default stride is 1.
	assert.Equal(t, []float64{6, 7, 8, 10, 11, 12, 14, 15, 16}, nn.NewMaxPool2d(2, nn.PoolOptions{}).Forward(x).Float64s())
	assert.Equal(t, []float64{6, 8, 14, 16}, nn.NewMaxPool2d(2, nn.PoolOptions{Stride: []int{2}}).Forward(x).Float64s())
	assert.Equal(t, []float64{3.5, 5.5, 11.5, 13.5}, nn.NewAvgPool2d(2, nn.PoolOptions{Stride: []int{2}}).Forward(x).Float64s())
	// Padding counts as zeros in a mean, unless ExcludePad.
	pad := nn.PoolOptions{Stride: []int{2}, Padding: nn.Padding(1)}
	assert.Equal(t, []float64{0.25, 1.25, 1, 3.5, 8.5, 5, 3.25, 7.25, 4}, nn.NewAvgPool2d(2, pad).Forward(x).Float64s())
	pad.ExcludePad = true
	assert.Equal(t, []float64{1, 2.5, 4, 7, 8.5, 10, 13, 14.5, 16}, nn.NewAvgPool2d(2, pad).Forward(x).Float64s())
	// Ceil rounding: a last window that starts inside the input.
	ceil := nn.PoolOptions{Stride: []int{3}, UseCeil: true}
	assert.Equal(t, []float64{11, 12, 15, 16}, nn.NewMaxPool2d(3, ceil).Forward(x).Float64s())
	assert.Equal(t, []float64{11}, nn.NewMaxPool2d(3, nn.PoolOptions{Stride: []int{3}}).Forward(x).Float64s())
	// Global average pooling, one example.
	assert.Equal(t, []float64{8.5}, nn.NewAdaptiveAvgPool(1, 1).Forward(tensor.Reshape(x, 1, 4, 4)).Float64s())
}

func TestStateAndBatchNorm(t *testing.T) {
	type model struct {
		A, B nn.BatchNorm
		Seq  nn.Sequential
	}
	m := model{A: nn.NewBatchNorm(3, nn.BatchNormOptions{}), B: nn.NewBatchNorm(3, nn.BatchNormOptions{Momentum: 0.5}),
		Seq: nn.NewSequential(nn.NewConv1d(tensor.NewKey(1), 3, 3, 1, nn.ConvOptions{}), nn.NewBatchNorm(3, nn.BatchNormOptions{}))}
	bn := m.A
	requirePanicContains(t, func() { nn.State{}.Get(bn.Index) }, "a batch_norm layer's index was never numbered: build the model's State with nn.MakeWithState")
	m, s := nn.MakeWithState(m)
	require.Len(t, s.Values, 3)
	assert.Equal(t, "batch_norm#1", m.A.Index.Key())
	assert.Equal(t, "batch_norm#2", m.B.Index.Key())
	assert.Equal(t, []float64{0, 0, 0}, s.Get(m.A.Index)[0].Float64s())
	assert.Equal(t, []float64{1, 1, 1}, s.Get(m.A.Index)[1].Float64s())
	// The state is a pytree; its leaves are not the model's.
	assert.Len(t, pytree.Leaves(s), 6)
	assert.Len(t, pytree.Leaves(m), 8) // weights and biases of A, B, the conv and the BatchNorm in Seq

	x := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 2, 3, 2)
	y, s2 := m.B.Forward(x, s)
	// Channel c holds {1,2,7,8}+2c: mean 4.5+2c, biased variance 9.25.
	want := []float64{-3.5, -2.5, -3.5, -2.5, -3.5, -2.5, 2.5, 3.5, 2.5, 3.5, 2.5, 3.5}
	for i, v := range y.Float64s() {
		assert.InDelta(t, want[i]/math.Sqrt(9.25+1e-5), v, 1e-5)
	}
	assert.InDeltaSlice(t, []float64{2.25, 3.25, 4.25}, s2.Get(m.B.Index)[0].Float64s(), 1e-6) // 0.5·0 + 0.5·mean
	assert.InDeltaSlice(t, []float64{5.125, 5.125, 5.125}, s2.Get(m.B.Index)[1].Float64s(), 1e-5)
	assert.Equal(t, []float64{0, 0, 0}, s.Get(m.B.Index)[0].Float64s(), "Set returns a new State")
	// Inference uses the running statistics and leaves the state alone.
	inf := nn.InferenceMode(m, true)
	yi, s3 := inf.B.Forward(x, s2)
	assert.Equal(t, s2, s3)
	for i, v := range yi.Float64s() {
		c := (i / 2) % 3
		assert.InDelta(t, (x.Float64s()[i]-(2.25+float64(c)))/math.Sqrt(5.125+1e-5), v, 1e-5)
	}
	assert.False(t, nn.InferenceMode(inf, false).B.Inference)
	// A Sequential threads the state; Call without one panics.
	_, s4 := m.Seq.ForwardState(x, s, tensor.NewKey(0))
	assert.NotEqual(t, s.Values["batch_norm#3"][0].Float64s(), s4.Values["batch_norm#3"][0].Float64s())
	requirePanicContains(t, func() { m.Seq.Forward(x, tensor.NewKey(0)) }, "nn.BatchNorm: needs a State")
}

func TestGroupNormGradient(t *testing.T) {
	g := nn.NewGroupNorm(2, 4, nn.GroupNormOptions{})
	g.Weight, g.Bias = randn(1, 4), randn(2, 4)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
		g.Weight, g.Bias = xs[1], xs[2]
		return g.Forward(xs[0])
	}, randn(3, 2, 4, 3), g.Weight, g.Bias)
}
