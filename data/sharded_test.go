package data

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// recording is a dataset that records the index lists it is asked for.
type recording struct {
	Dataset
	mu    sync.Mutex
	calls [][]int
}

func (r *recording) Batch(idx []int) (Batch, error) {
	r.mu.Lock()
	r.calls = append(r.calls, slices.Clone(idx))
	r.mu.Unlock()
	return r.Dataset.Batch(idx)
}

// TestLoaderSharding: a sharded loader gives the batches of a plain loader
// placed with shard.Put, and reads each distinct block once, for it alone.
func TestLoaderSharding(t *testing.T) {
	n := 48
	ds := &InMemory{X: tensor.Reshape(tensor.AsType(tensor.Arange(3*n), tensor.Float32), n, 3), Y: tensor.Arange(n)}
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	s := shard.NewSharding(mesh, shard.P("dp"))
	key := tensor.NewKey(3)
	plain := &Loader{Dataset: ds, BatchSize: 8, Shuffle: true, Key: key}
	rec := &recording{Dataset: ds}
	sharded := &Loader{Dataset: rec, BatchSize: 8, Shuffle: true, Key: key, Sharding: s, Prefetch: 1}
	want, got := collect(t, plain, 1), collect(t, sharded, 1)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].Indices, got[i].Indices)
		assert.Equal(t, "float32[8@dp,3]", got[i].X.Type())
		assert.Equal(t, "int32[8@dp]", got[i].Y.Type())
		assert.Equal(t, want[i].X.Float32s(), shard.Gather(got[i].X).Float32s())
		assert.Equal(t, want[i].Y.Ints(), shard.Gather(got[i].Y).Ints())
	}
	// 4 blocks of 2 rows per batch (the tp replicas share them).
	require.Len(t, rec.calls, 4*len(want))
	for k, c := range rec.calls {
		b := want[k/4].Indices
		assert.Equal(t, b[2*(k%4):2*(k%4)+2], c)
	}
}

func TestLoaderShardingErrors(t *testing.T) {
	ds := &InMemory{X: tensor.Zeros(tensor.Float32, 12, 4), Y: tensor.Zeros(tensor.Int32, 12)}
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	for _, tc := range []struct {
		batch int
		spec  shard.Spec
		want  string
	}{
		{6, shard.P("dp"), "a batch of 6 examples does not split into 4 parts over [dp]"},
		{4, shard.P(nil, "tp"), "splits dimension 1; a loader or stream splits batches along the first dimension only"},
	} {
		l := &Loader{Dataset: ds, BatchSize: tc.batch, Sharding: shard.NewSharding(mesh, tc.spec)}
		for _, err := range l.Epoch(0) {
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			break
		}
	}
}
