//go:build mpi

package mpi_test

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

// sumsInRankOrder reports whether gonox's float32 sums over every process
// of the job are in rank order: two processes (a sum of two values is the
// same in either order), or shared memory on and either one host
// (shared-memory collectives) or several hosts of which one holds two or
// more processes, each host's processes consecutive ranks (hierarchical
// collectives).
func sumsInRankOrder() bool {
	n := mpi.Size()
	if n <= 2 {
		return true
	}
	if os.Getenv(mpi.SharedMemoryEnv) == "0" {
		return false
	}
	hosts := mpi.Hosts()
	wide, seen := false, map[int]bool{}
	for p, h := range hosts {
		if p > 0 && h != hosts[p-1] {
			if seen[h] {
				return false
			}
		} else if p > 0 {
			wide = true
		}
		seen[h] = true
	}
	return len(seen) == 1 || wide
}

// treeSum adds xs in float32 as gonox's sums do: groups of eight, four,
// two or one operands, each a balanced tree, added one after another (the
// one-process psum over devices; the shared-memory collectives over
// processes in rank order).
func treeSum(xs []float32) float32 {
	var acc float32
	for i := 0; len(xs) > 0; i++ {
		k := 1
		switch {
		case len(xs) >= 8:
			k = 8
		case len(xs) >= 4:
			k = 4
		case len(xs) >= 2:
			k = 2
		}
		g := slices.Clone(xs[:k])
		for len(g) > 1 {
			for j := range len(g) / 2 {
				g[j] = g[2*j] + g[2*j+1]
			}
			g = g[:len(g)/2]
		}
		if i == 0 {
			acc = g[0]
		} else {
			acc += g[0]
		}
		xs = xs[k:]
	}
	return acc
}

// TestSumsInRankOrderAcrossProcesses: Psum and PsumScatter over every
// device of the job equal, bit for bit, the float32 sum (treeSum) of each
// process's devices' blocks taken over the processes in rank order, which
// is the one-process psum with one device per process; on several hosts
// through the hierarchical collectives. Values of very different
// magnitudes make the order show.
func TestSumsInRankOrderAcrossProcesses(t *testing.T) {
	if !sumsInRankOrder() {
		t.Skipf("sums over %d processes on hosts %v are in MPI's order here", mpi.Size(), mpi.Hosts())
	}
	m, n := lineMesh()
	per := n / mpi.Size()
	const cols = 4096 * 3
	r := rand.New(rand.NewPCG(9, 10))
	d := make([]float32, n*cols)
	for i := range d {
		d[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(12)-6)))
	}
	x := tensor.FromFloat32(d, n, cols)
	want := make([]float32, cols)
	procs := make([]float32, mpi.Size())
	devs := make([]float32, per)
	for j := range want {
		for p := range procs {
			for k := range devs {
				devs[k] = d[(p*per+k)*cols+j]
			}
			procs[p] = treeSum(devs)
		}
		want[j] = treeSum(procs)
	}
	spec := shard.P("d")
	psum := floats(shard.Map(m, spec, shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.Psum(b, "d")
	})(x))
	require.Len(t, psum, cols)
	assert.Equal(t, want, psum, "psum")
	scattered := floats(shard.Map(m, spec, spec, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.PsumScatter(b, shard.Axes{"d"}, 1, true)
	})(x))
	assert.Equal(t, want, scattered, "psum_scatter")
	started := floats(shard.Map(m, spec, spec, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.PsumScatterStart(b, shard.Axes{"d"}, 1, true).Wait()
	})(x))
	assert.Equal(t, want, started, "started psum_scatter")
}
