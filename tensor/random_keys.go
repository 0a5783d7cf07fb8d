package tensor

import (
	"fmt"
	"slices"
)

// Keys held in tensors: stacks of keys (JAX's key arrays) and keys inside
// Vmap. A Key's words live either in the Key (the usual case) or in an
// int32 tensor of shape [..., 2] (the words' bits). A key held in a tensor
// is a pytree node whose one leaf is that tensor, so Vmap maps it like any
// other leaf; the key methods and the samplers then run as ops on it
// (keySplitOp, keyFoldOp, rngOp), whose batching rules give each example
// its own draws: the same numbers as a loop over the examples' keys.

// StackKeys returns the keys as one key holding a stack of them (JAX's key
// array of shape [len(keys)]): the value to Vmap over so that each example
// gets its own key.
//
//	models := autodiff.Vmap(newModel)(tensor.StackKeys(key.Split(8)))
//
// A stack of keys cannot be given to a sampler; Unstack (or Vmap) takes
// it apart.
func StackKeys(keys []Key) Key {
	ts := make([]*Tensor, len(keys))
	for i, k := range keys {
		ts[i] = k.tensor()
	}
	if len(ts) == 0 {
		return Key{t: Zeros(Int32, 0, 2)}
	}
	return Key{t: Stack(0, ts...)}
}

// Unstack returns the keys of a stack of keys made by StackKeys (or
// returned by a vmapped function): k.Unstack()[i] is key i. A single key
// (one not held in a tensor, or one of shape [2]) panics.
func (k Key) Unstack() []Key {
	if k.t == nil || len(k.t.shape) < 2 {
		panic(fmt.Sprintf("tensor.Key.Unstack: %v is a single key, not a stack of keys", k))
	}
	rows := Unstack(k.t, 0)
	out := make([]Key, len(rows))
	for i, r := range rows {
		out[i] = Key{t: r}
	}
	return out
}

// Shape returns the shape of a stack of keys ([8] for StackKeys of 8
// keys), or [] for a single key.
func (k Key) Shape() []int {
	if k.t == nil {
		return []int{}
	}
	return slices.Clone(k.t.shape[:len(k.t.shape)-1])
}

// PytreeChildren makes a key held in a tensor a pytree node with that
// tensor as its leaf (see pytree.Node); a key holding its words has none.
func (k Key) PytreeChildren() (names []string, children []any) {
	if k.t == nil {
		return nil, nil
	}
	return []string{"words"}, []any{k.t}
}

// PytreeRebuild returns the key around a new words tensor (see
// pytree.Node).
func (k Key) PytreeRebuild(children []any) any {
	if len(children) == 0 {
		return Key{data: k.data}
	}
	t, _ := children[0].(*Tensor)
	return Key{data: k.data, t: t}
}

// tensor returns the key's words as an i32[2] tensor.
func (k Key) tensor() *Tensor {
	if k.t != nil {
		return k.t
	}
	return FromInt32([]int32{int32(k.data[0]), int32(k.data[1])}, 2)
}

// words returns the key's words, reading them from its tensor if it holds
// one; op names the caller in the panic for a stack of keys or a key
// inside Vmap.
func (k Key) words(op string) [2]uint32 {
	if k.t == nil {
		return k.data
	}
	if len(k.t.shape) != 1 {
		panic(fmt.Sprintf("%s: %v is a stack of keys; take one (Unstack) or map over them (autodiff.Vmap)", op, k))
	}
	w := k.t.Int32s()
	return [2]uint32{uint32(w[0]), uint32(w[1])}
}

// single panics unless k is one key (not a stack), naming op.
func (k Key) single(op string) {
	if k.t != nil && len(k.t.shape) != 1 {
		panic(fmt.Sprintf("%s: %v is a stack of keys; take one (Unstack) or map over them (autodiff.Vmap)", op, k))
	}
}

// sample draws with draw, the sampler of one key, from k and the sampler's
// tensor operands: directly for a key holding its words and host
// operands, else as rngOp on the key's tensor, whose batching rule draws
// each example's numbers from each example's key and operands.
func (k Key) sample(op string, draw func(k Key, operands []*Tensor) *Tensor, operands ...*Tensor) *Tensor {
	k.single(op)
	if k.t == nil && !slices.ContainsFunc(operands, func(x *Tensor) bool { return x.xv() != nil }) {
		return draw(k, operands)
	}
	in := make([]*Tensor, 0, 1+len(operands))
	in = append(in, k.tensor())
	for _, x := range operands {
		in = append(in, StopGradient(x))
	}
	return Apply(rngOp, &rngParams{op: op, draw: draw}, in...)
}

// splitTensor is Split for a key held in a tensor.
func (k Key) splitTensor(op string, n int) []Key {
	k.single(op)
	rows := Unstack(Apply(keySplitOp, n, k.t), 0)
	out := make([]Key, n)
	for i, r := range rows {
		out[i] = Key{t: r}
	}
	return out
}

// foldInTensor is FoldIn for a key held in a tensor.
func (k Key) foldInTensor(data uint32) Key {
	k.single("tensor.FoldIn")
	return Key{t: Apply(keyFoldOp, data, k.t)}
}

// rngParams are the params of rngOp: the sampler of one key and the
// public function that asked for it.
type rngParams struct {
	op   string
	draw func(k Key, operands []*Tensor) *Tensor
}

// keyAt returns key i of the key words t (int32 [..., 2], flattened).
func keyAt(t *Tensor, i int) Key {
	return Key{data: [2]uint32{uint32(t.i32()[2*i]), uint32(t.i32()[2*i+1])}}
}

// rowOf returns the i-th of n equal parts of x's data as a tensor of the
// given shape (a view of host data).
func rowOf(x *Tensor, i, n int, shape []int) *Tensor {
	m := numel(shape)
	out := &Tensor{dtype: x.dtype, shape: shape}
	switch x.dtype {
	case Float32:
		setData(out, x.f32()[i*m:(i+1)*m])
	case Int32:
		setData(out, x.i32()[i*m:(i+1)*m])
	case Bool:
		setData(out, x.b()[i*m:(i+1)*m])
	case BFloat16, Float16:
		setData(out, x.u16()[i*m:(i+1)*m])
	case Float64:
		setData(out, x.f64()[i*m:(i+1)*m])
	case Int64:
		setData(out, x.i64()[i*m:(i+1)*m])
	case Uint8:
		setData(out, x.u8()[i*m:(i+1)*m])
	}
	return out
}

var rngOp, keySplitOp, keyFoldOp *Op

func init() {
	// random: the draws of a sampler for a key, or for each key of a
	// stack of keys i32[..., 2] with operands stacked the same way. Not
	// differentiable: the draws are constants.
	rngOp = &Op{
		Name: "random",
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*rngParams)
			keys := in[0]
			lead := keys.shape[:len(keys.shape)-1]
			n := numel(lead)
			if len(lead) == 0 {
				return p.draw(keyAt(keys, 0), in[1:])
			}
			if n == 0 { // the shape of one draw, for none
				one := p.draw(Key{}, zerosRows(in[1:], len(lead)))
				return Zeros(one.dtype, append(slices.Clone(lead), one.shape...)...)
			}
			outs := make([]*Tensor, n)
			for i := range n {
				ops := make([]*Tensor, len(in)-1)
				for j, x := range in[1:] {
					ops[j] = rowOf(x, i, n, x.shape[len(lead):])
				}
				outs[i] = p.draw(keyAt(keys, i), ops)
			}
			return Reshape(Stack(0, outs...), append(slices.Clone(lead), outs[0].shape...)...)
		},
		// One more stack dimension: each example's key draws its own.
		Batch: materializeBatch(&rngOp),
		// Every dtype: each sampler checks its own operands (Choice
		// moves any data).
		Traits: Traits{Half: NativeHalf, Types: TypesAll},
	}
	// key_split: [..., 2] → [..., n, 2], jax.random.split of every key.
	keySplitOp = &Op{
		Name: "random_split",
		Impl: func(in []*Tensor, pp any) *Tensor {
			n, keys := pp.(int), in[0]
			lead := keys.shape[:len(keys.shape)-1]
			out := newTensor(Int32, append(append(slices.Clone(lead), n), 2))
			d := out.i32()
			for i := range numel(lead) {
				for j, s := range rngPartitionable.split(keyAt(keys, i), n) {
					d[2*(i*n+j)], d[2*(i*n+j)+1] = int32(s.data[0]), int32(s.data[1])
				}
			}
			return out
		},
		Batch: sameOpBatch(&keySplitOp),
	}
	// key_fold_in: jax.random.fold_in of every key of [..., 2].
	keyFoldOp = &Op{
		Name: "random_fold_in",
		Impl: func(in []*Tensor, pp any) *Tensor {
			data, keys := pp.(uint32), in[0]
			out := newTensor(Int32, keys.shape)
			d := out.i32()
			for i := range numel(keys.shape[:len(keys.shape)-1]) {
				k := keyAt(keys, i)
				a, b := rngThreefry2x32(k.data[0], k.data[1], 0, data)
				d[2*i], d[2*i+1] = int32(a), int32(b)
			}
			return out
		},
		Batch: sameOpBatch(&keyFoldOp),
	}
}

// zerosRows returns one zero row of each operand (stacked with lead
// leading dimensions): the operands of a draw that only gives the shape
// of an empty stack's result.
func zerosRows(in []*Tensor, lead int) []*Tensor {
	out := make([]*Tensor, len(in))
	for i, x := range in {
		out[i] = Zeros(x.dtype, x.shape[lead:]...)
	}
	return out
}
