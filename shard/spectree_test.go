package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

func TestSpecsPrecedence(t *testing.T) {
	specs := shard.Specs{
		"":            shard.P(),
		"Layers[*].W": shard.P("dp"),
		"Layers[1].W": shard.P(nil, "tp"),
		"Layers":      shard.P("tp"),
	}
	x := tensor.Zeros(tensor.Float32, 8, 8)
	for path, want := range map[string]shard.Spec{
		"Layers[0].W": shard.P("dp"),      // wildcard key, longest
		"Layers[1].W": shard.P(nil, "tp"), // the literal key beats the wildcard
		"Layers[0].B": shard.P("tp"),      // prefix "Layers"
		"Embed":       shard.P(),          // the root key
	} {
		got, err := specs.SpecFor(pytree.MustParsePath(path), x)
		require.NoError(t, err, path)
		assert.True(t, got.Equal(want), "%s: got %v want %v", path, got, want)
	}
	_, err := shard.Specs{"A[*]": shard.P(), "*[0]": shard.P()}.SpecFor(pytree.MustParsePath("A[0]"), x)
	assert.EqualError(t, err, `several keys of equal length match "A[0]"`)
}

func TestMeshesCompareByValue(t *testing.T) {
	a := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	b := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	c := shard.NewMesh([]int{2, 4}, []string{"dp", "tp"})
	assert.True(t, a.Equal(b))
	assert.False(t, a.Equal(c))
	x := shard.Put(tensor.Ones(tensor.Float32, 8, 4), shard.NewSharding(a, shard.P("dp")))
	// Placing on an equal mesh is a no-op, not a copy.
	assert.Same(t, x, shard.Put(x, shard.NewSharding(b, shard.P("dp"))))
}

type axesPair struct{ W, B *tensor.Tensor }

// Placement keeps logical axis names: Put, Gather, Map's blocks and
// outputs, and the gradients a Map sends back.
func TestPlacementKeepsLogicalAxes(t *testing.T) {
	m := shard.NewMesh([]int{4}, []string{"dp"})
	w := tensor.WithLogicalAxes(tensor.Ones(tensor.Float32, 8, 4), "in", "out")
	b := tensor.WithLogicalAxes(tensor.Ones(tensor.Float32, 4), "out")
	p := shard.Put(w, shard.NewSharding(m, shard.P("dp", nil)))
	assert.Equal(t, []string{"in", "out"}, p.LogicalAxes())
	assert.Equal(t, []string{"in", "out"}, shard.Gather(p).LogicalAxes())

	specs := shard.Specs{"W": shard.P("dp", nil), "B": shard.P()}
	var seen []string
	out := shard.Map(m, specs, specs, func(c *shard.Ctx, x axesPair) axesPair {
		if c.Device().ID() == 0 {
			seen = x.W.LogicalAxes()
		}
		return axesPair{W: tensor.WithLogicalAxes(tensor.MulScalar(x.W, 2), x.W.LogicalAxes()...), B: x.B}
	})(axesPair{p, b})
	assert.Equal(t, []string{"in", "out"}, seen)
	assert.Equal(t, []string{"in", "out"}, out.W.LogicalAxes())
	assert.Equal(t, []string{"out"}, out.B.LogicalAxes())
}

func TestFromBlocks(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	s := shard.NewSharding(m, shard.P("dp"))
	x := tensor.Reshape(tensor.AsType(tensor.Arange(32), tensor.Float32), 8, 4)
	want := shard.Put(x, s)
	y, err := shard.FromBlocks(s, []int{8, 4}, shard.Blocks(want))
	require.NoError(t, err)
	assert.Equal(t, "float32[8@dp,4]", y.Type())
	assert.Equal(t, x.Float32s(), shard.Gather(y).Float32s())

	blocks := shard.Blocks(want)
	blocks[3] = tensor.Zeros(tensor.Float32, 3, 4)
	_, err = shard.FromBlocks(s, []int{8, 4}, blocks)
	assert.EqualError(t, err, "shard.FromBlocks: block 3 is f32[3,4], want shape [2 4] for PartitionSpec('dp',) of shape [8 4]")
	_, err = shard.FromBlocks(s, []int{8, 4}, blocks[:2])
	assert.EqualError(t, err, "shard.FromBlocks: 2 blocks for a mesh of 8 devices")
	_, err = shard.FromBlocks(s, []int{6, 4}, shard.Blocks(want))
	assert.EqualError(t, err, "shard.FromBlocks: shape [6 4]: dim 0 (6) is not divisible by dp=4")
}
