package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// attentionRef is attention with naive loops over batch, head, query and key.
// q is [B,T,N,H], k and v [B,S,N,H] (flat, row-major); visible(b,n,t,s)
// says whether key s is visible.
func attentionRef(q, k, v []float64, B, T, S, N, H int, visible func(b, n, t, s int) bool) []float64 {
	out := make([]float64, B*T*N*H)
	at := func(x []float64, L, b, t, n int) []float64 {
		o := ((b*L+t)*N + n) * H
		return x[o : o+H]
	}
	for b := range B {
		for n := range N {
			for t := range T {
				logits := make([]float64, S)
				for s := range S {
					if visible != nil && !visible(b, n, t, s) {
						logits[s] = math.Inf(-1)
						continue
					}
					dot := 0.0
					qv, kv := at(q, T, b, t, n), at(k, S, b, s, n)
					for h := range H {
						dot += qv[h] * kv[h]
					}
					logits[s] = dot / math.Sqrt(float64(H))
				}
				w := softmax64(logits)
				o := at(out, T, b, t, n)
				for s := range S {
					vv := at(v, S, b, s, n)
					for h := range H {
						o[h] += w[s] * vv[h]
					}
				}
			}
		}
	}
	return out
}

func TestDotProductAttention(t *testing.T) {
	const B, T, S, N, H = 2, 4, 5, 3, 2
	q, k, v := randn(1, B, T, N, H), randn(2, B, S, N, H), randn(3, B, S, N, H)
	// Key padding: batch 0 sees all keys, batch 1 the first three.
	pad := make([]bool, B*S)
	for s := range S {
		pad[s] = true
		pad[S+s] = s < 3
	}
	padMask := tensor.FromBool(pad, B, 1, 1, S)
	// A per-head mask hiding key 1 from head 2.
	headBits := make([]bool, N*S)
	for n := range N {
		for s := range S {
			headBits[n*S+s] = !(n == 2 && s == 1)
		}
	}
	headMask := tensor.FromBool(headBits, N, 1, S)
	cases := []struct {
		name    string
		mask    *tensor.Tensor
		causal  bool
		visible func(b, n, t, s int) bool
	}{
		{"unmasked", nil, false, nil},
		{"causal", nil, true, func(b, n, t, s int) bool { return s <= t }},
		{"padding", padMask, false, func(b, n, t, s int) bool { return pad[b*S+s] }},
		{"padding and causal", padMask, true, func(b, n, t, s int) bool { return pad[b*S+s] && s <= t }},
		{"per head [N,1,S]", headMask, false, func(b, n, t, s int) bool { return headBits[n*S+s] }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := nn.DotProductAttention(q, k, v, c.mask, c.causal)
			require.Equal(t, []int{B, T, N, H}, got.Shape())
			want := attentionRef(q.Float64s(), k.Float64s(), v.Float64s(), B, T, S, N, H, c.visible)
			assert.InDeltaSlice(t, want, got.Float64s(), 1e-5)
			checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
				return nn.DotProductAttention(xs[0], xs[1], xs[2], c.mask, c.causal)
			}, q, k, v)
		})
	}
}

func TestDotProductAttentionFullyMaskedRowIsNaN(t *testing.T) {
	q, k := randn(1, 1, 2, 1, 2), randn(2, 1, 2, 1, 2)
	mask := tensor.FromBool([]bool{true, true, false, false}, 1, 1, 2, 2) // query 1 sees nothing
	y := nn.DotProductAttention(q, k, k, mask, false).Float64s()
	assert.False(t, math.IsNaN(y[0]) || math.IsNaN(y[1]))
	assert.True(t, math.IsNaN(y[2]) && math.IsNaN(y[3]))
}

func TestDotProductAttentionPanics(t *testing.T) {
	q := randn(0, 2, 3, 4, 5)
	requirePanicContains(t, func() { nn.DotProductAttention(randn(0, 3, 4, 5), q, q, nil, false) },
		"nn.DotProductAttention: q f32[3,4,5], k f32[2,3,4,5], v f32[2,3,4,5]: want float32 [batch, length, heads, head_dim]")
	requirePanicContains(t, func() { nn.DotProductAttention(q, randn(0, 2, 6, 4, 5), q, nil, false) },
		"k and v must be [2, S, 4, 5] with the same S")
	requirePanicContains(t, func() { nn.DotProductAttention(q, q, q, tensor.Ones(tensor.Bool, 2, 1, 3, 4), false) },
		"nn.DotProductAttention: mask bool[2,1,3,4]: want bool broadcastable to [2,4,3,3] (batch, heads, queries, keys)")
	requirePanicContains(t, func() { nn.DotProductAttention(q, q, q, tensor.Ones(tensor.Float32, 3, 3), false) },
		"mask f32[3,3]")
}

// mhaRef computes self-attention with naive loops from the layer's weights.
func mhaRef(a nn.MultiHeadAttention, x *tensor.Tensor, visible func(b, n, t, s int) bool) []float64 {
	B, T, D := x.Dim(0), x.Dim(1), x.Dim(2)
	N := a.NumHeads
	H := D / N
	rows := toMat(tensor.Reshape(x, B*T, D))
	proj := func(l nn.Linear, in mat) []float64 {
		var b []float64
		if l.B != nil {
			b = l.B.Float64s()
		}
		return flat(linearRef(in, toMat(l.W), b))
	}
	q, k, v := proj(a.QueryProj, rows), proj(a.KeyProj, rows), proj(a.ValueProj, rows)
	o := attentionRef(q, k, v, B, T, T, N, H, visible) // [B,T,N,H] = [B*T, D]
	om := make(mat, B*T)
	for i := range om {
		om[i] = o[i*D : (i+1)*D]
	}
	return proj(a.OutputProj, om)
}

func TestMultiHeadAttentionForward(t *testing.T) {
	const B, T, D, N = 2, 5, 8, 4
	cases := []struct {
		name string
		opts nn.AttentionOptions
	}{
		{"defaults", nn.AttentionOptions{}},
		{"causal with biases", nn.AttentionOptions{Causal: true, Bias: true}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := nn.NewMultiHeadAttention(tensor.NewKey(uint64(i)), D, N, c.opts)
			assert.Equal(t, N, a.NumHeads)
			assert.Equal(t, c.opts.Causal, a.Causal)
			for _, l := range []nn.Linear{a.QueryProj, a.KeyProj, a.ValueProj, a.OutputProj} {
				require.Equal(t, []int{D, D}, l.W.Shape())
				assert.Equal(t, c.opts.Bias, l.B != nil, "Equinox has no projection biases by default")
			}
			// The key is split into one key per projection.
			keys := tensor.NewKey(uint64(i)).Split(4)
			assert.Equal(t, nn.NewLinear(keys[2], D, D, nn.LinearOptions{}).W.Float32s(), a.ValueProj.W.Float32s())
			x := randn(10+uint64(i), B, T, D)
			var visible func(b, n, t, s int) bool
			if c.opts.Causal {
				visible = func(b, n, t, s int) bool { return s <= t }
			}
			got := a.Forward(x)
			require.Equal(t, []int{B, T, D}, got.Shape())
			assert.InDeltaSlice(t, mhaRef(a, x, visible), got.Float64s(), 1e-5)
			assert.Equal(t, got.Float32s(), a.Call(x, tensor.NewKey(3)).Float32s())
		})
	}
}

func TestMultiHeadAttentionMask(t *testing.T) {
	const B, T, D, N = 2, 4, 6, 2
	a := nn.NewMultiHeadAttention(tensor.NewKey(0), D, N, nn.AttentionOptions{Causal: true})
	x := randn(1, B, T, D)
	// Hide key 0 from every query but the first, in batch 1 only.
	bits := make([]bool, B*T*T)
	for b := range B {
		for q := range T {
			for s := range T {
				bits[(b*T+q)*T+s] = !(b == 1 && s == 0 && q > 0)
			}
		}
	}
	mask := tensor.FromBool(bits, B, 1, T, T)
	got := a.ForwardMask(x, mask)
	want := mhaRef(a, x, func(b, n, q, s int) bool { return bits[(b*T+q)*T+s] && s <= q })
	assert.InDeltaSlice(t, want, got.Float64s(), 1e-5)
}

// perturb returns x with position t of batch b changed.
func perturb(x *tensor.Tensor, b, t int) *tensor.Tensor {
	v := x.Float32s()
	T, D := x.Dim(1), x.Dim(2)
	for j := range D {
		v[(b*T+t)*D+j] += 1 + float32(j)
	}
	return tensor.FromFloat32(v, x.Shape()...)
}

func TestMultiHeadAttentionCausality(t *testing.T) {
	const B, T, D, N, pos = 2, 6, 8, 2, 3
	x := randn(1, B, T, D)
	for _, causal := range []bool{true, false} {
		a := nn.NewMultiHeadAttention(tensor.NewKey(2), D, N, nn.AttentionOptions{Causal: causal})
		y := a.Forward(x).Float32s()
		y2 := a.Forward(perturb(x, 0, pos)).Float32s()
		for tt := range T {
			row := func(v []float32, b int) []float32 { return v[(b*T+tt)*D : (b*T+tt+1)*D] }
			if causal && tt < pos {
				assert.Equal(t, row(y, 0), row(y2, 0), "causal: position %d must not see the future", tt)
			} else {
				assert.NotEqual(t, row(y, 0), row(y2, 0), "causal=%v: position %d should change", causal, tt)
			}
			assert.Equal(t, row(y, 1), row(y2, 1), "other batch element unchanged")
		}
	}
}

func TestMultiHeadAttentionGrad(t *testing.T) {
	const B, T, D, N = 2, 3, 4, 2
	for _, causal := range []bool{false, true} {
		a := nn.NewMultiHeadAttention(tensor.NewKey(5), D, N, nn.AttentionOptions{Causal: causal, Bias: true})
		x := randn(6, B, T, D)
		checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
			m := nn.MultiHeadAttention{
				QueryProj:  nn.Linear{W: xs[0], B: xs[1]},
				KeyProj:    nn.Linear{W: xs[2], B: xs[3]},
				ValueProj:  nn.Linear{W: xs[4], B: xs[5]},
				OutputProj: nn.Linear{W: xs[6], B: xs[7]},
				NumHeads:   N, Causal: causal,
			}
			return m.Forward(xs[8])
		}, a.QueryProj.W, a.QueryProj.B, a.KeyProj.W, a.KeyProj.B, a.ValueProj.W, a.ValueProj.B, a.OutputProj.W, a.OutputProj.B, x)
	}
}

func TestMultiHeadAttentionPanics(t *testing.T) {
	requirePanicContains(t, func() { nn.NewMultiHeadAttention(tensor.NewKey(0), 6, 4, nn.AttentionOptions{}) },
		"nn.NewMultiHeadAttention: dim 6, heads 4: heads must be positive and divide dim")
	a := nn.NewMultiHeadAttention(tensor.NewKey(0), 6, 2, nn.AttentionOptions{})
	requirePanicContains(t, func() { a.Forward(randn(0, 6)) }, "nn.MultiHeadAttention: x f32[6]: want [batch, length, 6] or one example [length, 6]")
	requirePanicContains(t, func() { a.Forward(randn(0, 3, 5)) }, "nn.MultiHeadAttention: x f32[3,5]: want [batch, length, 6] or one example [length, 6]")
}

// One example, Equinox's unbatched call: each example's call equals its
// row of the batched call (self-attention with a mask, cross-attention,
// causal, ProcessHeads without the batch axis); vmapped over a batch it
// equals the batched call, its dropout included when the keys are
// key.Split(B), as Equinox's layer vmapped over jax.random.split(key, B).
func TestMultiHeadAttentionOneExample(t *testing.T) {
	const B, T, S, D, N = 3, 4, 5, 6, 2
	a := nn.NewMultiHeadAttention(tensor.NewKey(9), D, N, nn.AttentionOptions{Bias: true})
	causal := nn.NewMultiHeadAttention(tensor.NewKey(10), D, N, nn.AttentionOptions{Causal: true})
	x, kv := randn(11, B, T, D), randn(12, B, S, D)
	mask := tensor.Greater(randn(13, T, S), tensor.Scalar(-0.5)) // [T,S]: every batch and head
	xs, kvs := tensor.Unstack(x, 0), tensor.Unstack(kv, 0)
	for name, c := range map[string]struct {
		batch func() *tensor.Tensor
		one   func(b int) *tensor.Tensor
	}{
		"self": {func() *tensor.Tensor { return a.Forward(x) }, func(b int) *tensor.Tensor { return a.Forward(xs[b]) }},
		"causal": {func() *tensor.Tensor { return causal.Forward(x) },
			func(b int) *tensor.Tensor { return causal.Forward(xs[b]) }},
		"cross with a mask": {func() *tensor.Tensor { return a.ForwardQKV(x, kv, kv, mask) },
			func(b int) *tensor.Tensor { return a.ForwardQKV(xs[b], kvs[b], kvs[b], mask) }},
	} {
		want := tensor.Unstack(c.batch(), 0)
		for b := range B {
			got := c.one(b)
			require.Equal(t, want[b].Shape(), got.Shape(), name)
			require.InDeltaSlice(t, want[b].Float64s(), got.Float64s(), 1e-6, "%s example %d", name, b)
		}
	}

	var seen []int
	double := func(q, k, v *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
		seen = q.Shape()
		return tensor.MulScalar(q, 2), k, v
	}
	got := a.ForwardWith(xs[1], xs[1], xs[1], nn.AttentionCall{ProcessHeads: double})
	require.Equal(t, []int{T, N, D / N}, seen)
	want := a.ForwardWith(x, x, x, nn.AttentionCall{ProcessHeads: double})
	require.InDeltaSlice(t, tensor.Unstack(want, 0)[1].Float64s(), got.Float64s(), 1e-6)

	drop := nn.NewMultiHeadAttention(tensor.NewKey(14), D, N, nn.AttentionOptions{DropoutRate: 0.5})
	key := tensor.NewKey(15)
	vm := autodiff.Vmap2(drop.Call, autodiff.Strict())(x, tensor.StackKeys(key.Split(B)))
	require.InDeltaSlice(t, drop.Call(x, key).Float64s(), vm.Float64s(), 1e-6)
	require.InDeltaSlice(t, tensor.Unstack(drop.Call(x, key), 0)[2].Float64s(), drop.Call(xs[2], key.Split(B)[2]).Float64s(), 1e-6)
}

func TestMultiHeadAttentionCross(t *testing.T) {
	const B, T, S, D, N = 2, 3, 5, 6, 3
	a := nn.NewMultiHeadAttention(tensor.NewKey(4), D, N, nn.AttentionOptions{Bias: true})
	q, kv := randn(1, B, T, D), randn(2, B, S, D)
	got := a.ForwardQKV(q, kv, kv, nil)
	require.Equal(t, []int{B, T, D}, got.Shape())
	proj := func(l nn.Linear, x *tensor.Tensor) []float64 {
		return flat(linearRef(toMat(tensor.Reshape(x, -1, D)), toMat(l.W), l.B.Float64s()))
	}
	o := attentionRef(proj(a.QueryProj, q), proj(a.KeyProj, kv), proj(a.ValueProj, kv), B, T, S, N, D/N, nil)
	om := make(mat, B*T)
	for i := range om {
		om[i] = o[i*D : (i+1)*D]
	}
	assert.InDeltaSlice(t, flat(linearRef(om, toMat(a.OutputProj.W), a.OutputProj.B.Float64s())), got.Float64s(), 1e-5)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return a.ForwardQKV(xs[0], xs[1], xs[2], nil) }, q, kv, kv)
	requirePanicContains(t, func() { a.ForwardQKV(q, randn(0, B, S, 4), randn(0, B, S, 4), nil) },
		"nn.MultiHeadAttention: q f32[2,3,6], k f32[2,5,4], v f32[2,5,4]: want q [batch, T, 6], k [batch, S, 6] and v [batch, S, 6]")
}

// mhaRefQKV is MultiHeadAttention with naive loops for any sizes: queries
// and keys of qk features per head, values of vo, dropping (and scaling by
// 1/keep) the weights where keep(b, n, t, s) is false, if keep is set.
func mhaRefQKV(a nn.MultiHeadAttention, q, k, v *tensor.Tensor, keep func(b, n, t, s int) bool, rate float64) []float64 {
	B, T, S, N := q.Dim(0), q.Dim(1), k.Dim(1), a.NumHeads
	proj := func(l nn.Linear, x *tensor.Tensor) []float64 {
		var b []float64
		if l.B != nil {
			b = l.B.Float64s()
		}
		return flat(linearRef(toMat(tensor.Reshape(x, -1, x.Dim(2))), toMat(l.W), b))
	}
	qp, kp, vp := proj(a.QueryProj, q), proj(a.KeyProj, k), proj(a.ValueProj, v)
	QK, VO := a.QueryProj.Out()/N, a.ValueProj.Out()/N
	o := make([]float64, B*T*N*VO)
	for b := range B {
		for n := range N {
			for t := range T {
				logits := make([]float64, S)
				for s := range S {
					for h := range QK {
						logits[s] += qp[((b*T+t)*N+n)*QK+h] * kp[((b*S+s)*N+n)*QK+h]
					}
					logits[s] /= math.Sqrt(float64(QK))
				}
				w := softmax64(logits)
				for s := range S {
					if keep != nil {
						if keep(b, n, t, s) {
							w[s] /= 1 - rate
						} else {
							w[s] = 0
						}
					}
					for h := range VO {
						o[((b*T+t)*N+n)*VO+h] += w[s] * vp[((b*S+s)*N+n)*VO+h]
					}
				}
			}
		}
	}
	om := make(mat, B*T)
	for i := range om {
		om[i] = o[i*N*VO : (i+1)*N*VO]
	}
	var ob []float64
	if a.OutputProj.B != nil {
		ob = a.OutputProj.B.Float64s()
	}
	return flat(linearRef(om, toMat(a.OutputProj.W), ob))
}

// Equinox's size options: key, value and output sizes apart from the
// query's, qk and vo sizes per head, and a bias per projection.
func TestMultiHeadAttentionSizes(t *testing.T) {
	const B, T, S, N = 2, 3, 4, 2
	opts := nn.AttentionOptions{KeySize: 5, ValueSize: 4, OutputSize: 7, QKSize: 3, VOSize: 2, KeyBias: true, OutputBias: true}
	a := nn.NewMultiHeadAttention(tensor.NewKey(8), 6, N, opts)
	assert.Equal(t, []int{6, 6}, a.QueryProj.W.Shape())
	assert.Equal(t, []int{5, 6}, a.KeyProj.W.Shape())
	assert.Equal(t, []int{4, 4}, a.ValueProj.W.Shape())
	assert.Equal(t, []int{4, 7}, a.OutputProj.W.Shape())
	assert.Nil(t, a.QueryProj.B)
	assert.NotNil(t, a.KeyProj.B)
	assert.Nil(t, a.ValueProj.B)
	assert.NotNil(t, a.OutputProj.B)
	q, k, v := randn(1, B, T, 6), randn(2, B, S, 5), randn(3, B, S, 4)
	got := a.ForwardQKV(q, k, v, nil)
	require.Equal(t, []int{B, T, 7}, got.Shape())
	assert.InDeltaSlice(t, mhaRefQKV(a, q, k, v, nil, 0), got.Float64s(), 1e-5)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return a.ForwardQKV(xs[0], xs[1], xs[2], nil) }, q, k, v)
	// Heads need not divide the query size when both head sizes are given.
	b := nn.NewMultiHeadAttention(tensor.NewKey(8), 5, 3, nn.AttentionOptions{QKSize: 2, VOSize: 2})
	assert.Equal(t, []int{5, 6}, b.QueryProj.W.Shape())
	requirePanicContains(t, func() { a.ForwardQKV(q, k, randn(3, B, S+1, 4), nil) },
		"nn.MultiHeadAttention: q f32[2,3,6], k f32[2,4,5], v f32[2,5,4]: want q [batch, T, 6], k [batch, S, 5] and v [batch, S, 4]")
}

// Dropout on the attention weights draws per example and head with
// key.Split(B)[b].Split(N)[h], scales the kept weights by 1/(1-rate), needs
// a key, and is off in inference mode.
func TestMultiHeadAttentionDropout(t *testing.T) {
	const B, T, D, N, rate = 2, 4, 6, 3, 0.4
	a := nn.NewMultiHeadAttention(tensor.NewKey(1), D, N, nn.AttentionOptions{DropoutRate: rate, Bias: true})
	x := randn(2, B, T, D)
	key := tensor.NewKey(77)
	masks := make([][]bool, B*N)
	for b, kb := range key.Split(B) {
		for h, kh := range kb.Split(N) {
			masks[b*N+h] = tensor.Bernoulli(kh, 1-rate, T, T).Bools()
		}
	}
	keep := func(b, n, t, s int) bool { return masks[b*N+n][t*T+s] }
	got := a.Call(x, key)
	assert.InDeltaSlice(t, mhaRefQKV(a, x, x, x, keep, rate), got.Float64s(), 1e-5)
	assert.Equal(t, got.Float32s(), a.ForwardWith(x, x, x, nn.AttentionCall{Key: &key}).Float32s())
	assert.NotEqual(t, got.Float32s(), a.Call(x, tensor.NewKey(78)).Float32s())

	inf := nn.InferenceMode(a, true)
	assert.InDeltaSlice(t, mhaRefQKV(a, x, x, x, nil, 0), inf.Forward(x).Float64s(), 1e-5)
	requirePanicContains(t, func() { a.Forward(x) }, "nn.MultiHeadAttention: dropout on the attention weights needs a key")
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return a.Call(xs[0], key) }, x)
}

// ProcessHeads sees the projected heads and its results are attended
// with: here the query heads are doubled, which is attention with a query
// projection twice as large.
func TestMultiHeadAttentionProcessHeads(t *testing.T) {
	const B, T, D, N = 2, 3, 4, 2
	a := nn.NewMultiHeadAttention(tensor.NewKey(3), D, N, nn.AttentionOptions{Causal: true})
	x := randn(4, B, T, D)
	var seen []int
	got := a.ForwardWith(x, x, x, nn.AttentionCall{ProcessHeads: func(q, k, v *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
		seen = q.Shape()
		return tensor.MulScalar(q, 2), k, v
	}})
	assert.Equal(t, []int{B, T, N, D / N}, seen)
	b := a
	b.QueryProj.W = tensor.MulScalar(a.QueryProj.W, 2)
	assert.InDeltaSlice(t, b.Forward(x).Float64s(), got.Float64s(), 1e-5)
	requirePanicContains(t, func() {
		a.ForwardWith(x, x, x, nn.AttentionCall{ProcessHeads: func(q, k, v *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
			return tensor.Reshape(q, B, T, -1), k, v
		}})
	}, "nn.MultiHeadAttention: ProcessHeads changed the heads' shapes")
}
