package nn_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// WeightNorm and SpectralNorm: hand-worked values, finite differences, and
// PyTorch 1.13's weight_norm and spectral_norm on identical weights and
// inputs (testdata/torch_norm.py, committed as testdata/torch_norm.json).

func TestWeightNormHand(t *testing.T) {
	// W [in 2, out 2] = [[3, 0], [4, 1]]: column (output) norms 5 and 1.
	lin := nn.Linear{W: tensor.FromFloat32([]float32{3, 0, 4, 1}, 2, 2)}
	wn := nn.NewWeightNorm(lin, nn.WeightNormOptions{})
	require.Equal(t, "W", wn.WeightPath)
	require.Equal(t, 1, wn.Axis)
	require.Equal(t, []int{1, 2}, wn.G.Shape())
	require.InDeltaSlice(t, []float32{5, 1}, wn.G.Float32s(), 1e-6)
	// A fresh WeightNorm computes what its layer does.
	require.InDeltaSlice(t, []float32{3, 0, 4, 1}, wn.Weight().Float32s(), 1e-6)

	// G = [10, 3]: the columns become 10·W[:,0]/5 and 3·W[:,1]/1.
	wn.G = tensor.FromFloat32([]float32{10, 3}, 1, 2)
	require.InDeltaSlice(t, []float32{6, 0, 8, 3}, wn.Weight().Float32s(), 1e-6)
	x := tensor.FromFloat32([]float32{1, 2}, 1, 2)
	require.InDeltaSlice(t, []float32{1*6 + 2*8, 2 * 3}, wn.Forward(x).Float32s(), 1e-5)

	// One norm over everything: ‖W‖ = √26.
	all := nn.NewWeightNorm(lin, nn.WeightNormOptions{AllAxes: true})
	require.Equal(t, []int{1, 1}, all.G.Shape())
	require.InDelta(t, 5.0990195, all.G.Float32s()[0], 1e-5)

	// Conv: one norm per output channel, over [in, k...].
	conv := nn.NewConv2d(tensor.NewKey(1), 2, 3, 2, nn.ConvOptions{})
	cw := nn.NewWeightNorm(conv, nn.WeightNormOptions{})
	require.Equal(t, []int{3, 1, 1, 1}, cw.G.Shape())
	w := conv.Weight.Float32s()
	for o := range 3 {
		var ss float64
		for _, v := range w[o*8 : (o+1)*8] {
			ss += float64(v) * float64(v)
		}
		g := float64(cw.G.Float32s()[o])
		require.InDelta(t, ss, g*g, 1e-5)
	}

	// A custom path: the weight of the second layer of an MLP.
	mlp := nn.NewMLP(tensor.NewKey(2), []int{3, 4, 2}, nn.MLPOptions{})
	mw := nn.NewWeightNorm(mlp, nn.WeightNormOptions{WeightPath: "Layers[1].W", Axis: 1})
	require.Equal(t, []int{1, 2}, mw.G.Shape())
	require.InDeltaSlice(t, mlp.Forward(randn(3, 5, 3)).Float32s(), mw.Forward(randn(3, 5, 3)).Float32s(), 1e-5)

	requirePanicContains(t, func() { nn.NewWeightNorm(mlp, nn.WeightNormOptions{}) }, "nn.NewWeightNorm", "nn.MLP", "WeightPath")
	requirePanicContains(t, func() { nn.NewWeightNorm(mlp, nn.WeightNormOptions{WeightPath: "Layers[3].W"}) }, "nn.NewWeightNorm", `"Layers[3].W"`)
	requirePanicContains(t, func() { nn.NewWeightNorm(mlp, nn.WeightNormOptions{WeightPath: "Layers[0].W", Axis: 2}) }, "axis 2")
}

func TestWeightNormGrad(t *testing.T) {
	conv := nn.NewConv2d(tensor.NewKey(3), 2, 3, 2, nn.ConvOptions{Padding: nn.Padding(1)})
	wn := nn.NewWeightNorm(conv, nn.WeightNormOptions{})
	wn.G = tensor.MulScalar(wn.G, 1.7)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
		m := wn
		m.G, m.Layer.Weight, m.Layer.Bias = xs[0], xs[1], xs[2]
		return m.Forward(xs[3])
	}, wn.G, conv.Weight, conv.Bias, randn(4, 2, 2, 3, 3))
}

func TestSpectralNormHand(t *testing.T) {
	// W [in 2, out 3], viewed [out, in] = [[0, 1], [3, 0], [0, 0]]:
	// singular values 3 and 1, top vectors u = e2, v = e1.
	lin := nn.Linear{W: tensor.FromFloat32([]float32{0, 3, 0, 1, 0, 0}, 2, 3), B: tensor.Zeros(tensor.Float32, 3)}
	sn := nn.NewSpectralNorm(tensor.NewKey(4), lin, nn.SpectralNormOptions{})
	require.Equal(t, 1, sn.Iterations)
	require.Equal(t, 1e-12, sn.Eps)
	sn, state := nn.MakeWithState(sn)
	uv := state.Get(sn.Index)
	require.Equal(t, []int{3}, uv[0].Shape())
	require.Equal(t, []int{2}, uv[1].Shape())
	// 15 power iterations shrink the second direction by (1/3)^30.
	require.InDelta(t, 3, sn.Sigma(state).Float32s()[0], 1e-5)
	require.InDelta(t, 1, abs32(uv[0].Float32s()[1]), 1e-6)
	require.InDelta(t, 1, abs32(uv[1].Float32s()[0]), 1e-6)

	x := tensor.FromFloat32([]float32{1, 2}, 1, 2)
	y, next := sn.Forward(x, state)
	require.InDeltaSlice(t, []float32{2.0 / 3, 1, 0}, y.Float32s(), 1e-5)
	require.NotSame(t, state.Get(sn.Index)[0], next.Get(sn.Index)[0], "training advances u and v")

	inf := nn.InferenceMode(sn, true)
	require.True(t, inf.Inference)
	y2, same := inf.Forward(x, state)
	require.InDeltaSlice(t, y.Float32s(), y2.Float32s(), 1e-5)
	require.Same(t, state.Get(sn.Index)[0], same.Get(sn.Index)[0], "inference keeps u and v")

	// In a Sequential, behind the Module interface.
	seq := nn.InferenceMode(nn.NewSequential(sn, nn.Relu), true)
	require.True(t, seq.Layers[0].(nn.SpectralNorm[nn.Linear]).Inference)
	seq, st := nn.MakeWithState(nn.NewSequential(sn, nn.Relu))
	ys, st2 := seq.ForwardState(x, st, tensor.NewKey(0))
	require.InDeltaSlice(t, []float32{2.0 / 3, 1, 0}, ys.Float32s(), 1e-5)
	require.Len(t, st2.Values, 1)
	requirePanicContains(t, func() { sn.Call(x, tensor.Key{}) }, "nn.SpectralNorm", "State")

	requirePanicContains(t, func() {
		nn.NewSpectralNorm(tensor.NewKey(0), nn.NewMLP(tensor.NewKey(0), []int{2, 2}, nn.MLPOptions{}), nn.SpectralNormOptions{WeightPath: "Layers[0].B"})
	}, "nn.NewSpectralNorm", "at least two dimensions")
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

func TestSpectralNormGrad(t *testing.T) {
	// With u and v fixed (inference), the gradient through σ = uᵀWv is
	// that of the whole map; in training the power iterations see W with
	// its gradient stopped, as in Equinox and PyTorch.
	conv := nn.NewConv2d(tensor.NewKey(5), 2, 3, 2, nn.ConvOptions{})
	sn, state := nn.MakeWithState(nn.NewSpectralNorm(tensor.NewKey(6), conv, nn.SpectralNormOptions{Inference: true}))
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
		m := sn
		m.Layer.Weight, m.Layer.Bias = xs[0], xs[1]
		y, _ := m.Forward(xs[2], state)
		return y
	}, conv.Weight, conv.Bias, randn(7, 2, 2, 4, 3))
}

func TestTorchWeightSpectralNorm(t *testing.T) {
	cases := loadTorchFile(t, "torch_norm.json")
	require.Len(t, cases, 7)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			switch c.Kind {
			case "weightnorm_linear":
				v := c.tensor(t, "weight_v") // torch's [out, in]
				lin := nn.Linear{W: tensor.T(v), B: c.tensor(t, "bias")}
				wn := nn.NewWeightNorm(lin, nn.WeightNormOptions{AllAxes: c.flag("all_axes")})
				wn.G = tensor.Reshape(c.tensor(t, "weight_g"), wn.G.Shape()...)
				y, dx, dl := layerGrads(wn, c.tensor(t, "x"), c.tensor(t, "g"), nn.WeightNorm[nn.Linear].Forward)
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
				requireTorch(t, c, "dweight_v", tensor.T(dl.Layer.W))
				requireTorch(t, c, "dweight_g", tensor.Reshape(dl.G, c.Tensors["weight_g"].Shape...))
				requireTorch(t, c, "dbias", dl.Layer.B)
			case "weightnorm_conv2d":
				conv := nn.NewConv2d(tensor.NewKey(0), 3, 4, 3, nn.ConvOptions{Padding: nn.Padding(1)})
				conv.Weight, conv.Bias = c.tensor(t, "weight_v"), c.tensor(t, "bias")
				wn := nn.NewWeightNorm(conv, nn.WeightNormOptions{})
				wn.G = c.tensor(t, "weight_g")
				y, dx, dl := layerGrads(wn, c.tensor(t, "x"), c.tensor(t, "g"), nn.WeightNorm[nn.Conv].Forward)
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
				requireTorch(t, c, "dweight_v", dl.Layer.Weight)
				requireTorch(t, c, "dweight_g", dl.G)
				requireTorch(t, c, "dbias", dl.Layer.Bias)
			case "spectralnorm_linear":
				lin := nn.Linear{W: tensor.T(c.tensor(t, "weight")), B: c.tensor(t, "bias")}
				g := torchSpectral(t, c, lin)
				requireTorch(t, c, "dweight", tensor.T(g.Layer.W))
				requireTorch(t, c, "dbias", g.Layer.B)
			case "spectralnorm_conv2d":
				conv := nn.NewConv2d(tensor.NewKey(0), 3, 4, 3, nn.ConvOptions{Padding: nn.Padding(1)})
				conv.Weight, conv.Bias = c.tensor(t, "weight"), c.tensor(t, "bias")
				g := torchSpectral(t, c, conv)
				requireTorch(t, c, "dweight", g.Layer.Weight)
				requireTorch(t, c, "dbias", g.Layer.Bias)
			case "spectralnorm_convtranspose2d":
				conv := nn.NewConvTranspose2d(tensor.NewKey(0), 3, 2, 3, nn.ConvTransposeOptions{Stride: []int{2}})
				conv.Weight, conv.Bias = c.tensor(t, "weight"), c.tensor(t, "bias")
				g := torchSpectral(t, c, conv)
				requireTorch(t, c, "dweight", g.Layer.Weight)
				requireTorch(t, c, "dbias", g.Layer.Bias)
			default:
				t.Fatalf("unknown kind %q", c.Kind)
			}
		})
	}
}

// torchSpectral wraps layer in a SpectralNorm starting from PyTorch's u
// and v, runs the three training calls and the eval call of case c,
// comparing outputs and vectors, and returns the gradients of the last
// training call.
func torchSpectral[L nn.Module](t *testing.T, c torchCase, layer L) nn.SpectralNorm[L] {
	t.Helper()
	sn, state := nn.MakeWithState(nn.NewSpectralNorm(tensor.NewKey(0), layer, nn.SpectralNormOptions{Iterations: int(c.num("iterations"))}))
	state = state.Set(sn.Index, c.tensor(t, "u0"), c.tensor(t, "v0"))
	checkVectors := func(step int) {
		uv := state.Get(sn.Index)
		requireTorch(t, c, fmt.Sprintf("u%d", step), uv[0])
		requireTorch(t, c, fmt.Sprintf("v%d", step), uv[1])
	}
	for step := range 2 {
		var y *tensor.Tensor
		y, state = sn.Forward(c.tensor(t, fmt.Sprintf("x%d", step)), state)
		requireTorch(t, c, fmt.Sprintf("y%d", step), y)
		checkVectors(step + 1)
	}
	before := state
	y, dx, dl := layerGrads(sn, c.tensor(t, "x2"), c.tensor(t, "g"), func(m nn.SpectralNorm[L], x *tensor.Tensor) *tensor.Tensor {
		y, s := m.Forward(x, before)
		state = s
		return y
	})
	requireTorch(t, c, "y2", y)
	requireTorch(t, c, "dx", dx)
	checkVectors(3)
	ey, same := nn.InferenceMode(sn, true).Forward(c.tensor(t, "x_eval"), state)
	requireTorch(t, c, "y_eval", ey)
	require.Same(t, state.Get(sn.Index)[0], same.Get(sn.Index)[0])
	return dl
}
