package nn

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// EmbeddingOptions configures NewEmbedding. The zero value gives Equinox's
// eqx.nn.Embedding: a table drawn from the standard normal.
type EmbeddingOptions struct {
	// Init draws the [vocab, dim] table; nil means Normal(1), Equinox's
	// default. (Flax's nnx.Embed default amounts to Normal(1/√dim).)
	Init Initializer
	// Axes are the logical names of the table's (vocab, dim) dimensions,
	// conventionally (AxisVocab, AxisEmbed); the zero value sets none.
	Axes [2]string
}

// Embedding maps integer ids to learned vectors (eqx.nn.Embedding).
//
// Unlike torch.nn.Embedding it has no padding_idx, max_norm or
// scale_grad_by_freq: every id's row gets its gradient. For PyTorch's
// padding_idx, zero that row of W and mask the ids' outputs (or zero the
// row of the gradient) yourself.
type Embedding struct {
	W *tensor.Tensor // f32[vocab, dim]
}

// NewEmbedding returns an Embedding of vocab vectors of dim features.
func NewEmbedding(key tensor.Key, vocab, dim int, opts EmbeddingOptions) Embedding {
	if vocab < 0 || dim < 0 {
		panic(fmt.Sprintf("nn.NewEmbedding: negative size vocab=%d dim=%d", vocab, dim))
	}
	init := opts.Init
	if init == nil {
		init = Normal(1)
	}
	w := checkInit("nn.NewEmbedding", "table", init(key, vocab, dim), vocab, dim)
	return Embedding{W: withAxes(w, opts.Axes[:]...)}
}

// Forward looks up int32 ids of any shape [...] and returns f32[..., dim].
// The gradient with respect to the table accumulates over repeated ids. It
// panics on an id outside [0, vocab), naming the id and its position;
// negative ids are refused too, although tensor.Take would count them from
// the end. Under Vmap, where one example's ids have no data, tensor.Take
// checks the batch's ids instead (negative ones count from the end).
func (e Embedding) Forward(ids *tensor.Tensor) *tensor.Tensor {
	requireInput("nn.Embedding", "ids", ids)
	requireBuilt("nn.Embedding", "W", e.W, "nn.NewEmbedding")
	if ids.DType() != tensor.Int32 {
		panic(fmt.Sprintf("nn.Embedding: ids %v: want int32 ids", ids))
	}
	v := int32(e.W.Dim(0))
	check := func(b *tensor.Tensor, where string) {
		for i, id := range b.RawInt32() {
			if id < 0 || id >= v {
				panic(fmt.Sprintf("nn.Embedding: ids %v: id %d at flat index %d%s is outside [0, %d)", ids, id, i, where, v))
			}
		}
	}
	switch l := ids.Layout(); {
	case ids.InsideVmap():
		// The ids of one example under Vmap have no data of their own:
		// tensor.Take checks the whole batch (ids outside [-vocab, vocab)).
	case l != nil:
		// Placed ids: every device checks its own block, where it lives.
		l.MapBlocks(ids, func(b *tensor.Tensor) *tensor.Tensor {
			check(b, " of the block "+b.String())
			return b
		})
	default:
		check(ids, "")
	}
	return tensor.Take(e.W, ids, 0)
}

// Call is Forward, ignoring key; it makes an Embedding a Module.
func (e Embedding) Call(ids *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return e.Forward(ids) }

// Attend returns x @ Wᵀ: f32[..., dim] to logits f32[..., vocab], the output
// layer of a language model whose input and output embeddings are tied
// (Flax's Embed.attend).
func (e Embedding) Attend(x *tensor.Tensor) *tensor.Tensor {
	requireParamDType("nn.Embedding.Attend", x, e.W)
	d := e.W.Dim(1)
	if x.Rank() == 0 || x.Dim(-1) != d {
		panic(fmt.Sprintf("nn.Embedding.Attend: x %v, W %v: last dim of x must be %d", x, e.W, d))
	}
	shape := x.Shape()
	shape[len(shape)-1] = e.W.Dim(0)
	x2 := x
	if x.Rank() != 2 {
		x2 = tensor.Reshape(x, -1, d)
	}
	return tensor.Reshape(tensor.MatMulT(x2, e.W, false, true), shape...)
}
