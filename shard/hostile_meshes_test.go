package shard_test

import (
	"testing"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// An op given operands placed on two meshes of one shape but other
// devices names each mesh's devices: "Mesh('dp': 2) with ... Mesh('dp': 2)"
// alone would not say what differs.
func TestHostileMixedMeshesOfOneShape(t *testing.T) {
	a := shard.NewMeshOn(shard.Devices()[:2], []int{2}, []string{"dp"})
	b := shard.NewMeshOn(shard.Devices()[2:4], []int{2}, []string{"dp"})
	data := shard.Put(tensor.Normal(tensor.NewKey(0), 4, 3), shard.NewSharding(a, shard.P("dp", nil)))
	w := shard.Put(tensor.Normal(tensor.NewKey(1), 4), shard.NewSharding(b, shard.P("dp")))
	ids := tensor.FromInt32([]int32{0, 1, 0, 1}, 4)
	requirePanicContains(t, func() { tensor.SegmentWeightedSum(data, w, ids, 2) },
		`shard: op "segment_weighted_sum" mixes float32[4@dp,3] on Mesh('dp': 2) of devices [0 1] with float32[4@dp] on Mesh('dp': 2) of devices [2 3]; move one onto the other's mesh with shard.Put (or Reshard) first`)
	q := tensor.Normal(tensor.NewKey(5), 4, 4, 2, 8)
	requirePanicContains(t, func() {
		tensor.DotProductAttentionAs(shard.Put(q, shard.NewSharding(a, shard.P("dp"))), shard.Put(q, shard.NewSharding(b, shard.P("dp"))), q, nil, 0, true, tensor.BFloat16)
	}, `shard: op "attention" mixes float32[4@dp,4,2,8] on Mesh('dp': 2) of devices [0 1] with float32[4@dp,4,2,8] on Mesh('dp': 2) of devices [2 3]`)
}
