package shard_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// A nil tensor or a nil mesh given to the placement API panics naming the
// function and the argument, not with a nil dereference inside it.
func TestPlacementNilArguments(t *testing.T) {
	mesh := shard.NewMesh([]int{2}, []string{"dp"})
	x := tensor.Zeros(tensor.Float32, 4, 2)
	id := func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor { return x }
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"Put nil x", func() { shard.Put(nil, shard.NewSharding(mesh, shard.P("dp", nil))) }, "shard.Put: x is nil"},
		{"NewSharding nil mesh", func() { shard.NewSharding(nil, shard.P("dp", nil)) }, "shard.NewSharding: mesh is nil"},
		{"NewMesh no axes", func() { shard.NewMesh(nil, nil) }, "shard.NewMesh: no axes: a mesh needs at least one"},
		{"Map nil mesh", func() { shard.Map(nil, shard.P(), shard.P(), id) }, "shard.Map: mesh is nil"},
		{"MapErr nil mesh", func() { shard.MapErr(nil, shard.P(), shard.P(), id) }, "shard.MapErr: mesh is nil"},
		{"Map nil fn", func() { shard.Map[*tensor.Tensor, *tensor.Tensor](mesh, shard.P(), shard.P(), nil) }, "shard.Map: fn is nil"},
		{"FilterShard nil mesh", func() { shard.FilterShard(x, nil, shard.P()) }, "shard.FilterShard: mesh is nil"},
		{"Put zero Sharding", func() { shard.Put(x, shard.Sharding{}) }, "shard.Put: zero Sharding (use NewSharding or Replicated)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.PanicsWithValue(t, tt.want, tt.f)
		})
	}
}
