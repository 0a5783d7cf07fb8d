package tensor

import "math/rand/v2"

// The rule cases of lstm_cell and its backward op (ad_rules_test.go).
var _ = addRuleCases(
	ruleCase{name: "lstmCellOp", op: &lstmCellOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 12), rF(r, 2, 3)) },
		f:  ap(&lstmCellOp, 1)},
	ruleCase{name: "lstmCellOp", op: &lstmCellOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 12), rF(r, 2, 12), rF(r, 2, 3)) },
		f:  ap(&lstmCellOp, 2)},
	ruleCase{name: "lstmCellBwdOp", op: &lstmCellBwdOp,
		in: func(r *rand.Rand) []*Tensor {
			return args(rF(r, 2, 3), rF(r, 2, 3), rF(r, 2, 3), rF(r, 2, 3), rU(r, 0.1, 0.9, 2, 12))
		},
		f: ap(&lstmCellBwdOp, nil)},
)

// The rule cases of gru_cell and its backward op (ad_rules_test.go).
var _ = addRuleCases(
	ruleCase{name: "gruCellOp", op: &gruCellOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 9), rF(r, 2, 9), rF(r, 2, 3)) },
		f:  ap(&gruCellOp, nil)},
	ruleCase{name: "gruCellBwdOp", op: &gruCellBwdOp,
		in: func(r *rand.Rand) []*Tensor {
			return args(rF(r, 2, 3), rF(r, 2, 9), rF(r, 2, 3), rU(r, 0.1, 0.9, 2, 9))
		},
		f: ap(&gruCellBwdOp, nil)},
)
