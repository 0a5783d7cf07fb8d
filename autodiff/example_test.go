package autodiff_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// A model is a plain struct; ValueAndGrad returns the gradient as a value
// of the same type, with nil for the leaves that are not float32.
func ExampleValueAndGrad() {
	type Linear struct {
		W, B  *tensor.Tensor
		Steps *tensor.Tensor // int32: not differentiated
	}
	model := Linear{
		W:     tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2),
		B:     tensor.FromFloat32([]float32{0.5, -0.5}),
		Steps: tensor.ScalarInt(3),
	}
	x := tensor.FromFloat32([]float32{1, 1}, 1, 2)
	loss := func(m Linear) *tensor.Tensor {
		y := tensor.Add(tensor.MatMul(x, m.W), m.B) // [4.5, 5.5]
		return tensor.Sum(tensor.Square(y))         // 4.5² + 5.5²
	}
	value, grad := autodiff.ValueAndGrad(loss)(model)
	fmt.Printf("loss %g\n", value.Item())
	fmt.Printf("dW %g\n", grad.W)
	fmt.Printf("dB %g\n", grad.B)
	fmt.Println("dSteps", grad.Steps)
	// Output:
	// loss 50.5
	// dW [[ 9 11]
	//  [ 9 11]]
	// dB [ 9 11]
	// dSteps <nil>
}

// Checkpoint recomputes a block's intermediate values during the backward
// pass instead of keeping them; Residuals shows the memory that saves.
func ExampleCheckpoint() {
	w := tensor.Full(tensor.Float32, 0.1, 64, 64)
	block := func(x *tensor.Tensor) *tensor.Tensor {
		for range 4 {
			x = tensor.Tanh(tensor.MatMul(x, w))
		}
		return x
	}
	x := tensor.Ones(tensor.Float32, 32, 64)
	loss := func(b func(*tensor.Tensor) *tensor.Tensor) func(*tensor.Tensor) *tensor.Tensor {
		return func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(b(x)) }
	}
	plain := autodiff.Residuals(loss(block), x)
	remat := autodiff.Residuals(loss(autodiff.Checkpoint(block, autodiff.NothingSaveable)), x)
	fmt.Println("activations kept without checkpoint:", plain.Activations().Bytes)
	fmt.Println("activations kept with checkpoint:   ", remat.Activations().Bytes)

	g1 := autodiff.Grad(loss(block))(x)
	g2 := autodiff.Grad(loss(autodiff.Checkpoint(block, autodiff.NothingSaveable)))(x)
	fmt.Println("same gradient:", fmt.Sprint(g1.Float32s()) == fmt.Sprint(g2.Float32s()))
	// Output:
	// activations kept without checkpoint: 32768
	// activations kept with checkpoint:    0
	// same gradient: true
}

// CustomVJP gives a function a hand-written derivative: here the gradient
// passes through unchanged but clipped to [-1, 1].
func ExampleCustomVJP() {
	clipGrad := autodiff.CustomVJP("clip_grad",
		func(x *tensor.Tensor) (*tensor.Tensor, struct{}) { return x, struct{}{} },
		func(_ struct{}, g *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(g, -1, 1) })
	x := tensor.FromFloat32([]float32{1, 2, 3})
	g := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.MulScalar(clipGrad(x), 5))
	})(x)
	fmt.Printf("%g\n", g)
	// Output:
	// [1 1 1]
}

// A training step that donates its gradients and lets the backward pass
// recycle the activations allocates almost no tensor storage in the
// steady state: each step reuses the previous one's.
func ExampleRecycleIntermediates() {
	w := tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	x := tensor.FromFloat32([]float32{1, 0, 0, 1, 1, 1}, 3, 2)
	loss := func(w, x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Relu(tensor.MatMul(x, w))) }
	step := autodiff.ValueAndGradWith(loss, autodiff.RecycleIntermediates())
	for range 3 {
		l, g := step(w, x)
		fmt.Printf("%g %g\n", l, g)
		tensor.Donate(l)
		autodiff.DonateTree(g)
	}
	// Output:
	// 20 [[2 2]
	//  [2 2]]
	// 20 [[2 2]
	//  [2 2]]
	// 20 [[2 2]
	//  [2 2]]
}
