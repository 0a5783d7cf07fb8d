package optim_test

import (
	"fmt"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// NFNets' recipe: adaptive gradient clipping before SGD with momentum. The
// column whose gradient is large against its weights is scaled down to
// 0.01 of the weights' norm; the other passes.
func ExampleAdaptiveGradClip() {
	type layer struct{ W *tensor.Tensor }
	params := layer{W: tensor.FromFloat32([]float32{3, 0, 4, 1}, 2, 2)} // [in, out]: column norms 5, 1
	grads := layer{W: tensor.FromFloat32([]float32{6, 0.001, 8, 0.002}, 2, 2)}
	clip := optim.AdaptiveGradClip(0.01, 1e-3)
	u, _ := clip.Update(grads, clip.Init(params), params)
	fmt.Printf("%.3f\n", u.(layer).W.Float32s())

	opt := optim.Chain(clip, optim.SGD(optim.Constant(0.1), optim.SGDOptions{Momentum: 0.9}))
	params, _ = optim.Step(opt, params, grads, opt.Init(params))
	fmt.Printf("%.4f\n", params.W.Float32s())
	// Output:
	// [0.030 0.001 0.040 0.002]
	// [2.9970 -0.0001 3.9960 0.9998]
}
