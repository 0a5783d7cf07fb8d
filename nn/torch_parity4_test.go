package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// The parts of nn that testdata/torch_parity4.py checks against PyTorch
// 1.13 in float64 on both sides, to 1e-12 (requireTight): BatchNorm's eps
// and momentum and SpectralNorm's eps as float64 constants, and the
// losses of losses_parity4.go, CTCLoss in float64 and EmbeddingBag.

func TestTorchParity4(t *testing.T) {
	kinds := map[string]int{}
	for _, c := range loadTorchFile(t, "torch_parity4.json") {
		t.Run(c.Name, func(t *testing.T) {
			switch c.Kind {
			case "batchnorm":
				// The running statistics (1e-3 to 1e-5) to 1e-12 relative.
				checkBatchNorm(t, c, c.f64(t, "x"), c.f64(t, "g"), c.f64, requireTight, requireRelative)
			case "spectral":
				// Linear's W is [in, out]: PyTorch's weight transposed.
				lin := nn.Linear{W: tensor.Transpose(c.f64(t, "weight"), 1, 0)}
				s, state := nn.MakeWithState(nn.NewSpectralNorm(tensor.NewKey(1), lin, nn.SpectralNormOptions{Eps: c.num("eps")}))
				state = state.Set(s.Index, c.f64(t, "u"), c.f64(t, "v"))
				l, after := s.Normalized(state)
				uv := after.Get(s.Index)
				requireTight(t, c, "u_after", uv[0])
				requireTight(t, c, "v_after", uv[1])
				requireTight(t, c, "sigma", s.Sigma(after))
				requireTight(t, c, "y", tensor.Transpose(l.W, 1, 0))
			case "bag":
				checkEmbeddingBag(t, c)
			default:
				checkParity4Loss(t, c)
			}
		})
		kinds[c.Kind]++
	}
	require.Equal(t, 4, kinds["batchnorm"])
	require.Equal(t, 1, kinds["spectral"])
	require.Len(t, kinds, 12, "every kind of case ran: %v", kinds)
}

// requireRelative requires got to equal want to 1e-12 relative, however
// small want is.
func requireRelative(t *testing.T, c torchCase, name string, got *tensor.Tensor) {
	t.Helper()
	want, ok := c.Tensors[name]
	require.True(t, ok, "%s: no tensor %q", c.Name, name)
	require.Equal(t, want.Shape, got.Shape(), "%s: %s", c.Name, name)
	g := got.Float64s()
	for i, w := range want.Data {
		require.InDelta(t, w, g[i], 1e-12*math.Abs(w), "%s: %s[%d]", c.Name, name, i)
	}
}

// checkParity4Loss checks a loss case: y and the gradients torch wrote.
func checkParity4Loss(t *testing.T, c torchCase) {
	t.Helper()
	x, g := c.f64(t, "x"), tensor.OnesLike(c.f64(t, "y"))
	if _, ok := c.Tensors["g"]; ok {
		g = c.f64(t, "g")
	}
	type pair struct{ A, B *tensor.Tensor }
	var red nn.Reduction
	if c.Kind != "kl_batchmean" && c.Kind != "ctc" {
		red = parity3Reduction(t, c)
	}
	switch c.Kind {
	case "hinge_embedding":
		y := c.f64(t, "x2")
		v, dx := lossGrads(x, g, func(x *tensor.Tensor) *tensor.Tensor { return nn.HingeEmbeddingLoss(x, y, c.num("margin"), red) })
		requireTight(t, c, "y", v)
		requireTight(t, c, "dx", dx)
	case "cosine_embedding":
		y := c.f64(t, "x3")
		v, d := lossGrads(pair{x, c.f64(t, "x2")}, g, func(a pair) *tensor.Tensor {
			return nn.CosineEmbeddingLoss(a.A, a.B, y, c.num("margin"), red)
		})
		requireTight(t, c, "y", v)
		requireTight(t, c, "dx", d.A)
		requireTight(t, c, "dx2", d.B)
	case "soft_margin":
		y := c.f64(t, "x2")
		v, dx := lossGrads(x, g, func(x *tensor.Tensor) *tensor.Tensor { return nn.SoftMarginLoss(x, y, red) })
		requireTight(t, c, "y", v)
		requireTight(t, c, "dx", dx)
	case "multilabel_margin":
		labels := c.int32s(t, "labels")
		v, dx := lossGrads(x, g, func(x *tensor.Tensor) *tensor.Tensor { return nn.MultiLabelMarginLoss(x, labels, red) })
		requireTight(t, c, "y", v)
		requireTight(t, c, "dx", dx)
	case "multilabel_soft_margin":
		o := nn.MultiLabelSoftMarginLossOptions{Reduction: red}
		if _, ok := c.Tensors["weight"]; ok {
			o.Weights = c.f64(t, "weight")
		}
		v, d := lossGrads(pair{x, c.f64(t, "x2")}, g, func(a pair) *tensor.Tensor {
			return nn.MultiLabelSoftMarginLoss(a.A, a.B, o)
		})
		requireTight(t, c, "y", v)
		requireTight(t, c, "dx", d.A)
		requireTight(t, c, "dx2", d.B)
	case "bce":
		o := nn.BCEOptions{Reduction: red}
		if _, ok := c.Tensors["weight"]; ok {
			o.Weight = c.f64(t, "weight")
		}
		v, d := lossGrads(pair{x, c.f64(t, "x2")}, g, func(a pair) *tensor.Tensor {
			return nn.BinaryCrossEntropy(a.A, a.B, o)
		})
		requireTight(t, c, "y", v)
		requireTight(t, c, "dx", d.A)
		requireTight(t, c, "dx2", d.B)
	case "bce_value":
		// The clamped logs: finite values, and finite gradients: 0
		// through a clamped log, ∓1/(1-p) or 1/p through the other
		// (PyTorch's backward gives (p-t)/1e-12 at p of 0 or 1).
		v, dx := lossGrads(x, g, func(x *tensor.Tensor) *tensor.Tensor {
			return nn.BinaryCrossEntropy(x, c.f64(t, "x2"), nn.BCEOptions{Reduction: red})
		})
		requireTight(t, c, "y", v)
		require.Equal(t, []float64{0, 0, 1, -1}, dx.Float64s()[:4])
	case "ctc":
		labels, lp, pp := c.int32s(t, "labels"), c.f64(t, "label_paddings"), c.f64(t, "logit_paddings")
		v, dx := lossGrads(x, g, func(x *tensor.Tensor) *tensor.Tensor {
			return nn.CTCLoss(x, pp, labels, lp, nn.CTCOptions{BlankID: int(c.num("blank"))})
		})
		requireTight(t, c, "y", v)
		requireTight(t, c, "dx", dx)
	case "kl_batchmean":
		v, d := lossGrads(pair{x, c.f64(t, "x2")}, g, func(a pair) *tensor.Tensor {
			return tensor.Div(tensor.Sum(nn.KLDivergence(a.A, a.B)), tensor.ScalarFloat64(float64(a.A.Dim(0))))
		})
		requireTight(t, c, "y", v)
		requireTight(t, c, "dx", d.A)
		requireTight(t, c, "dx2", d.B)
	default:
		t.Fatalf("%s: unknown kind %q", c.Name, c.Kind)
	}
}

// checkEmbeddingBag checks an embedding_bag case: the bags and the
// gradients of the weight (and of the per-sample weights).
func checkEmbeddingBag(t *testing.T, c torchCase) {
	t.Helper()
	mode := map[string]nn.BagMode{"sum": nn.BagSum, "mean": nn.BagMean, "max": nn.BagMax}[c.Config["mode"].(string)]
	ids := c.int32s(t, "indices")
	var offsets *tensor.Tensor
	if _, ok := c.Tensors["offsets"]; ok {
		offsets = c.int32s(t, "offsets")
	}
	type in struct{ W, P *tensor.Tensor }
	args := in{W: c.f64(t, "weight")}
	if _, ok := c.Tensors["x"]; ok {
		args.P = c.f64(t, "x")
	}
	e := nn.EmbeddingBag{Mode: mode, IncludeLastOffset: c.flag("include_last_offset")}
	if p, ok := c.Config["padding_idx"]; ok {
		e.Padding, e.PaddingIdx = true, int(p.(float64))
	}
	if v, ok := c.Config["max_norm"]; ok {
		e.MaxNorm = v.(float64)
	}
	switch v := c.Config["norm_type"].(type) {
	case float64:
		e.NormType = v
	case string: // "inf"
		e.NormType = math.Inf(1)
	}
	v, d := lossGrads(args, c.f64(t, "g"), func(a in) *tensor.Tensor {
		e := e
		e.W = a.W
		return e.Forward(ids, offsets, a.P)
	})
	requireTight(t, c, "y", v)
	requireTight(t, c, "dweight", d.W)
	if args.P != nil {
		requireTight(t, c, "dx", d.P)
	}
	if _, ok := c.Tensors["renormed"]; ok {
		e.W = args.W
		requireTight(t, c, "renormed", e.Renorm(ids).W)
	}
}
