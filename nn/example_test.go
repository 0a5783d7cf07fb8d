package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Build an MLP and look at it: a model is a plain struct, and pytree.Format
// prints it the way Equinox prints a module.
func ExampleNewMLP() {
	key := tensor.NewKey(0)
	model := nn.NewMLP(key, []int{32, 128, 256, 128, 4}, nn.MLPOptions{Activation: nn.Gelu})
	fmt.Println(pytree.Format(model))
	fmt.Println(len(pytree.Leaves(model)), "parameter tensors")
	// Output:
	// MLP{
	//   Layers: [
	//     Linear{W: f32[32,128], B: f32[128]},
	//     Linear{W: f32[128,256], B: f32[256]},
	//     Linear{W: f32[256,128], B: f32[128]},
	//     Linear{W: f32[128,4], B: f32[4]},
	//   ],
	//   Activation: Gelu,
	//   FinalActivation: Identity,
	// }
	// 8 parameter tensors
}

// A forward pass takes a batch: the leading dimensions are batch dimensions.
func ExampleMLP_Forward() {
	key, xkey := tensor.NewKey(42).Split2()
	model := nn.NewMLP(key, []int{3, 16, 2}, nn.MLPOptions{})
	x := tensor.Normal(xkey, 4, 3) // 4 examples of 3 features
	y := model.Forward(x)
	fmt.Println(x, "->", y)
	fmt.Printf("%.4f\n", y)
	// Output:
	// f32[4,3] -> f32[4,2]
	// [[-0.0122 -0.2182]
	//  [ 0.4925 -0.1204]
	//  [ 0.2908 -0.0247]
	//  [ 0.2106 -0.1354]]
}

// One step of gradient descent: autodiff.ValueAndGradWith differentiates
// with respect to every float tensor of the model, and returns the gradient
// as a value of the model's own type. pytree.MapN applies the update leaf by
// leaf.
func ExampleMLP_gradientStep() {
	kmodel, kx := tensor.NewKey(1).Split2()
	model := nn.NewMLP(kmodel, []int{2, 8, 1}, nn.MLPOptions{Activation: nn.Tanh})
	x := tensor.Normal(kx, 16, 2)
	y := tensor.Sum(x, -1)             // learn the sum of the inputs
	target := tensor.Reshape(y, 16, 1) // f32[16,1]

	loss := func(m nn.MLP, x *tensor.Tensor) *tensor.Tensor {
		return tensor.MSE(m.Forward(x), target)
	}
	lossAndGrad := autodiff.ValueAndGradWith(loss)

	l, grad := lossAndGrad(model, x)
	fmt.Printf("loss %.4f\n", l.Item())
	fmt.Printf("gradient: %T %s\n", grad, pytree.Format(grad.Layers))
	model = pytree.MapN(func(p []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sub(p[0], tensor.MulScalar(p[1], 0.1)) // p[0] param, p[1] gradient
	}, model, grad)
	fmt.Printf("loss after one step %.4f\n", loss(model, x).Item())
	// Output:
	// loss 3.0581
	// gradient: nn.MLP [Linear{W: f32[2,8], B: f32[8]}, Linear{W: f32[8,1], B: f32[1]}]
	// loss after one step 2.4186
}

// Sequential composes Modules; Dropout takes its randomness from the key
// passed to Forward, and InferenceMode turns it off for evaluation.
func ExampleSequential() {
	ks := tensor.NewKey(0).Split(3)
	seq := nn.NewSequential(
		nn.NewLinear(ks[0], 4, 8, nn.LinearOptions{}),
		nn.Relu,
		nn.NewDropout(0.5),
		nn.NewLayerNorm(8, nn.LayerNormOptions{}),
		nn.NewLinear(ks[1], 8, 2, nn.LinearOptions{}),
	)
	x := tensor.Normal(ks[2], 3, 4)
	train1 := seq.Forward(x, tensor.NewKey(10))
	train2 := seq.Forward(x, tensor.NewKey(11))
	eval := nn.InferenceMode(seq, true)
	fmt.Println(pytree.Format(eval.Layers[2]))
	fmt.Println("different keys, different masks:", !pytree.Equal(train1, train2, 0, 0))
	fmt.Println("evaluation ignores the key:", pytree.Equal(eval.Forward(x, tensor.NewKey(10)), eval.Forward(x, tensor.NewKey(11)), 0, 0))
	// Output:
	// Dropout{Rate: 0.5, Inference: true}
	// different keys, different masks: true
	// evaluation ignores the key: true
}

// A mixture of experts returns its output with the auxiliary loss and the
// routing decisions.
func ExampleMoE() {
	key, xkey := tensor.NewKey(0).Split2()
	moe := nn.NewMoE(key, 8, 32, 4, nn.MoEOptions{TopK: 2, CapacityFactor: 1.0})
	x := tensor.Normal(xkey, 2, 16, 8) // 2 sequences of 16 tokens
	out := moe.Forward(x)
	fmt.Println("output:", out.Output)
	fmt.Println("capacity per expert:", out.Capacity)
	fmt.Println("routed to each expert:", out.Load.Ints())
	fmt.Println("computed by each expert:", out.Processed.Ints())
	fmt.Printf("aux loss: %.4f\n", out.AuxLoss.Item())
	// Output:
	// output: f32[2,16,8]
	// capacity per expert: 16
	// routed to each expert: [17 11 18 18]
	// computed by each expert: [16 11 16 16]
	// aux loss: 1.0046
}

// Logical axis names set at construction travel with the parameters, their
// gradients and their updates, for shard's rules to map onto a mesh.
func ExampleMegatronAxes() {
	mlp := nn.NewMLP(tensor.NewKey(0), []int{16, 64, 16}, nn.MLPOptions{Axes: nn.MegatronAxes(2)})
	paths, leaves := pytree.LeavesWithPath(mlp)
	for i, p := range paths {
		fmt.Println(p, leaves[i], leaves[i].LogicalAxes())
	}
	// Output:
	// Layers[0].W f32[16,64] [embed mlp]
	// Layers[0].B f32[64] [mlp]
	// Layers[1].W f32[64,16] [mlp embed]
	// Layers[1].B f32[16] [embed]
}
