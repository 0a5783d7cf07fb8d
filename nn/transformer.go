package nn

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor"
)

// TransformerOptions configures the Transformer layers as the keyword
// arguments of PyTorch 1.13's torch.nn.TransformerEncoderLayer and
// friends do. The zero value gives PyTorch's defaults except for Dropout
// (PyTorch's default is 0.1; here 0 means none).
type TransformerOptions struct {
	// DimFeedforward is the hidden size of the feed-forward block
	// (dim_feedforward); 0 means 2048, PyTorch's default.
	DimFeedforward int
	// Dropout is the rate of every dropout of the layer (dropout): on
	// the attention weights, after each attention block, inside and
	// after the feed-forward block. It needs a key at call time unless
	// the model is in InferenceMode.
	Dropout float64
	// Activation is the feed-forward block's activation; nil means Relu
	// (activation="relu"). PyTorch's activation="gelu" is GeluExact (the
	// erf form); any Activation, or function of a tensor, goes.
	Activation Activation
	// LayerNormEps is the LayerNorms' eps (layer_norm_eps); 0 means 1e-5.
	LayerNormEps float64
	// BatchFirst takes and returns [batch, length, d_model] (batch_first);
	// the default is PyTorch's [length, batch, d_model].
	BatchFirst bool
	// NormFirst applies the LayerNorms before the attention and
	// feed-forward blocks (norm_first, "pre-norm") instead of after the
	// residual additions (post-norm, the default).
	NormFirst bool
}

func (o TransformerOptions) withDefaults(fn string) TransformerOptions {
	if o.DimFeedforward == 0 {
		o.DimFeedforward = 2048
	}
	if o.Activation == nil {
		o.Activation = Relu
	}
	if o.LayerNormEps == 0 {
		o.LayerNormEps = 1e-5
	}
	if o.DimFeedforward < 0 || !(o.Dropout >= 0 && o.Dropout <= 1) || !(o.LayerNormEps > 0) {
		panic(fmt.Sprintf("%s: DimFeedforward %d, Dropout %g, LayerNormEps %g: want a positive size, a rate in [0, 1] and a positive eps",
			fn, o.DimFeedforward, o.Dropout, o.LayerNormEps))
	}
	return o
}

// newTorchAttention returns the attention of a Transformer layer as
// PyTorch's torch.nn.MultiheadAttention builds it: biases on every
// projection, the query, key and value weights Glorot-uniform over
// PyTorch's packed in_proj_weight [3·dim, dim] (bound √(6/(4·dim))), their
// biases zero, the output weight uniform in ±1/√dim and its bias zero.
func newTorchAttention(fn string, key tensor.Key, dim, heads int, dropout float64) MultiHeadAttention {
	if heads <= 0 || dim <= 0 || dim%heads != 0 {
		panic(fmt.Sprintf("%s: d_model %d, nhead %d: nhead must be positive and divide d_model", fn, dim, heads))
	}
	k1, k2 := key.Split2()
	bound := math.Sqrt(6 / float64(4*dim))
	a := NewMultiHeadAttention(k1, dim, heads, AttentionOptions{Bias: true, DropoutRate: dropout,
		WeightInit: UniformRange(-bound, bound), BiasInit: Zeros})
	a.OutputProj = NewLinear(k2, dim, dim, LinearOptions{BiasInit: Zeros})
	return a
}

// torchFeedforward returns linear1 and linear2 of a Transformer layer,
// PyTorch's nn.Linear initialization (Linear's default).
func torchFeedforward(key tensor.Key, dim, ff int) (Linear, Linear) {
	k1, k2 := key.Split2()
	return NewLinear(k1, dim, ff, LinearOptions{}), NewLinear(k2, ff, dim, LinearOptions{})
}

// TransformerEncoderLayer is PyTorch's torch.nn.TransformerEncoderLayer:
// self-attention and a feed-forward block, each with a residual
// connection and a LayerNorm, after the addition (post-norm) or, with
// NormFirst, before the block:
//
//	post-norm: x = Norm1(x + Dropout1(SelfAttn(x)));  x = Norm2(x + Dropout2(FF(x)))
//	pre-norm:  x = x + Dropout1(SelfAttn(Norm1(x)));  x = x + Dropout2(FF(Norm2(x)))
//	FF(x) = Linear2(Dropout(Activation(Linear1(x))))
//
// The fields hold PyTorch's parameters one to one: self_attn's
// in_proj_weight is SelfAttn's query, key and value weights stacked and
// transposed, in_proj_bias their biases, out_proj its OutputProj;
// linear1, linear2, norm1 and norm2 the fields of those names
// (checkpoint.TorchTransformer maps a state dict).
type TransformerEncoderLayer struct {
	SelfAttn         MultiHeadAttention
	Linear1, Linear2 Linear
	Norm1, Norm2     LayerNorm
	// Dropout is inside the feed-forward block, Dropout1 after the
	// attention, Dropout2 after the feed-forward block. (SelfAttn.Dropout
	// drops the attention weights.)
	Dropout, Dropout1, Dropout2 Dropout
	Activation                  Activation
	BatchFirst, NormFirst       bool
}

// NewTransformerEncoderLayer returns an encoder layer of dModel features
// with nhead heads (which must divide dModel), initialized as PyTorch
// initializes one (key is split between the attention and the
// feed-forward block): the attention's query, key and value weights
// Glorot-uniform over PyTorch's packed in_proj_weight [3·dModel, dModel],
// the output weight uniform in ±1/√dModel, every attention bias zero; the
// feed-forward Linears as torch.nn.Linear initializes them.
func NewTransformerEncoderLayer(key tensor.Key, dModel, nhead int, opts TransformerOptions) TransformerEncoderLayer {
	opts = opts.withDefaults("nn.NewTransformerEncoderLayer")
	k := key.Split(2)
	l1, l2 := torchFeedforward(k[1], dModel, opts.DimFeedforward)
	ln := LayerNormOptions{Eps: opts.LayerNormEps}
	d := NewDropout(opts.Dropout)
	return TransformerEncoderLayer{
		SelfAttn: newTorchAttention("nn.NewTransformerEncoderLayer", k[0], dModel, nhead, opts.Dropout),
		Linear1:  l1, Linear2: l2,
		Norm1: NewLayerNorm(dModel, ln), Norm2: NewLayerNorm(dModel, ln),
		Dropout: d, Dropout1: d, Dropout2: d,
		Activation: opts.Activation, BatchFirst: opts.BatchFirst, NormFirst: opts.NormFirst,
	}
}

// TransformerEncoderCall holds the optional arguments of an encoder's
// ForwardWith, PyTorch's src_mask and src_key_padding_mask, and the
// dropout key.
type TransformerEncoderCall struct {
	// Mask is PyTorch's src_mask: [T, T] or [batch·nhead, T, T] (query,
	// key). A bool mask hides the keys where it is true (PyTorch's
	// convention, the opposite of DotProductAttention's); a float mask
	// (of the input's dtype, or converted to it) is added to the scaled
	// logits, -Inf hiding. See SquareSubsequentMask.
	Mask *tensor.Tensor
	// KeyPaddingMask is PyTorch's src_key_padding_mask: [batch, T], or
	// [T] for one unbatched example; bool, true at the padding positions
	// to hide, or float, added to the logits.
	KeyPaddingMask *tensor.Tensor
	// Key draws the dropouts; it is required when they are active
	// (Dropout above 0 and not in InferenceMode).
	Key *tensor.Key
}

// Forward applies the layer to src without masks: src is [T, batch,
// d_model] (PyTorch's default layout), [batch, T, d_model] with
// BatchFirst, or one unbatched example [T, d_model]; the result has
// src's shape. Dropout, if active, needs ForwardWith's key or Call.
func (l TransformerEncoderLayer) Forward(src *tensor.Tensor) *tensor.Tensor {
	return l.ForwardWith(src, TransformerEncoderCall{})
}

// Call is ForwardWith with key for the dropouts; it makes the layer a
// Module.
func (l TransformerEncoderLayer) Call(src *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	return l.ForwardWith(src, TransformerEncoderCall{Key: &key})
}

// ForwardWith is PyTorch's forward(src, src_mask, src_key_padding_mask)
// with the dropout key. Key k of the call splits in four: the attention
// weights' dropout, Dropout1, Dropout and Dropout2. Each dropout draws
// one mask for the whole batch, so autodiff.Vmap over one-example calls
// with per-example keys draws other masks than the batched call (without
// dropout the two agree).
func (l TransformerEncoderLayer) ForwardWith(src *tensor.Tensor, c TransformerEncoderCall) *tensor.Tensor {
	const fn = "nn.TransformerEncoderLayer"
	requireInput(fn, "src", src)
	requireBuilt(fn, "Linear1.W", l.Linear1.W, "nn.NewTransformerEncoderLayer")
	x, unbatched := toBatchFirst(fn, "src", src, l.BatchFirst, l.Linear1.In())
	B, T := x.Dim(0), x.Dim(1)
	mask := attnMaskOf(fn, "Mask", c.Mask, B, l.SelfAttn.NumHeads, T, T)
	kpm := paddingMaskOf(fn, "KeyPaddingMask", c.KeyPaddingMask, B, T, unbatched)
	keys := layerKeys(fn, c.Key, 4, l.active())
	y := l.forward(x, mask, kpm, keys, unbatched)
	return fromBatchFirst(y, l.BatchFirst, unbatched)
}

// active says whether any dropout of the layer draws.
func (l TransformerEncoderLayer) active() bool {
	return dropActive(l.SelfAttn.Dropout, l.Dropout, l.Dropout1, l.Dropout2)
}

// forward is the layer on x [B,T,D] with checked masks and keys (nil
// when no dropout draws).
func (l TransformerEncoderLayer) forward(x, mask, kpm *tensor.Tensor, keys []tensor.Key, one bool) *tensor.Tensor {
	k := func(i int) tensor.Key {
		if keys == nil {
			return tensor.Key{}
		}
		return keys[i]
	}
	var kAttn *tensor.Key
	if keys != nil {
		kAttn = &keys[0]
	}
	sa := func(x *tensor.Tensor) *tensor.Tensor {
		return l.Dropout1.Forward(torchAttention(l.SelfAttn, x, x, mask, kpm, kAttn, one), k(1))
	}
	ff := func(x *tensor.Tensor) *tensor.Tensor {
		h := l.Dropout.Forward(l.Activation(l.Linear1.Forward(x)), k(2))
		return l.Dropout2.Forward(l.Linear2.Forward(h), k(3))
	}
	if l.NormFirst {
		x = tensor.Add(x, sa(l.Norm1.Forward(x)))
		return tensor.Add(x, ff(l.Norm2.Forward(x)))
	}
	x = l.Norm1.Forward(tensor.Add(x, sa(x)))
	return l.Norm2.Forward(tensor.Add(x, ff(x)))
}

// TransformerDecoderLayer is PyTorch's torch.nn.TransformerDecoderLayer:
// self-attention over the target, attention from the target to the
// encoder's output (the memory) and a feed-forward block, each with a
// residual connection and a LayerNorm (post-norm, or pre-norm with
// NormFirst), as TransformerEncoderLayer:
//
//	post-norm: x = Norm1(x + Dropout1(SelfAttn(x)))
//	           x = Norm2(x + Dropout2(MultiheadAttn(x, memory)))
//	           x = Norm3(x + Dropout3(FF(x)))
//
// The fields hold PyTorch's parameters one to one (self_attn,
// multihead_attn, linear1, linear2, norm1, norm2, norm3; see
// checkpoint.TorchTransformer).
type TransformerDecoderLayer struct {
	SelfAttn, MultiheadAttn MultiHeadAttention
	Linear1, Linear2        Linear
	Norm1, Norm2, Norm3     LayerNorm
	Dropout                 Dropout // inside the feed-forward block
	Dropout1, Dropout2      Dropout // after the self- and cross-attention
	Dropout3                Dropout // after the feed-forward block
	Activation              Activation
	BatchFirst, NormFirst   bool
}

// NewTransformerDecoderLayer returns a decoder layer of dModel features
// with nhead heads, initialized as PyTorch initializes one; key is split
// between the self-attention, the cross-attention and the feed-forward
// block.
func NewTransformerDecoderLayer(key tensor.Key, dModel, nhead int, opts TransformerOptions) TransformerDecoderLayer {
	opts = opts.withDefaults("nn.NewTransformerDecoderLayer")
	k := key.Split(3)
	l1, l2 := torchFeedforward(k[2], dModel, opts.DimFeedforward)
	ln := LayerNormOptions{Eps: opts.LayerNormEps}
	d := NewDropout(opts.Dropout)
	return TransformerDecoderLayer{
		SelfAttn:      newTorchAttention("nn.NewTransformerDecoderLayer", k[0], dModel, nhead, opts.Dropout),
		MultiheadAttn: newTorchAttention("nn.NewTransformerDecoderLayer", k[1], dModel, nhead, opts.Dropout),
		Linear1:       l1, Linear2: l2,
		Norm1: NewLayerNorm(dModel, ln), Norm2: NewLayerNorm(dModel, ln), Norm3: NewLayerNorm(dModel, ln),
		Dropout: d, Dropout1: d, Dropout2: d, Dropout3: d,
		Activation: opts.Activation, BatchFirst: opts.BatchFirst, NormFirst: opts.NormFirst,
	}
}

// TransformerDecoderCall holds the optional arguments of a decoder's
// ForwardWith: PyTorch's tgt_mask, memory_mask, tgt_key_padding_mask and
// memory_key_padding_mask (bool, true hiding, or float, added, as in
// TransformerEncoderCall), and the dropout key.
type TransformerDecoderCall struct {
	// TgtMask is [T, T] or [batch·nhead, T, T] over the target's
	// self-attention (SquareSubsequentMask(T) for a causal decoder);
	// MemoryMask is [T, S] or [batch·nhead, T, S] over the memory.
	TgtMask, MemoryMask *tensor.Tensor
	// TgtKeyPaddingMask is [batch, T] and MemoryKeyPaddingMask [batch, S]
	// ([T] and [S] for one unbatched example).
	TgtKeyPaddingMask, MemoryKeyPaddingMask *tensor.Tensor
	// Key draws the dropouts; it is required when they are active.
	Key *tensor.Key
}

// Forward applies the layer to the target tgt and the memory without
// masks: tgt is [T, batch, d_model] and memory [S, batch, d_model]
// (with BatchFirst [batch, T, d_model] and [batch, S, d_model]; one
// unbatched example [T, d_model] and [S, d_model]). The result has tgt's
// shape.
func (l TransformerDecoderLayer) Forward(tgt, memory *tensor.Tensor) *tensor.Tensor {
	return l.ForwardWith(tgt, memory, TransformerDecoderCall{})
}

// ForwardWith is PyTorch's forward(tgt, memory, tgt_mask, memory_mask,
// tgt_key_padding_mask, memory_key_padding_mask) with the dropout key,
// which splits in six: the self-attention weights, Dropout1, the
// cross-attention weights, Dropout2, Dropout and Dropout3.
func (l TransformerDecoderLayer) ForwardWith(tgt, memory *tensor.Tensor, c TransformerDecoderCall) *tensor.Tensor {
	const fn = "nn.TransformerDecoderLayer"
	requireInput(fn, "tgt", tgt)
	requireInput(fn, "memory", memory)
	requireBuilt(fn, "Linear1.W", l.Linear1.W, "nn.NewTransformerDecoderLayer")
	x, mem, masks, unbatched := decoderInputs(fn, tgt, memory, c, l.BatchFirst, l.Linear1.In(), l.SelfAttn.NumHeads)
	keys := layerKeys(fn, c.Key, 6, l.active())
	y := l.forward(x, mem, masks, keys, unbatched)
	return fromBatchFirst(y, l.BatchFirst, unbatched)
}

func (l TransformerDecoderLayer) active() bool {
	return dropActive(l.SelfAttn.Dropout, l.MultiheadAttn.Dropout, l.Dropout, l.Dropout1, l.Dropout2, l.Dropout3)
}

// decoderMasks are a decoder call's masks, checked and shaped for
// torchAttention.
type decoderMasks struct{ tgt, mem, tgtPad, memPad *tensor.Tensor }

// decoderInputs checks a decoder call and returns the target and memory
// batch-first, the masks shaped, and whether the call is unbatched.
func decoderInputs(fn string, tgt, memory *tensor.Tensor, c TransformerDecoderCall, batchFirst bool, dim, heads int) (x, mem *tensor.Tensor, m decoderMasks, unbatched bool) {
	x, unbatched = toBatchFirst(fn, "tgt", tgt, batchFirst, dim)
	mem, memUnbatched := toBatchFirst(fn, "memory", memory, batchFirst, dim)
	if unbatched != memUnbatched || mem.Dim(0) != x.Dim(0) {
		panic(fmt.Sprintf("%s: tgt %v, memory %v: want the same batch (or both unbatched)", fn, tgt, memory))
	}
	B, T, S := x.Dim(0), x.Dim(1), mem.Dim(1)
	m.tgt = attnMaskOf(fn, "TgtMask", c.TgtMask, B, heads, T, T)
	m.mem = attnMaskOf(fn, "MemoryMask", c.MemoryMask, B, heads, T, S)
	m.tgtPad = paddingMaskOf(fn, "TgtKeyPaddingMask", c.TgtKeyPaddingMask, B, T, unbatched)
	m.memPad = paddingMaskOf(fn, "MemoryKeyPaddingMask", c.MemoryKeyPaddingMask, B, S, unbatched)
	return x, mem, m, unbatched
}

func (l TransformerDecoderLayer) forward(x, mem *tensor.Tensor, m decoderMasks, keys []tensor.Key, one bool) *tensor.Tensor {
	k := func(i int) tensor.Key {
		if keys == nil {
			return tensor.Key{}
		}
		return keys[i]
	}
	kp := func(i int) *tensor.Key {
		if keys == nil {
			return nil
		}
		return &keys[i]
	}
	sa := func(x *tensor.Tensor) *tensor.Tensor {
		return l.Dropout1.Forward(torchAttention(l.SelfAttn, x, x, m.tgt, m.tgtPad, kp(0), one), k(1))
	}
	ca := func(x *tensor.Tensor) *tensor.Tensor {
		return l.Dropout2.Forward(torchAttention(l.MultiheadAttn, x, mem, m.mem, m.memPad, kp(2), one), k(3))
	}
	ff := func(x *tensor.Tensor) *tensor.Tensor {
		h := l.Dropout.Forward(l.Activation(l.Linear1.Forward(x)), k(4))
		return l.Dropout3.Forward(l.Linear2.Forward(h), k(5))
	}
	if l.NormFirst {
		x = tensor.Add(x, sa(l.Norm1.Forward(x)))
		x = tensor.Add(x, ca(l.Norm2.Forward(x)))
		return tensor.Add(x, ff(l.Norm3.Forward(x)))
	}
	x = l.Norm1.Forward(tensor.Add(x, sa(x)))
	x = l.Norm2.Forward(tensor.Add(x, ca(x)))
	return l.Norm3.Forward(tensor.Add(x, ff(x)))
}

// TransformerEncoder is PyTorch's torch.nn.TransformerEncoder: Layers
// applied in turn, then Norm if it is not nil (PyTorch's norm argument;
// torch.nn.Transformer gives its encoder one). PyTorch's state dict names
// layers.{i}.… and norm.… map to Layers[i] and Norm.
type TransformerEncoder struct {
	Layers []TransformerEncoderLayer
	Norm   *LayerNorm
}

// NewTransformerEncoder returns numLayers encoder layers built by
// NewTransformerEncoderLayer from key.Split(numLayers), and a final
// LayerNorm if norm. (PyTorch deep-copies one layer numLayers times, so
// its layers start equal; these start independent.)
func NewTransformerEncoder(key tensor.Key, dModel, nhead, numLayers int, norm bool, opts TransformerOptions) TransformerEncoder {
	if numLayers <= 0 {
		panic(fmt.Sprintf("nn.NewTransformerEncoder: numLayers %d: want at least one", numLayers))
	}
	var e TransformerEncoder
	for _, k := range key.Split(numLayers) {
		e.Layers = append(e.Layers, NewTransformerEncoderLayer(k, dModel, nhead, opts))
	}
	if norm {
		ln := NewLayerNorm(dModel, LayerNormOptions{Eps: opts.withDefaults("nn.NewTransformerEncoder").LayerNormEps})
		e.Norm = &ln
	}
	return e
}

// Forward applies the encoder to src without masks (see
// TransformerEncoderLayer.Forward for the layouts).
func (e TransformerEncoder) Forward(src *tensor.Tensor) *tensor.Tensor {
	return e.ForwardWith(src, TransformerEncoderCall{})
}

// Call is ForwardWith with key for the dropouts; it makes the encoder a
// Module.
func (e TransformerEncoder) Call(src *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	return e.ForwardWith(src, TransformerEncoderCall{Key: &key})
}

// ForwardWith is PyTorch's forward(src, mask, src_key_padding_mask): every
// layer gets the same masks, and layer i the key c.Key.Split(len(Layers))[i].
// The layout is the first layer's BatchFirst.
//
// PyTorch 1.13 in inference without gradients may run a "fast path"
// (nested tensors) that returns 0 at padded positions; this is PyTorch's
// ordinary path, which computes them as any other.
func (e TransformerEncoder) ForwardWith(src *tensor.Tensor, c TransformerEncoderCall) *tensor.Tensor {
	const fn = "nn.TransformerEncoder"
	if len(e.Layers) == 0 {
		panic(fn + ": no layers (build it with nn.NewTransformerEncoder)")
	}
	requireInput(fn, "src", src)
	l0 := e.Layers[0]
	requireBuilt(fn, "Layers[0].Linear1.W", l0.Linear1.W, "nn.NewTransformerEncoder")
	x, unbatched := toBatchFirst(fn, "src", src, l0.BatchFirst, l0.Linear1.In())
	B, T := x.Dim(0), x.Dim(1)
	mask := attnMaskOf(fn, "Mask", c.Mask, B, l0.SelfAttn.NumHeads, T, T)
	kpm := paddingMaskOf(fn, "KeyPaddingMask", c.KeyPaddingMask, B, T, unbatched)
	perLayer := stackKeys(fn, c.Key, len(e.Layers), func(i int) bool { return e.Layers[i].active() })
	for i, l := range e.Layers {
		x = l.forward(x, mask, kpm, layerKeys(fn, perLayer[i], 4, l.active()), unbatched)
	}
	if e.Norm != nil {
		x = e.Norm.Forward(x)
	}
	return fromBatchFirst(x, l0.BatchFirst, unbatched)
}

// TransformerDecoder is PyTorch's torch.nn.TransformerDecoder: Layers
// applied in turn to the target, each attending to the same memory, then
// Norm if it is not nil.
type TransformerDecoder struct {
	Layers []TransformerDecoderLayer
	Norm   *LayerNorm
}

// NewTransformerDecoder returns numLayers decoder layers built by
// NewTransformerDecoderLayer from key.Split(numLayers), and a final
// LayerNorm if norm.
func NewTransformerDecoder(key tensor.Key, dModel, nhead, numLayers int, norm bool, opts TransformerOptions) TransformerDecoder {
	if numLayers <= 0 {
		panic(fmt.Sprintf("nn.NewTransformerDecoder: numLayers %d: want at least one", numLayers))
	}
	var d TransformerDecoder
	for _, k := range key.Split(numLayers) {
		d.Layers = append(d.Layers, NewTransformerDecoderLayer(k, dModel, nhead, opts))
	}
	if norm {
		ln := NewLayerNorm(dModel, LayerNormOptions{Eps: opts.withDefaults("nn.NewTransformerDecoder").LayerNormEps})
		d.Norm = &ln
	}
	return d
}

// Forward applies the decoder to tgt and memory without masks.
func (d TransformerDecoder) Forward(tgt, memory *tensor.Tensor) *tensor.Tensor {
	return d.ForwardWith(tgt, memory, TransformerDecoderCall{})
}

// ForwardWith is PyTorch's forward(tgt, memory, tgt_mask, memory_mask,
// tgt_key_padding_mask, memory_key_padding_mask): every layer gets the
// same masks, and layer i the key c.Key.Split(len(Layers))[i].
func (d TransformerDecoder) ForwardWith(tgt, memory *tensor.Tensor, c TransformerDecoderCall) *tensor.Tensor {
	const fn = "nn.TransformerDecoder"
	if len(d.Layers) == 0 {
		panic(fn + ": no layers (build it with nn.NewTransformerDecoder)")
	}
	requireInput(fn, "tgt", tgt)
	requireInput(fn, "memory", memory)
	l0 := d.Layers[0]
	requireBuilt(fn, "Layers[0].Linear1.W", l0.Linear1.W, "nn.NewTransformerDecoder")
	x, mem, masks, unbatched := decoderInputs(fn, tgt, memory, c, l0.BatchFirst, l0.Linear1.In(), l0.SelfAttn.NumHeads)
	perLayer := stackKeys(fn, c.Key, len(d.Layers), func(i int) bool { return d.Layers[i].active() })
	for i, l := range d.Layers {
		x = l.forward(x, mem, masks, layerKeys(fn, perLayer[i], 6, l.active()), unbatched)
	}
	if d.Norm != nil {
		x = d.Norm.Forward(x)
	}
	return fromBatchFirst(x, l0.BatchFirst, unbatched)
}

// Transformer is PyTorch's torch.nn.Transformer: an Encoder over the
// source and a Decoder over the target attending to the encoder's
// output, both with a final LayerNorm.
type Transformer struct {
	Encoder TransformerEncoder
	Decoder TransformerDecoder
}

// NewTransformer returns torch.nn.Transformer(d_model=dModel,
// nhead=nhead, num_encoder_layers=encoderLayers,
// num_decoder_layers=decoderLayers, ...opts); PyTorch's defaults are 512,
// 8, 6 and 6. As PyTorch's _reset_parameters, every weight matrix is
// Glorot-uniform.
func NewTransformer(key tensor.Key, dModel, nhead, encoderLayers, decoderLayers int, opts TransformerOptions) Transformer {
	k := key.Split(3)
	t := Transformer{
		Encoder: NewTransformerEncoder(k[0], dModel, nhead, encoderLayers, true, opts),
		Decoder: NewTransformerDecoder(k[1], dModel, nhead, decoderLayers, true, opts),
	}
	var lins []*Linear
	for i := range t.Encoder.Layers {
		l := &t.Encoder.Layers[i]
		lins = append(lins, &l.SelfAttn.OutputProj, &l.Linear1, &l.Linear2)
	}
	for i := range t.Decoder.Layers {
		l := &t.Decoder.Layers[i]
		lins = append(lins, &l.SelfAttn.OutputProj, &l.MultiheadAttn.OutputProj, &l.Linear1, &l.Linear2)
	}
	// Glorot over gonox's [in, out] has the fans of PyTorch's [out, in].
	for i, kk := range k[2].Split(len(lins)) {
		lins[i].W = GlorotUniform()(kk, lins[i].W.Shape()...)
	}
	return t
}

// Forward is PyTorch's forward(src, tgt) without masks: the encoder's
// output on src is the decoder's memory. Layouts as
// TransformerDecoderLayer's.
func (t Transformer) Forward(src, tgt *tensor.Tensor) *tensor.Tensor {
	return t.ForwardWith(src, tgt, TransformerCall{})
}

// TransformerCall holds the optional arguments of Transformer's
// ForwardWith, PyTorch's masks (bool, true hiding, or float, added) and
// the dropout key.
type TransformerCall struct {
	SrcMask, TgtMask, MemoryMask                               *tensor.Tensor
	SrcKeyPaddingMask, TgtKeyPaddingMask, MemoryKeyPaddingMask *tensor.Tensor
	// Key draws the dropouts: Key.Split(2) gives the encoder's and the
	// decoder's.
	Key *tensor.Key
}

// ForwardWith is PyTorch's forward(src, tgt, src_mask, tgt_mask,
// memory_mask, src_key_padding_mask, tgt_key_padding_mask,
// memory_key_padding_mask).
func (t Transformer) ForwardWith(src, tgt *tensor.Tensor, c TransformerCall) *tensor.Tensor {
	var ke, kd *tensor.Key
	if c.Key != nil {
		k := c.Key.Split(2)
		ke, kd = &k[0], &k[1]
	}
	memory := t.Encoder.ForwardWith(src, TransformerEncoderCall{Mask: c.SrcMask, KeyPaddingMask: c.SrcKeyPaddingMask, Key: ke})
	return t.Decoder.ForwardWith(tgt, memory, TransformerDecoderCall{TgtMask: c.TgtMask, MemoryMask: c.MemoryMask,
		TgtKeyPaddingMask: c.TgtKeyPaddingMask, MemoryKeyPaddingMask: c.MemoryKeyPaddingMask, Key: kd})
}

// SquareSubsequentMask returns PyTorch's
// Transformer.generate_square_subsequent_mask(n): a float32 [n, n] mask
// with 0 on and below the diagonal and -Inf above it, so that position t
// attends to positions 0..t. Convert it to float64 for float64 models
// (tensor.Convert), or pass the bool TorchCausalMask instead.
func SquareSubsequentMask(n int) *tensor.Tensor {
	return tensor.Where(TorchCausalMask(n), tensor.Full(tensor.Float32, math.Inf(-1)), tensor.Zeros(tensor.Float32))
}

// TorchCausalMask returns the bool [n, n] mask that is true above the
// diagonal: in PyTorch's convention for the Transformer layers' masks
// (true = hidden), position t may not attend to positions after t.
//
// The polarity is PyTorch's, for the Transformer layers only: gonox's own
// attention (tensor.DotProductAttention, MultiHeadAttention) takes masks
// in JAX's convention, true = may attend, so passing this mask there
// inverts it; use their causal option (or tensor.LogicalNot of this mask)
// instead.
func TorchCausalMask(n int) *tensor.Tensor {
	if n < 0 {
		panic(fmt.Sprintf("nn.TorchCausalMask: n %d is negative", n))
	}
	rows := tensor.Reshape(tensor.Arange(n), n, 1)
	cols := tensor.Reshape(tensor.Arange(n), 1, n)
	return tensor.Less(rows, cols)
}
