package shard_test

import (
	"fmt"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// A sharded optimizer step: each of 2 devices updates its half of a
// replicated parameter with Adam, which writes it straight into the
// device's block of the all-gather's result, and the gather copies
// nothing.
func ExampleCtx_AllGatherInvariantTarget() {
	mesh := shard.NewMesh([]int{2}, []string{"dp"})
	p := tensor.FromFloat32([]float32{1, 2, 3, 4}, 4)
	f := shard.Map(mesh, shard.P(), shard.P(), func(c *shard.Ctx, p *tensor.Tensor) *tensor.Tensor {
		i := c.AxisIndex("dp")
		own := tensor.SliceAxis(p, 0, 2*i, 2*i+2) // this device's half
		t := c.AllGatherInvariantTarget(tensor.Float32, own.Shape(), shard.Axes{"dp"}, 0, true)
		adam := optim.Adam(optim.Constant(0.5))
		g := tensor.OnesLike(own)
		own, _ = optim.StepInto(t.Block(), adam, own, g, adam.Init(own)) // written into t.Block()
		return t.Start(own).Wait()
	})
	fmt.Println(f(p).Float32s())
	// Output: [0.5 1.5 2.5 3.5]
}
