package tensor

import "math/rand/v2"

// The rule cases of resample and its transpose: reflect padding and a
// linear interpolation (two weighted taps along two axes), and the
// transpose of the interpolation.
var _ = addRuleCases(
	ruleCase{name: "resampleOp", op: &resampleOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{PadWith(x[0], [][2]int{{1, 2}, {2, 1}}, PadReflect),
				Interpolate(Reshape(x[0], 1, 1, 3, 4), InterpSpec{Mode: InterpLinear, Size: []int{5, 7}})}
		}},
	ruleCase{name: "resampleTOp", op: &resampleTOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 1, 2, 5, 7)) },
		f: func(x []*Tensor) []*Tensor {
			p := interpParams("test", Zeros(Float32, 1, 2, 3, 4), InterpSpec{Mode: InterpLinear, Size: []int{5, 7}, AlignCorners: true})
			return []*Tensor{Apply(resampleTOp, p, x[0])}
		}},
)

// The rule cases of unfold and fold: 2-D blocks with padding, stride
// and dilation, and 1-D overlapping blocks.
var _ = addRuleCases(
	ruleCase{name: "unfoldOp", op: &unfoldOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 2, 4, 5)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{Unfold(x[0], UnfoldSpec{Kernel: []int{2, 3}, Padding: []int{1, 0}, Stride: []int{2, 1}, Dilation: []int{1, 2}}),
				Unfold(Reshape(x[0], 2, 4, 10), UnfoldSpec{Kernel: []int{3}})}
		}},
	ruleCase{name: "foldOp", op: &foldOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 6, 12)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{Fold(x[0], []int{4, 5}, UnfoldSpec{Kernel: []int{1, 3}, Padding: []int{0, 1}, Stride: []int{1, 2}}),
				Fold(SliceAxis(x[0], 2, 0, 8), []int{10}, UnfoldSpec{Kernel: []int{3}})}
		}},
)
