package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Donating a Map output gives its storage back: the next psum and
// all_gather results reuse it (the allocator cache serves them), and the
// values stay right.
func TestDonatedMapOutputsAreReused(t *testing.T) {
	n := len(shard.Devices()) // every device, of every process under mpirun
	m := shard.NewMesh([]int{n}, []string{"d"})
	host := tensor.AsType(tensor.Arange(n*256), tensor.Float32)
	x := shard.Put(host, shard.NewSharding(m, shard.P("d")))
	psum := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") })
	gather := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.AllGatherInvariant(b, shard.Axes{"d"}, 0, true)
	})
	want := make([]float32, 256)
	for i := range want {
		for d := range n {
			want[i] += float32(d*256 + i)
		}
	}
	// sync.Pool may drop what it is given (always under -race, at random),
	// so reuse is asked of several rounds, not of each one. Reading a
	// replicated result on the host hands its block out (Gather), which
	// keeps it from the cache: the values are read after the rounds, from
	// results computed into recycled storage.
	hits := tensor.CacheHits()
	for range 20 {
		tensor.Donate(psum(x))
		tensor.Donate(gather(x))
	}
	assert.Greater(t, tensor.CacheHits(), hits, "no Map output was reused")
	assert.Equal(t, want, psum(x).Float32s())
	assert.Equal(t, host.Float32s(), gather(x).Float32s())
}

// Blocks handed out (shard.Blocks, Gather of a replicated array, a second
// header such as WithLogicalAxes) are never donated with the array: they
// keep their values.
func TestDonateKeepsSharedBlocks(t *testing.T) {
	m := shard.NewMesh([]int{4}, []string{"d"})
	x := shard.Put(tensor.AsType(tensor.Arange(4*64), tensor.Float32), shard.NewSharding(m, shard.P("d")))
	psum := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") })
	want := psum(x).Float32s()
	cases := []struct {
		name string
		keep func(y *tensor.Tensor) *tensor.Tensor // a value that must outlive Donate(y)
	}{
		{"Blocks", func(y *tensor.Tensor) *tensor.Tensor { return shard.Blocks(y)[0] }},
		{"Gather of a replicated array", shard.Gather},
		{"WithLogicalAxes", func(y *tensor.Tensor) *tensor.Tensor { return tensor.WithLogicalAxes(y, "x") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			y := psum(x)
			kept := tc.keep(y)
			tensor.Donate(y)
			assert.Panics(t, func() { y.Float32s() })
			for range 3 { // fresh results that could take the storage
				tensor.Donate(psum(x))
			}
			require.False(t, kept.IsDonated())
			assert.Equal(t, want, kept.Float32s())
		})
	}
}

// The blocks fn receives are valid only during the Map call, like JAX's
// tracers: one kept aside panics when used after the call, while the
// outputs and the inputs themselves stay valid. Map's own headers over an
// input's blocks do not keep them from the cache: donating the input after
// the call recycles its storage.
func TestMapInputBlocksEndWithTheCall(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"d"})
	host := tensor.AsType(tensor.Arange(2*512), tensor.Float32)
	s := shard.NewSharding(m, shard.P("d"))
	var kept *tensor.Tensor
	double := shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		if c.AxisIndex("d") == 0 {
			kept = b
		}
		return tensor.MulScalar(b, 2)
	})
	x := shard.Put(host, s)
	y := double(x)
	assert.PanicsWithValue(t, "Tensor.Float32s: operand "+kept.String()+" was donated (tensor.Donate)", func() { kept.Float32s() })
	assert.Equal(t, host.Float32s(), x.Float32s())
	want := tensor.MulScalar(host, 2).Float32s()
	assert.Equal(t, want, y.Float32s())

	// Donated inputs come back as the next inputs' storage.
	hits := tensor.CacheHits()
	for range 20 {
		x := shard.Put(host, s)
		tensor.Donate(double(x))
		tensor.Donate(x)
	}
	assert.Greater(t, tensor.CacheHits()-hits, int64(20), "donated inputs were not reused")
}
