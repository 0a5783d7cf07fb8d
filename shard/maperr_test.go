package shard_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestMapErrBackwardFailure pins down what MapErr's doc says about
// failures of the backward pass: differentiated from outside, the backward
// pass runs inside the gradient call (which has no error result) and a
// device failure there panics with the *DeviceError; with the gradient
// taken inside fn, MapErr returns it.
func TestMapErrBackwardFailure(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	explode := autodiff.CustomVJP("explode",
		func(x *tensor.Tensor) (*tensor.Tensor, struct{}) { return x, struct{}{} },
		func(_ struct{}, g *tensor.Tensor) *tensor.Tensor {
			panic(fmt.Sprintf("backward failed on a block %v", g))
		})
	loss := func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		if c.Device().ID() == 4 {
			x = explode(x)
		}
		return tensor.Sum(tensor.Square(x))
	}
	x := tensor.Ones(tensor.Float32, 8, 4)

	f := shard.MapErr(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.Psum(loss(c, x), "dp", "tp")
	})
	var forwardErr error
	var p any
	within(t, 5*time.Second, func() {
		defer func() { p = recover() }()
		autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor {
			y, err := f(x)
			forwardErr = err
			return y
		})(x)
	})
	require.NoError(t, forwardErr, "the forward pass succeeds")
	err, ok := p.(error)
	require.True(t, ok, "the backward failure panics with an error, got %v", p)
	var de *shard.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 4, de.Device.ID())
	assert.Equal(t, "shard.Map (backward)", de.Op)

	// The gradient taken inside fn: its backward pass is part of the
	// call, and MapErr returns its failure.
	g := shard.MapErr(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		dx := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return loss(c, x) })(x)
		return c.Psum(tensor.Sum(dx), "dp", "tp")
	})
	within(t, 5*time.Second, func() { _, err = g(x) })
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 4, de.Device.ID())
	assert.Contains(t, err.Error(), "backward failed on a block f32[2,4]")
}
