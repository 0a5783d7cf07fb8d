package optim_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Line is a model: y = W·x + B.
type Line struct {
	W, B *tensor.Tensor
}

// A training loop: gradients from autodiff.ValueAndGrad, updates from Adam.
// Gradients and updates have the model's own type.
func Example() {
	x := tensor.FromFloat32([]float32{-1, 0, 1, 2}, 4)
	y := tensor.FromFloat32([]float32{-1, 1, 3, 5}, 4) // y = 2x + 1

	lossAndGrad := autodiff.ValueAndGrad(func(m Line) *tensor.Tensor {
		return tensor.MSE(tensor.Add(tensor.Mul(m.W, x), m.B), y)
	})

	model := Line{W: tensor.Scalar(0), B: tensor.Scalar(0)}
	opt := optim.Adam(optim.Constant(0.1))
	state := opt.Init(model)
	for step := range 300 {
		loss, grads := lossAndGrad(model)
		model, state = optim.Step(opt, model, grads, state)
		if step%100 == 0 {
			fmt.Printf("step %3d  loss %.4f\n", step, loss.Item())
		}
	}
	fmt.Printf("W %.3f  B %.3f\n", model.W.Item(), model.B.Item())
	// Output:
	// step   0  loss 9.0000
	// step 100  loss 0.0002
	// step 200  loss 0.0000
	// W 2.000  B 1.000
}

// The learning rate of a run with 100 warmup steps and 1000 in all.
func ExampleWarmupCosineDecay() {
	lr := optim.WarmupCosineDecay(0, 1e-3, 100, 1000, 1e-5)
	for _, step := range []int{0, 50, 100, 550, 999, 1000, 5000} {
		fmt.Printf("step %4d: %.6f\n", step, lr(step))
	}
	// Output:
	// step    0: 0.000000
	// step   50: 0.000500
	// step  100: 0.001000
	// step  550: 0.000505
	// step  999: 0.000010
	// step 1000: 0.000010
	// step 5000: 0.000010
}

// Clipping and AdamW chained, with weight decay on matrices only. The
// gradient's norm is 82.5, so it is clipped to norm 1; Adam's first step is
// then ±lr per element whatever the gradient's size, and W also decays by
// lr·0.1·W. Chain's state holds one state per link.
func ExampleChain() {
	type Layer struct{ W, B *tensor.Tensor }
	params := Layer{W: tensor.Full(tensor.Float32, 1, 2, 2), B: tensor.Full(tensor.Float32, 1, 2)}
	grads := Layer{W: tensor.Full(tensor.Float32, 30, 2, 2), B: tensor.Full(tensor.Float32, 40, 2)}

	matrices := func(_ pytree.Path, x *tensor.Tensor) bool { return x.Rank() >= 2 }
	opt := optim.Chain(
		optim.ClipByGlobalNorm(1),
		optim.AdamW(optim.Constant(0.01), optim.AdamWOptions{WeightDecay: 0.1, Mask: matrices}),
	)
	state := opt.Init(params)
	params, state = optim.Step(opt, params, grads, state)

	fmt.Printf("W %.3f\nB %.3f\n", params.W, params.B)
	fmt.Println(pytree.Format(state))
	// Output:
	// W [[0.989 0.989]
	//  [0.989 0.989]]
	// B [0.990 0.990]
	// [
	//   EmptyState{},
	//   AdamState{
	//     Count: i32[],
	//     Mu: Layer{W: f32[2,2], B: f32[2]},
	//     Nu: Layer{W: f32[2,2], B: f32[2]},
	//   },
	// ]
}

// Gradient accumulation: four micro-batches make one SGD step with their
// mean gradient.
func ExampleMultiSteps() {
	opt := optim.MultiSteps(optim.SGD(optim.Constant(1)), 4)
	p := tensor.Scalar(0)
	state := opt.Init(p)
	for i, g := range []float32{1, 2, 3, 6} {
		var u any
		u, state = opt.Update(tensor.Scalar(g), state, p)
		p = optim.Apply(p, u)
		fmt.Printf("micro-batch %d: update %g, updated %v\n", i, u.(*tensor.Tensor).Item(), state.(optim.MultiStepsState).HasUpdated())
	}
	// Output:
	// micro-batch 0: update 0, updated false
	// micro-batch 1: update 0, updated false
	// micro-batch 2: update 0, updated false
	// micro-batch 3: update -3, updated true
}

// An exponential moving average of the parameters, for evaluation.
func ExampleNewEMA() {
	p := Line{W: tensor.Scalar(1), B: tensor.Scalar(0)}
	ema := optim.NewEMA(p, 0.5, true)
	for _, w := range []float32{1, 2, 4} {
		p.W = tensor.Scalar(w)
		ema = ema.Update(p)
	}
	// debiased: (0.25·1 + 0.5·2 + 1·4)·0.5 / (1 - 0.5³)
	fmt.Printf("%.4f\n", ema.Params().W.Item())
	// Output:
	// 3.0000
}
