package tensor

import (
	"fmt"
	"slices"
)

// This file holds what an op declares for sharding propagation (package
// shard): the rule family it belongs to, and the description of its
// parameters a rule reads — which axes a reduction runs over, which
// dimensions a matmul contracts — without reaching into the unexported
// parameter types.

// ShardingRule is an op's sharding-propagation rule, declared with the op
// (Op.Sharding): how package shard computes the op when an operand is a
// placed tensor. Package tensor does not import shard: the op names the
// family of rules it follows and describes its parameters, and shard owns
// the rules (its prop_table.go maps each family to one) and applies the
// family's rule to the op's own Impl, block by block.
//
// The zero ShardingRule is always correct: the operands are gathered and
// the whole result is computed on every device (counted, and an error
// under shard's Strict mode).
type ShardingRule struct {
	// Family is the rule shard applies (see ShardFamily).
	Family ShardFamily
	// Params describes the op's parameters to the rule: the axes it works
	// along, the shape it makes, ... (see OpParams). Nil when the family's
	// rule reads none.
	Params func(params any) OpParams
	// Block returns the parameters with which the op computes on blocks
	// (each device's part of placed operands) instead of on the whole
	// arrays, for ops whose parameters hold a global shape. Nil: the
	// parameters as they are.
	Block func(params any, blocks []*Tensor) any
}

// ShardFamily names a family of sharding-propagation rules. Package shard
// implements one rule per family and documents each in its package doc;
// an op picks the family that describes how its results depend on its
// operands. A new family is added here (a constant and its name) and in
// shard (its rule in prop_table.go, a line in the doc's table).
type ShardFamily uint8

const (
	// ShardGather, the zero value: no rule. Operands are gathered and the
	// whole result is computed on every device.
	ShardGather ShardFamily = iota
	// ShardElementwise: each element of every result (all of the
	// broadcast shape of the operands) comes from the elements at the
	// same broadcast position of the operands.
	ShardElementwise
	// ShardLinear: ShardElementwise for ops linear in each operand (add,
	// sub, a name): pending sums pass through when every operand carries
	// the same.
	ShardLinear
	// ShardMatMul: a batched matrix product (OpParams: TransA, TransB and
	// the result DType of MatMulTo).
	ShardMatMul
	// ShardReduceSum, ShardReduceMax, ShardReduceMin: reductions over
	// OpParams.Axes (KeepDims keeps them with size 1), combined by sum,
	// max or min.
	ShardReduceSum
	ShardReduceMax
	ShardReduceMin
	// ShardTranspose: the dimensions permuted by OpParams.Perm.
	ShardTranspose
	// ShardReshape: the same elements in OpParams.Shape.
	ShardReshape
	// ShardBroadcast: the operand broadcast to OpParams.Shape.
	ShardBroadcast
	// ShardRowwise: independent along the last axis for every leading
	// position (an OpParams.Axes of one other axis gathers it); operands
	// of the full rank or one less (labels), every result full rows.
	ShardRowwise
	// ShardRowReduce: ShardRowwise whose first result has one value per
	// row (the last axis reduced) and whose further results are full rows
	// (cross-entropy against probabilities).
	ShardRowReduce
	// ShardSoftmax, ShardLogSoftmax: ShardRowwise, and along a sharded
	// last axis the numerically stable two-pass form (pmax, psum) instead
	// of gathering the rows.
	ShardSoftmax
	ShardLogSoftmax
	// ShardCrossEntropy: ShardRowReduce for softmax cross-entropy with
	// integer labels, and along a sharded class axis the two-pass,
	// vocabulary-parallel form.
	ShardCrossEntropy
	// ShardAlongAxis: independent along OpParams.Axes[0] for every other
	// position; every result has the first operand's rank.
	ShardAlongAxis
	// ShardAlongAxisReduce: ShardAlongAxis whose results drop the axis
	// unless OpParams.KeepDims (argmax, argmin).
	ShardAlongAxisReduce
	// ShardTake: x indexed along OpParams.Axes[0] by integer ids.
	ShardTake
	// ShardTakeGrad: the scatter-add of take's VJP (OpParams.Axes, the
	// table's OpParams.Shape).
	ShardTakeGrad
	// ShardOneHot: ids to a new last class axis.
	ShardOneHot
	// ShardConcat: operands joined along OpParams.Axes[0].
	ShardConcat
	// ShardSlice: the box OpParams.Starts to Limits.
	ShardSlice
	// ShardPad: OpParams.Lo and Hi added around each dimension.
	ShardPad
	// ShardFlip: the OpParams.Axes reversed.
	ShardFlip
	// ShardScatterAdd: updates added into x at indices along
	// OpParams.Axes[0].
	ShardScatterAdd
	// ShardBincount and ShardSegmentSum: counts of ids, sums of rows per
	// segment; ShardBincountGather and ShardSegmentTake: their
	// transposes, reading a table at the ids.
	ShardBincount
	ShardSegmentSum
	ShardBincountGather
	ShardSegmentTake
	// ShardMSE: the mean of squared differences, composed from
	// propagated ops.
	ShardMSE
	// ShardConv, ShardConvTranspose and ShardConvKernelGrad: a
	// convolution y[n, o] = Σ_c w[o, c] ⋆ x[n, c], its transpose in x
	// (dx[n, c] = Σ_o w[o, c] ⋆ dy[n, o]) and in w (dw[o, c] =
	// Σ_n dy[n, o] ⋆ x[n, c]), operands channels first with the spatial
	// dimensions last; OpParams.N is the number of feature groups.
	ShardConv
	ShardConvTranspose
	ShardConvKernelGrad
	// ShardWindow: each result element from a window over the dimensions
	// from OpParams.N on; the dimensions before are a batch.
	ShardWindow
	// ShardAttention: attention and its backward op, whose float operands
	// and results of rank 4 are [batch, length, heads, features], of rank
	// 3 [batch, heads, length], and whose bool mask is [batch, heads,
	// queries, keys] (dimensions of size 1 broadcast): each head of each
	// example is independent, so batch and heads may be split.
	ShardAttention
)

var shardFamilyNames = [...]string{
	ShardGather: "gather", ShardElementwise: "elementwise", ShardLinear: "linear",
	ShardMatMul: "matmul", ShardReduceSum: "reduce_sum", ShardReduceMax: "reduce_max",
	ShardReduceMin: "reduce_min", ShardTranspose: "transpose", ShardReshape: "reshape",
	ShardBroadcast: "broadcast", ShardRowwise: "rowwise", ShardRowReduce: "row_reduce",
	ShardSoftmax: "softmax", ShardLogSoftmax: "log_softmax", ShardCrossEntropy: "cross_entropy",
	ShardAlongAxis: "along_axis", ShardAlongAxisReduce: "along_axis_reduce", ShardTake: "take",
	ShardTakeGrad: "take_grad", ShardOneHot: "one_hot", ShardConcat: "concat",
	ShardSlice: "slice", ShardPad: "pad", ShardFlip: "flip", ShardScatterAdd: "scatter_add",
	ShardBincount: "bincount", ShardSegmentSum: "segment_sum",
	ShardBincountGather: "bincount_gather", ShardSegmentTake: "segment_take", ShardMSE: "mse",
	ShardConv: "conv", ShardConvTranspose: "conv_transpose", ShardConvKernelGrad: "conv_kernel_grad",
	ShardWindow:    "window",
	ShardAttention: "attention",
}

// String returns the family's name as shard's documentation lists it
// ("elementwise", "matmul", ...), or ShardFamily(n) for a value that
// names no family.
func (f ShardFamily) String() string {
	if int(f) < len(shardFamilyNames) {
		return shardFamilyNames[f]
	}
	return fmt.Sprintf("ShardFamily(%d)", f)
}

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

// DescribeParams returns the parameters of a call of op as an OpParams,
// as the op's ShardingRule.Params describes them; ok is false for an op
// that declares no description.
func DescribeParams(op *Op, params any) (p OpParams, ok bool) {
	if op.Sharding.Params == nil {
		return OpParams{}, false
	}
	return op.Sharding.Params(params), true
}

// BlockParams returns the parameters with which op computes on blocks
// (each device's part of placed operands) instead of on the whole arrays,
// as the op's ShardingRule.Block makes them: ops whose parameters hold a
// result shape (broadcasting elementwise ops, where, reductions,
// concatenate, the scatter of take's VJP) get the shape of the blocks;
// the others' parameters are returned unchanged. The blocks must be laid
// out consistently (a sharding rule sees to it).
func BlockParams(op *Op, params any, blocks []*Tensor) any {
	if op.Sharding.Block == nil {
		return params
	}
	return op.Sharding.Block(params, blocks)
}

// axisParams describes the params of an op along one axis given as an
// int (softmax and its relatives).
func axisParams(p any) OpParams { return OpParams{Axes: []int{p.(int)}} }

// shapeParams describes the params of an op that makes a shape given as
// an []int (reshape, broadcast).
func shapeParams(p any) OpParams { return OpParams{Shape: slices.Clone(p.([]int))} }
