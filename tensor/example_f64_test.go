package tensor_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// Float64 computes in float64 end to end, gradients included: 1 + 1e-12
// survives, and a gradient check passes at float64's tolerances.
func Example_float64() {
	x := tensor.FromFloat64s([]float64{1, 2, 3}, 3)
	fmt.Println(x)
	fmt.Printf("%.13f\n", tensor.Add(tensor.ScalarFloat64(1), tensor.ScalarFloat64(1e-12)))
	fmt.Println(tensor.FromFloat64([]float64{1, 2, 3}, 3)) // JAX's default: float32

	w := tensor.FromFloat64s([]float64{0.5, -1, 0.25, 2, 1.5, -0.5}, 3, 2)
	loss := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Tanh(tensor.MatMul(xs[0], xs[1])))
	}
	fmt.Println(autodiff.CheckGrad(loss, []*tensor.Tensor{x, w}, autodiff.CheckOptions{}))
	fmt.Printf("%g\n", tensor.AsType(tensor.FromUint8([]uint8{0, 128, 255}), tensor.Float64))
	// Output:
	// f64[3]
	// 1.0000000000010
	// f32[3]
	// <nil>
	// [  0 128 255]
}
