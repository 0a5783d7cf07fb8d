package nn_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// nn.MultiHeadAttention (with biases, with and without the causal mask),
// nn.LayerNorm and tensor.SoftmaxCrossEntropy against PyTorch 1.13 on
// identical weights: the float64 outputs and gradients that
// testdata/torch_attention.py computed with torch.nn.MultiheadAttention,
// torch.nn.LayerNorm and F.cross_entropy.
func TestTorchAttentionLayerNormCrossEntropy(t *testing.T) {
	raw, err := os.ReadFile("testdata/torch_attention.json")
	require.NoError(t, err)
	var f struct {
		Cases []torchCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &f))
	require.Len(t, f.Cases, 4)
	// PyTorch stores a Linear's weight [out, in]; gonox's is [in, out].
	linear := func(c torchCase, w, b string) nn.Linear {
		return nn.Linear{W: tensor.Transpose(c.tensor(t, w)), B: c.tensor(t, b)}
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			x, g := c.tensor(t, "x"), c.tensor(t, "g")
			switch c.Kind {
			case "mha":
				a := nn.NewMultiHeadAttention(tensor.NewKey(0), x.Shape()[2], int(c.num("heads")),
					nn.AttentionOptions{Bias: true, Causal: c.flag("causal")})
				a.QueryProj, a.KeyProj, a.ValueProj = linear(c, "wq", "bq"), linear(c, "wk", "bk"), linear(c, "wv", "bv")
				a.OutputProj = linear(c, "wo", "bo")
				y, dx, da := layerGrads(a, x, g, func(a nn.MultiHeadAttention, x *tensor.Tensor) *tensor.Tensor { return a.Forward(x) })
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
				for _, p := range []struct {
					l    nn.Linear
					w, b string
				}{{da.QueryProj, "dwq", "dbq"}, {da.KeyProj, "dwk", "dbk"}, {da.ValueProj, "dwv", "dbv"}, {da.OutputProj, "dwo", "dbo"}} {
					requireTorch(t, c, p.w, tensor.Transpose(p.l.W))
					requireTorch(t, c, p.b, p.l.B)
				}
			case "layernorm":
				ln := nn.NewLayerNorm(x.Shape()[2], nn.LayerNormOptions{})
				ln.Weight, ln.Bias = c.tensor(t, "w"), c.tensor(t, "b")
				y, dx, dl := layerGrads(ln, x, g, func(l nn.LayerNorm, x *tensor.Tensor) *tensor.Tensor { return l.Forward(x) })
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
				requireTorch(t, c, "dw", dl.Weight)
				requireTorch(t, c, "db", dl.Bias)
			case "cross_entropy":
				labels := tensor.FromInts(c.ints("labels", 0))
				y, dx, _ := layerGrads(struct{}{}, x, g, func(_ struct{}, x *tensor.Tensor) *tensor.Tensor {
					return tensor.SoftmaxCrossEntropy(x, labels)
				})
				requireTorch(t, c, "y", y)
				requireTorch(t, c, "dx", dx)
			default:
				t.Fatalf("unknown kind %q", c.Kind)
			}
		})
	}
}
