package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestCommBytes checks the bytes every device is charged per collective
// against the ring-algorithm formulas written out by hand, on the 4x2
// guide mesh with x split P("dp"): each device holds f32[2,4], 32 bytes.
// Results stay split over dp (after a psum over tp where they vary over it).
func TestCommBytes(t *testing.T) {
	m := guideMesh()
	x := testData(tensor.Float32, 8, 4)
	const block = 32
	cases := []struct {
		name  string
		kind  string
		f     func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor
		bytes int64 // per device
	}{
		{"psum over dp (4)", "psum", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.Psum(x, "dp")
		}, 2 * 3 * block / 4},
		{"psum over dp,tp (8)", "psum", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.Psum(x, "dp", "tp")
		}, 2 * 7 * block / 8},
		{"pmax over tp (2)", "pmax", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.Pmax(x, "tp")
		}, 2 * 1 * block / 2},
		{"all_gather over dp", "all_gather", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.AllGatherInvariant(x, shard.Axes{"dp"}, 0, true)
		}, 3 * block},
		{"psum_scatter over dp,tp", "psum_scatter", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.Psum(c.PsumScatter(tensor.Concat(0, x, x, x, x), shard.Axes{"dp", "tp"}, 0, true), "tp")
		}, 7 * 4 * block / 8},
		{"ring shift over dp", "ppermute", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.RingShift(x, shard.Axes{"dp"}, 1)
		}, block},
		{"all_to_all over tp", "all_to_all", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.Psum(c.AllToAll(x, shard.Axes{"tp"}, 1, 0, true), "tp")
		}, 1 * block / 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var comm shard.Comm
			shard.Map(m, shard.P("dp"), shard.P("dp"), tc.f, shard.WithComm(&comm))(x)
			assert.Equal(t, 1, comm.Calls(tc.kind))
			for _, d := range m.Devices() {
				assert.Equal(t, tc.bytes, comm.Bytes(d, tc.kind), "device %d", d.ID())
			}
		})
	}
}

// TestCommBytesBackward: the backward pass of a Map is charged to the same
// Comm; the transpose of an all-gather is a reduce-scatter of the gathered
// cotangent.
func TestCommBytesBackward(t *testing.T) {
	m := guideMesh()
	x := testData(tensor.Float32, 8, 4)
	var comm shard.Comm
	f := shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.Pmean(tensor.Sum(tensor.Square(c.AllGather(x, shard.Axes{"dp"}, 0, true))), "dp")
	}, shard.WithComm(&comm))
	autodiff.Grad(f)(x)
	for _, d := range m.Devices() {
		assert.Equal(t, int64(3*32), comm.Bytes(d, "all_gather"))
		assert.Equal(t, int64(3*128/4), comm.Bytes(d, "psum_scatter"))
	}
	assert.Equal(t, 1, comm.Calls("psum_scatter"))
}

// Pmean rejects a non-float block before communicating.
func TestPmeanRejectsIntsWithoutCommunicating(t *testing.T) {
	m := guideMesh()
	var comm shard.Comm
	f := shard.MapErr(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.Pmean(x, "dp", "tp")
	}, shard.WithComm(&comm))
	_, err := f(testData(tensor.Int32, 8, 4))
	var de *shard.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "shard.Ctx.Pmean: i32[2,4]{dp}: want float32 or float64", de.Value)
	assert.Empty(t, comm.Kinds())
}
