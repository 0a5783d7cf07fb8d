//go:build mpi

package mpi

import (
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSharedWindow checks the MPI side of shard.SharedMemoryGroup under
// mpirun: the processes of a job on one host form a shared group; every
// process sees the bytes the others store into their segments past a
// fence, in a first window and in a larger one that replaces it; and
// GONOX_MPI_SHM=0, on every process or on one, turns shared groups off.
func TestSharedWindow(t *testing.T) {
	w := World()
	if w.Size() < 2 {
		t.Skip("needs mpirun -np 2 or more")
	}
	t.Setenv(SharedMemoryEnv, "0")
	off := w.Dup()
	assert.Nil(t, sharedOf(off), "turned off")
	// Turned off on the last process only: off for all, and no process
	// is left in a collective the others never make.
	if w.Rank() == w.Size()-1 {
		t.Setenv(SharedMemoryEnv, "0")
	} else {
		t.Setenv(SharedMemoryEnv, "1")
	}
	assert.Nil(t, sharedOf(off), "turned off on one process")
	off.Free()
	t.Setenv(SharedMemoryEnv, "1")
	g := sharedOf(w.Dup())
	if ls := os.Getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); ls != "" && ls != strconv.Itoa(w.Size()) {
		// Hosts of their own (shard/mpi/cluster.sh): a group spanning
		// them has no shared memory.
		assert.Nil(t, g, "the processes of this job run on several hosts")
		return
	}
	require.NotNil(t, g, "every process of this job runs on one host")
	for _, n := range []int{4096, 1 << 20} {
		seg := g.Share(n)
		require.Len(t, seg, w.Size())
		for q, s := range seg {
			require.Len(t, s, n)
			assert.Zero(t, uintptr(ptr(s))%64, "segment %d is 64-byte aligned", q)
		}
		mine := seg[w.Rank()]
		for i := range mine {
			mine[i] = byte(7*w.Rank() + i)
		}
		g.Fence()
		for q, s := range seg {
			for i, v := range s {
				if v != byte(7*q+i) {
					t.Fatalf("window of %d bytes: byte %d of process %d's segment is %d, want %d", n, i, q, v, byte(7*q+i))
				}
			}
		}
		g.Fence() // read before the next window replaces this one
	}
}
