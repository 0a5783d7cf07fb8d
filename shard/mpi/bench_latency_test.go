//go:build mpi

package mpi_test

import (
	"testing"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkPsumLatency: a Psum of one float32 per device over every
// process (through shared memory, and through MPI's collectives with
// mpicoll), in µs per call: the latency of a collective between
// processes, of which the fingerprint the processes compare before every
// exchange (one all-gather of 24 bytes) is a part.
func BenchmarkPsumLatency(b *testing.B) {
	for _, c := range []struct{ name, shm string }{{"gonox", "1"}, {"mpicoll", "0"}} {
		b.Setenv(mpi.SharedMemoryEnv, c.shm) // read when the mesh is made
		m := shard.NewMesh([]int{len(shard.Devices())}, []string{"d"})
		xs := shard.Put(tensor.Ones(tensor.Float32, len(shard.Devices())), shard.NewSharding(m, shard.P("d")))
		psum := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") })
		b.Run(c.name, func(b *testing.B) {
			loopTimes(b, func() { tensor.Donate(psum(xs)) }, "µs", func(s float64) float64 { return s * 1e6 })
		})
	}
}
