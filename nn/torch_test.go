package nn_test

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// The layers against PyTorch 1.13 on identical weights and inputs: the
// outputs and gradients that testdata/torch_conv.py computed (in float64)
// and committed in testdata/torch_conv.json.

type torchTensor struct {
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

type torchCase struct {
	Name    string                 `json:"name"`
	Kind    string                 `json:"kind"`
	Config  map[string]any         `json:"config"`
	Tensors map[string]torchTensor `json:"tensors"`
}

// loadTorchFile returns the cases of testdata/name, a file a
// testdata/torch_*.py script wrote.
func loadTorchFile(t *testing.T, name string) []torchCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	var f struct {
		Cases []torchCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &f))
	require.NotEmpty(t, f.Cases, name)
	return f.Cases
}

func (c torchCase) tensor(t *testing.T, name string) *tensor.Tensor {
	t.Helper()
	v, ok := c.Tensors[name]
	require.True(t, ok, "%s: no tensor %q", c.Name, name)
	return tensor.FromFloat64(v.Data, v.Shape...)
}

// ints reads a config value that is an int or a list of ints, for nd
// dimensions.
func (c torchCase) ints(key string, nd int) []int {
	switch v := c.Config[key].(type) {
	case float64:
		out := make([]int, nd)
		for i := range out {
			out[i] = int(v)
		}
		return out
	case []any:
		out := make([]int, len(v))
		for i, x := range v {
			out[i] = int(x.(float64))
		}
		return out
	}
	return nil
}

// pairs returns the case's config key, a list of [lo, hi] pairs (a
// padding per spatial axis).
func (c torchCase) pairs(key string) [][2]int {
	var out [][2]int
	for _, p := range c.Config[key].([]any) {
		q := p.([]any)
		out = append(out, [2]int{int(q[0].(float64)), int(q[1].(float64))})
	}
	return out
}

// checkBatchNorm runs a BatchNorm case on x with output gradient g: its
// tensors read by get, the output and gradients compared by req, the
// running statistics after the step by reqRun.
func checkBatchNorm(t *testing.T, c torchCase, x, g *tensor.Tensor, get func(*testing.T, string) *tensor.Tensor,
	req, reqRun func(*testing.T, torchCase, string, *tensor.Tensor)) {
	t.Helper()
	bn := nn.NewBatchNorm(int(c.num("channels")), nn.BatchNormOptions{Eps: c.num("eps"),
		Momentum: 1 - c.num("momentum"), UnbiasedRunningVar: true})
	bn.Weight, bn.Bias = get(t, "weight"), get(t, "bias")
	bn, state := nn.MakeWithState(bn)
	state = state.Set(bn.Index, get(t, "running_mean"), get(t, "running_var"))
	if c.Config["mode"] == "eval" {
		bn = nn.InferenceMode(bn, true)
	}
	var after nn.State
	y, dx, dl := layerGrads(bn, x, g, func(b nn.BatchNorm, x *tensor.Tensor) *tensor.Tensor {
		y, s := b.Forward(x, state)
		after = s
		return y
	})
	req(t, c, "y", y)
	req(t, c, "dx", dx)
	req(t, c, "dweight", dl.Weight)
	req(t, c, "dbias", dl.Bias)
	run := after.Get(bn.Index)
	reqRun(t, c, "running_mean_after", run[0])
	reqRun(t, c, "running_var_after", run[1])
}

func (c torchCase) num(key string) float64 { return c.Config[key].(float64) }

func (c torchCase) flag(key string) bool { b, _ := c.Config[key].(bool); return b }

// requireTorch requires got to equal PyTorch's float64 want within float32
// rounding.
func requireTorch(t *testing.T, c torchCase, name string, got *tensor.Tensor) {
	t.Helper()
	want := c.Tensors[name]
	require.Equal(t, want.Shape, got.Shape(), "%s: %s", c.Name, name)
	g := got.Float64s()
	for i, w := range want.Data {
		require.InDelta(t, w, g[i], 2e-5+1e-4*math.Abs(w), "%s: %s[%d]", c.Name, name, i)
	}
}

// layerGrads returns f(x) and the gradients of Σ f(x)·g with respect to
// x and the layer's parameters.
func layerGrads[L any](layer L, x, g *tensor.Tensor, f func(L, *tensor.Tensor) *tensor.Tensor) (y, dx *tensor.Tensor, dl L) {
	type in struct {
		Layer L
		X     *tensor.Tensor
	}
	vg := autodiff.ValueAndGradAux(func(p in) (*tensor.Tensor, *tensor.Tensor) {
		y := f(p.Layer, p.X)
		return tensor.Sum(tensor.Mul(y, g)), y
	})
	_, y, grads := vg(in{layer, x})
	return y, grads.X, grads.Layer
}

// layerGrads2 is layerGrads for a layer of two inputs a and b (a
// decoder's target and memory): f's output, the gradients of Σ f·g with
// respect to a, b and the layer.
func layerGrads2[L any](layer L, a, b, g *tensor.Tensor, f func(L, *tensor.Tensor, *tensor.Tensor) *tensor.Tensor) (y, da, db *tensor.Tensor, dl L) {
	type in struct {
		Layer L
		A, B  *tensor.Tensor
	}
	vg := autodiff.ValueAndGradAux(func(p in) (*tensor.Tensor, *tensor.Tensor) {
		y := f(p.Layer, p.A, p.B)
		return tensor.Sum(tensor.Mul(y, g)), y
	})
	_, y, grads := vg(in{layer, a, b})
	return y, grads.A, grads.B, grads.Layer
}

func TestTorchEquality(t *testing.T) {
	for _, c := range loadTorchFile(t, "torch_conv.json") {
		t.Run(c.Name, func(t *testing.T) {
			x, g := c.tensor(t, "x"), c.tensor(t, "g")
			nd := x.Rank() - 2
			switch c.Kind {
			case "conv":
				layer := nn.Conv{Weight: c.tensor(t, "weight"), Stride: c.ints("stride", nd), Dilation: c.ints("dilation", nd),
					Padding: nn.Padding(c.ints("padding", nd)...), Groups: int(c.num("groups"))}
				if c.flag("bias") {
					layer.Bias = c.tensor(t, "bias")
				}
				y, dx, dl := layerGrads(layer, x, g, nn.Conv.Forward)
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
				requireTorch(t, c, "dweight", dl.Weight)
				if c.flag("bias") {
					requireTorch(t, c, "dbias", dl.Bias)
				}
			case "convtranspose":
				pad := c.ints("padding", nd)
				pairs := make([][2]int, nd)
				for d := range pairs {
					pairs[d] = [2]int{pad[d], pad[d]}
				}
				layer := nn.ConvTranspose{Weight: c.tensor(t, "weight"), Stride: c.ints("stride", nd), Dilation: c.ints("dilation", nd),
					Padding: pairs, OutputPadding: c.ints("output_padding", nd), Groups: int(c.num("groups"))}
				if c.flag("bias") {
					layer.Bias = c.tensor(t, "bias")
				}
				y, dx, dl := layerGrads(layer, x, g, nn.ConvTranspose.Forward)
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
				requireTorch(t, c, "dweight", dl.Weight)
				if c.flag("bias") {
					requireTorch(t, c, "dbias", dl.Bias)
				}
			case "maxpool", "avgpool":
				k := c.ints("kernel", nd)
				opts := nn.PoolOptions{Stride: c.ints("stride", nd), Padding: nn.Padding(c.ints("padding", nd)...)}
				if c.Config["dilation"] != nil {
					opts.Dilation = c.ints("dilation", nd)
				}
				var layer nn.Pool
				if c.Kind == "maxpool" {
					layer = nn.NewMaxPool(k, opts)
				} else {
					opts.ExcludePad = !c.flag("count_include_pad")
					layer = nn.NewAvgPool(k, opts)
				}
				y, dx, _ := layerGrads(layer, x, g, nn.Pool.Forward)
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
			case "adaptiveavg", "adaptivemax":
				layer := nn.NewAdaptiveAvgPool(c.ints("output", nd)...)
				if c.Kind == "adaptivemax" {
					layer = nn.NewAdaptiveMaxPool(c.ints("output", nd)...)
				}
				y, dx, _ := layerGrads(layer, x, g, nn.AdaptivePool.Forward)
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
			case "batchnorm":
				checkBatchNorm(t, c, x, g, c.tensor, requireTorch, requireTorch)
			case "groupnorm":
				gn := nn.NewGroupNorm(int(c.num("groups")), int(c.num("channels")), nn.GroupNormOptions{Eps: c.num("eps")})
				gn.Weight, gn.Bias = c.tensor(t, "weight"), c.tensor(t, "bias")
				y, dx, dl := layerGrads(gn, x, g, nn.GroupNorm.Forward)
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
				requireTorch(t, c, "dweight", dl.Weight)
				requireTorch(t, c, "dbias", dl.Bias)
			default:
				t.Fatalf("unknown kind %q", c.Kind)
			}
		})
	}
}
