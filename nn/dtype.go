package nn

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// requireParamDType panics, naming the layer fn, when x's dtype is not that
// of the layer's parameter p (nil p: nothing to check). Without it, the
// mismatch would surface in whichever tensor op first combined the two.
func requireParamDType(fn string, x, p *tensor.Tensor) {
	requireInput(fn, "x", x)
	if p != nil && x.DType() != p.DType() {
		panic(fmt.Sprintf("%s: x %v, parameter %v: dtypes differ; convert x with tensor.Convert "+
			"or the layer with nn.CastTo", fn, x, p))
	}
}

// requireInput panics, naming the layer fn and the input, when x is nil.
func requireInput(fn, name string, x *tensor.Tensor) {
	if x == nil {
		panic(fmt.Sprintf("%s: %s is nil", fn, name))
	}
}

// requireParamDTypeOrHalf is requireParamDType letting through a
// half-precision (bfloat16, float16) x to a float32 parameter p, which
// nn.Linear takes on purpose (its products computed in x's dtype, see
// TestMixedPolicyProducts): for layers built of Linears.
func requireParamDTypeOrHalf(fn string, x, p *tensor.Tensor) {
	requireInput(fn, "x", x)
	if p != nil && p.DType() == tensor.Float32 && (x.DType() == tensor.BFloat16 || x.DType() == tensor.Float16) {
		return
	}
	requireParamDType(fn, x, p)
}
