package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// The guide's first all_to_all_demo reshapes the exchanged
// int32[64@(dp,tp)] back to x's shape and prints
// jax.typeof(x_all_to_all)=ShapedArray(int32[8@(dp,tp),8]) and the
// transpose of x: the reshape keeps the rows split over (dp, tp).
func TestGuideAllToAllReshaped(t *testing.T) {
	m := guideMesh()
	x := tensor.Add(tensor.Mul(tensor.ScalarInt(10), tensor.Reshape(tensor.Arange(8), 8, 1)), tensor.Reshape(tensor.Arange(8), 1, 8))
	spec := shard.P([]string{"dp", "tp"})
	y := shard.Map(m, spec, spec, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.AllToAll(b, shard.Axes{"dp", "tp"}, 0, 0, true)
	})(tensor.Reshape(x, 64))
	z := tensor.Reshape(y, 8, 8)
	assert.Equal(t, "int32[8@(dp,tp),8]", z.Type())
	assert.Equal(t, []int{
		0, 10, 20, 30, 40, 50, 60, 70,
		1, 11, 21, 31, 41, 51, 61, 71,
		2, 12, 22, 32, 42, 52, 62, 72,
		3, 13, 23, 33, 43, 53, 63, 73,
		4, 14, 24, 34, 44, 54, 64, 74,
		5, 15, 25, 35, 45, 55, 65, 75,
		6, 16, 26, 36, 46, 56, 66, 76,
		7, 17, 27, 37, 47, 57, 67, 77,
	}, ints(z))
}
