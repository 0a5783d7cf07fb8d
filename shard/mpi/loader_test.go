//go:build mpi

package mpi_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

type recording struct {
	data.Dataset
	mu    sync.Mutex
	calls [][]int
}

func (r *recording) Batch(idx []int) (data.Batch, error) {
	r.mu.Lock()
	r.calls = append(r.calls, slices.Clone(idx))
	r.mu.Unlock()
	return r.Dataset.Batch(idx)
}

// TestLoaderReadsOnlyThisProcessShare: with a Sharding, each process reads
// the examples of its own devices' blocks, and the batches equal the
// one-process ones.
func TestLoaderReadsOnlyThisProcessShare(t *testing.T) {
	m := guideMesh(t)
	n := 64
	ds := &data.InMemory{X: tensor.Reshape(tensor.AsType(tensor.Arange(2*n), tensor.Float32), n, 2), Y: tensor.Arange(n)}
	rec := &recording{Dataset: ds}
	key := tensor.NewKey(9)
	plain := &data.Loader{Dataset: ds, BatchSize: 16, Shuffle: true, Key: key}
	sharded := &data.Loader{Dataset: rec, BatchSize: 16, Shuffle: true, Key: key, Sharding: shard.NewSharding(m, shard.P("dp"))}
	var want, got []data.Batch
	for b, err := range plain.Epoch(2) {
		require.NoError(t, err)
		want = append(want, b)
	}
	for b, err := range sharded.Epoch(2) {
		require.NoError(t, err)
		got = append(got, b)
	}
	require.Len(t, got, len(want))
	// Blocks of dp rows this process holds: dp index of its devices.
	mine := map[int]bool{}
	for d, dev := range m.Devices() {
		if dev.IsLocal() {
			mine[m.Coords(d)[0]] = true
		}
	}
	require.Len(t, rec.calls, len(mine)*len(want))
	k := 0
	for i := range want {
		assert.Equal(t, want[i].X.Float32s(), shard.Gather(got[i].X).Float32s())
		assert.Equal(t, want[i].Y.Ints(), shard.Gather(got[i].Y).Ints())
		for part := 0; part < 4; part++ {
			if mine[part] {
				assert.Equal(t, want[i].Indices[4*part:4*part+4], rec.calls[k])
				k++
			}
		}
	}
}
