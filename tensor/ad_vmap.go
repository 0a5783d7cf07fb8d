package tensor

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// BatchTrace is one Vmap in progress, as JAX's BatchTrace: a value inside
// it stands for a batch of Size examples, one per element along a batch
// dimension, while its shape is that of one example. An op on such values
// runs once on the whole batch: Apply hands it to the op's batching rule
// (Op.Batch), which moves or broadcasts the batch dimensions and calls
// ops on the batches. An op without a rule is computed example by example
// and the results stacked — correct, slow, counted (Fallbacks), and a
// panic naming the op once Strict is set.
//
// Package autodiff's Vmap is the interface for users: it batches the
// tensor leaves of whole trees with JAX's in_axes and out_axes. A
// BatchTrace is its engine:
//
//	bt := tensor.NewBatchTrace(8)
//	x := bt.Batched(xs, 0)      // xs: f32[8,3]; x: f32[3], one example
//	y := tensor.Sum(tensor.Mul(x, x))
//	ys := bt.Unbatched(y, 0)    // f32[8]: one sum per example
//
// The data of a batched value cannot be read (Float32s, Item, ... panic):
// inside the function it stands for many values. BatchTraces nest (a Vmap
// inside a Vmap) and compose with traces both ways (gradients inside a
// vmapped function are per-example gradients; a gradient of a vmapped
// function flows through the batches), with forward mode, with Remat,
// with placed tensors (the batches are placed, the rules' ops propagate)
// and with shard.Map blocks.
type BatchTrace struct {
	id     uint64
	size   int
	mu     sync.Mutex
	strict bool
	counts map[string]int
}

// NewBatchTrace returns a BatchTrace over a batch of size examples,
// inner to every trace and level that exists already.
func NewBatchTrace(size int) *BatchTrace {
	if size < 0 {
		panic(fmt.Sprintf("tensor.NewBatchTrace: negative batch size %d", size))
	}
	return &BatchTrace{id: newLevelID(), size: size}
}

// Size returns the number of examples.
func (bt *BatchTrace) Size() int { return bt.size }

// Strict makes an op without a batching rule panic, naming the op,
// instead of computing example by example.
func (bt *BatchTrace) Strict() {
	bt.mu.Lock()
	bt.strict = true
	bt.mu.Unlock()
}

// Fallbacks returns how many times each op without a batching rule was
// computed example by example, by op name.
func (bt *BatchTrace) Fallbacks() map[string]int {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return maps.Clone(bt.counts)
}

func (bt *BatchTrace) levelID() uint64 { return bt.id }

func (bt *BatchTrace) noData(op string, x *Tensor) {
	panic(fmt.Sprintf("%s: %v is a value inside Vmap: it stands for a batch of %d examples and has no data of its own; return it from the vmapped function to read it", op, x, bt.size))
}

// Batched returns the value inside bt that stands for the slices of x
// along axis (negative counts from the end), which must have bt.Size()
// elements: the batch of examples x[..., i, ...]. x may be traced, placed,
// a shard.Map block or a value of an outer level.
func (bt *BatchTrace) Batched(x *Tensor, axis int) *Tensor {
	checkNil("tensor.BatchTrace.Batched", "x", x)
	checkNesting("tensor.BatchTrace.Batched", x, bt.id)
	if len(x.shape) == 0 {
		panic(fmt.Sprintf("tensor.BatchTrace.Batched: %v is a scalar: it has no axis to batch over", x))
	}
	ax := normAxis("tensor.BatchTrace.Batched", x, axis)
	if x.shape[ax] != bt.size {
		panic(fmt.Sprintf("tensor.BatchTrace.Batched: %v has %d elements along axis %d, not the batch size %d", x, x.shape[ax], axis, bt.size))
	}
	return bt.wrap(moveAxis(x, ax, 0))
}

// Unbatched returns the batch a value y computed inside bt stands for,
// with the batch dimension at axis (of the result; negative counts from
// the end). A y that does not depend on the batch is broadcast: every
// example has its value.
func (bt *BatchTrace) Unbatched(y *Tensor, axis int) *Tensor {
	checkNil("tensor.BatchTrace.Unbatched", "y", y)
	var v *Tensor
	switch {
	case bt.valueOf(y) != nil:
		v = bt.valueOf(y)
	case levelIDOf(y) > bt.id:
		panic(fmt.Sprintf("tensor.BatchTrace.Unbatched: %v belongs to a transformation started inside the vmapped function (a trace: return its primal value)", y))
	default:
		v = BroadcastTo(y, append([]int{bt.size}, y.shape...)...) // NumPy rules: a leading axis
	}
	ax := axis
	if ax < 0 {
		ax += len(v.shape)
	}
	if ax < 0 || ax >= len(v.shape) {
		panic(fmt.Sprintf("tensor.BatchTrace.Unbatched: axis %d out of range for a batch of %v", axis, y))
	}
	return moveAxis(v, 0, ax)
}

// Batches reports whether y, a value computed inside bt, depends on the
// batch (is a value of bt), as opposed to being the same for every
// example.
func (bt *BatchTrace) Batches(y *Tensor) bool { return y != nil && bt.valueOf(y) != nil }

// valueOf returns the batched value behind x if x is a value of bt.
func (bt *BatchTrace) valueOf(x *Tensor) *Tensor {
	if x.node == nil && x.xv() != nil && x.xv().lvl == bt {
		return x.xv().val
	}
	return nil
}

// wrap returns the value of bt for the batch v (batch dimension first).
func (bt *BatchTrace) wrap(v *Tensor) *Tensor {
	return newXValue(v.dtype, v.shape[1:len(v.shape):len(v.shape)], v.local(), bt, v, nil)
}

// wrapIn is wrap with the value in box (a rule call's allocation), or
// allocated on its own for a nil box.
func (bt *BatchTrace) wrapIn(box *xbox, v *Tensor) *Tensor {
	if box == nil {
		return bt.wrap(v)
	}
	box.set(v.dtype, v.shape[1:len(v.shape):len(v.shape)], v.local(), bt, v, nil)
	return &box.t
}

// wrapFresh is wrap for a batch a batching fast path computed for the new
// value alone, which donating the value donates.
func (bt *BatchTrace) wrapFresh(v *Tensor) *Tensor {
	t := bt.wrap(v)
	t.xv().owned.Store(true)
	return t
}

// apply computes op on operands some of which are values of bt.
func (bt *BatchTrace) apply(op *Op, params any, in []*Tensor, wantState bool) ([]*Tensor, any) {
	if op.Traits.Through.Has(ThroughVmap) && (wantState || op.Batch == nil) {
		return passThrough(op, params, in, wantState)
	}
	vals, bat, res, box := ruleArgs(len(in))
	for i, x := range in {
		if v := bt.valueOf(x); v != nil {
			vals[i], bat[i] = v, true
		} else {
			vals[i] = x
		}
	}
	var outs []*Tensor
	if op.Batch != nil {
		outs = op.Batch(vals, bat, params)
	} else {
		outs = bt.fallback(op, params, vals, bat)
	}
	if len(outs) > len(res) {
		res, box = make([]*Tensor, len(outs)), nil
	}
	res = res[:len(outs):len(outs)]
	for i, o := range outs {
		if o == nil || len(o.shape) == 0 || o.shape[0] != bt.size {
			panic(fmt.Sprintf("tensor: the batching rule of op %q returned %v for output %d; want the batch of %d examples first", op.Name, o, i, bt.size))
		}
		res[i] = bt.wrapIn(box, o)
		// The batch belongs to this value alone unless the rule
		// returned an operand's batch (an op that returns its operand,
		// such as Reshape to the same shape) or another output's: then
		// no value that wraps it may donate it.
		owned := !slices.Contains(outs[:i], o)
		for j, v := range vals {
			if v == o {
				owned = false
				if bat[j] {
					in[j].xv().owned.Store(false)
				}
			}
		}
		for j := range i {
			if outs[j] == o {
				res[j].xv().owned.Store(false)
			}
		}
		res[i].xv().owned.Store(owned)
	}
	return res, nil
}

// ruleArgs returns the operand and batched slices of a batching rule's
// call, room for one result (results: more get their own slice) and the
// box of that result's value, in one allocation for the common ops (box
// is nil for others).
func ruleArgs(n int) (vals []*Tensor, bat []bool, res []*Tensor, box *xbox) {
	if n > 4 {
		return make([]*Tensor, n), make([]bool, n), make([]*Tensor, 1), nil
	}
	buf := &struct {
		vals [4]*Tensor
		res  [1]*Tensor
		bat  [4]bool
		box  xbox
	}{}
	return buf.vals[:n:n], buf.bat[:n:n], buf.res[:], &buf.box
}

// ruleCall is the memory of a batching rule's one op call: the operands it
// passes to Apply and the slice of the result it returns, allocated at
// once (with the op's batched params where the rule makes them), where
// Apply's variadic operands and a rule's result slice would be two
// allocations more per op under Vmap.
type ruleCall struct {
	args [4]*Tensor
	res  [1]*Tensor
}

// call applies op (single-output) with params to rc.args[:n] and returns
// the result as a rule does. The operands are cleared once applied: the
// result slice stays reachable from the graph (a trace's node keeps its
// op's results), the operands need not.
func (rc *ruleCall) call(op *Op, params any, n int) []*Tensor {
	rc.res[0] = applyIn(op, params, rc.args[:n])
	rc.args = [4]*Tensor{}
	return rc.res[:]
}

// fallback computes op example by example and stacks the results: the
// rule of an op that has none.
func (bt *BatchTrace) fallback(op *Op, params any, vals []*Tensor, bat []bool) []*Tensor {
	bt.mu.Lock()
	strict := bt.strict
	if bt.counts == nil {
		bt.counts = map[string]int{}
	}
	bt.counts[op.Name]++
	bt.mu.Unlock()
	if strict {
		panic(fmt.Sprintf("tensor: op %q has no batching rule (Op.Batch) and Vmap is strict: it would be computed example by example, %d times", op.Name, bt.size))
	}
	if bt.size == 0 {
		panic(fmt.Sprintf("tensor: op %q has no batching rule (Op.Batch): it cannot be computed on a batch of 0 examples", op.Name))
	}
	var per [][]*Tensor
	for j := range bt.size {
		args := slices.Clone(vals)
		for i, b := range bat {
			if b {
				args[i] = batchElem(vals[i], j)
			}
		}
		per = append(per, applyAll(op, params, args))
	}
	outs := make([]*Tensor, len(per[0]))
	col := make([]*Tensor, bt.size)
	for k := range outs {
		for j := range col {
			col[j] = per[j][k]
		}
		outs[k] = Stack(0, col...)
	}
	return outs
}

// batchElem returns example j of the batch v (batch dimension first).
func batchElem(v *Tensor, j int) *Tensor {
	return Squeeze(SliceAxis(v, 0, j, j+1), 0)
}

// moveAxis returns x with axis from moved to position to (the others in
// order): x itself if from == to.
func moveAxis(x *Tensor, from, to int) *Tensor {
	if from == to {
		return x
	}
	perm := make([]int, 0, len(x.shape))
	for i := range x.shape {
		if i != from {
			perm = append(perm, i)
		}
	}
	perm = slices.Insert(perm, to, from)
	return Transpose(x, perm...)
}

// Helpers for batching rules (Op.Batch). A rule receives the operands with
// the batch dimension first where batched[i] is set, unbatched ones as
// they are, and returns every output with the batch first.

// batchSize returns the batch size of a rule's batched operands.
func batchSize(in []*Tensor, batched []bool) int {
	for i, b := range batched {
		if b {
			return in[i].shape[0]
		}
	}
	panic("tensor: internal error: a batching rule without a batched operand")
}

// exampleShape returns the shape of one example of x.
func exampleShape(x *Tensor, batched bool) []int {
	if batched {
		return x.shape[1:]
	}
	return x.shape
}

// materialize returns x with a batch of n examples first: x itself if it
// is batched, else n copies of x.
func materialize(x *Tensor, batched bool, n int) *Tensor {
	if batched {
		return x
	}
	// NumPy rules: a leading axis (always valid; BroadcastTo's checks
	// would cost a rule more than the copy).
	var buf [8]int
	shape := append(append(buf[:0], n), x.shape...)
	if tileable(x) {
		// A plain host tensor (a batch's labels, a cotangent shared by
		// the examples): the copies without an op, which would record
		// nothing, in recycled storage.
		x.mustHaveData("tensor: a batching rule")
		switch x.dtype {
		case Float32:
			out := newOutUninit(Float32, shape)
			tile(out.f32(), x.f32())
			return out
		case Int32:
			out := newOutUninit(Int32, shape)
			tile(out.i32(), x.i32())
			return out
		case Float64:
			out := newOutUninit(Float64, shape)
			tile(out.f64(), x.f64())
			return out
		}
	}
	return Apply(broadcastOp, slices.Clone(shape), x)
}

// tileable reports whether materialize copies x without an op: a plain
// host tensor with data.
func tileable(x *Tensor) bool {
	return x.node == nil && x.xv() == nil && x.layout() == nil && x.local() == nil && x.Size() > 0
}

// tile fills dst with copies of src end to end (len(dst) a multiple of
// len(src) > 0).
func tile[T any](dst, src []T) {
	for i := 0; i < len(dst); i += len(src) {
		copy(dst[i:i+len(src)], src)
	}
}

// materializeAll is materialize for every operand of a rule.
func materializeAll(in []*Tensor, batched []bool) []*Tensor {
	n := batchSize(in, batched)
	out := make([]*Tensor, len(in))
	for i, x := range in {
		out[i] = materialize(x, batched[i], n)
	}
	return out
}

// alignBatch returns the operands of an op with NumPy broadcasting, the
// batched ones reshaped so that one example has rank r (dimensions of size
// 1 inserted after the batch dimension): broadcasting then lines the batch
// dimensions up, and the unbatched operands broadcast along them.
func alignBatch(in []*Tensor, batched []bool, r int) []*Tensor {
	out := in // copied before the first change: in is the caller's
	for i, x := range in {
		if batched[i] && len(x.shape)-1 < r {
			if &out[0] == &in[0] {
				out = slices.Clone(in)
			}
			shape := make([]int, 0, r+1)
			shape = append(shape, x.shape[0])
			for range r - (len(x.shape) - 1) {
				shape = append(shape, 1)
			}
			shape = append(shape, x.shape[1:]...)
			if x.node == nil && x.xv() == nil && x.layout() == nil {
				// A plain batch (no trace, level or placement to
				// record the reshape): the view Reshape would make,
				// without its checks and dispatch.
				x.mustHaveData("tensor: a batching rule")
				out[i] = view(x, shape)
				continue
			}
			out[i] = Reshape(x, shape...)
		}
	}
	return out
}

// maxExampleRank returns the largest rank of one example among in.
func maxExampleRank(in []*Tensor, batched []bool) int {
	r := 0
	for i, x := range in {
		r = max(r, len(exampleShape(x, batched[i])))
	}
	return r
}

// elementwiseBatch returns the batching rule of an elementwise op with
// NumPy broadcasting whose public function (checks and params included)
// is f: the operands are aligned (alignBatch) and f is called once.
func elementwiseBatch(f func(in []*Tensor) *Tensor) func([]*Tensor, []bool, any) []*Tensor {
	return func(in []*Tensor, batched []bool, _ any) []*Tensor {
		return []*Tensor{f(alignBatch(in, batched, maxExampleRank(in, batched)))}
	}
}

// sameOpBatch returns the batching rule of a one-operand op whose params
// do not depend on the shape (elementwise functions): the op itself,
// applied to the batch.
func sameOpBatch(op **Op) func([]*Tensor, []bool, any) []*Tensor {
	return func(in []*Tensor, _ []bool, p any) []*Tensor {
		return applyAll(*op, p, in)
	}
}

// shiftAxes returns axes (normalised, non-negative) moved past the batch
// dimension.
func shiftAxes(axes []int) []int {
	out := make([]int, len(axes))
	for i, a := range axes {
		out[i] = a + 1
	}
	return out
}

// axisBatch is the batching rule of a one-operand op whose params are one
// normalised axis: the op on the batch, the axis past the batch
// dimension.
func axisBatch(op **Op) func([]*Tensor, []bool, any) []*Tensor {
	return func(in []*Tensor, _ []bool, p any) []*Tensor {
		return applyAll(*op, p.(int)+1, in)
	}
}

// axisBatchAll is axisBatch for ops whose operands all have one shape:
// every operand is given the batch.
func axisBatchAll(op **Op) func([]*Tensor, []bool, any) []*Tensor {
	return func(in []*Tensor, batched []bool, p any) []*Tensor {
		return applyAll(*op, p.(int)+1, materializeAll(in, batched))
	}
}

// materializeBatch is the batching rule of an op whose operands must all
// have one shape (fused elementwise kernels) or whose leading dimensions
// are all batch dimensions (the fused losses): every operand is given the
// batch and the op runs once with the same params.
func materializeBatch(op **Op) func([]*Tensor, []bool, any) []*Tensor {
	return func(in []*Tensor, batched []bool, p any) []*Tensor {
		n := batchSize(in, batched)
		var rc *ruleCall
		var args []*Tensor
		if (*op).ImplN == nil && len(in) <= len(rc.args) {
			rc = new(ruleCall)
			args = rc.args[:len(in)]
		} else {
			args = make([]*Tensor, len(in))
		}
		var tiled [4]*Tensor
		for i, x := range in {
			args[i] = materialize(x, batched[i], n)
			if i < len(tiled) && !batched[i] && tileable(x) {
				tiled[i] = args[i]
			}
		}
		var res []*Tensor
		if rc != nil {
			res = rc.call(*op, p, len(in))
		} else {
			res = applyAll(*op, p, args)
		}
		donateTiles(tiled[:], res)
		return res
	}
}

// donateTiles donates the copies of plain operands (a batch's labels) that
// materializeBatch made for an op whose results are untraced (no node
// kept them) and none of them: their storage serves the next step.
func donateTiles(tiled, res []*Tensor) {
	for _, r := range res {
		if r.node != nil || r.xv() != nil {
			return
		}
	}
	for _, t := range tiled {
		if t != nil && !slices.Contains(res, t) {
			Donate(t)
		}
	}
}

// mergeBatchInto returns the batch x (batch first) with the examples laid
// end to end along their axis: the batch dimension moved in front of axis
// and merged with it.
func mergeBatchInto(x *Tensor, axis int) *Tensor {
	m := moveAxis(x, 0, axis)
	shape := append(append(append([]int{}, m.shape[:axis]...), -1), m.shape[axis+2:]...)
	return Reshape(m, shape...)
}

// splitBatchFrom undoes mergeBatchInto for a batch of n: axis of x holds n
// examples end to end; the result has the batch first.
func splitBatchFrom(x *Tensor, axis, n int) *Tensor {
	shape := append(append(append([]int{}, x.shape[:axis]...), n, -1), x.shape[axis+1:]...)
	return moveAxis(Reshape(x, shape...), axis, 0)
}

// batchOffsets returns a batch of NumPy indices into an axis of size n
// (batch first), wrapped to [0, n) and offset by b·n for example b: the
// indices into the examples' axes laid end to end. It panics, naming op,
// on an index outside [-n, n), as op does on one example: offset, such
// an index would reach into another example's part.
func batchOffsets(op string, idx *Tensor, n int) *Tensor {
	idx = checkIndices(func() string {
		return fmt.Sprintf("%s under Vmap: indices %v (batch first) into an axis of %d", op, idx, n)
	}, idx, n)
	b := idx.shape[0]
	off := Reshape(Mul(Arange(b), ScalarInt(int32(n))), append([]int{b}, ones(len(idx.shape)-1)...)...)
	wrapped := Where(Less(idx, ScalarInt(0)), Add(idx, ScalarInt(int32(n))), idx)
	return Add(wrapped, off)
}

// segmentOffsets returns a batch of segment ids (batch first) offset by
// b·n for example b, ids outside [0, n) replaced by -1 (still dropped).
func segmentOffsets(ids *Tensor, n int) *Tensor {
	b := ids.shape[0]
	off := Reshape(Mul(Arange(b), ScalarInt(int32(n))), append([]int{b}, ones(len(ids.shape)-1)...)...)
	valid := LogicalAnd(GreaterEqual(ids, ScalarInt(0)), Less(ids, ScalarInt(int32(n))))
	return Where(valid, Add(ids, off), ScalarInt(-1))
}

// leadingBatch returns x with a leading batch dimension: x itself if
// batched, else x with a dimension of size 1 in front (for ops that
// broadcast it).
func leadingBatch(x *Tensor, batched bool) *Tensor {
	if batched {
		return x
	}
	return ExpandDims(x, 0)
}

// ones returns n ones.
func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}
