package shard_test

import (
	"errors"
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

// within runs f and fails the test if it does not return in time: a
// deadlock shows up as a failure, not a hung test binary.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("did not finish within %v (deadlock?)", d)
	}
}

func TestFaults(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	x := tensor.Ones(tensor.Float32, 8, 4)
	cases := []struct {
		name    string
		fn      func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor
		device  int
		message string
	}{
		{"panic mid-collective", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			y := c.Psum(x, "dp")
			if c.Device().ID() == 3 {
				panic("boom")
			}
			return c.Psum(y, "tp")
		}, 3, "boom"},
		{"panic with an error value", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			if c.Device().ID() == 6 {
				panic(errors.New("disk on fire"))
			}
			return c.Psum(c.Psum(x, "dp"), "tp")
		}, 6, "disk on fire"},
		{"mismatched collectives", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			if c.Device().ID() == 5 {
				return c.Psum(c.AllGather(x, shard.Axes{"tp"}, 0, true), "dp", "tp")
			}
			return c.Psum(x, "dp", "tp")
		}, 5, "collective #0 mismatch: device 0 called psum(f32[2,4]{dp,tp} over dp,tp) but device 5 called all_gather(f32[2,4]{dp,tp} over tp, axis 0 tiled)"},
		{"a device returns early", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			y := c.Psum(x, "dp", "tp")
			if c.Device().ID() == 2 {
				return y
			}
			return c.Psum(tensor.Sum(y), "dp", "tp")
		}, 2, "returned after 1 collectives, but device"},
		{"shape mismatch", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			if c.Device().ID() == 1 {
				x = tensor.Concat(0, x, x)
			}
			return tensor.Sum(c.Psum(x, "dp", "tp"))
		}, 1, "collective #0 mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := shard.MapErr(m, shard.P("dp"), shard.P(), tc.fn)
			var err error
			within(t, 5*time.Second, func() { _, err = f(x) })
			require.Error(t, err)
			var de *shard.DeviceError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tc.device, de.Device.ID())
			assert.Contains(t, err.Error(), tc.message)
			// Map (not MapErr) panics with such an error.
			p := panicValue(func() { shard.Map(m, shard.P("dp"), shard.P(), tc.fn)(x) })
			require.ErrorAs(t, p.(error), &de)
			assert.Equal(t, tc.device, de.Device.ID())
			assert.Contains(t, p.(error).Error(), tc.message)
		})
	}
}

func TestPanicInBackward(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	explode := autodiff.CustomVJP("explode",
		func(x *tensor.Tensor) (*tensor.Tensor, struct{}) { return x, struct{}{} },
		func(_ struct{}, g *tensor.Tensor) *tensor.Tensor {
			panic(fmt.Sprintf("backward failed on a block %v", g))
		})
	f := shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		y := x
		if c.Device().ID() == 4 {
			y = explode(x)
		}
		return c.Psum(tensor.Sum(tensor.Square(y)), "dp", "tp")
	})
	x := tensor.Ones(tensor.Float32, 8, 4)
	var p any
	within(t, 5*time.Second, func() {
		defer func() { p = recover() }()
		autodiff.Grad(f)(x)
	})
	require.NotNil(t, p)
	err, ok := p.(error)
	require.True(t, ok, "panic value %v", p)
	var de *shard.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 4, de.Device.ID())
	assert.Equal(t, "shard.Map (backward)", de.Op)
	assert.Contains(t, err.Error(), "backward failed on a block f32[2,4]{dp}")
}

func TestCapturedTracedTensorIsReported(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	w := tensor.Ones(tensor.Float32, 4)
	x := tensor.Ones(tensor.Float32, 8, 4)
	assert.PanicsWithValue(t, "shard.Map: output (root) f32[] depends on a traced tensor that fn closes over; pass it in through the input tree so its gradient flows", func() {
		autodiff.Grad(func(w *tensor.Tensor) *tensor.Tensor {
			return shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				return c.Psum(tensor.Sum(tensor.Mul(x, w)), "dp", "tp")
			})(x)
		})(w)
	})
	// When the Map is differentiated through an input, the closed-over
	// tensor is caught as soon as an op mixes it with a block.
	// Any device may be the first to report it.
	p := panicValue(func() {
		autodiff.Grad(func(in dpIn) *tensor.Tensor {
			return shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				return c.Psum(tensor.Sum(tensor.Mul(x, in.W)), "dp", "tp")
			})(in.X)
		})(dpIn{W: w, X: x})
	})
	var de *shard.DeviceError
	require.ErrorAs(t, p.(error), &de)
	assert.Equal(t, "shard.Map: fn uses the traced tensor f32[4] that is not one of its inputs; pass it in through the input tree", de.Value)
}

func panicValue(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// A Ctx kept past its Map call fails with a message saying so, not with
// an internal signal or a hang.
func TestCtxUsedAfterMapReturned(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := shard.NewMesh([]int{2}, []string{"dp"})
	var saved *shard.Ctx
	shard.Map(m, shard.P(), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		if c.Device().ID() == 0 {
			saved = c
		}
		return x
	})(tensor.Ones(tensor.Float32, 2))
	assert.PanicsWithValue(t,
		"shard.Ctx: psum(f32[2]{dp} over dp) on CpuDevice(id=0) after its shard.Map call returned; a Ctx is valid only inside fn",
		func() { saved.Psum(tensor.Ones(tensor.Float32, 2), "dp") })
}
