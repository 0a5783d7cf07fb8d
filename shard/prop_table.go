package shard

// propRules maps tensor op names to their sharding rules: the one table that
// says how every op computes on placed operands. An op that is not listed
// (or whose rule declines the operands it got) gathers its operands on
// every device and computes the whole result there, replicated: correct,
// counted under the op's name, and a panic under Strict.
var propRules = map[string]*propRule{}

// elementwiseOps compute each element from the elements at the same
// broadcast position of their operands.
var elementwiseOps = []string{
	// unary
	"neg", "abs", "sign", "exp", "log", "sqrt", "rsqrt", "square", "tanh",
	"sigmoid", "relu", "silu", "gelu", "gelu_exact",
	"softplus", "log_sigmoid", "clamp", "convert", "not",
	"is_nan", "is_finite", "name",
	// backward kernels of the activations: (g, x or y)
	"square_bwd", "tanh_bwd", "sigmoid_bwd", "relu_bwd", "silu_bwd",
	"gelu_bwd", "gelu_exact_bwd",
	// binary, broadcasting
	"add", "sub", "mul", "div", "rem", "floorDiv", "maximum", "minimum", "pow",
	"equal", "notEqual", "less", "lessEqual", "greater", "greaterEqual",
	"logicalAnd", "logicalOr", "logicalXor", "where",
	// fused
	"bias_act", "bias_act_bwd", "adam_update", "adam_step", "sgd_step",
}

func init() {
	for _, name := range elementwiseOps {
		propRules[name] = &propRule{what: "elementwise: operand shardings merged, conflicts moved", plan: elementwise}
	}
}

func init() {
	for name, r := range map[string]*propRule{
		"matmul":                      {"free dims keep their axes; contracting dim sharded on both sides: partial sum", matmulRule, nil},
		"reduce_sum":                  {"local sum; reduced sharded dims leave a partial sum (psum or psum_scatter by the consumer)", reduceSumRule, nil},
		"reduce_max":                  {"local max, then pmax over the reduced dims' axes", reduceExtremeRule, nil},
		"reduce_min":                  {"local min, then pmin over the reduced dims' axes", reduceExtremeRule, nil},
		"transpose":                   {"spec permuted; partial sums carry over", transposeRule, nil},
		"reshape":                     {"sharded dims that stay contiguous keep their axes, others gathered", reshapeRule, nil},
		"broadcast":                   {"new and size-1 dims replicated", broadcastRule, nil},
		"take_grad":                   {"scatter-add of take's VJP: indexed dims of g leave a partial sum", takeGradRule, nil},
		"take":                        {"indexed axis gathered; result laid out like the table around it and like the ids in it", takeRule, nil},
		"softmax":                     {"rowwise: leading dims merged; a sharded softmax axis: two passes (pmax, psum)", rowwise, softmaxTwoPass},
		"log_softmax":                 {"rowwise; a sharded axis: two passes", rowwise, softmaxTwoPass},
		"softmax_grad":                {"rowwise", rowwise, nil},
		"log_softmax_grad":            {"rowwise", rowwise, nil},
		"softmax_cross_entropy":       {"rowwise, batch dims merged with the labels'; a sharded class axis: two passes (vocab-parallel)", rowwise, crossEntropyTwoPass},
		"softmax_cross_entropy_grad":  {"rowwise", rowwise, nil},
		"softmax_cross_entropy_probs": {"rowwise", rowwise, nil},
	} {
		propRules[name] = r
	}
}

// alongAxisOps work along one axis independently for every other position.
var alongAxisOps = []string{
	"cumsum", "argminmax", "argsort", "sort", "top_k",
	"srt_take_along_axis", "srt_scatter_add_along_axis", "split", "roll",
}

func init() {
	for _, name := range alongAxisOps {
		propRules[name] = &propRule{what: "along one axis: that axis gathered, the others keep their axes", plan: alongAxis}
	}
	propRules["one_hot"] = &propRule{what: "laid out like the ids, the class axis whole", plan: oneHotRule}
	propRules["concatenate"] = &propRule{what: "concatenated axis gathered, the others merged", plan: concatRule}
	propRules["slice"] = &propRule{what: "sliced dims gathered, the others keep their axes", plan: sliceRule}
	propRules["pad"] = &propRule{what: "padded dims gathered, the others keep their axes", plan: padRule}
	propRules["flip"] = &propRule{what: "flipped dims gathered, the others keep their axes", plan: flipRule}
	propRules["scatter_add"] = &propRule{what: "scattered axis (and the updates' indexed dims) gathered, the others keep x's axes", plan: scatterAddRule}
	propRules["bincount"] = &propRule{what: "local counts: a partial sum over the ids' axes", plan: countRule}
	propRules["segment_sum"] = &propRule{what: "local segment sums: a partial sum over the rows' axes", plan: countRule}
	propRules["bincount_gather"] = &propRule{what: "counts gathered; laid out like the ids", plan: binGatherRule}
	propRules["segment_take"] = &propRule{what: "segments gathered; rows follow the ids", plan: segmentTakeRule}
	propRules["mse"] = &propRule{what: "composed: mean of squared differences (partial sum, one psum)", compose: mseCompose}
}

func propRuleFor(name string) *propRule { return propRules[name] }
