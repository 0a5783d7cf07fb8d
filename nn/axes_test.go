package nn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// axesByPath returns the logical axes of every leaf, by path.
func axesByPath(tree any) map[string][]string {
	out := map[string][]string{}
	paths, leaves := pytree.LeavesWithPath(tree)
	for i, p := range paths {
		out[p.String()] = leaves[i].LogicalAxes()
	}
	return out
}

// model has one of each parameterized module, with logical axes.
type model struct {
	Embed nn.Embedding
	Norm  nn.LayerNorm
	RMS   nn.RMSNorm
	Attn  nn.MultiHeadAttention
	MLP   nn.MLP
	MoE   nn.MoE
	Head  nn.Linear
}

func newModel(key tensor.Key, axes bool) model {
	k := key.Split(5)
	var (
		e     [2]string
		ax    string
		attn  nn.AttentionAxes
		mlp   [][2]string
		moe   nn.MoEAxes
		headA [2]string
	)
	if axes {
		e = [2]string{nn.AxisVocab, nn.AxisEmbed}
		ax = nn.AxisEmbed
		attn = nn.DefaultAttentionAxes()
		mlp = nn.MegatronAxes(2)
		moe = nn.DefaultMoEAxes()
		headA = [2]string{nn.AxisEmbed, nn.AxisVocab}
	}
	return model{
		Embed: nn.NewEmbedding(k[0], 10, 8, nn.EmbeddingOptions{Axes: e}),
		Norm:  nn.NewLayerNorm(8, nn.LayerNormOptions{Axis: ax}),
		RMS:   nn.NewRMSNorm(8, nn.RMSNormOptions{Axis: ax, Bias: true}),
		Attn:  nn.NewMultiHeadAttention(k[1], 8, 2, nn.AttentionOptions{Axes: attn, Bias: true}),
		MLP:   nn.NewMLP(k[2], []int{8, 16, 8}, nn.MLPOptions{Axes: mlp}),
		MoE:   nn.NewMoE(k[3], 8, 12, 4, nn.MoEOptions{Axes: moe}),
		Head:  nn.NewLinear(k[4], 8, 10, nn.LinearOptions{Axes: headA}),
	}
}

func (m model) loss(ids *tensor.Tensor) *tensor.Tensor {
	x := m.Embed.Forward(ids)
	x = tensor.Add(x, m.Attn.Forward(m.Norm.Forward(x)))
	x = tensor.Add(x, m.MLP.Forward(m.RMS.Forward(x)))
	o := m.MoE.Forward(x)
	logits := m.Head.Forward(o.Output)
	ce := tensor.Mean(tensor.SoftmaxCrossEntropy(logits, ids))
	return tensor.Add(ce, tensor.MulScalar(o.AuxLoss, 0.01))
}

var wantAxes = map[string][]string{
	"Embed.W":           {"vocab", "embed"},
	"Norm.Weight":       {"embed"},
	"Norm.Bias":         {"embed"},
	"RMS.Weight":        {"embed"},
	"RMS.Bias":          {"embed"},
	"Attn.QueryProj.W":  {"embed", "heads"},
	"Attn.QueryProj.B":  {"heads"},
	"Attn.KeyProj.W":    {"embed", "heads"},
	"Attn.KeyProj.B":    {"heads"},
	"Attn.ValueProj.W":  {"embed", "heads"},
	"Attn.ValueProj.B":  {"heads"},
	"Attn.OutputProj.W": {"heads", "embed"},
	"Attn.OutputProj.B": {"embed"},
	"MLP.Layers[0].W":   {"embed", "mlp"},
	"MLP.Layers[0].B":   {"mlp"},
	"MLP.Layers[1].W":   {"mlp", "embed"},
	"MLP.Layers[1].B":   {"embed"},
	"MoE.Router":        {"embed", ""},
	"MoE.Up":            {"expert", "embed", "mlp"},
	"MoE.Down":          {"expert", "mlp", "embed"},
	"Head.W":            {"embed", "vocab"},
	"Head.B":            {"vocab"},
}

func TestLogicalAxesOnParameters(t *testing.T) {
	m := newModel(tensor.NewKey(0), true)
	assert.Equal(t, wantAxes, axesByPath(m))
	// Without the option nothing is annotated.
	for p, a := range axesByPath(newModel(tensor.NewKey(0), false)) {
		assert.Nil(t, a, p)
	}
}

func TestLogicalAxesSurviveMapsAndGradients(t *testing.T) {
	m := newModel(tensor.NewKey(1), true)
	scaled := pytree.Map(m, func(x *tensor.Tensor) *tensor.Tensor { return tensor.MulScalar(x, 2) })
	assert.Equal(t, wantAxes, axesByPath(scaled), "pytree.Map keeps axes")
	ids := tensor.FromInt32([]int32{1, 2, 3, 4, 5, 6, 7, 8}, 2, 4)
	loss, g := autodiff.ValueAndGradWith(func(m model, ids *tensor.Tensor) *tensor.Tensor { return m.loss(ids) })(m, ids)
	assert.False(t, loss.IsTraced())
	assert.Equal(t, wantAxes, axesByPath(g), "gradients carry the axes")
	// A gradient-descent step written with MapN keeps them as well.
	step := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sub(xs[0], tensor.MulScalar(xs[1], 0.1))
	}, m, g)
	assert.Equal(t, wantAxes, axesByPath(step))
}

func TestMegatronAxes(t *testing.T) {
	assert.Equal(t, [][2]string{{"embed", "mlp"}, {"mlp", "embed"}, {"embed", "mlp"}}, nn.MegatronAxes(3))
	assert.Empty(t, nn.MegatronAxes(0))
}

func TestLogicalAxesWithUnnamedDimension(t *testing.T) {
	l := nn.NewLinear(tensor.NewKey(0), 3, 4, nn.LinearOptions{Axes: [2]string{"", "mlp"}})
	assert.Equal(t, []string{"", "mlp"}, l.W.LogicalAxes())
	assert.Equal(t, []string{"mlp"}, l.B.LogicalAxes())
	l = nn.NewLinear(tensor.NewKey(0), 3, 4, nn.LinearOptions{Axes: [2]string{"embed", ""}})
	assert.Equal(t, []string{"embed", ""}, l.W.LogicalAxes())
	assert.Nil(t, l.B.LogicalAxes(), "an all-empty name list annotates nothing")
}
