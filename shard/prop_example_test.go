package shard_test

import (
	"fmt"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Ops compute on placed tensors; Explain shows, per op, the types and the
// collectives that propagation inserted.
func ExampleExplain() {
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	x := shard.Put(tensor.Ones(tensor.Float32, 1024, 4096), shard.NewSharding(mesh, shard.P("dp", nil)))
	w := shard.Put(tensor.Ones(tensor.Float32, 4096, 256), shard.NewSharding(mesh, shard.P(nil, "tp")))
	var y, total *tensor.Tensor
	fmt.Print(shard.Explain(mesh, func() {
		y = tensor.MatMul(x, w)                      // no communication
		total = tensor.MulScalar(tensor.Sum(y), 0.5) // local sums, then one psum
	}))
	fmt.Println(y.Type(), total.Item())
	// Output:
	// matmul                float32[1024@dp,4096], float32[4096,256@tp] -> float32[1024@dp,256@tp]
	// reduce_sum            float32[1024@dp,256@tp] -> float32[]{partial (dp,tp)}
	// mul                   float32[]{partial (dp,tp)}, float32[] -> float32[]
	//     psum 7 B/device
	// float32[1024@dp,256@tp] 5.36870912e+08
}
