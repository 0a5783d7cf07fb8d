package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Psum, AllGather and their gradients (AllGather's is a PsumScatter) on
// float64 blocks inside shard.Map, and int64 sums, against loops over the
// blocks; placed float64 tensors split and gather exactly.
func TestCollectivesFloat64(t *testing.T) {
	m := shard.NewMesh([]int{4}, []string{"dp"})
	x := tensor.NormalFloat64(tensor.NewKey(3), 8, 3) // two rows per device
	xd := x.Float64s()

	sum := make([]float64, 2*3) // Σ over the devices' blocks
	for d := range 4 {
		for i := range 6 {
			sum[i] += xd[d*6+i]
		}
	}
	psum := shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.Psum(b, "dp")
	})
	got := shard.Gather(psum(x))
	require.Equal(t, tensor.Float64, got.DType())
	assert.InDeltaSlice(t, sum, got.Float64s(), 1e-15)

	pmean := shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.Pmean(b, "dp")
	})
	mean := make([]float64, len(sum))
	for i, v := range sum {
		mean[i] = v / 4
	}
	assert.InDeltaSlice(t, mean, shard.Gather(pmean(x)).Float64s(), 1e-15)

	gather := shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.AllGatherInvariant(b, shard.Axes{"dp"}, 0, true)
	})
	assert.Equal(t, xd, shard.Gather(gather(x)).Float64s(), "all-gather moves float64 bit for bit")

	placed := shard.Put(x, shard.NewSharding(m, shard.P("dp")))
	assert.Equal(t, xd, shard.Gather(placed).Float64s(), "Put and Gather of float64")

	// The gradient of Σ w·allgather(x) reaches each block as its part of
	// w summed over the devices (4 copies of the gathered sum).
	w := tensor.NormalFloat64(tensor.NewKey(4), 8, 3)
	loss := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Mul(shard.Gather(gather(xs[0])), xs[1]))
	}
	require.NoError(t, autodiff.CheckGrad(loss, []*tensor.Tensor{x, w}, autodiff.CheckOptions{}))

	// AllGather's result varies; its gradient is a PsumScatter.
	gatherV := shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.AllGather(b, shard.Axes{"dp"}, 0, true)
	})
	w4 := tensor.NormalFloat64(tensor.NewKey(5), 32, 3)
	lossV := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Mul(shard.Gather(gatherV(xs[0])), xs[1]))
	}
	require.NoError(t, autodiff.CheckGrad(lossV, []*tensor.Tensor{x, w4}, autodiff.CheckOptions{}))

	// Ops on placed float64 tensors compute blockwise (sharding
	// propagation): a product of row blocks, and a sum over the sharded
	// axis (a psum of the blocks' sums).
	wr := tensor.NormalFloat64(tensor.NewKey(6), 3, 2)
	y := tensor.MatMul(placed, wr)
	require.Equal(t, tensor.Float64, y.DType())
	assert.InDeltaSlice(t, tensor.MatMul(x, wr).Float64s(), shard.Gather(y).Float64s(), 1e-15)
	assert.InDeltaSlice(t, tensor.Sum(x, 0).Float64s(), shard.Gather(tensor.Sum(placed, 0)).Float64s(), 1e-14)

	ids := tensor.FromInt64([]int64{1 << 40, 1, 2, 3}, 4)
	isum := shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.Psum(b, "dp")
	})
	assert.Equal(t, []int64{1<<40 + 6}, shard.Gather(isum(ids)).Int64s())
}

// AllToAll, RingShift (ppermute) and RingShiftStart move float64, int64
// and uint8 blocks bit for bit.
func TestMovesWideDTypes(t *testing.T) {
	m := shard.NewMesh([]int{4}, []string{"dp"})
	for _, a := range []*tensor.Tensor{
		tensor.NormalFloat64(tensor.NewKey(7), 16),
		tensor.AsType(tensor.Add(tensor.Arange(16), tensor.Full(tensor.Int32, 1<<30, 16)), tensor.Int64),
		tensor.AsType(tensor.Arange(16), tensor.Uint8),
	} {
		t.Run(a.DType().String(), func(t *testing.T) {
			a2t := shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
				return c.AllToAll(b, shard.Axes{"dp"}, 0, 0, true)
			})
			want := tensor.Reshape(tensor.Transpose(tensor.Reshape(a, 4, 4)), 16)
			got := shard.Gather(a2t(a))
			require.Equal(t, a.DType(), got.DType())
			assert.Equal(t, want.Float64s(), got.Float64s(), "all_to_all transposes")
			ring := shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
				return c.RingShift(b, shard.Axes{"dp"}, 1)
			})
			assert.Equal(t, tensor.Roll(a, 4, 0).Float64s(), shard.Gather(ring(a)).Float64s(), "ring shift by one device")
			async := shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
				return c.RingShiftStart(b, shard.Axes{"dp"}, 1).Wait()
			})
			got = shard.Gather(async(a))
			require.Equal(t, a.DType(), got.DType())
			assert.Equal(t, tensor.Roll(a, 4, 0).Float64s(), got.Float64s(), "asynchronous ring shift")
		})
	}
}

// Pmax and Pmin of float64 and int64 blocks; the gradient of a float64
// Pmax is split among tied devices in float64 (1/3 to 17 digits).
func TestPmaxFloat64(t *testing.T) {
	m := shard.NewMesh([]int{4}, []string{"dp"})
	x := tensor.FromFloat64s([]float64{1.5, 5.25, -2, 5.25, 0.125, 5.25, 3, 4}, 4, 2)
	extreme := func(isMax bool) func(*tensor.Tensor) *tensor.Tensor {
		return shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			if isMax {
				return c.Pmax(b, "dp")
			}
			return c.Pmin(b, "dp")
		})
	}
	assert.Equal(t, []float64{3, 5.25}, shard.Gather(extreme(true)(x)).Float64s())
	assert.Equal(t, []float64{-2, 4}, shard.Gather(extreme(false)(x)).Float64s())
	ids := tensor.FromInt64([]int64{1 << 40, -(1 << 41), 7, 1<<40 + 1}, 4, 1)
	assert.Equal(t, []int64{1<<40 + 1}, shard.Gather(extreme(true)(ids)).Int64s())
	assert.Equal(t, []int64{-(1 << 41)}, shard.Gather(extreme(false)(ids)).Int64s())

	// Column 0's maximum is held by device 3 alone, column 1's by
	// devices 0, 1 and 2.
	g := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(shard.Gather(extreme(true)(x))) })(x)
	require.Equal(t, tensor.Float64, g.DType())
	third := 1.0 / 3
	assert.Equal(t, []float64{0, third, 0, third, 0, third, 1, 0}, g.Float64s())
}

// raggedTranspose is a RaggedAllToAll over n devices in which each device
// sends its row j to device j, which writes it at row r (the sender's
// index): the all-to-all transpose of [n·n, k] rows, for any dtype.
func raggedTranspose(m *shard.Mesh, n int) func(*tensor.Tensor) *tensor.Tensor {
	var io, ss, oo, rs []int32
	for r := range n {
		for j := range n {
			io, ss, oo, rs = append(io, int32(j)), append(ss, 1), append(oo, int32(r)), append(rs, 1)
		}
	}
	ins := []*tensor.Tensor{tensor.FromInt32(io, n*n), tensor.FromInt32(ss, n*n), tensor.FromInt32(oo, n*n), tensor.FromInt32(rs, n*n)}
	axis := m.AxisNames()[0]
	return func(x *tensor.Tensor) *tensor.Tensor {
		f := shard.Map(m, shard.P(axis), shard.P(axis), func(c *shard.Ctx, in []*tensor.Tensor) *tensor.Tensor {
			out := c.Local(tensor.Zeros(in[0].DType(), in[0].Shape()...))
			return c.RaggedAllToAll(in[0], out, in[1], in[2], in[3], in[4], shard.Axes{axis})
		})
		return shard.Gather(f(append([]*tensor.Tensor{x}, ins...)))
	}
}

// RaggedAllToAll moves float64, int64 and uint8 rows bit for bit.
func TestRaggedAllToAllWideDTypes(t *testing.T) {
	m := shard.NewMesh([]int{4}, []string{"dp"})
	f := raggedTranspose(m, 4)
	for _, a := range []*tensor.Tensor{
		tensor.NormalFloat64(tensor.NewKey(8), 16, 2),
		tensor.AsType(tensor.Reshape(tensor.Add(tensor.Arange(32), tensor.Full(tensor.Int32, 1<<30, 32)), 16, 2), tensor.Int64),
		tensor.AsType(tensor.Reshape(tensor.Arange(32), 16, 2), tensor.Uint8),
	} {
		got := f(a)
		require.Equal(t, a.DType(), got.DType())
		want := tensor.Reshape(tensor.Transpose(tensor.Reshape(a, 4, 4, 2), 1, 0, 2), 16, 2)
		assert.Equal(t, want.Float64s(), got.Float64s(), "%v", a)
	}
}
