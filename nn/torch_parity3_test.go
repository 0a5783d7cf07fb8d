package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// The parts of nn that testdata/torch_parity3.py checks against PyTorch
// 1.13 in float64 on both sides, to 1e-12: the activations with a
// parameter (float64 constants in float64 computations), the eps of
// RMSNorm, LayerNorm and GroupNorm,
// the shrink activations, Softmin and Threshold, Embedding's padding and
// max norm, CrossEntropy with probability targets, NLLLoss, the
// optax-style losses of losses.go in float64 and the PyTorch-style losses
// of losses_torch.go.

// requireTight requires got to equal PyTorch's want to 1e-12 relative,
// for values below 1 too (an absolute floor of 1e-12 hid a 4e-8 relative
// error in BatchNorm's running variance), and exactly where want is 0:
// float64 arithmetic in another order, where a constant rounded to
// float32 (1e-8 relative) fails.
func requireTight(t *testing.T, c torchCase, name string, got *tensor.Tensor) {
	t.Helper()
	want, ok := c.Tensors[name]
	require.True(t, ok, "%s: no tensor %q", c.Name, name)
	require.Equal(t, want.Shape, got.Shape(), "%s: %s", c.Name, name)
	require.Equal(t, tensor.Float64, got.DType(), "%s: %s", c.Name, name)
	g := got.Float64s()
	for i, w := range want.Data {
		require.InDelta(t, w, g[i], max(1e-12*math.Abs(w), 1e-300), "%s: %s[%d]", c.Name, name, i)
	}
}

// parity3Activations are the activations of the act cases, by name.
func parity3Activations(c torchCase) nn.Activation {
	switch c.Config["act"].(string) {
	case "LeakyRelu":
		return nn.LeakyRelu
	case "LeakyRelu0.2":
		return nn.LeakyReluWith(0.2)
	case "Elu0.3":
		return nn.EluWith(0.3)
	case "Selu":
		return nn.Selu
	case "Celu0.7":
		return nn.CeluWith(0.7)
	case "Celu":
		return nn.Celu
	case "Softmin":
		return nn.Softmin
	case "Softmin0":
		return nn.SoftminAxis(0)
	case "HardShrink":
		return nn.HardShrink
	case "HardShrink0.3":
		return nn.HardShrinkWith(0.3)
	case "SoftShrink":
		return nn.SoftShrink
	case "SoftShrink0.3":
		return nn.SoftShrinkWith(0.3)
	case "TanhShrink":
		return nn.TanhShrink
	case "Threshold":
		return nn.Threshold(c.num("threshold"), c.num("value"))
	}
	return nil
}

func TestTorchParity3(t *testing.T) {
	kinds := map[string]int{}
	for _, c := range loadTorchFile(t, "torch_parity3.json") {
		t.Run(c.Name, func(t *testing.T) {
			x, g := c.f64(t, "x"), c.f64(t, "g")
			switch c.Kind {
			case "act":
				f := parity3Activations(c)
				require.NotNil(t, f, "no gonox activation for %v", c.Config["act"])
				y, dx, _ := layerGrads(f, x, g, func(f nn.Activation, x *tensor.Tensor) *tensor.Tensor { return f(x) })
				requireTight(t, c, "y", y)
				requireTight(t, c, "dx", dx)
			case "rmsnorm":
				n := nn.RMSNorm{Eps: c.num("eps")}
				if _, ok := c.Tensors["weight"]; ok {
					n.Weight = c.f64(t, "weight")
				}
				y, dx, dn := layerGrads(n, x, g, nn.RMSNorm.Forward)
				requireTight(t, c, "y", y)
				requireTight(t, c, "dx", dx)
				if n.Weight != nil {
					requireTight(t, c, "dweight", dn.Weight)
				}
			case "layernorm":
				n := nn.LayerNorm{Eps: c.num("eps")}
				if _, ok := c.Tensors["weight"]; ok {
					n.Weight, n.Bias = c.f64(t, "weight"), c.f64(t, "bias")
				}
				y, dx, dn := layerGrads(n, x, g, nn.LayerNorm.Forward)
				requireTight(t, c, "y", y)
				requireTight(t, c, "dx", dx)
				if n.Weight != nil {
					requireTight(t, c, "dweight", dn.Weight)
					requireTight(t, c, "dbias", dn.Bias)
				}
			case "groupnorm":
				n := nn.GroupNorm{Groups: int(c.num("groups")), Eps: c.num("eps"), Weight: c.f64(t, "weight"), Bias: c.f64(t, "bias")}
				y, dx, dn := layerGrads(n, x, g, nn.GroupNorm.Forward)
				requireTight(t, c, "y", y)
				requireTight(t, c, "dx", dx)
				requireTight(t, c, "dweight", dn.Weight)
				requireTight(t, c, "dbias", dn.Bias)
			case "embedding":
				e := nn.Embedding{W: c.f64(t, "weight")}
				if v, ok := c.Config["padding_idx"]; ok {
					e.Padding, e.PaddingIdx = true, int(v.(float64))
				}
				if v, ok := c.Config["max_norm"]; ok {
					e.MaxNorm, e.NormType = v.(float64), math.Inf(1)
					if p, ok := c.Config["norm_type"].(float64); ok {
						e.NormType = p
					}
				}
				ids := c.int32s(t, "x")
				y, _, de := layerGrads(e, ids, g, nn.Embedding.Forward)
				requireTight(t, c, "y", y)
				requireTight(t, c, "dweight", de.W)
				if e.MaxNorm > 0 {
					// torch renormalised the rows in place: Renorm, and
					// an SGD step (lr 0.1) from there.
					r := e.Renorm(ids)
					requireTight(t, c, "renormed", r.W)
					requireTight(t, c, "stepped", tensor.Sub(r.W, tensor.Mul(de.W, tensor.ScalarFloat64(0.1))))
				}
			case "xent_probs":
				// Gradients of the logits, the probabilities and, where
				// torch's weight required it, the weights.
				type in struct{ X, P, W *tensor.Tensor }
				opts := nn.CrossEntropyOptions{LabelSmoothing: c.num("label_smoothing"), Reduction: parity3Reduction(t, c)}
				args := in{X: x, P: c.f64(t, "x2")}
				if _, ok := c.Tensors["weight"]; ok {
					args.W = c.f64(t, "weight")
				}
				y, d := lossGrads(args, g, func(a in) *tensor.Tensor {
					o := opts
					o.Weights = a.W
					return nn.CrossEntropy(a.X, a.P, o)
				})
				requireTight(t, c, "y", y)
				requireTight(t, c, "dx", d.X)
				requireTight(t, c, "dx2", d.P)
				if args.W != nil {
					requireTight(t, c, "dweight", d.W)
				}
			case "nll":
				opts := nn.NLLLossOptions{Reduction: parity3Reduction(t, c)}
				if v, ok := c.Config["ignore_index"].(float64); ok {
					opts.Ignore, opts.IgnoreIndex = true, int32(v)
				}
				if _, ok := c.Tensors["weight"]; ok {
					opts.Weights = c.f64(t, "weight")
				}
				labels := c.int32s(t, "x2")
				y, dx := lossGrads(x, g, func(x *tensor.Tensor) *tensor.Tensor { return nn.NLLLoss(x, labels, opts) })
				requireTight(t, c, "y", y)
				requireTight(t, c, "dx", dx)
			case "optax_loss":
				type in struct{ X, Y *tensor.Tensor }
				var f func(a in) *tensor.Tensor
				switch name := c.Config["loss"].(string); name {
				case "squared_error":
					f = func(a in) *tensor.Tensor { return nn.SquaredError(a.X, a.Y) }
				case "l2":
					f = func(a in) *tensor.Tensor { return nn.L2Loss(a.X, a.Y) }
				case "huber0.7":
					f = func(a in) *tensor.Tensor { return nn.HuberLoss(a.X, a.Y, 0.7) }
				case "smooth_l1_0.3":
					// smooth_l1_loss(beta) is HuberLoss(delta = beta)/beta.
					f = func(a in) *tensor.Tensor {
						return tensor.Div(nn.HuberLoss(a.X, a.Y, 0.3), tensor.ScalarFloat64(0.3))
					}
				case "log_cosh":
					f = func(a in) *tensor.Tensor { return nn.LogCosh(a.X, a.Y) }
				case "kl_div":
					f = func(a in) *tensor.Tensor { return nn.KLDivergence(a.X, a.Y) }
				case "kl_div_log_target":
					f = func(a in) *tensor.Tensor { return nn.KLDivergenceWithLogTargets(a.X, a.Y) }
				case "focal0.7_0.3":
					labels := c.f64(t, "labels")
					f = func(a in) *tensor.Tensor { return nn.SigmoidFocalLoss(a.X, labels, 0.7, 0.3) }
				case "smooth_labels0.15":
					f = func(a in) *tensor.Tensor { return nn.SmoothLabels(a.X, 0.15) }
				case "cosine_similarity":
					f = func(a in) *tensor.Tensor { return nn.CosineSimilarity(a.X, a.Y, 1e-12) }
				default:
					t.Fatalf("no gonox loss for %q", name)
				}
				args := in{X: x}
				if _, ok := c.Tensors["x2"]; ok {
					args.Y = c.f64(t, "x2")
				}
				v, d := lossGrads(args, g, f)
				requireTight(t, c, "y", v)
				requireTight(t, c, "dx", d.X)
				if args.Y != nil {
					requireTight(t, c, "dx2", d.Y)
				}
			case "margin_ranking":
				type in struct{ X1, X2 *tensor.Tensor }
				y := c.f64(t, "x3")
				v, d := lossGrads(in{x, c.f64(t, "x2")}, g, func(a in) *tensor.Tensor {
					return nn.MarginRankingLoss(a.X1, a.X2, y, c.num("margin"), parity3Reduction(t, c))
				})
				requireTight(t, c, "y", v)
				requireTight(t, c, "dx", d.X1)
				requireTight(t, c, "dx2", d.X2)
			case "triplet":
				type in struct{ A, P, N *tensor.Tensor }
				o := nn.TripletMarginOptions{P: c.num("p"), Eps: c.num("eps"), Swap: c.flag("swap"), Reduction: parity3Reduction(t, c)}
				v, d := lossGrads(in{x, c.f64(t, "x2"), c.f64(t, "x3")}, g, func(a in) *tensor.Tensor {
					return nn.TripletMarginLoss(a.A, a.P, a.N, c.num("margin"), o)
				})
				requireTight(t, c, "y", v)
				requireTight(t, c, "dx", d.A)
				requireTight(t, c, "dx2", d.P)
				requireTight(t, c, "dx3", d.N)
			case "poisson":
				o := nn.PoissonNLLOptions{Rate: !c.flag("log_input"), Full: c.flag("full"), Eps: c.num("eps"), Reduction: parity3Reduction(t, c)}
				target := c.f64(t, "x2")
				v, dx := lossGrads(x, g, func(x *tensor.Tensor) *tensor.Tensor { return nn.PoissonNLLLoss(x, target, o) })
				requireTight(t, c, "y", v)
				requireTight(t, c, "dx", dx)
			case "gaussian":
				type in struct{ X, T, V *tensor.Tensor }
				o := nn.GaussianNLLOptions{Full: c.flag("full"), Eps: c.num("eps"), Reduction: parity3Reduction(t, c)}
				v, d := lossGrads(in{x, c.f64(t, "x2"), c.f64(t, "x3")}, g, func(a in) *tensor.Tensor {
					return nn.GaussianNLLLoss(a.X, a.T, a.V, o)
				})
				requireTight(t, c, "y", v)
				requireTight(t, c, "dx", d.X)
				requireTight(t, c, "dx2", d.T)
				requireTight(t, c, "dx3", d.V)
			case "multi_margin":
				o := nn.MultiMarginOptions{P: int(c.num("p")), Reduction: parity3Reduction(t, c)}
				if _, ok := c.Tensors["weight"]; ok {
					o.Weights = c.f64(t, "weight")
				}
				labels := c.int32s(t, "x2")
				v, dx := lossGrads(x, g, func(x *tensor.Tensor) *tensor.Tensor { return nn.MultiMarginLoss(x, labels, c.num("margin"), o) })
				requireTight(t, c, "y", v)
				requireTight(t, c, "dx", dx)
			case "pairwise":
				type in struct{ X1, X2 *tensor.Tensor }
				p := math.Inf(1)
				if v, ok := c.Config["p"].(float64); ok {
					p = v
				}
				v, d := lossGrads(in{x, c.f64(t, "x2")}, g, func(a in) *tensor.Tensor { return nn.PairwiseDistance(a.X1, a.X2, p, c.num("eps")) })
				requireTight(t, c, "y", v)
				requireTight(t, c, "dx", d.X1)
				requireTight(t, c, "dx2", d.X2)
			default:
				t.Fatalf("kind %q: no check", c.Kind)
			}
			kinds[c.Kind]++
		})
	}
	require.Len(t, kinds, 14, "every kind of case ran: %v", kinds)
}

// parity3Reduction is the case's reduction.
func parity3Reduction(t *testing.T, c torchCase) nn.Reduction {
	t.Helper()
	switch r := c.Config["reduction"]; r {
	case "mean":
		return nn.ReduceMean
	case "sum":
		return nn.ReduceSum
	case "none":
		return nn.ReduceNone
	default:
		t.Fatalf("%s: reduction %v", c.Name, r)
	}
	return 0
}

// lossGrads returns f(args) and the gradient of Σ f(args)·g with respect
// to args (g a scalar 1 for a reduced loss).
func lossGrads[A any](args A, g *tensor.Tensor, f func(A) *tensor.Tensor) (*tensor.Tensor, A) {
	vg := autodiff.ValueAndGradAux(func(a A) (*tensor.Tensor, *tensor.Tensor) {
		y := f(a)
		return tensor.Sum(tensor.Mul(y, g)), y
	})
	_, y, d := vg(args)
	return y, d
}
