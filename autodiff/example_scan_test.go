package autodiff_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// Scan threads a carry through a loop and stacks the per-step outputs, as
// lax.scan does: here a running sum and its history. The gradient flows
// through every step.
func ExampleScan() {
	xs := tensor.FromFloat32([]float32{1, 2, 3, 4}, 4, 1)
	step := func(sum, x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
		sum = tensor.Add(sum, x)
		return sum, sum
	}
	total, history := autodiff.Scan(step, tensor.Zeros(tensor.Float32, 1), xs)
	fmt.Printf("total %g\n", total)
	fmt.Printf("history %g\n", tensor.Reshape(history, 4))

	// d/dxs of the sum of the history: x[t] is counted in 4-t partial sums.
	grad := autodiff.Grad(func(xs *tensor.Tensor) *tensor.Tensor {
		_, h := autodiff.Scan(step, tensor.Zeros(tensor.Float32, 1), xs, autodiff.ScanRemat(2))
		return tensor.Sum(h)
	})(xs)
	fmt.Printf("grad %g\n", tensor.Reshape(grad, 4))
	// Output:
	// total [10]
	// history [ 1  3  6 10]
	// grad [4 3 2 1]
}
