package shard

import "github.com/gonox/gonox/tensor"

// propRules maps each family of sharding rules an op can declare
// (tensor.ShardFamily, in the op's Sharding) to its rule: the one table
// that says how ops compute on placed operands. No op is named here: an op
// picks its family where it is registered. An op that declares none (or
// whose rule declines the operands it got) gathers its operands on every
// device and computes the whole result there, replicated: correct,
// counted under the op's name, and a panic under Strict.
//
// A new family is a constant in package tensor (placed_params.go), a rule
// here, and a line in the doc's table (a test checks both).
var propRules = [...]*propRule{
	tensor.ShardElementwise:     {what: "operand shardings merged, conflicts moved", plan: elementwise},
	tensor.ShardLinear:          {what: "elementwise; equal partial sums stay partial", plan: linear},
	tensor.ShardMatMul:          {what: "free dims keep their axes; contracting dim sharded on both sides: partial sum", plan: matmulRule},
	tensor.ShardReduceSum:       {what: "local sum; reduced sharded dims leave a partial sum (psum or psum_scatter by the consumer)", plan: reduceSumRule},
	tensor.ShardReduceMax:       {what: "local max, then pmax over the reduced dims' axes", plan: reduceExtremeRule},
	tensor.ShardReduceMin:       {what: "local min, then pmin over the reduced dims' axes", plan: reduceExtremeRule},
	tensor.ShardTranspose:       {what: "spec permuted; partial sums carry over", plan: transposeRule},
	tensor.ShardReshape:         {what: "sharded dims that stay contiguous keep their axes, others gathered", plan: reshapeRule},
	tensor.ShardBroadcast:       {what: "new and size-1 dims replicated", plan: broadcastRule},
	tensor.ShardRowwise:         {what: "rowwise: leading dims merged, the last axis gathered", plan: rowwise},
	tensor.ShardRowReduce:       {what: "rowwise; the first result one value per row", plan: rowwise},
	tensor.ShardSoftmax:         {what: "rowwise; a sharded softmax axis: two passes (pmax, psum)", plan: rowwise, compose: softmaxTwoPass},
	tensor.ShardLogSoftmax:      {what: "rowwise; a sharded axis: two passes", plan: rowwise, compose: softmaxTwoPass},
	tensor.ShardCrossEntropy:    {what: "rowwise, batch dims merged with the labels'; a sharded class axis: two passes (vocab-parallel)", plan: rowwise, compose: crossEntropyTwoPass},
	tensor.ShardAlongAxis:       {what: "along one axis: that axis gathered, the others keep their axes", plan: alongAxis},
	tensor.ShardAlongAxisReduce: {what: "along one axis, which the result drops unless kept", plan: alongAxis},
	tensor.ShardTake:            {what: "indexed axis gathered; result laid out like the table around it and like the ids in it", plan: takeRule},
	tensor.ShardTakeGrad:        {what: "scatter-add of take's VJP: indexed dims of g leave a partial sum", plan: takeGradRule},
	tensor.ShardOneHot:          {what: "laid out like the ids, the class axis whole", plan: oneHotRule},
	tensor.ShardConcat:          {what: "concatenated axis gathered, the others merged", plan: concatRule},
	tensor.ShardSlice:           {what: "sliced dims gathered, the others keep their axes", plan: sliceRule},
	tensor.ShardPad:             {what: "padded dims gathered, the others keep their axes", plan: padRule},
	tensor.ShardFlip:            {what: "flipped dims gathered, the others keep their axes", plan: flipRule},
	tensor.ShardScatterAdd:      {what: "scattered axis (and the updates' indexed dims) gathered, the others keep x's axes", plan: scatterAddRule},
	tensor.ShardBincount:        {what: "local counts: a partial sum over the ids' axes", plan: bincountRule},
	tensor.ShardSegmentSum:      {what: "local segment sums: a partial sum over the rows' axes", plan: segmentSumRule},
	tensor.ShardBincountGather:  {what: "counts gathered; laid out like the ids", plan: binGatherRule},
	tensor.ShardSegmentTake:     {what: "segments gathered; rows follow the ids", plan: segmentTakeRule},
	tensor.ShardMSE:             {what: "composed: mean of squared differences (partial sum, one psum)", compose: mseCompose},
	tensor.ShardConv:            {what: "batch and output channels keep their axes; input channels split on both sides: partial sum", plan: convRule},
	tensor.ShardConvTranspose:   {what: "batch and input channels keep their axes; output channels split on both sides: partial sum", plan: convRule},
	tensor.ShardConvKernelGrad:  {what: "channels keep their axes; the batch split on both sides: partial sum", plan: convRule},
	tensor.ShardWindow:          {what: "batch dims keep their axes, windowed dims gathered", plan: windowRule},
	tensor.ShardAttention:       {what: "batch and head dims keep their axes, lengths and features gathered", plan: attentionRule},
}

// propRuleFor returns the rule of the family op declares (nil: gather).
func propRuleFor(op *tensor.Op) *propRule {
	if f := int(op.Sharding.Family); f < len(propRules) {
		return propRules[f]
	}
	return nil
}
