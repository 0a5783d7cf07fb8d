package tensor

import "slices"

// This file describes the parameters of this package's ops to sharding
// rules (package shard), which must know, say, which axes a reduction
// runs over or which dimensions a matmul contracts, without reaching into
// the unexported parameter types.

// OpParams is what a sharding rule needs to know of an op's parameters.
// Fields that do not apply to the op are zero.
type OpParams struct {
	// Axes are the axes a reduction runs over (sorted, non-negative), the
	// axes flip reverses, the axis of softmax, log_softmax, concatenate,
	// take, scatter_add, cumsum, roll, sort and argmin/argmax (one
	// element).
	Axes []int
	// KeepDims is set when a reduction keeps its axes with size 1.
	KeepDims bool
	// Shape is the result shape of reshape, broadcast and take_grad.
	Shape []int
	// Perm is the permutation of transpose.
	Perm []int
	// TransA and TransB say that a matmul operand is stored transposed
	// (its last two dimensions swapped).
	TransA, TransB bool
	// Starts and Limits bound a slice, per dimension.
	Starts, Limits []int
	// Lo and Hi are the padding before and after each dimension of pad.
	Lo, Hi []int
	// N is k of top_k, the depth of one_hot and the number of outputs of
	// split.
	N int
	// DType is the result dtype MatMulTo asked for (zero for MatMul).
	DType DType
}

// DescribeParams returns the parameters of a call of op, one of this
// package's ops, as an OpParams; ok is false for ops it does not describe.
func DescribeParams(op *Op, params any) (p OpParams, ok bool) {
	switch v := params.(type) {
	case *matmulParams:
		return OpParams{TransA: v.ta, TransB: v.tb}, true
	case *matmulToParams:
		return OpParams{TransA: v.p.ta, TransB: v.p.tb, DType: v.dt}, true
	case *reduceParams:
		return OpParams{Axes: slices.Clone(v.axes), KeepDims: v.keep}, true
	case *concatParams:
		return OpParams{Axes: []int{v.axis}}, true
	case *sliceParams:
		return OpParams{Starts: slices.Clone(v.starts), Limits: slices.Clone(v.limits)}, true
	case *padParams:
		return OpParams{Lo: slices.Clone(v.lo), Hi: slices.Clone(v.hi)}, true
	case cumsumParams:
		return OpParams{Axes: []int{v.axis}}, true
	case argParams:
		return OpParams{Axes: []int{v.axis}, KeepDims: v.keep}, true
	case srtSortParams:
		return OpParams{Axes: []int{v.axis}}, true
	case srtAlongParams:
		return OpParams{Axes: []int{v.axis}}, true
	case rollParams:
		return OpParams{Axes: []int{v.axis}}, true
	case scatterParams:
		return OpParams{Axes: []int{v.axis}}, true
	case []bool: // flip: the flipped axes
		var axes []int
		for i, f := range v {
			if f {
				axes = append(axes, i)
			}
		}
		return OpParams{Axes: axes}, true
	case *splitParams:
		return OpParams{Axes: []int{v.axis}, N: len(v.sizes)}, true
	case *takeParams:
		return OpParams{Axes: []int{v.axis}}, true
	case *takeGradParams:
		return OpParams{Axes: []int{v.axis}, Shape: slices.Clone(v.xShape)}, true
	}
	switch op.Name {
	case "reshape", "broadcast":
		return OpParams{Shape: slices.Clone(params.([]int))}, true
	case "transpose":
		return OpParams{Perm: slices.Clone(params.([]int))}, true
	case "softmax", "log_softmax", "softmax_grad", "log_softmax_grad":
		return OpParams{Axes: []int{params.(int)}}, true
	case "top_k":
		return OpParams{Axes: []int{-1}, N: params.(int)}, true
	case "one_hot":
		return OpParams{N: params.(int)}, true
	}
	return OpParams{}, false
}

// BlockParams returns the parameters with which op computes on blocks
// (each device's part of placed operands) instead of on the whole arrays:
// ops whose parameters hold a result shape (broadcasting elementwise ops,
// where, reductions, concatenate, the scatter of take's VJP) get the
// shape of the blocks; the others' parameters are returned unchanged. The blocks must be laid out consistently (a sharding rule
// sees to it).
func BlockParams(op *Op, params any, blocks []*Tensor) any {
	switch v := params.(type) {
	case *binaryParams:
		shape := broadcastShapes(op.Name, ",", blocks...)
		return binaryParamsFor(shape, blocks[0])
	case *whereParams:
		return &whereParams{shape: broadcastShapes(op.Name, ",", blocks...)}
	case *reduceParams:
		return newReduceParams(op.Name, blocks[0], v.axes, v.keep)
	case *concatParams:
		shape := slices.Clone(blocks[0].shape)
		shape[v.axis] = 0
		for _, b := range blocks {
			shape[v.axis] += b.shape[v.axis]
		}
		return &concatParams{axis: v.axis, shape: shape}
	case *takeGradParams:
		// blocks: indices, g; the scattered axis stays whole
		g, r := blocks[1].shape, len(blocks[0].shape)
		shape := append(append(slices.Clone(g[:v.axis]), v.xShape[v.axis]), g[v.axis+r:]...)
		return &takeGradParams{axis: v.axis, xShape: shape}
	}
	return params
}
