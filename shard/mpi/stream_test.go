//go:build mpi

package mpi_test

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// tokenShards writes two token files (the same in every process) and
// returns their windows of 8 tokens at every offset.
func tokenShards(t *testing.T) *data.TokenWindows {
	dir := t.TempDir()
	var paths []string
	for k, n := range []int{300, 200} {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32((k*7919 + i*31) % 1000)
		}
		path := filepath.Join(dir, []string{"a.tok", "b.tok"}[k])
		w, err := data.CreateTokens(path, data.Uint16, 1000)
		require.NoError(t, err)
		require.NoError(t, w.Write(ids))
		require.NoError(t, w.Close())
		paths = append(paths, path)
	}
	d, err := data.OpenTokenWindows(paths, 8, 1)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func readStream(t *testing.T, s *data.Stream, from int64, n int) []data.Batch {
	r := s.Open(context.Background(), from)
	defer r.Close()
	var out []data.Batch
	for range n {
		b, err := r.Next()
		require.NoError(t, err)
		out = append(out, b)
	}
	return out
}

// TestStreamAcrossProcesses: a shuffled Stream over two token files,
// resumed mid-epoch in a job of several processes, gives the batches of
// one uninterrupted process: placed on the mesh with each process reading
// only the rows of its own devices, or split by Share with each process
// reading its part.
func TestStreamAcrossProcesses(t *testing.T) {
	m := guideMesh(t)
	d := tokenShards(t)
	key := tensor.NewKey(5)
	plain := data.Stream{Dataset: d, BatchSize: 16, Shuffle: true, Key: key}
	want := readStream(t, &plain, 0, 40) // 30 batches an epoch: crosses one

	rec := &recording{Dataset: d}
	sharded := plain
	sharded.Dataset, sharded.Sharding, sharded.Prefetch = rec, shard.NewSharding(m, shard.P("dp")), 2
	got := readStream(t, &sharded, 25, 15)
	mine := map[int]bool{}
	for dv, dev := range m.Devices() {
		if dev.IsLocal() {
			mine[m.Coords(dv)[0]] = true
		}
	}
	// (Prefetch reads a few batches ahead: those calls come after.)
	require.GreaterOrEqual(t, len(rec.calls), len(mine)*len(got))
	k := 0
	for i, b := range got {
		assert.Equal(t, want[25+i].X.Ints(), shard.Gather(b.X).Ints())
		assert.Equal(t, want[25+i].Y.Ints(), shard.Gather(b.Y).Ints())
		for part := range 4 {
			if mine[part] {
				assert.Equal(t, want[25+i].Indices[4*part:4*part+4], rec.calls[k], "process %d reads only its rows", shard.ProcessIndex())
				k++
			}
		}
	}

	shared := plain
	shared.Share = data.Share{Index: shard.ProcessIndex(), Count: shard.ProcessCount()}
	for i, b := range readStream(t, &shared, 25, 15) {
		var buf []byte
		for _, v := range b.X.Ints() {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(v))
		}
		var all []int
		for _, part := range shard.AllGatherProcesses(buf) {
			for j := 0; j < len(part); j += 4 {
				all = append(all, int(binary.LittleEndian.Uint32(part[j:])))
			}
		}
		assert.Equal(t, want[25+i].X.Ints(), all)
	}
}
