package shard_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// tinyLM is a one-block decoder written as a plain struct: embedding,
// pre-norm causal multi-head attention and MLP with residuals, a final
// norm and an output head.
type tinyLM struct {
	Embed        nn.Embedding
	Norm1, Norm2 nn.LayerNorm
	Attn         nn.MultiHeadAttention
	MLP          nn.MLP
	NormF        nn.LayerNorm
	Head         nn.Linear
}

func newTinyLM(key tensor.Key, vocab, dim, heads int) tinyLM {
	k := key.Split(4)
	ln := func() nn.LayerNorm { return nn.NewLayerNorm(dim, nn.LayerNormOptions{Axis: nn.AxisEmbed}) }
	return tinyLM{
		Embed: nn.NewEmbedding(k[0], vocab, dim, nn.EmbeddingOptions{Axes: [2]string{nn.AxisVocab, nn.AxisEmbed}}),
		Norm1: ln(), Norm2: ln(), NormF: ln(),
		Attn: nn.NewMultiHeadAttention(k[1], dim, heads, nn.AttentionOptions{Causal: true, Bias: true, Axes: nn.DefaultAttentionAxes()}),
		MLP:  nn.NewMLP(k[2], []int{dim, 4 * dim, dim}, nn.MLPOptions{Activation: nn.Gelu, Axes: nn.MegatronAxes(2)}),
		Head: nn.NewLinear(k[3], dim, vocab, nn.LinearOptions{Axes: [2]string{nn.AxisEmbed, nn.AxisVocab}}),
	}
}

func (m tinyLM) loss(tokens, targets *tensor.Tensor) *tensor.Tensor {
	x := m.Embed.Forward(tokens) // [B,T,D]
	x = tensor.Add(x, m.Attn.Forward(m.Norm1.Forward(x)))
	x = tensor.Add(x, m.MLP.Forward(m.Norm2.Forward(x)))
	logits := m.Head.Forward(m.NormF.Forward(x)) // [B,T,V]
	return tensor.Mean(tensor.SoftmaxCrossEntropy(logits, targets))
}

// TestTransformerStrategiesByPropagation: the block, placed only with
// FilterShard and logical-axis rules, gives the loss and every gradient of
// one device on DP, FSDP, Megatron TP and FSDP+TP over meshes 1x8, 2x4,
// 4x2 and 8x1, each gradient laid out like its parameter.
func TestTransformerStrategiesByPropagation(t *testing.T) {
	const B, T, V, D, H = 8, 6, 16, 16, 4
	model := newTinyLM(tensor.NewKey(9), V, D, H)
	r := rand.New(rand.NewPCG(9, 9))
	ids := make([]int32, B*T)
	for i := range ids {
		ids[i] = int32(r.IntN(V))
	}
	tokens := tensor.FromInt32(ids, B, T)
	targets := tensor.Roll(tokens, -1, 1)
	f := func(m tinyLM, xy [2]*tensor.Tensor) *tensor.Tensor { return m.loss(xy[0], xy[1]) }
	want, wantG := autodiff.ValueAndGradWith(f)(model, [2]*tensor.Tensor{tokens, targets})
	floor := 0.0 // the largest gradient element: the scale of a zero gradient (the key bias's)
	for _, g := range pytree.Leaves(wantG) {
		for _, v := range g.Float64s() {
			floor = max(floor, abs(v))
		}
	}
	strategies := []struct {
		name  string
		rules func(data shard.Axes) shard.Rules
		data  func(m *shard.Mesh) shard.Axes
	}{
		{"dp", func(shard.Axes) shard.Rules { return nil }, func(*shard.Mesh) shard.Axes { return shard.Axes{"dp", "tp"} }},
		{"fsdp", func(d shard.Axes) shard.Rules { return shard.Rules{{nn.AxisEmbed, d}} }, func(*shard.Mesh) shard.Axes { return shard.Axes{"dp", "tp"} }},
		{"tp", func(shard.Axes) shard.Rules {
			return shard.Rules{{nn.AxisHeads, shard.Axes{"tp"}}, {nn.AxisMLP, shard.Axes{"tp"}}}
		}, func(*shard.Mesh) shard.Axes { return shard.Axes{"dp"} }},
		{"fsdp_tp", func(d shard.Axes) shard.Rules {
			return shard.Rules{{nn.AxisEmbed, d}, {nn.AxisHeads, shard.Axes{"tp"}}, {nn.AxisMLP, shard.Axes{"tp"}}}
		}, func(*shard.Mesh) shard.Axes { return shard.Axes{"dp"} }},
	}
	for _, shape := range strategyMeshes {
		m := shard.NewMesh(shape, []string{"dp", "tp"})
		for _, st := range strategies {
			t.Run(fmt.Sprintf("%s/%dx%d", st.name, shape[0], shape[1]), func(t *testing.T) {
				data := st.data(m)
				rules := st.rules(data)
				if rules == nil {
					rules = shard.Rules{{nn.AxisEmbed, nil}}
				}
				placed := shard.FilterShard(model, m, rules)
				xy := [2]*tensor.Tensor{
					shard.Put(tokens, shard.NewSharding(m, shard.P([]string(data), nil))),
					shard.Put(targets, shard.NewSharding(m, shard.P([]string(data), nil))),
				}
				var comm shard.Comm
				stop := shard.Record(m, &comm)
				got, gotG := autodiff.ValueAndGradWith(f)(placed, xy)
				stop()
				require.InDelta(t, want.Item(), got.Item(), 1e-5*max(1, abs(want.Item())))
				// The key bias's gradient is zero analytically: what either
				// side computes is the rounding left when terms as large as
				// the largest gradient cancel, so its scale is floor*1e-2
				// (a tolerance of 1e-7 of the largest gradient, float32's
				// epsilon); with floor*1e-3 another summation order (the
				// pure-Go kernels) failed by 1.4e-9 against 1.4e-9.
				requireGradsLike(t, wantG, gotG, placed, 1e-5, floor*1e-2)
				params := pytree.Leaves(placed)
				// Data parallelism moves gradients only: DP all-reduces each
				// one (and the loss); FSDP reduce-scatters the sharded ones
				// and all-reduces the rest. Neither moves activations
				// (no all_to_all, no psum beyond those).
				dev := m.Devices()[0]
				n := int64(m.Size())
				var psum, scatter int64
				for _, p := range params {
					b := int64(p.Bytes())
					if s, _ := shard.ShardingOf(p); len(s.Spec().Axes()) > 0 {
						scatter += (n - 1) * b / n
					} else {
						psum += 2 * (n - 1) * b / n
					}
				}
				psum += 2 * (n - 1) * 4 / n // the loss
				// Megatron TP: the activations are all-reduced over tp twice
				// in forward (after the attention output projection and the
				// second MLP layer) and twice in backward (the cotangents of
				// the two pre-norm inputs, the three Q, K, V contributions
				// summed before their one reduction); each device's gradient
				// blocks are all-reduced over the data axes, except the
				// pre-norm biases': their gradients are sums of the still
				// partial cotangents, reduced over every axis at once.
				d := int64(m.AxisSize(data...))
				tp := n / d
				tpBytes := 4 * 2 * (tp - 1) * (B / d * T * D * 4) / tp
				for _, p := range params {
					s, _ := shard.ShardingOf(p)
					if p == placed.Norm1.Bias || p == placed.Norm2.Bias {
						tpBytes += 2 * (n - 1) * int64(p.Bytes()) / n
						continue
					}
					tpBytes += 2 * (d - 1) * (int64(p.Bytes()) / int64(m.AxisSize(s.Spec().Axes()...))) / d
				}
				tpBytes += 2 * (d - 1) * 4 / d
				switch st.name {
				case "tp":
					if H%tp != 0 {
						break // heads cannot be split: attention runs replicated over tp
					}
					require.Equal(t, tpBytes, comm.Bytes(dev, "psum"), comm.String())
					require.Equal(t, tpBytes, comm.Bytes(dev, ""), comm.String())
				case "dp":
					require.Equal(t, psum, comm.Bytes(dev, "psum"), comm.String())
					require.Equal(t, psum, comm.Bytes(dev, ""), comm.String())
				case "fsdp":
					require.Equal(t, psum, comm.Bytes(dev, "psum"), comm.String())
					require.Equal(t, scatter, comm.Bytes(dev, "psum_scatter"), comm.String())
					require.Zero(t, comm.Bytes(dev, "all_to_all"), comm.String())
				}
			})
		}
	}
}
