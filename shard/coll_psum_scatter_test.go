package shard_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// A float reduce-scatter along any dimension, tiled or not, is bit for bit
// that device's part of the psum of the same blocks (both sum with the
// same kernel in the same order; half blocks in float32, rounded once).
func TestPsumScatterIsPartOfPsum(t *testing.T) {
	m := guideMesh() // dp=4, tp=2
	for _, dt := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
		for _, tc := range []struct {
			axes  shard.Axes
			shape []int // of each device's block
			dim   int
			tiled bool
		}{
			{shard.Axes{"dp"}, []int{8, 6, 5}, 0, true},
			{shard.Axes{"dp"}, []int{3, 8, 5}, 1, true},
			{shard.Axes{"dp"}, []int{3, 5, 12}, 2, true},
			{shard.Axes{"dp", "tp"}, []int{16, 3}, 0, true},
			{shard.Axes{"dp", "tp"}, []int{3, 8}, 1, false},
			{shard.Axes{"tp"}, []int{4, 2, 3}, 1, false},
		} {
			t.Run(fmt.Sprintf("%v/%v/%v/dim%d/tiled=%v", dt, tc.axes, tc.shape, tc.dim, tc.tiled), func(t *testing.T) {
				global := append([]int{m.Size() * tc.shape[0]}, tc.shape[1:]...)
				x := tensor.Convert(tensor.Normal(tensor.NewKey(5), global...), dt)
				type out struct{ Got, Want *tensor.Tensor }
				spec := shard.P([]string{"dp", "tp"})
				y := shard.Map(m, spec, spec, func(c *shard.Ctx, x *tensor.Tensor) out {
					got := c.PsumScatter(x, tc.axes, tc.dim, tc.tiled)
					n, r := c.AxisSize(tc.axes...), c.AxisIndex(tc.axes...)
					s := x.Dim(tc.dim) / n
					want := tensor.SliceAxis(c.Psum(x, tc.axes...), tc.dim, r*s, (r+1)*s)
					if !tc.tiled {
						want = tensor.Squeeze(want, tc.dim)
					}
					// Both vary over every axis in the output tree.
					return out{c.Vary(got, "dp", "tp"), c.Vary(want, "dp", "tp")}
				})(x)
				require.Equal(t, y.Want.Shape(), y.Got.Shape())
				got, want := shard.Gather(y.Got).Float64s(), shard.Gather(y.Want).Float64s()
				assert.Equal(t, want, got)
				assert.NotEqual(t, make([]float64, len(got)), got)
			})
		}
	}
}
