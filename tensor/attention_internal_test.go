package tensor

import "math/rand/v2"

// Rule cases of attention and its backward op (ad_rules_test.go): Vmap
// over each operand equals the loop over examples, the forward-mode rule
// equals finite differences and the transpose of the VJP. The batch
// changes the order of nothing (each head computes alone), but the Vmap
// of the mask or of the examples of a batch still merges blocks
// differently: compared to rounding.
var _ = addRuleCases(
	ruleCase{name: "attentionOp", op: &attentionOp, in: func(r *rand.Rand) []*Tensor {
		return args(rF(r, 2, 5, 2, 3), rF(r, 2, 6, 2, 3), rF(r, 2, 6, 2, 4), attnRuleMask(r))
	}, f: func(x []*Tensor) []*Tensor {
		return []*Tensor{
			DotProductAttention(x[0], x[1], x[2], nil, 0, true),
			DotProductAttention(x[0], x[1], x[2], x[3], 0.7, false),
			ApplyN(attentionOp, &attnParams{scale: 0.5, causal: true}, x[0], x[1], x[2])[1], // the log-sum-exps
		}
	}, vmapTol: 1e-6},
	ruleCase{name: "attentionBwdOp", op: &attentionBwdOp, in: func(r *rand.Rand) []*Tensor {
		q, k, v := rF(r, 2, 5, 2, 3), rF(r, 2, 6, 2, 3), rF(r, 2, 6, 2, 4)
		o := ApplyN(attentionOp, &attnParams{scale: 0.5, causal: true}, q, k, v)
		return args(q, k, v, o[0], o[1], rF(r, 2, 5, 2, 4), rF(r, 2, 2, 5))
	}, f: func(x []*Tensor) []*Tensor {
		return ApplyN(attentionBwdOp, &attnParams{scale: 0.5, causal: true, glse: true}, x...)
	}, vmapTol: 1e-6},
)

// attnRuleMask is a mask [2,1,5,6] leaving every query key 0.
func attnRuleMask(r *rand.Rand) *Tensor {
	m := make([]bool, 2*5*6)
	for i := range m {
		m[i] = i%6 == 0 || r.IntN(3) > 0
	}
	return FromBool(m, 2, 1, 5, 6)
}
