package shard_test

import (
	"fmt"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

type xw struct{ X, W *tensor.Tensor }

// A collective matmul written by hand: W's row blocks go around the ring
// of 4 devices, each step's shift started before the step's product and
// waited for after it, so the block travels while the device multiplies
// (shard.AllGatherMatMulRing is this recipe).
func ExampleCtx_RingShiftStart() {
	mesh := shard.NewMesh([]int{4}, []string{"d"})
	x := tensor.Reshape(tensor.AsType(tensor.Arange(32), tensor.Float32), 4, 8)
	w := tensor.Ones(tensor.Float32, 8, 3)
	specs := shard.Specs{"X": shard.P("d", nil), "W": shard.P("d", nil)}
	f := shard.Map(mesh, specs, shard.P("d", nil), func(c *shard.Ctx, in xw) *tensor.Tensor {
		n, i := c.AxisSize("d"), c.AxisIndex("d")
		w := in.W // this device's [2, 3] block of W's rows
		var y *tensor.Tensor
		for step := range n {
			var h *shard.Handle
			if step < n-1 {
				h = c.RingShiftStart(w, shard.Axes{"d"}, 1) // to the next device
			}
			j := ((i-step)%n + n) % n // the block at hand is W's rows 2j, 2j+1
			p := tensor.MatMul(tensor.SliceAxis(in.X, 1, 2*j, 2*j+2), w)
			if y == nil {
				y = p
			} else {
				y = tensor.Add(y, p)
			}
			if h != nil {
				w = h.Wait() // the previous device's block
			}
		}
		return y
	})
	y := f(xw{x, w})
	fmt.Println(y.Type())
	fmt.Println(shard.Gather(y).Float32s())
	fmt.Println(tensor.MatMul(x, w).Float32s())
	// Output:
	// float32[4@d,3]
	// [28 28 28 92 92 92 156 156 156 220 220 220]
	// [28 28 28 92 92 92 156 156 156 220 220 220]
}
