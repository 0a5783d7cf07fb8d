package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// DotProductAttention computes scaled dot-product attention per head, like
// jax.nn.dot_product_attention with JAX's [batch, length, heads, head_dim]
// layout:
//
//	out[b,t,n] = Σ_s softmax_s(q[b,t,n]·k[b,s,n] / √H) v[b,s,n]
//
// q is f32[B,T,N,H], k and v are f32[B,S,N,H], and the result is
// f32[B,T,N,H]. The softmax runs over the S keys.
//
// mask, if not nil, is a bool tensor that broadcasts to [B,N,T,S] (for
// instance [B,1,1,S] for key padding or [T,S]): key s is visible to query t
// where it is true. causal additionally hides every key s > t (the mask
// jnp.tril(ones(T, S)), aligned at the top left, as JAX's is_causal). Hidden
// positions get -Inf before the softmax, so they receive exactly zero
// weight; a query that can see no key at all gets NaN, as in JAX with -Inf
// masking, so padding masks should leave each query at least one key (its own
// position, say).
//
// It is one fused op (tensor.DotProductAttention, FlashAttention's
// algorithm): the [B,N,T,S] weights are never stored, so memory grows
// linearly with the lengths.
func DotProductAttention(q, k, v, mask *tensor.Tensor, causal bool) *tensor.Tensor {
	if q.Rank() != 4 || k.Rank() != 4 || v.Rank() != 4 ||
		!q.DType().IsFloat() || k.DType() != q.DType() || v.DType() != q.DType() {
		panic(fmt.Sprintf("nn.DotProductAttention: q %v, k %v, v %v: want float32 [batch, length, heads, head_dim]", q, k, v))
	}
	B, T, N, H := q.Dim(0), q.Dim(1), q.Dim(2), q.Dim(3)
	S := k.Dim(1)
	if !slices.Equal(k.Shape(), []int{B, S, N, H}) || !slices.Equal(v.Shape(), []int{B, S, N, H}) {
		panic(fmt.Sprintf("nn.DotProductAttention: q %v, k %v, v %v: k and v must be [%d, S, %d, %d] with the same S", q, k, v, B, N, H))
	}
	if mask != nil {
		checkMask(mask, B, N, T, S)
	}
	return attention(q, k, v, mask, causal, nil, tensor.Float32)
}

// attention is DotProductAttention for q [B,T,N,H], k [B,S,N,H] and v
// [B,S,N,V] (checked by the caller, mask too), with weights, if not nil,
// applied to the softmax's weights [B,N,T,S] (dropout). Without weights
// it is the fused op (tensor.DotProductAttentionAs, its products in
// dtype compute: Float32 or BFloat16); dropout on the weights needs them
// stored, and composes the ops (in float32).
func attention(q, k, v, mask *tensor.Tensor, causal bool, weights func(*tensor.Tensor) *tensor.Tensor, compute tensor.DType) *tensor.Tensor {
	if weights == nil {
		return tensor.DotProductAttentionAs(q, k, v, mask, 0, causal, compute)
	}
	T, S, H := q.Dim(1), k.Dim(1), q.Dim(3)
	if causal {
		rows := tensor.Reshape(tensor.Arange(T), T, 1)
		cols := tensor.Reshape(tensor.Arange(S), 1, S)
		tril := tensor.GreaterEqual(rows, cols) // key s visible to query t iff s <= t
		if mask == nil {
			mask = tril
		} else {
			mask = tensor.LogicalAnd(mask, tril)
		}
	}
	qt := tensor.Transpose(tensor.MulScalar(q, float32(1/math.Sqrt(float64(H)))), 0, 2, 1, 3) // [B,N,T,H]
	kt := tensor.Transpose(k, 0, 2, 1, 3)                                                     // [B,N,S,H]
	vt := tensor.Transpose(v, 0, 2, 1, 3)                                                     // [B,N,S,V]
	logits := tensor.MatMulT(qt, kt, false, true)                                             // [B,N,T,S]
	if mask != nil {
		logits = tensor.Where(mask, logits, tensor.Scalar(float32(math.Inf(-1))))
	}
	w := tensor.Softmax(logits, -1)
	if weights != nil {
		w = weights(w)
	}
	return tensor.Transpose(tensor.MatMul(w, vt), 0, 2, 1, 3) // [B,T,N,V]
}

func checkMask(mask *tensor.Tensor, B, N, T, S int) {
	full := []int{B, N, T, S}
	ok := mask.DType() == tensor.Bool && mask.Rank() <= 4
	if ok {
		r := mask.Rank()
		for i := range r {
			d, f := mask.Dim(i), full[4-r+i]
			if d != 1 && d != f {
				ok = false
			}
		}
	}
	if !ok {
		panic(fmt.Sprintf("nn.DotProductAttention: mask %v: want bool broadcastable to [%d,%d,%d,%d] (batch, heads, queries, keys)", mask, B, N, T, S))
	}
}

// AttentionAxes holds the logical axes of the projections of a
// MultiHeadAttention: QKV for the query, key and value weights [dim,
// dim], Output for the output weight. See DefaultAttentionAxes.
type AttentionAxes struct {
	QKV, Output [2]string
}

// DefaultAttentionAxes returns the tensor-parallel convention: the query,
// key and value projections (AxisEmbed, AxisHeads) are column-parallel,
// splitting heads, and the output projection (AxisHeads, AxisEmbed) is
// row-parallel, as in Megatron-LM. The columns of a projection are ordered
// head by head, so splitting them into as many parts as the mesh axis has
// devices splits whole heads when that number divides the head count.
func DefaultAttentionAxes() AttentionAxes {
	return AttentionAxes{
		QKV:    [2]string{AxisEmbed, AxisHeads},
		Output: [2]string{AxisHeads, AxisEmbed},
	}
}

// AttentionOptions configures NewMultiHeadAttention. The zero value gives
// Equinox's eqx.nn.MultiheadAttention defaults: keys, values and outputs
// of the query's size, heads of dim/heads features, no biases, Linear's
// initialization, no dropout, no causal mask.
type AttentionOptions struct {
	// Causal hides future positions: query t attends to keys 0..t.
	Causal bool
	// KeySize and ValueSize are the features of the key and value inputs
	// (Equinox's key_size and value_size); 0 means dim, the query's.
	KeySize, ValueSize int
	// OutputSize is the features of the output (output_size); 0 means
	// dim.
	OutputSize int
	// QKSize is the features per head that queries and keys are compared
	// over (qk_size), VOSize those per head of the values and of the
	// output projection's input (vo_size); 0 means dim/heads.
	QKSize, VOSize int
	// QueryBias, KeyBias, ValueBias and OutputBias give a projection a
	// bias (Equinox's use_query_bias and friends); Bias gives all four
	// one.
	QueryBias, KeyBias, ValueBias, OutputBias bool
	Bias                                      bool
	// DropoutRate drops attention weights with this probability during
	// training (Equinox's dropout_p), see MultiHeadAttention.Dropout.
	DropoutRate float64
	// WeightInit and BiasInit are passed to the projections (see
	// LinearOptions).
	WeightInit, BiasInit Initializer
	// Axes are the logical axes of the projections; the zero value sets
	// none. See DefaultAttentionAxes.
	Axes AttentionAxes
}

// MultiHeadAttention is multi-head attention (eqx.nn.MultiheadAttention):
// the query, key and value inputs are projected to NumHeads heads (of
// QKSize features for queries and keys, VOSize for values), each head
// attends with scaled dot-product attention (DotProductAttention), and the
// heads are concatenated and projected to the output size. Forward is
// self-attention; ForwardQKV takes separate query, key and value inputs,
// and ForwardWith Equinox's other call arguments (a mask, the dropout key,
// a function of the heads such as rotary embeddings).
type MultiHeadAttention struct {
	QueryProj  Linear // [querySize, NumHeads·QKSize]
	KeyProj    Linear // [keySize, NumHeads·QKSize]
	ValueProj  Linear // [valueSize, NumHeads·VOSize]
	OutputProj Linear // [NumHeads·VOSize, outputSize]
	NumHeads   int
	Causal     bool
	// Dropout drops attention weights after the softmax (Equinox's
	// dropout on the weights), drawing from the key given to ForwardWith
	// or Call; InferenceMode switches it off.
	Dropout Dropout
}

// WithPolicy returns a with mixed-precision policy p set on its four
// projections (see Linear.WithPolicy): with float32 host parameters and a
// half p.Compute they run as automatic mixed precision, their products in
// p.Compute with float32 results and gradients. With bfloat16 compute the
// attention's products run in bfloat16 too (tensor.DotProductAttentionAs:
// q·kᵀ and the weights times v, forward and backward, on operands rounded
// to bfloat16 with float32 accumulation), as PyTorch's autocast runs
// them, while the scaled logits, the mask, the softmax and its statistics
// stay float32; with float16 compute, or dropout on the weights, the
// attention runs in float32. The zero Policy switches the policy off.
func (a MultiHeadAttention) WithPolicy(p Policy) MultiHeadAttention {
	checkPolicy("nn.MultiHeadAttention.WithPolicy", p)
	for _, l := range []*Linear{&a.QueryProj, &a.KeyProj, &a.ValueProj, &a.OutputProj} {
		l.policy = p
	}
	return a
}

// attentionCompute is the dtype of the attention's products: BFloat16
// when the projections run as automatic mixed precision in bfloat16 and
// the heads are float32, else Float32.
func (a MultiHeadAttention) attentionCompute(q, k, v *tensor.Tensor) tensor.DType {
	p := a.QueryProj
	if ampCompute(p.policy, p.W, p.B) == tensor.BFloat16 &&
		q.DType() == tensor.Float32 && k.DType() == tensor.Float32 && v.DType() == tensor.Float32 {
		return tensor.BFloat16
	}
	return tensor.Float32
}

// Policy returns the mixed-precision policy of a's projections (the zero
// Policy if none).
func (a MultiHeadAttention) Policy() Policy { return a.QueryProj.policy }

func (a MultiHeadAttention) withPolicy(p Policy) any { return a.WithPolicy(p) }

// NewMultiHeadAttention returns attention for queries of dim features in
// heads heads (by default self-attention with every size dim, and heads
// of dim/heads features, so heads must divide dim unless QKSize and
// VOSize are given). key is split into one key per projection, in the
// order query, key, value, output, as Equinox splits it.
func NewMultiHeadAttention(key tensor.Key, dim, heads int, opts AttentionOptions) MultiHeadAttention {
	qk, vo := opts.QKSize, opts.VOSize
	if heads <= 0 || dim <= 0 || (qk == 0 || vo == 0) && dim%heads != 0 {
		panic(fmt.Sprintf("nn.NewMultiHeadAttention: dim %d, heads %d: heads must be positive and divide dim", dim, heads))
	}
	def := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	qk, vo = def(qk, dim/heads), def(vo, dim/heads)
	ks, vs, os := def(opts.KeySize, dim), def(opts.ValueSize, dim), def(opts.OutputSize, dim)
	if qk < 0 || vo < 0 || ks < 0 || vs < 0 || os < 0 {
		panic(fmt.Sprintf("nn.NewMultiHeadAttention: negative size in %+v", opts))
	}
	keys := key.Split(4)
	lin := func(k tensor.Key, in, out int, bias bool, axes [2]string) Linear {
		return NewLinear(k, in, out, LinearOptions{NoBias: !(bias || opts.Bias), WeightInit: opts.WeightInit, BiasInit: opts.BiasInit, Axes: axes})
	}
	return MultiHeadAttention{
		QueryProj:  lin(keys[0], dim, heads*qk, opts.QueryBias, opts.Axes.QKV),
		KeyProj:    lin(keys[1], ks, heads*qk, opts.KeyBias, opts.Axes.QKV),
		ValueProj:  lin(keys[2], vs, heads*vo, opts.ValueBias, opts.Axes.QKV),
		OutputProj: lin(keys[3], heads*vo, os, opts.OutputBias, opts.Axes.Output),
		NumHeads:   heads,
		Causal:     opts.Causal,
		Dropout:    NewDropout(opts.DropoutRate),
	}
}

// Forward applies self-attention to x f32[B,T,D] and returns
// f32[B,T,outputSize]. One example x f32[T,D] (Equinox's call, which
// autodiff.Vmap maps over a batch) gives f32[T,outputSize].
func (a MultiHeadAttention) Forward(x *tensor.Tensor) *tensor.Tensor {
	return a.ForwardWith(x, x, x, AttentionCall{})
}

// ForwardMask is Forward with a bool mask broadcastable to [B, heads, T, T]
// (true where query t may attend to key s), combined with the causal mask
// if the layer is causal. See DotProductAttention.
func (a MultiHeadAttention) ForwardMask(x, mask *tensor.Tensor) *tensor.Tensor {
	return a.ForwardWith(x, x, x, AttentionCall{Mask: mask})
}

// ForwardQKV is general attention, as eqx.nn.MultiheadAttention's
// __call__(query, key_, value, mask): queries come from q f32[B,T,Q], keys
// and values from k f32[B,S,K] and v f32[B,S,V] (cross-attention when they
// differ from q). mask, if not nil, broadcasts to [B, heads, T, S]; the
// causal mask, if the layer is causal, hides keys s > t. The result is
// f32[B,T,outputSize]. One example, q f32[T,Q], k f32[S,K] and v f32[S,V]
// (every operand of rank 2), is Equinox's unbatched call: the mask then
// broadcasts to [heads, T, S] and the result is f32[T,outputSize].
func (a MultiHeadAttention) ForwardQKV(q, k, v, mask *tensor.Tensor) *tensor.Tensor {
	return a.ForwardWith(q, k, v, AttentionCall{Mask: mask})
}

// Call is Forward with key for the dropout of the attention weights; it
// makes a MultiHeadAttention a Module.
func (a MultiHeadAttention) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	return a.ForwardWith(x, x, x, AttentionCall{Key: &key})
}

// AttentionCall holds the optional arguments of MultiHeadAttention's
// ForwardWith: Equinox's mask, key and process_heads.
type AttentionCall struct {
	// Mask, if not nil, is a bool tensor broadcastable to [B, heads, T, S]:
	// key s is visible to query t where it is true.
	Mask *tensor.Tensor
	// Key draws the dropout of the attention weights. It is required
	// when the layer's Dropout is active (a rate above 0, not in
	// inference mode): example b and head h draw with
	// Key.Split(B)[b].Split(heads)[h], the keys Equinox's layer uses
	// when vmapped over jax.random.split(key, B).
	Key *tensor.Key
	// ProcessHeads, if set, maps the projected query, key and value heads
	// (f32[B,T,heads,QKSize], f32[B,S,heads,QKSize], f32[B,S,heads,VOSize])
	// before attention, and must return them in the same shapes: rotary
	// positional embeddings are applied here (see
	// RotaryPositionalEmbedding).
	ProcessHeads func(q, k, v *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor)
}

// ForwardWith is ForwardQKV with Equinox's other call arguments: a mask,
// the key of the weights' dropout and a function of the heads.
func (a MultiHeadAttention) ForwardWith(q, k, v *tensor.Tensor, c AttentionCall) *tensor.Tensor {
	const fn = "nn.MultiHeadAttention"
	requireInput(fn, "q", q)
	requireInput(fn, "k", k)
	requireInput(fn, "v", v)
	requireBuilt(fn, "QueryProj.W", a.QueryProj.W, "nn.NewMultiHeadAttention")
	requireParamDTypeOrHalf(fn, q, a.QueryProj.W)
	requireParamDTypeOrHalf(fn, k, a.KeyProj.W)
	requireParamDTypeOrHalf(fn, v, a.ValueProj.W)
	if q.Rank() == 2 && k.Rank() == 2 && v.Rank() == 2 {
		return a.forwardOne(q, k, v, c)
	}
	return a.forwardBatch(q, k, v, c, false)
}

// forwardOne is Equinox's call on one example, q f32[T,Q], k f32[S,K] and
// v f32[S,V], as the call on a batch of one: the mask broadcasts to
// [heads, T, S], ProcessHeads sees heads without a batch axis, and the
// dropout of head h draws with Key.Split(heads)[h], as Equinox's layer
// does, so that the layer vmapped over jax.random.split(key, B) draws as
// the batched call with key.
func (a MultiHeadAttention) forwardOne(q, k, v *tensor.Tensor, c AttentionCall) *tensor.Tensor {
	if ph := c.ProcessHeads; ph != nil {
		c.ProcessHeads = func(q, k, v *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
			q2, k2, v2 := ph(tensor.Squeeze(q, 0), tensor.Squeeze(k, 0), tensor.Squeeze(v, 0))
			return tensor.ExpandDims(q2, 0), tensor.ExpandDims(k2, 0), tensor.ExpandDims(v2, 0)
		}
	}
	// One header per distinct operand, so that self-attention stays
	// recognisable (q == k == v) to forwardBatch's messages.
	one := func(x *tensor.Tensor) *tensor.Tensor { return tensor.ExpandDims(x, 0) }
	eq := one(q)
	ek, ev := eq, eq
	if k != q {
		ek = one(k)
	}
	switch {
	case v == k:
		ev = ek
	case v != q:
		ev = one(v)
	}
	return tensor.Squeeze(a.forwardBatch(eq, ek, ev, c, true), 0)
}

// forwardBatch is ForwardWith on a batch; one says the batch is one
// example's (forwardOne): its dropout keys are then Equinox's for one
// example.
func (a MultiHeadAttention) forwardBatch(q, k, v *tensor.Tensor, c AttentionCall, one bool) *tensor.Tensor {
	qs, ks, vs := a.QueryProj.In(), a.KeyProj.In(), a.ValueProj.In()
	if q.Rank() != 3 || q.Dim(2) != qs || k.Rank() != 3 || v.Rank() != 3 ||
		k.Dim(0) != q.Dim(0) || v.Dim(0) != q.Dim(0) || k.Dim(2) != ks || v.Dim(2) != vs || k.Dim(1) != v.Dim(1) {
		self := q == k && k == v
		if one { // name the operands as the caller gave them
			q, k, v = tensor.Squeeze(q, 0), tensor.Squeeze(k, 0), tensor.Squeeze(v, 0)
		}
		if self {
			panic(fmt.Sprintf("nn.MultiHeadAttention: x %v: want [batch, length, %d] or one example [length, %d]", q, qs, qs))
		}
		panic(fmt.Sprintf("nn.MultiHeadAttention: q %v, k %v, v %v: want q [batch, T, %d], k [batch, S, %d] and v [batch, S, %d] (or one example each, without the batch axis)",
			q, k, v, qs, ks, vs))
	}
	n := a.NumHeads
	if c.Mask != nil {
		checkMask(c.Mask, q.Dim(0), n, q.Dim(1), k.Dim(1))
	}
	drop := !a.Dropout.Inference && a.Dropout.Rate > 0
	if drop && c.Key == nil {
		panic("nn.MultiHeadAttention: dropout on the attention weights needs a key: pass AttentionCall.Key (or use Call), or switch it off with InferenceMode")
	}
	heads := func(l Linear, x *tensor.Tensor) *tensor.Tensor {
		return tensor.Reshape(l.Forward(x), x.Dim(0), x.Dim(1), n, l.Out()/n)
	}
	qh, kh, vh := heads(a.QueryProj, q), heads(a.KeyProj, k), heads(a.ValueProj, v)
	if c.ProcessHeads != nil {
		q2, k2, v2 := c.ProcessHeads(qh, kh, vh)
		if !sameShapes(q2, qh) || !sameShapes(k2, kh) || !sameShapes(v2, vh) {
			panic(fmt.Sprintf("nn.MultiHeadAttention: ProcessHeads changed the heads' shapes: %v, %v, %v to %v, %v, %v",
				qh, kh, vh, q2, k2, v2))
		}
		qh, kh, vh = q2, k2, v2
	}
	var weightsFn func(*tensor.Tensor) *tensor.Tensor
	if drop {
		weightsFn = func(w *tensor.Tensor) *tensor.Tensor { return a.dropWeights(w, *c.Key, one) }
	}
	o := attention(qh, kh, vh, c.Mask, a.Causal, weightsFn, a.attentionCompute(qh, kh, vh))
	return a.OutputProj.Forward(tensor.Reshape(o, q.Dim(0), q.Dim(1), -1))
}

// dropWeights applies the layer's dropout to attention weights w
// [B,N,T,S], with key.Split(B)[b].Split(N)[h] for example b and head h
// (key.Split(N)[h] for one example's call, one).
func (a MultiHeadAttention) dropWeights(w *tensor.Tensor, key tensor.Key, one bool) *tensor.Tensor {
	B, N := w.Dim(0), w.Dim(1)
	masks := make([]*tensor.Tensor, 0, B*N)
	perExample := []tensor.Key{key}
	if !one {
		perExample = key.Split(B)
	}
	for _, kb := range perExample {
		for _, kh := range kb.Split(N) {
			masks = append(masks, tensor.Bernoulli(kh, float32(1-a.Dropout.Rate), w.Dim(2), w.Dim(3)))
		}
	}
	keep := tensor.Reshape(tensor.Stack(0, masks...), w.Shape()...)
	if a.Dropout.Rate == 1 {
		return tensor.MulScalar(w, 0)
	}
	scaled := tensor.Div(w, tensor.Scalar(float32(1-a.Dropout.Rate)))
	return tensor.Where(keep, scaled, tensor.Scalar(0))
}
