//go:build mpi

package mpi_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

// TestSharedMemoryMatchesMPI runs each collective on random data over a
// mesh of every device of the job twice: on a mesh whose groups move data
// through shared memory (the default on one host) and on one made with
// GONOX_MPI_SHM=0, whose groups use MPI's collectives. Both must agree:
// exactly for the collectives that move data, and for sums to float32
// rounding (MPI may add in another order than rank order).
func TestSharedMemoryMatchesMPI(t *testing.T) {
	n := len(shard.Devices())
	rows, cols := 3*n, 120*n // split n ways on both axes; 74 KB a device of 8
	rng := rand.New(rand.NewPCG(7, 7))
	xd := make([]float32, n*rows*cols)
	for i := range xd {
		xd[i] = float32(rng.NormFloat64())
	}
	x := tensor.FromFloat32(xd, n*rows, cols)
	type collective struct {
		name string
		out  shard.Spec
		f    func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor
		sum  bool
	}
	cases := []collective{
		{"Psum", shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") }, true},
		{"PsumScatter", shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.PsumScatter(b, shard.Axes{"d"}, 1, true)
		}, true},
		{"Pmax", shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Pmax(b, "d") }, false},
		{"AllGather", shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.AllGather(b, shard.Axes{"d"}, 1, true)
		}, false},
		{"AllToAll", shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.AllToAll(b, shard.Axes{"d"}, 0, 1, true)
		}, false},
	}
	results := map[string][][]float32{}
	for _, shm := range []string{"1", "0"} {
		t.Setenv(mpi.SharedMemoryEnv, shm) // read when the mesh is made
		m := shard.NewMesh([]int{n}, []string{"d"})
		xs := shard.Put(x, shard.NewSharding(m, shard.P("d")))
		for _, c := range cases {
			got := floats(shard.Map(m, shard.P("d"), c.out, c.f)(xs))
			results[c.name] = append(results[c.name], got)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			shm, coll := results[c.name][0], results[c.name][1]
			if !c.sum {
				assert.Equal(t, coll, shm)
				return
			}
			assert.InDeltaSlice(t, coll, shm, 1e-4)
			if mpi.Size() <= 2 {
				assert.Equal(t, coll, shm, "two processes add in either order alike")
			}
		})
	}
	// Sizes that change from call to call make the region grow; every
	// size still gives the sum.
	m := shard.NewMesh([]int{n}, []string{"d"})
	for _, k := range []int{1, 5000, 3, 300000} {
		t.Run(fmt.Sprintf("Psum/%d", k), func(t *testing.T) {
			y := shard.Put(tensor.Full(tensor.Float32, 0.5, n*k), shard.NewSharding(m, shard.P("d")))
			got := floats(shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") })(y))
			for i, v := range got {
				if v != float32(n)/2 {
					t.Fatalf("element %d of %d: %v, want %v", i, k, v, float32(n)/2)
				}
			}
		})
	}
}
