package shard_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestHalfPlacement: bfloat16 and float16 arrays are placed, resharded
// and gathered bit for bit, and shard.Map computes on their blocks.
func TestHalfPlacement(t *testing.T) {
	mesh := shard.NewMesh([]int{2, 2}, []string{"dp", "tp"})
	x32 := tensor.Normal(tensor.NewKey(3), 8, 6)
	w32 := tensor.Normal(tensor.NewKey(4), 6, 4)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		x, w := tensor.Convert(x32, dt), tensor.Convert(w32, dt)
		for _, spec := range []shard.Spec{shard.P("dp"), shard.P("dp", "tp"), shard.P(nil, "tp"), shard.P()} {
			p := shard.Put(x, shard.NewSharding(mesh, spec))
			require.Equal(t, dt, p.DType())
			require.Equal(t, x.Bits16(), shard.Gather(p).Bits16(), "%v %v", dt, spec)
			r := shard.Reshard(p, shard.NewSharding(mesh, shard.P("tp", "dp")))
			require.Equal(t, x.Bits16(), shard.Gather(r).Bits16(), "%v %v resharded", dt, spec)
		}
		xs := shard.Put(x, shard.NewSharding(mesh, shard.P("dp")))
		prod := shard.Map(mesh, shard.P("dp"), shard.P("dp"), func(_ *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return tensor.MatMul(b, w)
		})(xs)
		require.Equal(t, tensor.MatMul(x, w).Bits16(), shard.Gather(prod).Bits16(), "%v: blockwise matmul", dt)
		// A psum of half blocks is computed in float32 and rounded once
		// per device; the row sums each device contributes are rounded
		// too, so compare with a tolerance of a few units of roundoff.
		sum := shard.Map(mesh, shard.P("dp"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.Psum(tensor.Sum(b, 0), "dp")
		})(xs)
		require.Equal(t, dt, sum.DType())
		want := tensor.Sum(tensor.Convert(x, tensor.Float32), 0).Float64s()
		got := shard.Gather(sum).Float64s()
		for i := range want {
			require.InDelta(t, want[i], got[i], 4*0x1p-8*(1+abs(want[i])), "%v psum[%d]", dt, i)
		}
	}
}
