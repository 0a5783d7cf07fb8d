package mpi_test

import (
	"fmt"
	"log"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

// A data-parallel sum over every device of the job. Built with -tags mpi
// and started with mpirun -np 2, the devices are those of both processes;
// alone (or without the tag), the 8 simulated devices of this one. A real
// main also defers mpi.Finalize().
func Example() {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	n := len(shard.Devices())
	mesh := shard.NewMesh([]int{n}, []string{"dp"})
	x := shard.Put(tensor.Ones(tensor.Float32, n, 3), shard.NewSharding(mesh, shard.P("dp")))
	sum := shard.Map(mesh, shard.P("dp"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.Psum(b, "dp")
	})(x)
	fmt.Println(x.Type() == fmt.Sprintf("float32[%d@dp,3]", n))
	fmt.Println(tensor.MulScalar(shard.Gather(sum), 1/float32(n)).Float32s())
	// Output:
	// true
	// [1 1 1]
}
