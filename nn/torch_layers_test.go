package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// The activations, Linear, the norms without affine parameters, RMSNorm,
// Embedding, Conv's asymmetric and "same" paddings, ceil-mode and
// adaptive pooling, and the losses against PyTorch 1.13, in float64 on
// both sides: testdata/torch_layers.py wrote the inputs (exactly, with 17
// digits), the outputs and the gradients of Σ y·g in
// testdata/torch_layers.json.

// f64 returns the case's tensor name in float64.
func (c torchCase) f64(t *testing.T, name string) *tensor.Tensor {
	t.Helper()
	v, ok := c.Tensors[name]
	require.True(t, ok, "%s: no tensor %q", c.Name, name)
	return tensor.FromFloat64s(v.Data, v.Shape...)
}

// int32s returns the case's integer tensor name.
func (c torchCase) int32s(t *testing.T, name string) *tensor.Tensor {
	t.Helper()
	v := c.Tensors[name]
	ids := make([]int32, len(v.Data))
	for i, x := range v.Data {
		ids[i] = int32(x)
	}
	return tensor.FromInt32(ids, v.Shape...)
}

// float32Constants are the cases where PyTorch holds a constant as a
// float32 even in float64: hardsigmoid's and hardswish's backward (1/6),
// celu's backward (1/alpha.toFloat() in derivatives.yaml). They agree to
// float32 rounding of that constant. (gonox's LeakyReluWith slope, Selu's
// α and λ, CeluWith's alpha and RMSNorm's Eps are float64 and agree to
// float64 rounding: torch_parity3.json checks them at 1e-12.)
var float32Constants = map[string]bool{"act_HardSigmoid": true, "act_HardSwish": true, "act_Celu0.7": true,
	"kink_HardSigmoid": true, "kink_HardSwish": true, "kink_Celu0.7": true}

// requireTorch64 requires got to equal PyTorch's want to float64 rounding
// (1e-9 relative, as float64 arithmetic in another order), or to float32
// rounding (1e-7 relative) for the cases of float32Constants.
func requireTorch64(t *testing.T, c torchCase, name string, got *tensor.Tensor) {
	t.Helper()
	want, ok := c.Tensors[name]
	require.True(t, ok, "%s: no tensor %q", c.Name, name)
	require.Equal(t, want.Shape, got.Shape(), "%s: %s", c.Name, name)
	abs, rel := 1e-11, 1e-9
	if float32Constants[c.Name] {
		abs, rel = 1e-8, 1e-7
	}
	g := got.Float64s()
	for i, w := range want.Data {
		require.InDelta(t, w, g[i], abs+rel*math.Abs(w), "%s: %s[%d]", c.Name, name, i)
	}
}

// kinkPoints are the inputs of the kink cases, and jaxKinks the gradients
// of nn's activations (JAX's) at the points where PyTorch's differ:
// PyTorch takes the negative side at 0 for LeakyRelu and PReLU, gives 0 at
// ±1 for HardTanh and x/3 + ½ at ±3 for HardSwish.
var (
	kinkPoints = []float64{-3, -1, 0, 1, 3, 6}
	jaxKinks   = map[string]map[float64]float64{
		"LeakyRelu":    {0: 1},
		"LeakyRelu0.2": {0: 1},
		"PReLU":        {0: 1},
		"HardTanh":     {-1: 1, 1: 1},
		"HardSwish":    {-3: 0, 3: 1},
	}
)

// float32Only are the losses that take float32 operands only: they are
// compared in float32.
var float32Only = map[string]bool{"mse": true, "huber": true, "smooth_l1": true, "kl": true, "kl_log": true, "cosine": true}

func TestTorchLayers(t *testing.T) {
	acts := map[string]nn.Activation{
		"Relu": nn.Relu, "Gelu": nn.Gelu, "GeluExact": nn.GeluExact, "Silu": nn.Silu, "Tanh": nn.Tanh,
		"Sigmoid": nn.Sigmoid, "Softplus": nn.Softplus, "LeakyRelu": nn.LeakyRelu, "LeakyRelu0.2": nn.LeakyReluWith(0.2),
		"Elu": nn.Elu, "Elu0.5": nn.EluWith(0.5), "Selu": nn.Selu, "Celu": nn.Celu, "Celu0.7": nn.CeluWith(0.7),
		"Mish": nn.Mish, "Relu6": nn.Relu6, "HardTanh": nn.HardTanh, "HardSigmoid": nn.HardSigmoid,
		"HardSwish": nn.HardSwish, "Softsign": nn.Softsign, "Glu": nn.Glu,
	}
	seen := map[string]bool{}
	for _, c := range loadTorchFile(t, "torch_layers.json") {
		t.Run(c.Name, func(t *testing.T) {
			x, g := c.f64(t, "x"), c.f64(t, "g")
			switch c.Kind {
			case "act":
				name := c.Config["act"].(string)
				seen[name] = true
				f, ok := acts[name]
				require.True(t, ok, "no gonox activation for %q", name)
				y, dx, _ := layerGrads(f, x, g, func(f nn.Activation, x *tensor.Tensor) *tensor.Tensor { return f(x) })
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", dx)
			case "kink":
				// At a kink nn follows JAX: where PyTorch's one-sided
				// gradient differs, the activation's doc says so and
				// jaxKinks holds nn's value.
				name := c.Config["act"].(string)
				f, ok := acts[name]
				if name == "PReLU" {
					f, ok = nn.PReLU{NegativeSlope: tensor.FromFloat64s([]float64{0.25})}.Forward, true
				}
				require.True(t, ok, "no gonox activation for %q", name)
				y, dx, _ := layerGrads(f, x, g, func(f nn.Activation, x *tensor.Tensor) *tensor.Tensor { return f(x) })
				requireTorch64(t, c, "y", y)
				want, gs := c.Tensors["dx"].Data, g.Float64s()
				for i, v := range dx.Float64s() {
					if j, ok := jaxKinks[name][kinkPoints[i]]; ok {
						require.NotEqual(t, want[i], j*gs[i], "%s at %v: PyTorch agrees now: drop it from jaxKinks", name, kinkPoints[i])
						require.InDelta(t, j*gs[i], v, 1e-12, "%s at %v: JAX's gradient", name, kinkPoints[i])
						continue
					}
					require.InDelta(t, want[i], v, 1e-7+1e-7*math.Abs(want[i]), "%s at %v", name, kinkPoints[i])
				}
			case "prelu":
				// torch's per-channel slope is on axis 1: as [C, 1] it
				// broadcasts over [N, C, L].
				a := c.f64(t, "x2")
				p := nn.PReLU{NegativeSlope: tensor.Reshape(a, a.Dim(0), 1)}
				y, dx, dp := layerGrads(p, x, g, nn.PReLU.Forward)
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", dx)
				requireTorch64(t, c, "dx2", tensor.Reshape(dp.NegativeSlope, a.Dim(0)))
			case "linear":
				l := nn.Linear{W: tensor.T(c.f64(t, "weight")), B: c.f64(t, "bias")}
				y, dx, dl := layerGrads(l, x, g, nn.Linear.Forward)
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", dx)
				requireTorch64(t, c, "dweight", tensor.T(dl.W))
				requireTorch64(t, c, "dbias", dl.B)
			case "layernorm", "rmsnorm":
				eps := c.num("eps")
				var y, dx *tensor.Tensor
				if c.Kind == "layernorm" {
					n := nn.LayerNorm{Eps: eps}
					if c.flag("affine") {
						n.Weight, n.Bias = c.f64(t, "weight"), c.f64(t, "bias")
					}
					var dn nn.LayerNorm
					y, dx, dn = layerGrads(n, x, g, nn.LayerNorm.Forward)
					if c.flag("affine") {
						requireTorch64(t, c, "dweight", dn.Weight)
						requireTorch64(t, c, "dbias", dn.Bias)
					}
				} else {
					n := nn.RMSNorm{Eps: c.num("eps")}
					if c.flag("affine") {
						n.Weight = c.f64(t, "weight")
					}
					var dn nn.RMSNorm
					y, dx, dn = layerGrads(n, x, g, nn.RMSNorm.Forward)
					if c.flag("affine") {
						requireTorch64(t, c, "dweight", dn.Weight)
					}
				}
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", dx)
			case "groupnorm":
				gn := nn.NewGroupNorm(int(c.num("groups")), int(c.num("channels")), nn.GroupNormOptions{Eps: c.num("eps"), NoAffine: true})
				y, dx, _ := layerGrads(gn, x, g, nn.GroupNorm.Forward)
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", dx)
			case "batchnorm":
				checkBatchNorm(t, c, x, g, c.f64, requireTorch64, requireTorch64)
			case "embedding":
				e := nn.Embedding{W: c.f64(t, "weight")}
				ids := c.int32s(t, "x")
				y, _, de := layerGrads(e, ids, g, nn.Embedding.Forward)
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dweight", de.W)
			case "conv":
				checkTorchConv(t, c, x, g, tensor.PadZeros)
			case "convtranspose":
				nd := x.Rank() - 2
				layer := nn.ConvTranspose{Weight: c.f64(t, "weight"), Stride: c.ints("stride", nd), Dilation: c.ints("dilation", nd),
					Padding: c.pairs("padding"), OutputPadding: c.ints("output_padding", nd), Groups: int(c.num("groups"))}
				if _, ok := c.Tensors["bias"]; ok {
					layer.Bias = c.f64(t, "bias")
				}
				y, dx, dl := layerGrads(layer, x, g, nn.ConvTranspose.Forward)
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", dx)
				requireTorch64(t, c, "dweight", dl.Weight)
				if layer.Bias != nil {
					requireTorch64(t, c, "dbias", dl.Bias)
				}
			case "maxpool", "avgpool":
				nd := x.Rank() - 2
				opts := nn.PoolOptions{Stride: c.ints("stride", nd), Padding: nn.Padding(c.ints("padding", nd)...), UseCeil: c.flag("ceil")}
				var layer nn.Pool
				if c.Kind == "maxpool" {
					layer = nn.NewMaxPool(c.ints("kernel", nd), opts)
				} else {
					opts.ExcludePad = !c.flag("count_include_pad")
					layer = nn.NewAvgPool(c.ints("kernel", nd), opts)
				}
				y, dx, _ := layerGrads(layer, x, g, nn.Pool.Forward)
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", dx)
			case "adaptiveavg", "adaptivemax":
				nd := x.Rank() - 2
				layer := nn.NewAdaptiveAvgPool(c.ints("output", nd)...)
				if c.Kind == "adaptivemax" {
					layer = nn.NewAdaptiveMaxPool(c.ints("output", nd)...)
				}
				y, dx, _ := layerGrads(layer, x, g, nn.AdaptivePool.Forward)
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", dx)
			case "mha_cross":
				// gonox's mask is true where a key is visible: the
				// complement of PyTorch's key_padding_mask, as [B,1,1,S].
				kpm := c.Tensors["key_padding_mask"]
				visible := make([]bool, len(kpm.Data))
				for i, v := range kpm.Data {
					visible[i] = v == 0
				}
				mask := tensor.FromBool(visible, kpm.Shape[0], 1, 1, kpm.Shape[1])
				k, v := c.f64(t, "x2"), c.f64(t, "x3")
				a := nn.NewMultiHeadAttention(tensor.NewKey(0), x.Dim(2), int(c.num("heads")),
					nn.AttentionOptions{Bias: true, KeySize: k.Dim(2), ValueSize: v.Dim(2)})
				lin := func(w, b string) nn.Linear { return nn.Linear{W: tensor.T(c.f64(t, w)), B: c.f64(t, b)} }
				a.QueryProj, a.KeyProj, a.ValueProj, a.OutputProj = lin("wq", "bq"), lin("wk", "bk"), lin("wv", "bv"), lin("wo", "bo")
				type in struct {
					A       nn.MultiHeadAttention
					Q, K, V *tensor.Tensor
				}
				y, _, d := layerGrads(in{a, x, k, v}, x, g, func(p in, _ *tensor.Tensor) *tensor.Tensor {
					return p.A.ForwardQKV(p.Q, p.K, p.V, mask)
				})
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", d.Q)
				requireTorch64(t, c, "dx2", d.K)
				requireTorch64(t, c, "dx3", d.V)
				for _, p := range []struct {
					l    nn.Linear
					w, b string
				}{{d.A.QueryProj, "dwq", "dbq"}, {d.A.KeyProj, "dwk", "dbk"}, {d.A.ValueProj, "dwv", "dbv"}, {d.A.OutputProj, "dwo", "dbo"}} {
					requireTorch64(t, c, p.w, tensor.T(p.l.W))
					requireTorch64(t, c, p.b, p.l.B)
				}
			case "fn":
				fns := map[string]func(x *tensor.Tensor) *tensor.Tensor{
					"softmax":     func(x *tensor.Tensor) *tensor.Tensor { return tensor.Softmax(x, 1) },
					"log_softmax": func(x *tensor.Tensor) *tensor.Tensor { return tensor.LogSoftmax(x, 1) },
					"logsumexp":   func(x *tensor.Tensor) *tensor.Tensor { return tensor.LogSumExp(x, 1) },
					"cumsum":      func(x *tensor.Tensor) *tensor.Tensor { return tensor.Cumsum(x, 1) },
					"erf":         tensor.Erf,
					// F.pad's pairs run from the last dimension backwards.
					"pad": func(x *tensor.Tensor) *tensor.Tensor { return tensor.Pad(x, [][2]int{{0, 0}, {1, 3}, {2, 0}}, 0.5) },
				}
				f, ok := fns[c.Config["fn"].(string)]
				require.True(t, ok, "no gonox function for %v", c.Config["fn"])
				y, dx, _ := layerGrads(struct{}{}, x, g, func(_ struct{}, x *tensor.Tensor) *tensor.Tensor { return f(x) })
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", dx)
			case "instancenorm":
				ch := int(c.num("channels"))
				gn := nn.NewGroupNorm(ch, ch, nn.GroupNormOptions{Eps: c.num("eps")})
				gn.Weight, gn.Bias = c.f64(t, "weight"), c.f64(t, "bias")
				y, dx, dl := layerGrads(gn, x, g, nn.GroupNorm.Forward)
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", dx)
				requireTorch64(t, c, "dweight", dl.Weight)
				requireTorch64(t, c, "dbias", dl.Bias)
			case "ctc":
				labels, lp, pp := c.int32s(t, "labels"), c.tensor(t, "label_paddings"), c.tensor(t, "logit_paddings")
				y, dx, _ := layerGrads(struct{}{}, c.tensor(t, "x"), c.tensor(t, "g"), func(_ struct{}, x *tensor.Tensor) *tensor.Tensor {
					return nn.CTCLoss(x, pp, labels, lp, nn.CTCOptions{BlankID: int(c.num("blank"))})
				})
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
			case "focal":
				// float32 operands only, as the other losses.
				labels := c.tensor(t, "labels")
				var alpha []float64
				if a, ok := c.Config["alpha"]; ok {
					alpha = append(alpha, a.(float64))
				}
				y, dx, _ := layerGrads(labels, c.tensor(t, "x"), c.tensor(t, "g"), func(l, x *tensor.Tensor) *tensor.Tensor {
					return nn.SigmoidFocalLoss(x, l, c.num("gamma"), alpha...)
				})
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
			case "ce_smooth":
				// torch's label_smoothing is optax's smooth_labels of the
				// one-hot labels (SmoothLabels takes float32 only).
				labels := c.int32s(t, "x2")
				onehot := tensor.Convert(tensor.OneHot(labels, x.Dim(-1)), tensor.Float32)
				probs := nn.SmoothLabels(onehot, c.num("alpha"))
				y, dx, _ := layerGrads(probs, c.tensor(t, "x"), c.tensor(t, "g"), func(p, x *tensor.Tensor) *tensor.Tensor {
					return tensor.SoftmaxCrossEntropyProbs(x, p)
				})
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
			default:
				binary := map[string]func(a, b *tensor.Tensor) *tensor.Tensor{
					"bce":   tensor.SigmoidBinaryCrossEntropy,
					"mse":   nn.SquaredError,
					"huber": func(a, b *tensor.Tensor) *tensor.Tensor { return nn.HuberLoss(a, b, c.num("delta")) },
					// smooth_l1_loss(beta) is HuberLoss(delta=beta)/beta.
					"smooth_l1": func(a, b *tensor.Tensor) *tensor.Tensor {
						return tensor.MulScalar(nn.HuberLoss(a, b, c.num("beta")), float32(1/c.num("beta")))
					},
					"kl":     nn.KLDivergence,
					"kl_log": nn.KLDivergenceWithLogTargets,
					"cosine": func(a, b *tensor.Tensor) *tensor.Tensor { return nn.CosineSimilarity(a, b, 1e-12) },
				}
				f, ok := binary[c.Kind]
				require.True(t, ok, "unknown kind %q", c.Kind)
				x2 := c.f64(t, "x2")
				check := requireTorch64
				if float32Only[c.Kind] {
					x, x2, g, check = c.tensor(t, "x"), c.tensor(t, "x2"), c.tensor(t, "g"), requireTorch
				}
				type pair struct{ A, B *tensor.Tensor }
				y, _, dp := layerGrads(pair{x, x2}, x, g, func(p pair, _ *tensor.Tensor) *tensor.Tensor { return f(p.A, p.B) })
				check(t, c, "y", y)
				check(t, c, "dx", dp.A)
				if _, ok := c.Tensors["dx2"]; ok {
					check(t, c, "dx2", dp.B)
				}
			}
		})
	}
	for name := range acts {
		require.True(t, seen[name], "activation %s has no torch case", name)
	}
}

// checkTorchConv checks an nn.Conv case in float64 (weight, stride,
// dilation, groups, explicit or "same" padding filled by mode, optional
// bias): the output and the gradients of x, the weight and the bias for
// the cotangent g.
func checkTorchConv(t *testing.T, c torchCase, x, g *tensor.Tensor, mode tensor.PadMode) {
	t.Helper()
	nd := x.Rank() - 2
	layer := nn.Conv{Weight: c.f64(t, "weight"), Stride: c.ints("stride", nd), Dilation: c.ints("dilation", nd),
		Groups: int(c.num("groups")), PaddingMode: mode}
	if c.flag("same") {
		layer.Padding = tensor.SamePadding
	} else {
		layer.Padding = tensor.Pads(c.pairs("padding")...)
	}
	if _, ok := c.Tensors["bias"]; ok {
		layer.Bias = c.f64(t, "bias")
	}
	y, dx, dl := layerGrads(layer, x, g, nn.Conv.Forward)
	requireTorch64(t, c, "y", y)
	requireTorch64(t, c, "dx", dx)
	requireTorch64(t, c, "dweight", dl.Weight)
	if layer.Bias != nil {
		requireTorch64(t, c, "dbias", dl.Bias)
	}
}
