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
// The scale 1/√H is applied to q before the product (JAX applies it to the
// logits; the results agree to rounding).
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
	vt := tensor.Transpose(v, 0, 2, 1, 3)                                                     // [B,N,S,H]
	logits := tensor.MatMulT(qt, kt, false, true)                                             // [B,N,T,S]
	if mask != nil {
		logits = tensor.Where(mask, logits, tensor.Scalar(float32(math.Inf(-1))))
	}
	w := tensor.Softmax(logits, -1)
	return tensor.Transpose(tensor.MatMul(w, vt), 0, 2, 1, 3) // [B,T,N,H]
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
// Equinox's eqx.nn.MultiheadAttention defaults: no biases, Linear's
// initialization, no causal mask.
type AttentionOptions struct {
	// Causal hides future positions: query t attends to keys 0..t.
	Causal bool
	// Bias adds a bias to each of the four projections (Equinox's
	// use_query_bias and friends, all false by default).
	Bias bool
	// WeightInit and BiasInit are passed to the projections (see
	// LinearOptions).
	WeightInit, BiasInit Initializer
	// Axes are the logical axes of the projections; the zero value sets
	// none. See DefaultAttentionAxes.
	Axes AttentionAxes
}

// MultiHeadAttention is multi-head attention (eqx.nn.MultiheadAttention):
// the inputs are projected to queries, keys and values of NumHeads heads of
// D/NumHeads features each, each head attends with DotProductAttention, and
// the heads are concatenated and projected back to D. Forward is
// self-attention; ForwardQKV takes separate query, key and value inputs.
type MultiHeadAttention struct {
	QueryProj, KeyProj, ValueProj, OutputProj Linear // each [D, D]
	NumHeads                                  int
	Causal                                    bool
}

// NewMultiHeadAttention returns self-attention over dim features in heads
// heads; heads must divide dim. key is split into one key per projection.
func NewMultiHeadAttention(key tensor.Key, dim, heads int, opts AttentionOptions) MultiHeadAttention {
	if heads <= 0 || dim <= 0 || dim%heads != 0 {
		panic(fmt.Sprintf("nn.NewMultiHeadAttention: dim %d, heads %d: heads must be positive and divide dim", dim, heads))
	}
	keys := key.Split(4)
	lin := func(k tensor.Key, axes [2]string) Linear {
		return NewLinear(k, dim, dim, LinearOptions{NoBias: !opts.Bias, WeightInit: opts.WeightInit, BiasInit: opts.BiasInit, Axes: axes})
	}
	return MultiHeadAttention{
		QueryProj:  lin(keys[0], opts.Axes.QKV),
		KeyProj:    lin(keys[1], opts.Axes.QKV),
		ValueProj:  lin(keys[2], opts.Axes.QKV),
		OutputProj: lin(keys[3], opts.Axes.Output),
		NumHeads:   heads,
		Causal:     opts.Causal,
	}
}

// Forward applies self-attention to x f32[B,T,D] and returns f32[B,T,D].
func (a MultiHeadAttention) Forward(x *tensor.Tensor) *tensor.Tensor {
	return a.ForwardQKV(x, x, x, nil)
}

// ForwardMask is Forward with a bool mask broadcastable to [B, heads, T, T]
// (true where query t may attend to key s), combined with the causal mask
// if the layer is causal. See DotProductAttention.
func (a MultiHeadAttention) ForwardMask(x, mask *tensor.Tensor) *tensor.Tensor {
	return a.ForwardQKV(x, x, x, mask)
}

// ForwardQKV is general attention, as eqx.nn.MultiheadAttention's
// __call__(query, key_, value, mask): queries come from q f32[B,T,D], keys
// and values from k and v f32[B,S,D] (cross-attention when they differ from
// q). mask, if not nil, broadcasts to [B, heads, T, S]; the causal mask, if
// the layer is causal, hides keys s > t. The result is f32[B,T,D].
func (a MultiHeadAttention) ForwardQKV(q, k, v, mask *tensor.Tensor) *tensor.Tensor {
	d := a.QueryProj.In()
	if q.Rank() != 3 || q.Dim(2) != d || k.Rank() != 3 || v.Rank() != 3 ||
		k.Dim(0) != q.Dim(0) || k.Dim(2) != d || !slices.Equal(k.Shape(), v.Shape()) {
		if q == k && k == v {
			panic(fmt.Sprintf("nn.MultiHeadAttention: x %v: want [batch, length, %d]", q, d))
		}
		panic(fmt.Sprintf("nn.MultiHeadAttention: q %v, k %v, v %v: want q [batch, T, %d] and k, v [batch, S, %d]", q, k, v, d, d))
	}
	n := a.NumHeads
	heads := func(l Linear, x *tensor.Tensor) *tensor.Tensor {
		return tensor.Reshape(l.Forward(x), x.Dim(0), x.Dim(1), n, l.Out()/n)
	}
	o := DotProductAttention(heads(a.QueryProj, q), heads(a.KeyProj, k), heads(a.ValueProj, v), mask, a.Causal)
	return a.OutputProj.Forward(tensor.Reshape(o, q.Dim(0), q.Dim(1), -1))
}

// Call is Forward, ignoring key; it makes a MultiHeadAttention a Module.
func (a MultiHeadAttention) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return a.Forward(x) }
