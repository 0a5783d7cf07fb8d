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
