package nn

import (
	"fmt"
	"math"

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
	// Padding turns PaddingIdx on: torch.nn.Embedding's padding_idx, which
	// Equinox lacks. Without it (the default) every id's row is learnt.
	Padding bool
	// PaddingIdx is padding_idx: with Padding set, that row starts at
	// zeros and gets no gradient (see Embedding). A negative index counts
	// from the end, as PyTorch's; it must lie in [-vocab, vocab). A
	// non-zero PaddingIdx without Padding panics rather than being ignored.
	PaddingIdx int
	// MaxNorm is max_norm: above 0, the rows looked up are rescaled to
	// this NormType-norm where it is larger (see Embedding.Forward).
	MaxNorm float64
	// NormType is norm_type, the p of MaxNorm's p-norm (math.Inf(1) for
	// the largest magnitude); 0 means 2.
	NormType float64
}

// Embedding maps integer ids to learned vectors (eqx.nn.Embedding).
//
// The zero values of Padding and MaxNorm give Equinox's layer, where every
// id's row is learnt as it is. The options of torch.nn.Embedding that
// Equinox lacks are there too:
//
//   - Padding and PaddingIdx are padding_idx: the output of that id is
//     its row (zeros, as NewEmbedding makes it), and the row gets no
//     gradient, so it stays as it is through training.
//   - MaxNorm and NormType are max_norm and norm_type: each row looked up
//     whose p-norm exceeds MaxNorm is rescaled by MaxNorm/(norm + 1e-7)
//     before it is used, as PyTorch does. PyTorch also writes the rescaled
//     rows back into its weight, in place; a gonox layer is a value, so
//     Renorm returns the Embedding with those rows rescaled for a training
//     loop that wants PyTorch's table (and its trajectory) exactly.
//
// scale_grad_by_freq and sparse gradients are absent.
type Embedding struct {
	W *tensor.Tensor // f32[vocab, dim]
	// Padding, PaddingIdx, MaxNorm and NormType are the options of the
	// same names of EmbeddingOptions.
	Padding    bool
	PaddingIdx int
	MaxNorm    float64
	NormType   float64
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
	e := Embedding{Padding: opts.Padding, PaddingIdx: opts.PaddingIdx, MaxNorm: opts.MaxNorm, NormType: opts.NormType}
	e.checkOptions("nn.NewEmbedding", vocab)
	if e.Padding {
		e.PaddingIdx = e.padRow(vocab)
		pad := make([]bool, vocab)
		pad[e.PaddingIdx] = true
		w = tensor.Where(tensor.FromBool(pad, vocab, 1), tensor.Zeros(w.DType()), w)
	}
	e.W = withAxes(w, opts.Axes[:]...)
	return e
}

// checkOptions panics, naming op, on a PaddingIdx set without Padding, a
// padding index outside [-vocab, vocab), a negative or NaN MaxNorm or a
// NormType that is not positive.
func (e Embedding) checkOptions(op string, vocab int) {
	if !e.Padding && e.PaddingIdx != 0 {
		panic(fmt.Sprintf("%s: PaddingIdx %d is set but Padding is off: set Padding to make row %d the padding row", op, e.PaddingIdx, e.PaddingIdx))
	}
	if e.Padding && (e.PaddingIdx < -vocab || e.PaddingIdx >= vocab) {
		panic(fmt.Sprintf("%s: padding index %d outside [-%d, %d)", op, e.PaddingIdx, vocab, vocab))
	}
	if !(e.MaxNorm >= 0) {
		panic(fmt.Sprintf("%s: MaxNorm %v must be >= 0 (0 turns it off)", op, e.MaxNorm))
	}
	if !(e.NormType >= 0) {
		panic(fmt.Sprintf("%s: NormType %v must be > 0 (0 means 2)", op, e.NormType))
	}
}

// padRow returns the padding row in [0, vocab).
func (e Embedding) padRow(vocab int) int {
	if e.PaddingIdx < 0 {
		return e.PaddingIdx + vocab
	}
	return e.PaddingIdx
}

// Forward looks up int32 ids of any shape [...] and returns f32[..., dim].
// The gradient with respect to the table accumulates over repeated ids
// (none reaches the padding row, with Padding). With MaxNorm, the rows
// whose norm exceeds it come out rescaled to it, and the table's gradient
// is that of the plain lookup, as PyTorch's (whose rescaling is done to
// the weight outside autograd). It panics on an id outside [0, vocab),
// naming the id and its position;
// negative ids are refused too, although tensor.Take would count them from
// the end. Under Vmap, where one example's ids have no data, tensor.Take
// checks the batch's ids instead (negative ones count from the end).
func (e Embedding) Forward(ids *tensor.Tensor) *tensor.Tensor {
	requireInput("nn.Embedding", "ids", ids)
	requireBuilt("nn.Embedding", "W", e.W, "nn.NewEmbedding")
	if ids.DType() != tensor.Int32 {
		panic(fmt.Sprintf("nn.Embedding: ids %v: want int32 ids (convert int64 ids with tensor.AsType(ids, tensor.Int32))", ids))
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
	e.checkOptions("nn.Embedding", int(v))
	rows := tensor.Take(e.W, ids, 0)
	if e.MaxNorm > 0 {
		rows = e.renormed(rows)
	}
	if e.Padding {
		pad := tensor.Equal(ids, tensor.ScalarInt(int32(e.padRow(int(v)))))
		rows = tensor.Where(tensor.ExpandDims(pad, -1), tensor.StopGradient(rows), rows)
	}
	return rows
}

// renormed returns looked-up rows with the value of the rows rescaled by
// renormScale and the gradient of the plain lookup (PyTorch rescales its
// weight outside autograd): r·scale + (rows - r) with r the rows without
// gradient, where rows - r is exactly 0.
func (e Embedding) renormed(rows *tensor.Tensor) *tensor.Tensor {
	r := tensor.StopGradient(rows)
	return tensor.Add(tensor.Mul(r, e.renormScale(r)), tensor.Sub(rows, r))
}

// renormScale returns, for rows r [..., dim], the factor [..., 1] of
// PyTorch's embedding_renorm_: MaxNorm/(‖r‖ + 1e-7) where the NormType-norm
// ‖r‖ exceeds MaxNorm, 1 elsewhere.
func (e Embedding) renormScale(r *tensor.Tensor) *tensor.Tensor {
	p := e.NormType
	if p == 0 {
		p = 2
	}
	a := tensor.Abs(r)
	var norm *tensor.Tensor
	switch {
	case p == 2:
		norm = tensor.Sqrt(tensor.SumKeep(tensor.Square(r), -1))
	case p == 1:
		norm = tensor.SumKeep(a, -1)
	case math.IsInf(p, 1):
		norm = tensor.MaxKeep(a, -1)
	default:
		norm = tensor.Pow(tensor.SumKeep(tensor.Pow(a, constLike(a, p)), -1), constLike(a, 1/p))
	}
	over := tensor.Greater(norm, scalarLike(norm, e.MaxNorm))
	scale := tensor.Div(constLike(norm, e.MaxNorm), tensor.Add(norm, constLike(norm, 1e-7)))
	return tensor.Where(over, scale, tensor.OnesLike(scale))
}

// Renorm returns e with the rows that ids look up rescaled as Forward
// rescales them (MaxNorm/(norm + 1e-7) where their norm exceeds MaxNorm):
// the table PyTorch's embedding leaves in its weight after the lookup,
// which it renormalises in place. A training loop that sets
// e = e.Renorm(ids) before its optimizer step follows PyTorch's
// trajectory; one that does not still gets PyTorch's outputs and
// gradients from Forward. Without MaxNorm it returns e. ids must have
// data (not under Vmap).
func (e Embedding) Renorm(ids *tensor.Tensor) Embedding {
	requireInput("nn.Embedding.Renorm", "ids", ids)
	requireBuilt("nn.Embedding.Renorm", "W", e.W, "nn.NewEmbedding")
	if ids.DType() != tensor.Int32 {
		panic(fmt.Sprintf("nn.Embedding.Renorm: ids %v: want int32 ids (convert int64 ids with tensor.AsType(ids, tensor.Int32))", ids))
	}
	vocab := e.W.Dim(0)
	e.checkOptions("nn.Embedding.Renorm", vocab)
	if e.MaxNorm == 0 {
		return e
	}
	seen := make([]bool, vocab)
	for i, id := range ids.Int32s() {
		if id < 0 || int(id) >= vocab {
			panic(fmt.Sprintf("nn.Embedding.Renorm: ids %v: id %d at flat index %d is outside [0, %d)", ids, id, i, vocab))
		}
		seen[id] = true
	}
	scale := e.renormScale(tensor.StopGradient(e.W))
	scale = tensor.Where(tensor.FromBool(seen, vocab, 1), scale, tensor.OnesLike(scale))
	e.W = withAxes(tensor.Mul(e.W, scale), e.W.LogicalAxes()...)
	return e
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
