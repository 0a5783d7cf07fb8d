package shard

// rules maps tensor op names to their sharding rules: the one table that
// says how every op computes on placed operands. An op that is not listed
// (or whose rule declines the operands it got) gathers its operands on
// every device and computes the whole result there, replicated: correct,
// counted under the op's name, and a panic under Strict.
var rules = map[string]*rule{}

// elementwiseOps compute each element from the elements at the same
// broadcast position of their operands.
var elementwiseOps = []string{
	// unary
	"neg", "abs", "sign", "exp", "log", "sqrt", "rsqrt", "square", "tanh",
	"sigmoid", "relu", "silu", "gelu", "gelu_exact", "gelu_grad",
	"gelu_exact_grad", "softplus", "log_sigmoid", "clamp", "convert", "not",
	"is_nan", "is_finite", "name",
	// backward kernels of the activations: (g, x or y)
	"square_bwd", "tanh_bwd", "sigmoid_bwd", "relu_bwd", "silu_bwd",
	"gelu_bwd", "gelu_exact_bwd",
	// binary, broadcasting
	"add", "sub", "mul", "div", "rem", "floorDiv", "maximum", "minimum", "pow",
	"equal", "notEqual", "less", "lessEqual", "greater", "greaterEqual",
	"logicalAnd", "logicalOr", "logicalXor", "where",
	// fused
	"bias_act", "bias_act_bwd", "adam_update", "adam_step",
}

func init() {
	for _, name := range elementwiseOps {
		rules[name] = &rule{what: "elementwise: operand shardings merged, conflicts moved", plan: elementwise}
	}
}

func init() {
	for name, r := range map[string]*rule{
		"matmul":                      {"free dims keep their axes; contracting dim sharded on both sides: partial sum", matmulRule},
		"reduce_sum":                  {"local sum; reduced sharded dims leave a partial sum (psum or psum_scatter by the consumer)", reduceSumRule},
		"reduce_max":                  {"reduced dims gathered, others stay sharded", reduceGatherRule},
		"reduce_min":                  {"reduced dims gathered, others stay sharded", reduceGatherRule},
		"transpose":                   {"spec permuted; partial sums carry over", transposeRule},
		"reshape":                     {"sharded dims that stay contiguous keep their axes, others gathered", reshapeRule},
		"broadcast":                   {"new and size-1 dims replicated", broadcastRule},
		"softmax":                     {"rowwise: leading dims merged, softmax axis gathered", rowwise},
		"log_softmax":                 {"rowwise", rowwise},
		"softmax_grad":                {"rowwise", rowwise},
		"log_softmax_grad":            {"rowwise", rowwise},
		"softmax_cross_entropy":       {"rowwise: class axis gathered, batch dims merged with the labels'", rowwise},
		"softmax_cross_entropy_grad":  {"rowwise", rowwise},
		"softmax_cross_entropy_probs": {"rowwise", rowwise},
	} {
		rules[name] = r
	}
}

func ruleFor(name string) *rule { return rules[name] }
