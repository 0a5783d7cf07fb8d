package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// A psum of small float32 blocks, staged (each device copies its block
// into a buffer of the slot before it arrives, and every device sums the
// copies), gives the bits of the psum of larger blocks, summed in place:
// the first 4096 elements of a psum of 4097 per device equal the psum of
// those 4096 alone, on 8, 3 and 2 devices.
func TestStagedPsumBits(t *testing.T) {
	for _, n := range []int{8, 3, 2} {
		m := shard.NewMesh([]int{n}, []string{"dp"})
		x := tensor.Normal(tensor.NewKey(uint64(n)), n, 4097)
		small := tensor.SliceAxis(x, 1, 0, 4096)
		sum := func(x *tensor.Tensor) []float32 {
			return shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				return c.Psum(x, "dp")
			})(x).Float32s()
		}
		started := shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.PsumStart(x, "dp").Wait()
		})(small).Float32s()
		want := sum(x)[:4096]
		assert.Equal(t, want, sum(small), "%d devices", n)
		assert.Equal(t, want, started, "%d devices, started", n)
	}
}

// A reduce-scatter and an all-gather over axes of size one are the block
// itself, tiled or not, with no rendezvous (so one device may issue them
// alone, and its rendezvous with no other device): each is counted as a
// call of 0 bytes.
func TestCollectivesOverOneDevice(t *testing.T) {
	m := shard.NewMesh([]int{2, 1}, []string{"dp", "tp"})
	x := tensor.Normal(tensor.NewKey(7), 2, 1, 6)
	var comm shard.Comm
	y, err := shard.MapErr(m, shard.P("dp"), shard.P("dp", "tp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		if c.AxisIndex("dp") == 1 {
			return c.Vary(tensor.MulScalar(x, 3), "tp")
		}
		a := c.PsumScatter(x, shard.Axes{"tp"}, 2, true)
		b := c.PsumScatterStart(x, shard.Axes{"tp"}, 1, false).Wait()
		g := c.AllGather(b, shard.Axes{"tp"}, 0, false)
		return tensor.Add(tensor.Add(a, tensor.Reshape(g, 1, 1, 6)), c.AllGatherInvariant(x, shard.Axes{"tp"}, 0, true))
	}, shard.WithComm(&comm))(x)
	require.NoError(t, err)
	want := tensor.MulScalar(x, 3)
	assert.Equal(t, want.Float32s(), y.Float32s())
	assert.Equal(t, 2, comm.Calls("psum_scatter"))
	assert.Equal(t, 2, comm.Calls("all_gather"))
	for _, d := range m.Devices() {
		assert.Zero(t, comm.Bytes(d, "psum_scatter")+comm.Bytes(d, "all_gather"))
	}
}
