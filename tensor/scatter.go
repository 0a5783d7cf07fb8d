package tensor

import (
	"fmt"
	"math"
	"slices"
)

// scatterAddKernel adds upd, viewed as [outer, m, inner], into dst, viewed
// as [outer, n, inner], at the indices along the middle axis:
// dst[o, idx[j], :] += upd[o, j, :]. Repeated indices accumulate in order.
func scatterAddKernel[T float32 | int32 | float64 | int64](dst, upd []T, idx []int32, outer, n, inner int) {
	m := len(idx)
	for o := 0; o < outer; o++ {
		d := dst[o*n*inner : (o+1)*n*inner]
		u := upd[o*m*inner : (o+1)*m*inner]
		if inner == 1 {
			for j, v := range idx {
				d[wrapIndex(v, n)] += u[j]
			}
			continue
		}
		for j, v := range idx {
			k := wrapIndex(v, n) * inner
			dr := d[k : k+inner]
			for e, w := range u[j*inner : (j+1)*inner] {
				dr[e] += w
			}
		}
	}
}

// scatterAddInto runs scatterAddKernel on tensors of one numeric dtype.
func scatterAddInto(dst, upd, idx *Tensor, axis int) {
	outer, n, inner := axisSplit(dst.shape, axis)
	if scatterRows(dst.dtype, outer, inner) {
		scatterRowsF32(dst.f32(), upd.f32(), nil, idx.i32(), n, inner, false, false, isLocal(dst, upd, idx))
		return
	}
	switch dst.dtype {
	case Float32:
		scatterAddKernel(dst.f32(), upd.f32(), idx.i32(), outer, n, inner)
	case Int32:
		scatterAddKernel(dst.i32(), upd.i32(), idx.i32(), outer, n, inner)
	case Float64:
		scatterAddKernel(dst.f64(), upd.f64(), idx.i32(), outer, n, inner)
	case Int64:
		scatterAddKernel(dst.i64(), upd.i64(), idx.i32(), outer, n, inner)
	}
}

// scatterRows reports whether a scatter or gather of rows of inner
// elements (outer blocks of them) runs on the row kernels of
// rows_parallel.go.
func scatterRows(dt DType, outer, inner int) bool {
	return dt == Float32 && outer == 1 && inner >= rowsMin
}

type scatterParams struct{ axis int }

var scatterAddOp *Op

func init() {
	scatterAddOp = &Op{
		Name:     "scatter_add",
		Sharding: ShardingRule{Family: ShardScatterAdd, Params: func(p any) OpParams { return OpParams{Axes: []int{p.(scatterParams).axis}} }},
		Impl: func(in []*Tensor, pp any) *Tensor {
			x, idx, upd := in[0], in[1], in[2]
			out := cloneTensor(x)
			scatterAddInto(out, upd, idx, pp.(scatterParams).axis)
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			return []*Tensor{g, nil, Take(g, in[1], pp.(scatterParams).axis)}
		},
		Save: SaveInputs(1),
		JVP:  linearJVP(&scatterAddOp),
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			n := batchSize(in, batched)
			x, upd := materialize(in[0], batched[0], n), materialize(in[2], batched[2], n)
			return one1(scatterAddBatch(x, in[1], batched[1], upd, pp.(scatterParams).axis))
		},
		Traits: Traits{Types: TypesFloat64 | TypesInt64},
	}
}

// ScatterAdd returns x with updates added at the int32 indices along axis,
// the transpose of Take: out[..., indices[j], ...] += updates[..., j, ...],
// like x.at[..., indices, ...].add(updates) in JAX. updates must have Take's
// result shape, x.shape[:axis] + indices.shape + x.shape[axis+1:]. Repeated
// indices accumulate. Negative indices count from the end; indices outside
// [-n, n) panic. x and updates are Float32 or Int32, of one dtype.
//
// The gradient is g for x and Take(g, indices, axis) for updates.
func ScatterAdd(x, indices, updates *Tensor, axis int) *Tensor {
	checkNil("tensor.ScatterAdd", "x indices updates", x, indices, updates)
	what := func() string {
		return fmt.Sprintf("tensor.ScatterAdd: %s along axis %d", operands("", x, indices, updates), axis)
	}
	if x.dtype != updates.dtype {
		panic(fmt.Sprintf("%s: x and updates have different dtypes", what()))
	}
	if x.dtype == Bool {
		panic(fmt.Sprintf("%s: not defined for bool", what()))
	}
	a := normAxisFor(what, x, axis)
	indices = checkIndices(what, indices, x.shape[a])
	want := make([]int, 0, len(x.shape)-1+len(indices.shape))
	want = append(want, x.shape[:a]...)
	want = append(want, indices.shape...)
	want = append(want, x.shape[a+1:]...)
	if !sameShape(updates.shape, want) {
		panic(fmt.Sprintf("%s: updates must have shape %v (x.shape[:axis] + indices.shape + x.shape[axis+1:])", what(), want))
	}
	return Apply(scatterAddOp, scatterParams{a}, x, indices, updates)
}

type takeGradParams struct {
	axis   int
	xShape []int
}

// takeGradOp is the VJP of Take in x: ScatterAdd of g into zeros of x's
// shape, without materialising the zeros as an input. Inputs: indices, g.
var takeGradOp *Op

func init() {
	takeGradOp = &Op{
		Name: "take_grad",
		Sharding: ShardingRule{Family: ShardTakeGrad, Params: func(pp any) OpParams {
			p := pp.(*takeGradParams)
			return OpParams{Axes: []int{p.axis}, Shape: slices.Clone(p.xShape)}
		}, Block: takeGradBlockParams},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*takeGradParams)
			idx, g := in[0], in[1]
			if outer, n, inner := axisSplit(p.xShape, p.axis); scatterRows(g.dtype, outer, inner) {
				out := newOutUninit(Float32, p.xShape) // cleared by the row chunks
				scatterRowsF32(out.f32(), g.f32(), nil, idx.i32(), n, inner, false, true, isLocal(g, idx))
				return out
			}
			out := newTensor(g.dtype, p.xShape)
			scatterAddInto(out, g, idx, p.axis)
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			return []*Tensor{nil, Take(g, in[0], pp.(*takeGradParams).axis)}
		},
		Save: SaveInputs(0),
		JVP:  linearJVP(&takeGradOp),
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			p := pp.(*takeGradParams)
			n := batchSize(in, batched)
			g := materialize(in[1], batched[1], n)
			if !batched[0] {
				return one1(takeGrad(g, in[0], append([]int{n}, p.xShape...), p.axis+1))
			}
			x := Zeros(g.dtype, append([]int{n}, p.xShape...)...)
			return one1(scatterAddBatch(x, in[0], true, g, p.axis))
		},
		Traits: Traits{Types: TypesFloat64 | TypesInt64},
	}
}

func takeGrad(g, indices *Tensor, xShape []int, axis int) *Tensor {
	return Apply(takeGradOp, &takeGradParams{axis: axis, xShape: slices.Clone(xShape)}, indices, g)
}

// ---------------------------------------------------------------------------
// SegmentSum

type segmentParams struct{ numSegments int }

var segmentSumOp, segmentTakeOp *Op

func init() {
	segmentSumOp = &Op{
		Name:     "segment_sum",
		Sharding: ShardingRule{Family: ShardSegmentSum},
		Impl: func(in []*Tensor, pp any) *Tensor {
			data, ids := in[0], in[1]
			ns := pp.(segmentParams).numSegments
			shape := append([]int{ns}, data.shape[1:]...)
			inner := numel(data.shape[1:])
			if scatterRows(data.dtype, 1, inner) {
				out := newOutUninit(Float32, shape) // cleared by the row chunks
				scatterRowsF32(out.f32(), data.f32(), nil, ids.i32(), ns, inner, true, true, isLocal(data, ids))
				return out
			}
			out := newTensor(data.dtype, shape)
			switch {
			case data.dtype == Float32:
				segmentSumKernel(out.f32(), data.f32(), ids.i32(), ns, inner)
			case data.dtype == Int32:
				segmentSumKernel(out.i32(), data.i32(), ids.i32(), ns, inner)
			case data.dtype == Float64:
				segmentSumKernel(out.f64(), data.f64(), ids.i32(), ns, inner)
			case data.dtype == Int64:
				segmentSumKernel(out.i64(), data.i64(), ids.i32(), ns, inner)
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{Apply(segmentTakeOp, nil, g, in[1]), nil}
		},
		Save: SaveInputs(1),
		JVP:  linearJVP(&segmentSumOp),
		// Batched ids: the examples' rows end to end, each example's ids
		// offset to segments of its own.
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			ns := pp.(segmentParams).numSegments
			data, ids := in[0], in[1]
			n := batchSize(in, batched)
			if !batched[1] {
				return one1(moveAxis(SegmentSum(moveAxis(data, 0, 1), ids, ns), 1, 0))
			}
			data = materialize(data, batched[0], n)
			flat := Reshape(data, append([]int{-1}, data.shape[2:]...)...)
			s := SegmentSum(flat, Reshape(segmentOffsets(ids, ns), -1), n*ns)
			return one1(Reshape(s, append([]int{n, ns}, data.shape[2:]...)...))
		},
		Traits: Traits{Types: TypesFloat64 | TypesInt64, Reuse: FreshVJP},
	}
	// segmentTakeOp gathers rows of its first input at the segment ids,
	// giving zero rows for ids outside [0, rows): the transpose of
	// SegmentSum. Inputs: g, ids.
	segmentTakeOp = &Op{
		Name:     "segment_take",
		Sharding: ShardingRule{Family: ShardSegmentTake},
		Impl: func(in []*Tensor, _ any) *Tensor {
			g, ids := in[0], in[1]
			shape := append([]int{len(ids.i32())}, g.shape[1:]...)
			inner := numel(g.shape[1:])
			if scatterRows(g.dtype, 1, inner) {
				out := newOutUninit(Float32, shape) // every row copied or cleared
				gatherRowsF32(out.f32(), g.f32(), ids.i32(), g.shape[0], inner, true, isLocal(g, ids))
				return out
			}
			out := newTensor(g.dtype, shape)
			switch {
			case g.dtype == Float32:
				segmentTakeKernel(out.f32(), g.f32(), ids.i32(), g.shape[0], inner)
			case g.dtype == Int32:
				segmentTakeKernel(out.i32(), g.i32(), ids.i32(), g.shape[0], inner)
			case g.dtype == Float64:
				segmentTakeKernel(out.f64(), g.f64(), ids.i32(), g.shape[0], inner)
			case g.dtype == Int64:
				segmentTakeKernel(out.i64(), g.i64(), ids.i32(), g.shape[0], inner)
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{SegmentSum(g, in[1], in[0].shape[0]), nil}
		},
		Save: SaveInputs(1),
		JVP:  linearJVP(&segmentTakeOp),
		Batch: func(in []*Tensor, batched []bool, _ any) []*Tensor {
			g, ids := in[0], in[1]
			n := batchSize(in, batched)
			if !batched[1] {
				return one1(moveAxis(Apply(segmentTakeOp, nil, moveAxis(g, 0, 1), ids), 1, 0))
			}
			g = materialize(g, batched[0], n)
			rows := g.shape[1]
			flat := Reshape(g, append([]int{-1}, g.shape[2:]...)...)
			out := Apply(segmentTakeOp, nil, flat, Reshape(segmentOffsets(ids, rows), -1))
			return one1(Reshape(out, append([]int{n, ids.shape[1]}, g.shape[2:]...)...))
		},
		Traits: Traits{Types: TypesFloat64 | TypesInt64, Reuse: FreshVJP},
	}
}

func segmentSumKernel[T float32 | int32 | float64 | int64](dst, src []T, ids []int32, ns, inner int) {
	for r, id := range ids {
		if id < 0 || int(id) >= ns {
			continue
		}
		d := dst[int(id)*inner : (int(id)+1)*inner]
		for e, v := range src[r*inner : (r+1)*inner] {
			d[e] += v
		}
	}
}

func segmentTakeKernel[T float32 | int32 | float64 | int64](dst, src []T, ids []int32, ns, inner int) {
	for r, id := range ids {
		if id < 0 || int(id) >= ns {
			continue
		}
		copy(dst[r*inner:(r+1)*inner], src[int(id)*inner:(int(id)+1)*inner])
	}
}

// SegmentSum sums the rows of data (its slices along axis 0) that share a
// segment id, like jax.ops.segment_sum: out[s] is the sum of data[i] over
// the i with segmentIDs[i] == s. segmentIDs is a 1-D int32 tensor with one
// id per row; the result has shape [numSegments] + data.shape[1:], with
// zeros for segments no row names. Ids outside [0, numSegments), negative
// ones included, are dropped, as JAX does. data is Float32 or Int32.
//
// The gradient for data is g gathered at the ids (zero rows for dropped ids).
func SegmentSum(data, segmentIDs *Tensor, numSegments int) *Tensor {
	checkNil("tensor.SegmentSum", "data segmentIDs", data, segmentIDs)
	what := func() string {
		return fmt.Sprintf("tensor.SegmentSum: %s into %d segments", operands("", data, segmentIDs), numSegments)
	}
	if data.dtype == Bool {
		panic(fmt.Sprintf("%s: not defined for bool", what()))
	}
	checkSegments(what, data, segmentIDs, numSegments)
	return Apply(segmentSumOp, segmentParams{numSegments}, data, segmentIDs)
}

// checkSegments panics, with what() first in the message, unless
// segmentIDs is i32[N] for data of shape [N, ...] and numSegments is not
// negative: the operands every segment op shares.
func checkSegments(what func() string, data, segmentIDs *Tensor, numSegments int) {
	switch {
	case segmentIDs.dtype != Int32:
		panic(fmt.Sprintf("%s: segment ids must be int32", what()))
	case len(data.shape) == 0:
		panic(fmt.Sprintf("%s: data must have at least one dimension", what()))
	case len(segmentIDs.shape) != 1 || segmentIDs.shape[0] != data.shape[0]:
		panic(fmt.Sprintf("%s: want one segment id per row: i32[%d]", what(), data.shape[0]))
	case numSegments < 0:
		panic(fmt.Sprintf("%s: negative segment count", what()))
	case numSegments > 0 && numel(data.shape[1:]) > math.MaxInt/8/numSegments:
		panic(fmt.Sprintf("%s: the result's %d rows of %d elements overflow", what(), numSegments, numel(data.shape[1:])))
	}
}

// takeGradBlockParams makes take_grad's params for blocks (indices, g):
// the scattered axis stays whole, the other dimensions are g's block's.
func takeGradBlockParams(pp any, blocks []*Tensor) any {
	p := pp.(*takeGradParams)
	g, r := blocks[1].shape, len(blocks[0].shape)
	shape := append(append(slices.Clone(g[:p.axis]), p.xShape[p.axis]), g[p.axis+r:]...)
	return &takeGradParams{axis: p.axis, xShape: shape}
}

// scatterAddBatch is ScatterAdd on a batch: x and upd carry the batch
// first, idx does if batched. Batched indices are offset to each
// example's own part of x laid out end to end along axis, so repeated
// indices still accumulate in each example's order.
func scatterAddBatch(x, idx *Tensor, batched bool, upd *Tensor, axis int) *Tensor {
	if !batched {
		return ScatterAdd(x, idx, upd, axis+1)
	}
	n, size := x.shape[0], x.shape[axis+1]
	flat := mergeBatchInto(x, axis)
	// upd: [B] + x[:axis] + I + x[axis+1:]: the batch goes in front of I,
	// merged with it.
	ni := len(idx.shape) - 1
	u := moveAxis(upd, 0, axis)
	ushape := append(append(append([]int{}, u.shape[:axis]...), -1), u.shape[axis+1+ni:]...)
	u = Reshape(u, ushape...)
	out := ScatterAdd(flat, Reshape(batchOffsets("tensor.ScatterAdd", idx, size), -1), u, axis)
	return splitBatchFrom(out, axis, n)
}
