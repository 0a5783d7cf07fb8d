package tensor

import "math/rand/v2"

// The rule cases of the convolution and window ops (ad_rules_test.go).
// The batched kernel gradient sums over the batch in another order (the
// batch becomes feature groups): a tolerance instead of equal bits.
var _ = addRuleCases(
	ruleCase{name: "convOp", op: &convOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 4, 5, 4), rF(r, 6, 2, 3, 2)) },
		f: fn2(func(x, w *Tensor) *Tensor {
			return Conv(x, w, ConvSpec{Strides: []int{2, 1}, Padding: Pads([2]int{1, 1}, [2]int{0, 1}), Groups: 2})
		}), vmapTol: 1e-5},
	ruleCase{name: "convTransposeOp", op: &convTransposeOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 4, 3, 3), rF(r, 4, 3, 2, 3)) },
		f: fn2(func(x, w *Tensor) *Tensor {
			return ConvTranspose(x, w, ConvTransposeSpec{Strides: []int{2, 1}, Padding: [][2]int{{0, 1}, {1, 1}}, OutputPadding: []int{1, 0}, Groups: 2})
		}), vmapTol: 1e-5},
	ruleCase{name: "convKernelGradOp", op: &convKernelGradOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 4, 5), rF(r, 2, 6, 3)) },
		f: fn2(func(x, dy *Tensor) *Tensor {
			p := &convParams{stride: []int{2}, lo: []int{1}, hi: []int{0}, lhsDil: []int{1}, rhsDil: []int{1}, groups: 2, other: []int{2}}
			return Apply(convKernelGradOp, p, x, dy)
		}), vmapTol: 1e-5},
	ruleCase{name: "windowMaxOp", op: &windowMaxOp, in: func(r *rand.Rand) []*Tensor { return args(rDistinct(r, 2, 5, 4)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{
				ReduceWindow(x[0], WindowMax, Window{Dims: []int{1, 2, 2}, Strides: []int{1, 2, 1}, Padding: Pads([2]int{0, 0}, [2]int{0, 1}, [2]int{1, 0})}),
				AdaptivePool(x[0], WindowMax, 3, 2),
			}
		}},
	ruleCase{name: "windowSumOp", op: &windowSumOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 5, 4)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{
				ReduceWindow(x[0], WindowSum, Window{Dims: []int{1, 3, 2}, Strides: []int{1, 2, 2}, Padding: SamePadding}),
				ReduceWindow(x[0], WindowMeanValid, Window{Dims: []int{2, 2, 1}, Padding: Pads([2]int{1, 0}, [2]int{0, 1}, [2]int{0, 0})}),
				AdaptivePool(x[0], WindowMean, 2, 3),
			}
		}},
	ruleCase{name: "windowSumTOp", op: &windowSumTOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 2)) },
		f: func(x []*Tensor) []*Tensor {
			p := &windowParams{first: 1, size: []int{2, 2}, stride: []int{2, 1}, lo: []int{0, 1}, hi: []int{1, 0}, dl: []int{1, 1}, in: []int{5, 2}}
			return []*Tensor{Apply(windowSumTOp, p, x[0])}
		}},
	ruleCase{name: "selectScatterOp", op: &selectScatterOp, in: func(r *rand.Rand) []*Tensor { return args(rDistinct(r, 2, 5, 4), rF(r, 2, 3, 2)) },
		f: func(x []*Tensor) []*Tensor {
			p := &windowParams{first: 1, size: []int{2, 2}, stride: []int{2, 2}, lo: []int{1, 0}, hi: []int{0, 0}, dl: []int{1, 1}, in: []int{5, 4}}
			return []*Tensor{Apply(selectScatterOp, p, x[0], x[1])}
		}},
	ruleCase{name: "selectGatherOp", op: &selectGatherOp, in: func(r *rand.Rand) []*Tensor { return args(rDistinct(r, 2, 5, 4), rF(r, 2, 5, 4)) },
		f: func(x []*Tensor) []*Tensor {
			p := &windowParams{first: 1, size: []int{2, 2}, stride: []int{2, 2}, lo: []int{1, 0}, hi: []int{0, 0}, dl: []int{1, 1}, in: []int{5, 4}}
			return []*Tensor{Apply(selectGatherOp, p, x[0], x[1])}
		}},
)
