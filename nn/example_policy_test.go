package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// A mixed-precision policy applied to any model: the computation runs in
// bfloat16, the parameters, their gradients and the loss stay float32.
func ExampleCastToCompute() {
	policy := nn.MixedBFloat16
	km, kx := tensor.NewKey(0).Split2()
	model := nn.NewLinear(km, 4, 3, nn.LinearOptions{})
	x := tensor.Normal(kx, 2, 4)
	loss := func(m nn.Linear, x *tensor.Tensor) *tensor.Tensor {
		mc := nn.CastToCompute(policy, m)
		fmt.Println(pytree.Format(mc))
		y := nn.CastToOutput(policy, mc.Forward(nn.CastToCompute(policy, x)))
		return tensor.Mean(tensor.Square(y))
	}
	l, g := autodiff.ValueAndGradWith(loss)(model, x)
	fmt.Println(policy)
	fmt.Println(l, pytree.Format(g))
	// Output:
	// Linear{W: bf16[4,3], B: bf16[3]}
	// params=float32,compute=bfloat16,output=float32
	// f32[] Linear{W: f32[4,3], B: f32[3]}
}
