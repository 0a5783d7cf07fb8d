package tensor

import "math/rand/v2"

var _ = addRuleCases(
	ruleCase{name: "segmentWeightedSumOp", op: &segmentWeightedSumOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 5, 3), rF(r, 5), rI(r, -1, 5, 5)) },
		f:  func(x []*Tensor) []*Tensor { return []*Tensor{SegmentWeightedSum(x[0], x[1], x[2], 4)} }},
	ruleCase{name: "segmentWeightedTakeOp", op: &segmentWeightedTakeOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 4, 16), rI(r, -1, 5, 5), rF(r, 5), rF(r, 5, 16)) },
		f:  ap(&segmentWeightedTakeOp, nil)},
)
