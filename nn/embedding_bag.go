package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// BagMode is how an EmbeddingBag reduces the rows of a bag: PyTorch's mode.
type BagMode int

const (
	// BagSum is mode="sum" (the zero value): the sum of the rows, each
	// scaled by its per-sample weight if any.
	BagSum BagMode = iota
	// BagMean is mode="mean": the mean of the rows.
	BagMean
	// BagMax is mode="max": the elementwise maximum of the rows.
	BagMax
)

// String returns PyTorch's name of m.
func (m BagMode) String() string {
	switch m {
	case BagSum:
		return "sum"
	case BagMean:
		return "mean"
	case BagMax:
		return "max"
	}
	return fmt.Sprintf("BagMode(%d)", int(m))
}

// EmbeddingBag is PyTorch's EmbeddingBag: it looks up bags of rows of W
// and reduces each bag to one vector (sum, mean or max), without
// materialising the lookups of an Embedding followed by a reduction in
// user code. An empty bag gives zeros, as in PyTorch. Its fields beyond W
// and Mode are PyTorch's options of the same meaning; their zero values
// turn them off. scale_grad_by_freq and sparse gradients are absent.
type EmbeddingBag struct {
	W    *tensor.Tensor // f32[vocab, dim]
	Mode BagMode
	// Padding turns PaddingIdx on: padding_idx. The indices equal to it
	// are left out of their bags (a mean divides by the others, a bag of
	// nothing else gives zeros) and the row gets no gradient. A negative
	// index counts from the end; it must lie in [-vocab, vocab). A
	// non-zero PaddingIdx without Padding panics rather than being
	// ignored.
	Padding    bool
	PaddingIdx int
	// MaxNorm and NormType are max_norm and norm_type, as Embedding's:
	// each row looked up whose NormType-norm (0 means 2) exceeds MaxNorm
	// is rescaled by MaxNorm/(norm + 1e-7) before it is used, and W's
	// gradient is that of the plain lookup. PyTorch also rescales those
	// rows of its weight in place: Renorm gives that table.
	MaxNorm  float64
	NormType float64
	// IncludeLastOffset is include_last_offset: offsets has one more
	// element than there are bags, len(indices) (the CSR layout).
	IncludeLastOffset bool
}

// embedding returns the Embedding of e's table and options (for their
// checks and the max-norm rescaling).
func (e EmbeddingBag) embedding() Embedding {
	return Embedding{W: e.W, Padding: e.Padding, PaddingIdx: e.PaddingIdx, MaxNorm: e.MaxNorm, NormType: e.NormType}
}

// Renorm returns e with the rows that indices look up rescaled as Forward
// rescales them: the table PyTorch's embedding_bag leaves in its weight
// (see Embedding.Renorm). Without MaxNorm it returns e.
func (e EmbeddingBag) Renorm(indices *tensor.Tensor) EmbeddingBag {
	e.W = e.embedding().Renorm(indices).W
	return e
}

// NewEmbeddingBag returns an EmbeddingBag of vocab vectors of dim features
// drawn from N(0, 1), as PyTorch's.
func NewEmbeddingBag(key tensor.Key, vocab, dim int, mode BagMode) EmbeddingBag {
	if vocab < 0 || dim < 0 {
		panic(fmt.Sprintf("nn.NewEmbeddingBag: negative size vocab=%d dim=%d", vocab, dim))
	}
	if mode < BagSum || mode > BagMax {
		panic(fmt.Sprintf("nn.NewEmbeddingBag: unknown mode %v", mode))
	}
	return EmbeddingBag{W: tensor.Normal(key, vocab, dim), Mode: mode}
}

// Forward returns the bags' vectors [B, dim]
// (torch.nn.functional.embedding_bag). Either indices are int32 [B, L]
// and offsets nil, B bags of L indices each, or indices are int32 [M] and
// offsets int32 [B] the non-decreasing starting positions of the bags in
// indices (offsets[0] = 0; bag b is indices[offsets[b]:offsets[b+1]]),
// or, with IncludeLastOffset, int32 [B+1] ending with len(indices).
// perSampleWeights, nil or of indices' shape and W's dtype, scales each
// looked-up row (BagSum only, as PyTorch). The indices and offsets are
// read on the host. It panics on indices outside [0, vocab), bad offsets,
// or operands of the wrong dtype or shape.
func (e EmbeddingBag) Forward(indices, offsets, perSampleWeights *tensor.Tensor) *tensor.Tensor {
	const op = "nn.EmbeddingBag"
	if e.W == nil {
		panic(op + ": nil W (build the layer with NewEmbeddingBag)")
	}
	requireInput(op, "indices", indices)
	desc := fmt.Sprintf("W %v, indices %v", e.W, indices)
	if offsets != nil {
		desc += fmt.Sprintf(", offsets %v", offsets)
	}
	if perSampleWeights != nil {
		desc += fmt.Sprintf(", perSampleWeights %v", perSampleWeights)
	}
	if e.W.Rank() != 2 || !e.W.DType().IsFloat() {
		panic(fmt.Sprintf("%s: %s: want a float W [vocab, dim]", op, desc))
	}
	if e.Mode < BagSum || e.Mode > BagMax {
		panic(fmt.Sprintf("%s: %s: unknown mode %v", op, desc, e.Mode))
	}
	if indices.DType() != tensor.Int32 {
		panic(fmt.Sprintf("%s: %s: want int32 indices", op, desc))
	}
	vocab, dim := e.W.Dim(0), e.W.Dim(1)
	e.embedding().checkOptions(op, vocab)
	ids := indices.Int32s()
	var starts []int
	switch {
	case offsets == nil && indices.Rank() == 2 && e.IncludeLastOffset:
		panic(fmt.Sprintf("%s: %s: IncludeLastOffset needs indices i32[M] and offsets i32[B+1]", op, desc))
	case offsets == nil && indices.Rank() == 2:
		for b := range indices.Dim(0) {
			starts = append(starts, b*indices.Dim(1))
		}
	case offsets != nil && indices.Rank() == 1 && offsets.Rank() == 1 && offsets.DType() == tensor.Int32:
		for b, o := range offsets.Int32s() {
			if (b == 0 && o != 0) || int(o) > len(ids) || (b > 0 && int(o) < starts[b-1]) {
				panic(fmt.Sprintf("%s: %s: offsets must start at 0 and not decrease up to %d (offset %d at [%d])", op, desc, len(ids), o, b))
			}
			starts = append(starts, int(o))
		}
		if e.IncludeLastOffset {
			if len(starts) == 0 || starts[len(starts)-1] != len(ids) {
				panic(fmt.Sprintf("%s: %s: with IncludeLastOffset the last offset must be %d, the number of indices", op, desc, len(ids)))
			}
			starts = starts[:len(starts)-1]
		}
	default:
		panic(fmt.Sprintf("%s: %s: want indices i32[B, L] without offsets, or indices i32[M] and offsets i32[B]", op, desc))
	}
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			panic(fmt.Sprintf("%s: %s: index %d at %s outside [0, %d)", op, desc, id, flatIndex(indices.Shape(), i), vocab))
		}
	}
	if perSampleWeights != nil {
		if e.Mode != BagSum {
			panic(fmt.Sprintf("%s: %s: perSampleWeights need mode sum, not %v", op, desc, e.Mode))
		}
		if perSampleWeights.DType() != e.W.DType() || !slices.Equal(perSampleWeights.Shape(), indices.Shape()) {
			panic(fmt.Sprintf("%s: %s: want perSampleWeights of indices' shape and W's dtype", op, desc))
		}
	}
	nb := len(starts)
	ends := append(starts[1:len(starts):len(starts)], len(ids))
	lmax := 0
	for b := range nb {
		lmax = max(lmax, ends[b]-starts[b])
	}
	if nb == 0 || lmax == 0 {
		return tensor.Zeros(e.W.DType(), nb, dim)
	}
	// The bags padded to lmax: positions into indices, and which are real.
	// With Padding, the padding index's positions are not real.
	pad := int32(-1)
	if e.Padding {
		pad = int32(e.embedding().padRow(vocab))
	}
	pos := make([]int32, nb*lmax)
	inBag := make([]bool, nb*lmax)
	count := make([]float64, nb)
	for b := range nb {
		n := 0
		for j := range ends[b] - starts[b] {
			pos[b*lmax+j] = int32(starts[b] + j)
			if ids[starts[b]+j] != pad {
				inBag[b*lmax+j] = true
				n++
			}
		}
		count[b] = float64(max(1, n))
	}
	posT := tensor.FromInt32(pos, nb, lmax)
	mask := tensor.ExpandDims(tensor.FromBool(inBag, nb, lmax), -1)                // [B, L, 1]
	rows := tensor.Take(e.W, tensor.Take(tensor.Reshape(indices, -1), posT, 0), 0) // [B, L, dim]
	if e.MaxNorm > 0 {
		rows = e.embedding().renormed(rows)
	}
	if perSampleWeights != nil {
		rows = tensor.Mul(rows, tensor.ExpandDims(tensor.Take(tensor.Reshape(perSampleWeights, -1), posT, 0), -1))
	}
	switch e.Mode {
	case BagMax:
		m := tensor.Max(tensor.Where(mask, rows, scalarLike(rows, math.Inf(-1))), 1)
		empty := make([]bool, nb)
		for b := range nb {
			empty[b] = !slices.Contains(inBag[b*lmax:(b+1)*lmax], true)
		}
		return tensor.Where(tensor.FromBool(empty, nb, 1), scalarLike(m, 0), m)
	case BagMean:
		sum := tensor.Sum(tensor.Where(mask, rows, scalarLike(rows, 0)), 1)
		return tensor.Div(sum, tensor.Convert(tensor.FromFloat64s(count, nb, 1), e.W.DType()))
	}
	return tensor.Sum(tensor.Where(mask, rows, scalarLike(rows, 0)), 1)
}
