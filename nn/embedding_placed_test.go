package nn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestEmbeddingPlacedIds: a placed token batch reaches the table (ids are
// validated block by block) and the lookup and its gradient equal the
// host ones, with the table's gradient laid out like the table.
func TestEmbeddingPlacedIds(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	e := nn.NewEmbedding(tensor.NewKey(1), 10, 4, nn.EmbeddingOptions{})
	ids := tensor.FromInt32([]int32{1, 2, 3, 9, 0, 0, 5, 7}, 8)
	loss := func(e nn.Embedding, ids *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Square(e.Forward(ids)))
	}
	want, wantG := autodiff.ValueAndGradWith(loss)(e, ids)
	pe := nn.Embedding{W: shard.Put(e.W, shard.NewSharding(m, shard.P(nil, "tp")))}
	pids := shard.Put(ids, shard.NewSharding(m, shard.P("dp")))
	require.Equal(t, "float32[8@dp,4@tp]", pe.Forward(pids).Type())
	got, gotG := autodiff.ValueAndGradWith(loss)(pe, pids)
	assert.InDelta(t, want.Item(), got.Item(), 1e-4)
	assert.InDeltaSlice(t, wantG.W.Float32s(), gotG.W.Float32s(), 1e-5)
	s, ok := shard.ShardingOf(gotG.W)
	require.True(t, ok)
	assert.Equal(t, shard.P(nil, "tp"), s.Spec())

	bad := shard.Put(tensor.FromInt32([]int32{1, 2, 3, 9, 0, 10, 5, 7}, 8), shard.NewSharding(m, shard.P("dp")))
	assert.PanicsWithValue(t, "nn.Embedding: ids i32[8@dp]: id 10 at flat index 1 of the block i32[2] is outside [0, 10)", func() { pe.Forward(bad) })
}

// TestEmbeddingOptionsPlacedAndVmapped: Padding and MaxNorm give the host
// lookup and gradient on placed ids and table, and under Vmap over a batch
// of id sequences.
func TestEmbeddingOptionsPlacedAndVmapped(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	e := nn.NewEmbedding(tensor.NewKey(1), 10, 4, nn.EmbeddingOptions{Padding: true, PaddingIdx: 0, MaxNorm: 1.5})
	ids := tensor.FromInt32([]int32{1, 2, 0, 9, 0, 0, 5, 7}, 8)
	loss := func(e nn.Embedding, ids *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Square(tensor.AddScalar(e.Forward(ids), 1)))
	}
	want, wantG := autodiff.ValueAndGradWith(loss)(e, ids)
	pe := e
	pe.W = shard.Put(e.W, shard.NewSharding(m, shard.P(nil, "tp")))
	got, gotG := autodiff.ValueAndGradWith(loss)(pe, shard.Put(ids, shard.NewSharding(m, shard.P("dp"))))
	assert.InDelta(t, want.Item(), got.Item(), 1e-4)
	assert.InDeltaSlice(t, wantG.W.Float32s(), gotG.W.Float32s(), 1e-5)
	assert.Equal(t, []float32{0, 0, 0, 0}, wantG.W.Float32s()[:4], "no gradient to the padding row")

	batched := autodiff.Vmap(func(ids *tensor.Tensor) *tensor.Tensor { return e.Forward(ids) })(tensor.Reshape(ids, 2, 4))
	assert.Equal(t, e.Forward(ids).Float32s(), batched.Float32s())
}
