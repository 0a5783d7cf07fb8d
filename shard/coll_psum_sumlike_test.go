package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// SumLikePsum gives the bits of a float32 Psum over the devices of one
// process, staged (small blocks) or summed in place (large ones), on 1 to
// 8 devices (7 takes the sum's passes of four, two and one blocks); a sum
// in rank order differs, so the order is what is checked.
func TestSumLikePsumBits(t *testing.T) {
	orderShows := false
	for _, n := range []int{1, 2, 3, 5, 6, 7, 8} {
		for _, size := range []int{37, 5000} {
			m := shard.NewMesh([]int{n}, []string{"dp"})
			x := tensor.MulScalar(tensor.Normal(tensor.NewKey(uint64(n*size)), n, size), 1e3)
			want := shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				return c.Psum(tensor.Reshape(x, size), "dp")
			})(x).Float32s()
			all := x.Float32s()
			blocks := make([][]float32, n)
			for r := range blocks {
				blocks[r] = all[r*size : (r+1)*size]
			}
			got := make([]float32, size)
			shard.SumLikePsum(got, blocks)
			assert.Equal(t, want, got, "%d devices, %d elements", n, size)
			for i := range got {
				var seq float32
				for _, b := range blocks {
					seq += b[i]
				}
				orderShows = orderShows || seq != got[i]
			}
		}
	}
	assert.True(t, orderShows, "no sum in rank order differed from the Psum's")
	assert.PanicsWithValue(t, "shard.SumLikePsum: block 1 has 2 elements, dst 3", func() {
		shard.SumLikePsum(make([]float32, 3), [][]float32{{1, 2, 3}, {1, 2}})
	})
	dst := []float32{1, 2}
	shard.SumLikePsum(dst, nil)
	assert.Equal(t, []float32{0, 0}, dst, "a sum over no devices")
}
