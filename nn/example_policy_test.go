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

// A policy set once on a whole model: its attention and linear layers
// compute their products in bfloat16 from the float32 weights, the rest
// in float32, and the gradients are float32.
func ExampleWithPolicy() {
	type Model struct {
		Norm nn.LayerNorm
		Attn nn.MultiHeadAttention
		Head nn.Linear
	}
	k := tensor.NewKey(0).Split(3)
	model := Model{
		Norm: nn.NewLayerNorm(8, nn.LayerNormOptions{}),
		Attn: nn.NewMultiHeadAttention(k[0], 8, 2, nn.AttentionOptions{Causal: true}),
		Head: nn.NewLinear(k[1], 8, 3, nn.LinearOptions{}),
	}
	model = nn.WithPolicy(model, nn.MixedBFloat16)
	fmt.Println(model.Attn.Policy(), model.Head.Policy() == nn.MixedBFloat16)
	x := tensor.Normal(k[2], 2, 5, 8) // [batch, length, features]
	loss := func(m Model) *tensor.Tensor {
		y := m.Head.Forward(tensor.Add(x, m.Attn.Forward(m.Norm.Forward(x))))
		fmt.Println("output", y)
		return tensor.Mean(tensor.Square(y))
	}
	l, g := autodiff.ValueAndGrad(loss)(model)
	fmt.Println(l, g.Attn.QueryProj.W, g.Head.W)
	// Output:
	// params=float32,compute=bfloat16,output=float32 true
	// output f32[2,5,3]
	// f32[] f32[8,8] f32[8,3]
}
