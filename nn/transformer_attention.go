package nn

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor"
)

// torchAttention is torch.nn.MultiheadAttention's forward(q, kv, kv,
// attn_mask=mask, key_padding_mask=kpm) on q [B,T,D] and kv [B,S,D]
// with a's parameters: mask and kpm (nil, or rank 4 broadcasting to
// [B,N,T,S], as attnMaskOf and paddingMaskOf shape them) are bool, true
// hiding, or float, added to the scaled logits. Bool masks alone run the
// fused attention (MultiHeadAttention.ForwardWith with the visible
// positions); a float mask composes the ops as PyTorch's math path:
// softmax(q/√H·kᵀ + mask)·v. key draws the weights' dropout when it is
// active (one: the call is one unbatched example's).
func torchAttention(a MultiHeadAttention, q, kv, mask, kpm *tensor.Tensor, key *tensor.Key, one bool) *tensor.Tensor {
	masks := make([]*tensor.Tensor, 0, 2)
	float := false
	for _, m := range []*tensor.Tensor{mask, kpm} {
		if m != nil {
			masks = append(masks, m)
			float = float || m.DType() != tensor.Bool
		}
	}
	if !float {
		var visible *tensor.Tensor
		for _, m := range masks {
			v := tensor.LogicalNot(m)
			if visible == nil {
				visible = v
			} else {
				visible = tensor.LogicalAnd(visible, v)
			}
		}
		return a.forwardBatch(q, kv, kv, AttentionCall{Mask: visible, Key: key}, one)
	}
	const fn = "nn.MultiHeadAttention"
	requireParamDTypeOrHalf(fn, q, a.QueryProj.W)
	requireParamDTypeOrHalf(fn, kv, a.KeyProj.W)
	dt := q.DType()
	var bias *tensor.Tensor
	for _, m := range masks {
		if m.DType() == tensor.Bool {
			m = tensor.Where(m, tensor.Full(dt, math.Inf(-1)), tensor.Zeros(dt))
		} else if m.DType() != dt {
			m = tensor.Convert(m, dt)
		}
		if bias == nil {
			bias = m
		} else {
			bias = tensor.Add(bias, m)
		}
	}
	B, T, S, n := q.Dim(0), q.Dim(1), kv.Dim(1), a.NumHeads
	heads := func(l Linear, x *tensor.Tensor, L int) *tensor.Tensor {
		return tensor.Transpose(tensor.Reshape(l.Forward(x), B, L, n, l.Out()/n), 0, 2, 1, 3) // [B,N,L,H]
	}
	qh, kh, vh := heads(a.QueryProj, q, T), heads(a.KeyProj, kv, S), heads(a.ValueProj, kv, S)
	qh = tensor.Div(qh, tensor.Full(qh.DType(), math.Sqrt(float64(qh.Dim(3)))))
	logits := tensor.Add(tensor.MatMulT(qh, kh, false, true), tensor.Convert(bias, qh.DType())) // [B,N,T,S]
	w := tensor.Softmax(logits, -1)
	if !a.Dropout.Inference && a.Dropout.Rate > 0 {
		w = a.dropWeights(w, *key, one)
	}
	o := tensor.Transpose(tensor.MatMul(w, vh), 0, 2, 1, 3) // [B,T,N,V]
	return a.OutputProj.Forward(tensor.Reshape(o, B, T, -1))
}

// toBatchFirst returns x (PyTorch's [T, B, D], [B, T, D] if batchFirst,
// or one example [T, D]) as [B, T, D], and whether it was unbatched.
func toBatchFirst(fn, name string, x *tensor.Tensor, batchFirst bool, dim int) (*tensor.Tensor, bool) {
	if !x.DType().IsFloat() || x.Rank() < 2 || x.Rank() > 3 || x.Dim(x.Rank()-1) != dim {
		layout := "[length, batch, %d]"
		if batchFirst {
			layout = "[batch, length, %d]"
		}
		panic(fmt.Sprintf("%s: %s %v: want float "+layout+" or one example [length, %d]", fn, name, x, dim, dim))
	}
	if x.Rank() == 2 {
		return tensor.ExpandDims(x, 0), true
	}
	if !batchFirst {
		x = tensor.Transpose(x, 1, 0, 2)
	}
	return x, false
}

// fromBatchFirst undoes toBatchFirst on a result [B, T, D].
func fromBatchFirst(y *tensor.Tensor, batchFirst, unbatched bool) *tensor.Tensor {
	if unbatched {
		return tensor.Squeeze(y, 0)
	}
	if !batchFirst {
		return tensor.Transpose(y, 1, 0, 2)
	}
	return y
}

// attnMaskOf checks PyTorch's attn_mask m, [T, S] or [B·N, T, S], bool
// or float, and returns it as [1, 1, T, S] or [B, N, T, S] (nil for nil).
func attnMaskOf(fn, name string, m *tensor.Tensor, B, N, T, S int) *tensor.Tensor {
	if m == nil {
		return nil
	}
	ok := m.DType() == tensor.Bool || m.DType().IsFloat()
	switch {
	case ok && m.Rank() == 2 && m.Dim(0) == T && m.Dim(1) == S:
		return tensor.Reshape(m, 1, 1, T, S)
	case ok && m.Rank() == 3 && m.Dim(0) == B*N && m.Dim(1) == T && m.Dim(2) == S:
		return tensor.Reshape(m, B, N, T, S)
	}
	panic(fmt.Sprintf("%s: %s %v: want bool or float [%d, %d] or [%d, %d, %d] (batch·heads, queries, keys)", fn, name, m, T, S, B*N, T, S))
}

// paddingMaskOf checks PyTorch's key_padding_mask m, [B, S] (or [S] for
// an unbatched call), bool or float, and returns it as [B, 1, 1, S].
func paddingMaskOf(fn, name string, m *tensor.Tensor, B, S int, unbatched bool) *tensor.Tensor {
	if m == nil {
		return nil
	}
	ok := m.DType() == tensor.Bool || m.DType().IsFloat()
	if ok && unbatched && m.Rank() == 1 && m.Dim(0) == S {
		return tensor.Reshape(m, 1, 1, 1, S)
	}
	if ok && !unbatched && m.Rank() == 2 && m.Dim(0) == B && m.Dim(1) == S {
		return tensor.Reshape(m, B, 1, 1, S)
	}
	want := fmt.Sprintf("[%d, %d] (batch, keys)", B, S)
	if unbatched {
		want = fmt.Sprintf("[%d] (keys) for an unbatched call", S)
	}
	panic(fmt.Sprintf("%s: %s %v: want bool or float %s", fn, name, m, want))
}

// dropActive says whether any of ds draws.
func dropActive(ds ...Dropout) bool {
	for _, d := range ds {
		if !d.Inference && d.Rate > 0 {
			return true
		}
	}
	return false
}

// layerKeys returns key split in n when the layer's dropout is active,
// nil when not; an active dropout without a key panics.
func layerKeys(fn string, key *tensor.Key, n int, active bool) []tensor.Key {
	if !active {
		return nil
	}
	if key == nil {
		panic(fn + ": dropout is active and needs a key: pass the call's Key (or use Call), or switch it off with InferenceMode")
	}
	return key.Split(n)
}

// stackKeys returns key split in n for the layers of a stack (nils
// without a key; an active layer then panics).
func stackKeys(fn string, key *tensor.Key, n int, active func(int) bool) []*tensor.Key {
	out := make([]*tensor.Key, n)
	if key == nil {
		for i := range n {
			if active(i) {
				panic(fn + ": dropout is active and needs a key: pass the call's Key (or use Call), or switch it off with InferenceMode")
			}
		}
		return out
	}
	for i, k := range key.Split(n) {
		out[i] = &k
	}
	return out
}
