package tensor

import "math/rand/v2"

var _ = addRuleCases(
	ruleCase{name: "segmentWeightedSumOp", op: &segmentWeightedSumOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 5, 3), rF(r, 5), rI(r, -1, 5, 5)) },
		f:  func(x []*Tensor) []*Tensor { return []*Tensor{SegmentWeightedSum(x[0], x[1], x[2], 4)} }},
)
