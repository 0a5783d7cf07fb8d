package shard_test

import (
	"fmt"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// A data-parallel step's gradients reduce-scattered in one group: each of
// 2 devices holds its own gradients of two parameters (a matrix and a
// bias) and receives its half of each sum, laid end to end in one vector.
func ExampleCtx_PsumScatterGroupStart() {
	mesh := shard.NewMesh([]int{2}, []string{"dp"})
	f := shard.Map(mesh, shard.P(), shard.P("dp"), func(c *shard.Ctx, _ *tensor.Tensor) *tensor.Tensor {
		k := float32(1 + c.AxisIndex("dp")) // device 0's gradients are 1x, device 1's 2x
		w := tensor.MulScalar(tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2), k)
		b := tensor.MulScalar(tensor.FromFloat32([]float32{10, 20}, 2), k)
		h := c.PsumScatterGroupStart([]*tensor.Tensor{w, b}, shard.Axes{"dp"}, []int{0, 0})
		// ... other work of the step here ...
		return h.Wait() // this device's row of w's sum, then its entry of b's
	})
	fmt.Println(shard.Gather(f(tensor.Zeros(tensor.Float32, 1))).Float32s())
	// Output: [3 6 30 9 12 60]
}
