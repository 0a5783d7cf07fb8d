package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestReduceOverNoAxes checks JAX's semantics for a reduction over an empty
// tuple of axes (jax.lax.psum(x, ())): the sum over no devices is x itself,
// block for block, with no communication, and its gradient is the identity.
func TestReduceOverNoAxes(t *testing.T) {
	m := guideMesh()
	x := testData(tensor.Float32, 8, 4)
	for name, f := range map[string]func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor{
		"Psum":  func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor { return c.Psum(x) },
		"Pmean": func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor { return c.Pmean(x) },
		"Pmax":  func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor { return c.Pmax(x) },
		"Pmin":  func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor { return c.Pmin(x) },
	} {
		t.Run(name, func(t *testing.T) {
			var comm shard.Comm
			var types []string
			got := shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				y := f(c, x)
				if c.Device().ID() == 0 {
					types = append(types, y.String())
				}
				return y
			}, shard.WithComm(&comm))(x)
			assert.Equal(t, x.Float32s(), got.Float32s())
			assert.Equal(t, []string{"f32[2,4]{dp}"}, types, "the block still varies over dp")
			assert.Empty(t, comm.Kinds(), "no collective call")

			g := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Square(shard.Gather(shard.Map(m, shard.P("dp"), shard.P("dp"), f)(x))))
			})(x)
			require.Equal(t, tensor.MulScalar(x, 2).Float32s(), g.Float32s())
		})
	}
	// Pmean of ints is still refused, axes or not.
	_, err := shard.MapErr(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.Pmean(x)
	})(testData(tensor.Int32, 8, 4))
	require.ErrorContains(t, err, "shard.Ctx.Pmean: i32[2,4]{dp}: want float32")
}
