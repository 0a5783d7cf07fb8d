package data

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// labelled is an in-memory dataset whose example i is the row [i, i+0.5]
// with label i, so a batch shows its indices.
func labelled(n int) *InMemory {
	x := make([]float32, 2*n)
	y := make([]int32, n)
	for i := range n {
		x[2*i], x[2*i+1], y[i] = float32(i), float32(i)+0.5, int32(i)
	}
	return FromTensors(tensor.FromFloat32(x, n, 2), tensor.FromInt32(y, n))
}

// read returns count batches of s from position on.
func read(t *testing.T, s *Stream, position int64, count int) []Batch {
	t.Helper()
	r := s.Open(context.Background(), position)
	defer r.Close()
	var out []Batch
	for range count {
		b, err := r.Next()
		require.NoError(t, err)
		out = append(out, b)
	}
	assert.Equal(t, position+int64(count), r.Position())
	return out
}

func TestStreamInOrder(t *testing.T) {
	s := &Stream{Dataset: labelled(10), BatchSize: 3}
	assert.Equal(t, int64(3), s.NumBatches())
	bs := read(t, s, 0, 7)
	for p, b := range bs {
		step := p % 3
		assert.Equal(t, []int{3 * step, 3*step + 1, 3*step + 2}, b.Indices, "position %d", p)
		assert.Equal(t, p/3, b.Epoch)
		assert.Equal(t, step, b.Step)
		assert.Equal(t, []int{3 * step, 3*step + 1, 3*step + 2}, b.Y.Ints())
	}
}

// TestStreamShuffleEpochs: each epoch visits distinct examples (all but the
// n mod B of a partial batch), in an order of its own.
func TestStreamShuffleEpochs(t *testing.T) {
	const n, batch = 103, 10
	s := &Stream{Dataset: labelled(n), BatchSize: batch, Shuffle: true, Key: tensor.NewKey(4)}
	bs := read(t, s, 0, 3*10)
	var orders [][]int
	for e := range 3 {
		var order []int
		for _, b := range bs[10*e : 10*e+10] {
			assert.Equal(t, e, b.Epoch)
			order = append(order, b.Indices...)
			assert.Equal(t, b.Indices, b.Y.Ints())
		}
		sorted := slices.Clone(order)
		slices.Sort(sorted)
		assert.Len(t, slices.Compact(sorted), 100, "epoch %d repeats an example", e)
		// The order is the documented permutation.
		perm := NewPermutation(tensor.FoldIn(tensor.NewKey(4), uint32(e)), n)
		for i, ix := range order {
			assert.Equal(t, perm.At(i), ix)
		}
		orders = append(orders, order)
	}
	assert.NotEqual(t, orders[0], orders[1])
}

// TestStreamResume: reopening at a position gives the batches an
// uninterrupted run gives from there, whatever Prefetch, with a sharded
// placement on either of two meshes, and with the work shared by 1, 2 or 4
// processes.
func TestStreamResume(t *testing.T) {
	ds := labelled(60)
	base := Stream{Dataset: ds, BatchSize: 8, Shuffle: true, Key: tensor.NewKey(11)}
	whole := read(t, &base, 0, 20) // 7 batches an epoch: crosses two epochs
	for _, prefetch := range []int{0, 3} {
		s := base
		s.Prefetch = prefetch
		resumed := read(t, &s, 5, 15)
		for i, b := range resumed {
			assert.Equal(t, whole[5+i].Indices, b.Indices)
			assert.Equal(t, whole[5+i].X.Float32s(), b.X.Float32s())
			assert.Equal(t, whole[5+i].Epoch, b.Epoch)
			assert.Equal(t, whole[5+i].Step, b.Step)
		}
	}
	for _, mesh := range []*shard.Mesh{shard.NewMesh([]int{2}, []string{"dp"}), shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})} {
		s := base
		s.Sharding = shard.NewSharding(mesh, shard.P("dp"))
		for i, b := range read(t, &s, 9, 6) {
			assert.Equal(t, whole[9+i].X.Float32s(), shard.Gather(b.X).Float32s(), "%v", mesh)
			assert.Equal(t, whole[9+i].Y.Ints(), shard.Gather(b.Y).Ints(), "%v", mesh)
		}
	}
	for _, count := range []int{2, 4} {
		// Each process resumes from position 9 and reads its share; the
		// shares concatenate to the uninterrupted batches.
		shares := make([][]Batch, count)
		for p := range count {
			s := base
			s.Share = Share{Index: p, Count: count}
			s.Prefetch = p % 2
			shares[p] = read(t, &s, 9, 6)
		}
		for i := range 6 {
			var idx []int
			var x []float32
			for p := range count {
				idx = append(idx, shares[p][i].Indices...)
				x = append(x, shares[p][i].X.Float32s()...)
			}
			assert.Equal(t, whole[9+i].Indices, idx, "%d processes", count)
			assert.Equal(t, whole[9+i].X.Float32s(), x, "%d processes", count)
		}
	}
}

func TestStreamCloseAndContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := &Stream{Dataset: labelled(100), BatchSize: 4, Shuffle: true, Prefetch: 2}
	r := s.Open(context.Background(), 0)
	_, err := r.Next()
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.NoError(t, r.Close())
	_, err = r.Next()
	assert.ErrorIs(t, err, ErrClosed)

	ctx, cancel := context.WithCancel(context.Background())
	r = s.Open(ctx, 3)
	_, err = r.Next()
	require.NoError(t, err)
	cancel()
	_, err = r.Next()
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(4), r.Position())
	r.Close()
}

// failing fails on one example.
type failing struct {
	Dataset
	bad   int
	panic bool
}

func (f failing) Batch(idx []int) (Batch, error) {
	if slices.Contains(idx, f.bad) {
		if f.panic {
			panic("bad example")
		}
		return Batch{}, errors.New("cannot read example")
	}
	return f.Dataset.Batch(idx)
}

func TestStreamErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, prefetch := range []int{0, 2} {
		s := &Stream{Dataset: failing{Dataset: labelled(20), bad: 9}, BatchSize: 4, Prefetch: prefetch}
		r := s.Open(context.Background(), 1)
		_, err := r.Next()
		require.NoError(t, err)
		_, err = r.Next()
		assert.EqualError(t, err, "data: batch 2 (epoch 0, step 2): cannot read example")
		_, again := r.Next()
		assert.Equal(t, err, again)
		assert.Equal(t, int64(2), r.Position())
		r.Close()

		s.Dataset = failing{Dataset: labelled(20), bad: 9, panic: true}
		r = s.Open(context.Background(), 2)
		assert.PanicsWithValue(t, "bad example", func() { _, _ = r.Next() })
		r.Close()

		s.Dataset = labelled(3)
		r = s.Open(context.Background(), 0)
		_, err = r.Next()
		assert.ErrorContains(t, err, "the dataset's 3 examples make no batch of 4", fmt.Sprint(prefetch))
		r.Close()
	}
	assert.Panics(t, func() {
		(&Stream{Dataset: labelled(8), BatchSize: 4, Share: Share{Index: 0, Count: 3}}).Open(context.Background(), 0)
	})
	assert.Panics(t, func() { (&Stream{Dataset: labelled(8), BatchSize: 4}).Open(context.Background(), -1) })
}

// TestStreamTokenFiles: a shuffled stream of windows of two token files,
// resumed mid-epoch by two processes sharing the work, gives the batches
// of one uninterrupted process.
func TestStreamTokenFiles(t *testing.T) {
	dir := t.TempDir()
	a := writeTokens(t, dir, "a.tok", Uint16, 997, shardIDs(0, 500))
	b := writeTokens(t, dir, "b.tok", Uint16, 997, shardIDs(1, 300))
	d, err := OpenTokenWindows([]string{a, b}, 16, 1)
	require.NoError(t, err)
	defer d.Close()
	s := Stream{Dataset: d, BatchSize: 6, Shuffle: true, Key: tensor.NewKey(1), Prefetch: 2}
	whole := read(t, &s, 0, 10)
	s0, s1 := s, s
	s0.Share, s1.Share = Share{0, 2}, Share{1, 2}
	p0, p1 := read(t, &s0, 4, 6), read(t, &s1, 4, 6)
	for i := range 6 {
		assert.Equal(t, whole[4+i].X.Ints(), append(p0[i].X.Ints(), p1[i].X.Ints()...))
		assert.Equal(t, whole[4+i].Y.Ints(), append(p0[i].Y.Ints(), p1[i].Y.Ints()...))
	}
}

func TestStreamShardingError(t *testing.T) {
	mesh := shard.NewMesh([]int{4}, []string{"dp"})
	s := &Stream{Dataset: labelled(20), BatchSize: 6, Sharding: shard.NewSharding(mesh, shard.P("dp"))}
	r := s.Open(context.Background(), 0)
	defer r.Close()
	_, err := r.Next()
	assert.EqualError(t, err, "data: batch 0 (epoch 0, step 0): data: a batch of 6 examples does not split into 4 parts over [dp]")
	assert.Panics(t, func() {
		(&Stream{Dataset: labelled(8), BatchSize: 4, Share: Share{0, 2}, Sharding: shard.NewSharding(mesh, shard.P("dp"))}).Open(context.Background(), 0)
	})
}
