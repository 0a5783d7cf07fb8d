package autodiff_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// JVP is forward mode (jax.jvp): f's value and its derivative along a
// tangent, in one pass. Here f(x) = x·sin(x) elementwise, in float64, with
// the tangent 1 at every element, gives f'(x) = sin(x) + x·cos(x); and a
// JVP of a gradient gives a Hessian-vector product.
func ExampleJVP() {
	f := func(x *tensor.Tensor) *tensor.Tensor { return tensor.Mul(x, tensor.Sin(x)) }
	x := tensor.FromFloat64s([]float64{0, 1, 2}, 3)
	y, dy := autodiff.JVP(f, x, tensor.OnesLike(x))
	fmt.Printf("f(x)  = %.6f\n", y)
	fmt.Printf("f'(x) = %.6f\n", dy)

	// The Hessian of sum(x³) is diag(6x): along v = (1, 0, 1) it is (0, 0, 12).
	loss := func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Mul(x, tensor.Square(x))) }
	_, hv := autodiff.JVP(autodiff.Grad(loss), x, tensor.FromFloat64s([]float64{1, 0, 1}, 3))
	fmt.Printf("H·v   = %g\n", hv)
	// Output:
	// f(x)  = [0.000000 0.841471 1.818595]
	// f'(x) = [0.000000 1.381773 0.077004]
	// H·v   = [ 0  0 12]
}
