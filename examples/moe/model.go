package main

import (
	"math"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Block is a pre-norm transformer block whose feed-forward layer is a
// mixture of experts (MoE) or, with -ffn dense, one MLP (FFN).
type Block struct {
	Norm1 nn.LayerNorm
	Attn  nn.MultiHeadAttention
	Norm2 nn.LayerNorm
	MoE   nn.MoE // zero with a dense FFN
	FFN   nn.MLP // dim-hidden-dim, GELU, no biases; zero with a MoE
}

// ffnKind says what a block's feed-forward layer is.
type ffnKind int

const (
	ffnMoE   ffnKind = iota // a mixture of experts
	ffnDense                // one MLP, as wide as one expert
)

var ffnNames = []string{"moe", "dense"}

func (f ffnKind) String() string { return ffnNames[f] }

// Model is a character-level transformer language model: token and
// learned position embeddings, Blocks, a final norm and an output layer.
type Model struct {
	Embed  nn.Embedding   // [vocab, dim]
	Pos    *tensor.Tensor // [context, dim]
	Blocks []Block
	Norm   nn.LayerNorm
	Head   nn.Linear // [dim, vocab]
}

// modelConfig sizes a Model.
type modelConfig struct {
	vocab, context, dim, layers, heads int
	experts, hidden, topK              int
	capacity                           float64
	ffn                                ffnKind
}

// newModel draws a model. Every parameter carries logical axis names, so
// strategies place it with shard.Rules: experts over "expert", the model
// dimension "embed" (split by FSDP).
func newModel(key tensor.Key, c modelConfig) Model {
	keys := key.Split(3 + c.layers)
	norm := func() nn.LayerNorm { return nn.NewLayerNorm(c.dim, nn.LayerNormOptions{Axis: nn.AxisEmbed}) }
	m := Model{
		Embed: nn.NewEmbedding(keys[0], c.vocab, c.dim, nn.EmbeddingOptions{
			Init: nn.Normal(0.02), Axes: [2]string{nn.AxisVocab, nn.AxisEmbed}}),
		Pos:  tensor.WithLogicalAxes(tensor.MulScalar(tensor.Normal(keys[1], c.context, c.dim), 0.02), "", nn.AxisEmbed),
		Norm: norm(),
		Head: nn.NewLinear(keys[2], c.dim, c.vocab, nn.LinearOptions{Axes: [2]string{nn.AxisEmbed, nn.AxisVocab}}),
	}
	for l := range c.layers {
		ks := keys[3+l].Split(2)
		b := Block{
			Norm1: norm(),
			Attn: nn.NewMultiHeadAttention(ks[0], c.dim, c.heads, nn.AttentionOptions{
				Causal: true, Axes: nn.DefaultAttentionAxes()}),
			Norm2: norm(),
		}
		if c.ffn == ffnDense {
			b.FFN = nn.NewMLP(ks[1], []int{c.dim, c.hidden, c.dim}, nn.MLPOptions{
				Activation: nn.Gelu, NoBias: true, NoFinalBias: true})
		} else {
			b.MoE = nn.NewMoE(ks[1], c.dim, c.hidden, c.experts, nn.MoEOptions{
				TopK: c.topK, CapacityFactor: c.capacity, Activation: nn.Gelu, Axes: nn.DefaultMoEAxes()})
		}
		m.Blocks = append(m.Blocks, b)
	}
	return m
}

// moeFunc runs one block's MoE: on one device (nn.MoE.Forward) or expert
// parallel inside shard.Map (expert.Forward).
type moeFunc func(m nn.MoE, x *tensor.Tensor) nn.MoEOutput

// Coefficients of the auxiliary losses (Switch Transformer, ST-MoE).
const (
	auxCoef = 0.01
	zCoef   = 0.001
)

// forwardOut is a forward pass's result.
type forwardOut struct {
	Logits *tensor.Tensor // [B, T, vocab]
	Aux    *tensor.Tensor // Σ over layers of auxCoef·aux + zCoef·z
	// Per layer: dropped choices (bool[B·T, k]) and expert loads (i32[E]).
	Dropped []*tensor.Tensor
	Load    []*tensor.Tensor
}

// forward runs the model on ids i32[B, T] (T at most the context).
func (m Model) forward(ids *tensor.Tensor, moe moeFunc) forwardOut {
	T := ids.Dim(1)
	x := tensor.Add(m.Embed.Forward(ids), tensor.SliceAxis(m.Pos, 0, 0, T))
	var o forwardOut
	// The layers' auxiliary losses are summed, then scaled: 2L+1 ops
	// where scaling each layer's took 4L (every device of a strategy runs
	// them all); the parameters' gradients keep their bits (each loss's
	// is the coefficient either way).
	var auxSum, zSum *tensor.Tensor
	for i, b := range m.Blocks {
		// Under FSDP between processes, the next block's weights travel
		// while this one computes, and in the backward pass the previous
		// block's (nothing otherwise).
		if i+1 < len(m.Blocks) {
			shard.Prefetch(m.Blocks[i+1])
		}
		if i > 0 {
			x = shard.PrefetchBackward(x, m.Blocks[i-1])
		}
		x = tensor.Add(x, b.Attn.Forward(b.Norm1.Forward(x)))
		if b.FFN.Layers != nil {
			// A dense FFN is one expert that takes every token: no
			// auxiliary loss, nothing dropped.
			x = tensor.Add(x, b.FFN.Forward(b.Norm2.Forward(x)))
			n := x.Dim(0) * T
			o.Dropped = append(o.Dropped, tensor.FromBool(make([]bool, n), n, 1))
			o.Load = append(o.Load, tensor.FromInt32([]int32{int32(n)}, 1))
			continue
		}
		r := moe(b.MoE, b.Norm2.Forward(x))
		x = tensor.Add(x, r.Output) // dropped choices: the residual carries the token
		auxSum, zSum = addLoss(auxSum, r.AuxLoss), addLoss(zSum, r.RouterZLoss)
		o.Dropped = append(o.Dropped, r.Dropped)
		o.Load = append(o.Load, r.Load)
	}
	o.Logits = m.Head.Forward(m.Norm.Forward(x))
	o.Aux = tensor.Scalar(0)
	if auxSum != nil {
		o.Aux = tensor.Add(tensor.MulScalar(auxSum, auxCoef), tensor.MulScalar(zSum, zCoef))
	}
	return o
}

// addLoss returns sum + l, or l for a nil sum.
func addLoss(sum, l *tensor.Tensor) *tensor.Tensor {
	if sum == nil {
		return l
	}
	return tensor.Add(sum, l)
}

// singleMoE runs a MoE on one device with the given capacity rule.
func singleMoE(senders int) moeFunc {
	return func(m nn.MoE, x *tensor.Tensor) nn.MoEOutput {
		m.Senders = senders
		return m.Forward(x)
	}
}

// sample generates n characters after prompt ids, drawing each from the
// softmax of the logits divided by temperature.
func (m Model) sample(key tensor.Key, prompt []int32, n int, temperature float64) []int32 {
	ctx := m.Pos.Dim(0)
	out := append([]int32(nil), prompt...)
	keys := key.Split(n)
	moe := func(mm nn.MoE, x *tensor.Tensor) nn.MoEOutput {
		mm.NoDrop = true // generation routes a handful of tokens: keep them all
		return mm.Forward(x)
	}
	for i := range n {
		w := out[max(0, len(out)-ctx):]
		logits := m.forward(tensor.FromInt32(w, 1, len(w)), moe).Logits
		last := tensor.Squeeze(tensor.SliceAxis(logits, 1, len(w)-1, len(w)), 1) // [1, vocab]
		last = tensor.MulScalar(last, float32(1/math.Max(temperature, 1e-6)))
		out = append(out, int32(tensor.Categorical(keys[i], last, -1).Ints()[0]))
	}
	return out[len(prompt):]
}
