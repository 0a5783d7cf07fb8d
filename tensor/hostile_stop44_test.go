package tensor_test

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Hostile uses of tensor.Beside: nil operands panic at the call naming
// the op; a second wait panics (it hung on a closed region, or ran host
// twice at GOMAXPROCS 1 and inside shard.Map); a panic of host on one
// device fails its Map call without leaving the other devices waiting.
func TestHostileBeside(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	x := tensor.Ones(tensor.Float32, 4)
	const twice = "tensor.Beside: wait called a second time (each call must be followed by exactly one wait)"
	within := func(t *testing.T, f func() any) any {
		t.Helper()
		done := make(chan any, 1)
		go func() { done <- f() }()
		select {
		case r := <-done:
			return r
		case <-time.After(20 * time.Second):
			require.FailNow(t, "did not return in 20 s")
			return nil
		}
	}
	recovered := func(f func()) func() any {
		return func() (r any) {
			defer func() { r = recover() }()
			f()
			return nil
		}
	}
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		require.PanicsWithValue(t, "tensor.Beside: operand like is nil", func() { tensor.Beside(nil, func() {}) })
		require.PanicsWithValue(t, "tensor.Beside: nil host function", func() { tensor.Beside(x, nil) })
		calls := 0
		wait := tensor.Beside(x, func() { calls++ })
		wait()
		require.Equal(t, twice, within(t, recovered(wait)), "GOMAXPROCS %d", procs)
		require.Equal(t, 1, calls, "GOMAXPROCS %d: host ran once", procs)
		// A wait never called: host runs at most once, later calls work.
		tensor.Beside(x, func() {})
		calls = 0
		tensor.Beside(x, func() { calls++ })()
		require.Equal(t, 1, calls)
	}

	m := shard.NewMesh([]int{2}, []string{"dp"})
	for _, tc := range []struct {
		name string
		fn   func(c *shard.Ctx, b *tensor.Tensor)
		want string
	}{
		{"nil host", func(c *shard.Ctx, b *tensor.Tensor) { tensor.Beside(b, nil) }, "tensor.Beside: nil host function"},
		{"wait twice", func(c *shard.Ctx, b *tensor.Tensor) {
			calls := 0
			wait := tensor.Beside(b, func() { calls++ })
			wait()
			if calls != 1 {
				panic("host did not run once")
			}
			wait()
		}, twice},
		{"a panic of host on one device", func(c *shard.Ctx, b *tensor.Tensor) {
			wait := tensor.Beside(b, func() {
				if c.AxisIndex("dp") == 1 {
					panic("host fails")
				}
			})
			wait()
			c.Psum(b, "dp") // device 0 waits here for device 1
		}, "host fails"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := shard.MapErr(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
				tc.fn(c, b)
				return b
			})
			r := within(t, func() any { _, err := f(x); return err })
			err, _ := r.(error)
			var de *shard.DeviceError
			require.True(t, errors.As(err, &de), "want a *DeviceError, got %v", r)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "runtime error")
		})
	}
}

// Hostile uses of tensor.StepGroup: the zero value flushes nothing;
// wrong operands panic at Add naming the op and the gradient in type
// notation; a step panicking (a gradient larger than its parameter) in a
// Flush lets the other waiting steps run, names step's op and leaves the
// group empty and usable.
func TestHostileStepGroup(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	var q tensor.StepGroup
	q.Flush() // nothing added
	q.Flush()

	sgd := func(n int) (*tensor.Tensor, tensor.PieceStep) {
		p := tensor.Ones(tensor.Float32, n)
		p2, _, step := tensor.SGDStepIntoLater(nil, p, nil, 0, 0.5, false)
		return p2, step
	}
	_, step := sgd(4)
	g := tensor.Ones(tensor.Float32, 4)
	const op = "tensor.(*StepGroup).Add: "
	for _, tc := range []struct {
		name string
		add  func()
		want string
	}{
		{"nil step", func() { q.Add(nil, g) }, op + "nil step"},
		{"nil gradient", func() { q.Add(step, nil) }, op + "operand g is nil"},
		{"int32 gradient", func() { q.Add(step, tensor.Zeros(tensor.Int32, 4)) }, op + "i32[4]: want an untraced, unbatched float32 host gradient"},
		{"bf16 gradient", func() { q.Add(step, tensor.Zeros(tensor.BFloat16, 4)) }, op + "bf16[4]: want an untraced, unbatched float32 host gradient"},
		{"float64 gradient", func() { q.Add(step, tensor.Zeros(tensor.Float64, 2, 2)) }, op + "f64[2,2]: want an untraced, unbatched float32 host gradient"},
	} {
		require.PanicsWithValue(t, tc.want, tc.add, tc.name)
	}

	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		a, stepA := sgd(4)
		b, stepB := sgd(3)
		c, stepC := sgd(4)
		want := "tensor.SGDStepIntoLater: step of elements [0, 5) of a parameter of 3"
		run := func() {
			q.Add(stepA, tensor.Ones(tensor.Float32, 4))
			q.Add(stepB, tensor.Ones(tensor.Float32, 5)) // one too many
			q.Add(stepC, tensor.Ones(tensor.Float32, 4))
			q.Flush()
		}
		require.PanicsWithValue(t, want, run, "GOMAXPROCS %d", procs)
		// At GOMAXPROCS 1 the Add ran the step at once and panicked
		// there; at 2 the steps waited, and those beside the failing one
		// ran in the Flush. The group is empty either way.
		require.Equal(t, []float32{1.5, 1.5, 1.5, 1.5}, a.Float32s(), "GOMAXPROCS %d", procs)
		if procs == 2 {
			require.Equal(t, []float32{1.5, 1.5, 1.5, 1.5}, c.Float32s())
		}
		_ = b
		q.Flush()
		d, stepD := sgd(2)
		q.Add(stepD, tensor.Ones(tensor.Float32, 2))
		q.Flush()
		require.Equal(t, []float32{1.5, 1.5}, d.Float32s())
	}
}
