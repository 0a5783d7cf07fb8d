package nn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func TestFormat(t *testing.T) {
	k := tensor.NewKey(0)
	cases := []struct {
		name  string
		model any
		want  string
	}{
		{"Linear", nn.NewLinear(k, 3, 4, nn.LinearOptions{}), "Linear{W: f32[3,4], B: f32[4]}"},
		{"Linear without bias", nn.NewLinear(k, 3, 4, nn.LinearOptions{NoBias: true}), "Linear{W: f32[3,4], B: nil}"},
		{"Embedding", nn.NewEmbedding(k, 100, 16, nn.EmbeddingOptions{}), `Embedding{
  W: f32[100,16],
  Padding: false,
  PaddingIdx: 0,
  MaxNorm: 0,
  NormType: 0,
}`},
		{"RMSNorm", nn.NewRMSNorm(16, nn.RMSNormOptions{}), "RMSNorm{Weight: f32[16], Bias: nil, Eps: 1e-05}"},
		{"Dropout", nn.NewDropout(0.1), "Dropout{Rate: 0.1, Inference: false}"},
		{"Sequential", nn.NewSequential(nn.NewLinear(k, 2, 4, nn.LinearOptions{}), nn.Silu, nn.NewLayerNorm(4, nn.LayerNormOptions{Eps: 1e-6})), `Sequential{
  Layers: [
    Linear{W: f32[2,4], B: f32[4]},
    Silu,
    LayerNorm{Weight: f32[4], Bias: f32[4], Eps: 1e-06},
  ],
}`},
		{"MultiHeadAttention", nn.NewMultiHeadAttention(k, 64, 8, nn.AttentionOptions{Causal: true}), `MultiHeadAttention{
  QueryProj: Linear{W: f32[64,64], B: nil},
  KeyProj: Linear{W: f32[64,64], B: nil},
  ValueProj: Linear{W: f32[64,64], B: nil},
  OutputProj: Linear{W: f32[64,64], B: nil},
  NumHeads: 8,
  Causal: true,
  Dropout: Dropout{Rate: 0, Inference: false},
}`},
		{"MoE", nn.NewMoE(k, 64, 256, 8, nn.MoEOptions{Activation: nn.Silu}), `MoE{
  Router: f32[64,8],
  Up: f32[8,64,256],
  Down: f32[8,256,64],
  TopK: 2,
  CapacityFactor: 1.25,
  NoDrop: false,
  Senders: 0,
  Gating: GateTopKSoftmax,
  Activation: Silu,
}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, pytree.Format(c.model))
		})
	}
}
