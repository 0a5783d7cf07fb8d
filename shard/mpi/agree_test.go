//go:build mpi

package mpi_test

import (
	"fmt"
	"time"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

// agreeHelper runs the scenarios in which the processes of a job issue
// different operations, which the fingerprint every exchange carries
// catches in the default mode (TestFailuresEndTheJob starts them under
// mpirun with one device per process, without GONOX_DEBUG). m is a mesh
// over every device, x a float32 tensor of ones with a row per device.
func agreeHelper(kind string, m *shard.Mesh, x *tensor.Tensor) {
	rank := mpi.Rank()
	psum := func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") }
	// Two arrays of one shape and sharding, different values.
	two := func() (*tensor.Tensor, *tensor.Tensor) {
		n := len(shard.Devices())
		s := shard.NewSharding(m, shard.P("d"))
		return shard.Put(tensor.Full(tensor.Float32, 1, n, 4), s), shard.Put(tensor.Full(tensor.Float32, 2, n, 4), s)
	}
	switch kind {
	case "agree_mesh_order":
		// Process 1 lists the devices in the other order: its psum would
		// pair other blocks.
		devs := shard.Devices()
		if rank == 1 {
			devs[0], devs[1] = devs[1], devs[0]
		}
		mo := shard.NewMeshOn(devs, []int{len(devs)}, []string{"d"})
		y := shard.Map(mo, shard.P("d"), shard.P(), psum)(x)
		fmt.Printf("process %d: %v\n", rank, shard.Gather(y).Float32s())
	case "agree_pmax":
		shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			if c.Device().Process() == 1 {
				return c.Pmax(b, "d")
			}
			return c.Psum(b, "d")
		})(x)
	case "agree_dtype":
		xi := tensor.AsType(x, tensor.Int32)
		if rank == 1 {
			shard.Map(m, shard.P("d"), shard.P(), psum)(xi)
		} else {
			shard.Map(m, shard.P("d"), shard.P(), psum)(x)
		}
	case "agree_shape":
		n := len(shard.Devices())
		cols := 4
		if rank == 1 {
			cols = 3
		}
		shard.Map(m, shard.P("d"), shard.P(), psum)(tensor.Ones(tensor.Float32, n, cols))
	case "agree_gather_order":
		// A loop over a Go map gathers in an order of its own on every
		// process.
		a, b := two()
		if rank == 1 {
			a, b = b, a
		}
		ga, gb := shard.Gather(a), shard.Gather(b)
		fmt.Printf("process %d: %v %v\n", rank, ga.Float32s(), gb.Float32s())
	case "agree_gather_computed":
		// The same with arrays computed on the mesh, in the default mode.
		a, b := m2(m, two)
		if rank == 1 {
			a, b = b, a
		}
		ga, gb := shard.Gather(a), shard.Gather(b)
		fmt.Printf("process %d: %v %v\n", rank, ga.Float32s(), gb.Float32s())
	case "agree_reshard_order":
		a, b := m2(m, two)
		r := shard.NewSharding(m, shard.P(nil, "d"))
		if rank == 1 {
			a, b = b, a
		}
		ra, rb := shard.Reshard(a, r), shard.Reshard(b, r)
		fmt.Printf("process %d: %v %v\n", rank, shard.Gather(ra).Float32s(), shard.Gather(rb).Float32s())
	case "agree_same_order":
		// The control: arrays gathered and resharded in one order,
		// computed (not placed) so that they carry numbers.
		a, b := m2(m, two)
		r := shard.NewSharding(m, shard.P(nil, "d"))
		ra, rb := shard.Reshard(a, r), shard.Reshard(b, r)
		fmt.Printf("process %d: %v %v\n", rank, shard.Gather(ra).Float32s(), shard.Gather(rb).Float32s())
	case "steps":
		// Psums for a minute, one every 20 ms: cluster_test.go takes a
		// link down meanwhile.
		for i := range 3000 {
			y := shard.Map(m, shard.P("d"), shard.P(), psum)(x)
			if i%50 == 0 {
				fmt.Printf("process %d: step %d: %v\n", rank, i, shard.Gather(y).Float32s())
			}
			time.Sleep(20 * time.Millisecond)
		}
	default:
		panic("unknown helper " + kind)
	}
}

// m2 returns the arrays two places, each doubled by a Map (so computed on
// the mesh, not placed from the host).
func m2(m *shard.Mesh, two func() (*tensor.Tensor, *tensor.Tensor)) (*tensor.Tensor, *tensor.Tensor) {
	a, b := two()
	double := shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return tensor.Add(b, b) })
	return double(a), double(b)
}
