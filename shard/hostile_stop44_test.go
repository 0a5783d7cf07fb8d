package shard_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Hostile inputs to the grouped collectives of stop 44
// (Ctx.PsumScatterGroupStart, Ctx.AllGatherInvariantTargets and
// GatherTargets): a programmer error on any device, or on one device only,
// fails the Map call with a *DeviceError naming the op and the operands in
// type notation, within mapWithin's timeout (no device left waiting), and
// never with a runtime error from inside the collective.

func TestHostilePsumScatterGroupStart(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"dp"})
	const op = "shard.Ctx.PsumScatterGroupStart: "
	x := tensor.Ones(tensor.Float32, 4, 6)
	dp := shard.Axes{"dp"}
	one := func(c *shard.Ctx) bool { return c.AxisIndex("dp") == 1 }
	cases := []struct {
		name string
		fn   func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle
		want string
	}{
		{"no blocks", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			return c.PsumScatterGroupStart(nil, dp, nil)
		}, op + "0 blocks and 0 dimensions"},
		{"fewer dims than blocks", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			return c.PsumScatterGroupStart([]*tensor.Tensor{x, x}, dp, []int{0})
		}, op + "2 blocks and 1 dimensions"},
		{"a nil block", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			return c.PsumScatterGroupStart([]*tensor.Tensor{x, nil}, dp, []int{0, 0})
		}, op + "block 1 is nil"},
		{"an int32 block", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			return c.PsumScatterGroupStart([]*tensor.Tensor{tensor.AsType(x, tensor.Int32)}, dp, []int{0})
		}, op + "block 0 i32[2,6]{dp}: want float32 blocks"},
		{"a bf16 block", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			return c.PsumScatterGroupStart([]*tensor.Tensor{x, tensor.AsType(x, tensor.BFloat16)}, dp, []int{0, 1})
		}, op + "block 1 bf16[2,6]{dp}: want float32 blocks"},
		{"a float64 block on one device", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			if one(c) {
				x = tensor.AsType(x, tensor.Float64)
			}
			return c.PsumScatterGroupStart([]*tensor.Tensor{x}, dp, []int{0})
		}, op + "block 0 f64[2,6]{dp}: want float32 blocks"},
		{"a dimension not divisible", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			return c.PsumScatterGroupStart([]*tensor.Tensor{tensor.SliceAxis(x, 1, 0, 3)}, dp, []int{1})
		}, op + "f32[2,3]{dp}: dim 1 (3) is not divisible by dp=2"},
		{"a dimension out of range", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			return c.PsumScatterGroupStart([]*tensor.Tensor{x}, dp, []int{2})
		}, op + "axis 2 out of range for f32[2,6]{dp}"},
		{"a negative dimension out of range", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			return c.PsumScatterGroupStart([]*tensor.Tensor{x}, dp, []int{-3})
		}, op + "axis -3 out of range for f32[2,6]{dp}"},
		{"a scalar block", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			return c.PsumScatterGroupStart([]*tensor.Tensor{tensor.Scalar(1)}, dp, []int{0})
		}, op + "f32[]: needs at least one dimension"},
		{"an axis the mesh lacks", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			return c.PsumScatterGroupStart([]*tensor.Tensor{x}, shard.Axes{"tp"}, []int{0})
		}, op + "mesh Mesh('dp': 2) has no axis \"tp\""},
		{"no axes", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			return c.PsumScatterGroupStart([]*tensor.Tensor{x}, nil, []int{0})
		}, op + "no mesh axes given"},
		{"other dimensions on one device", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			d := 0
			if one(c) {
				d = 1
			}
			return c.PsumScatterGroupStart([]*tensor.Tensor{x}, dp, []int{d})
		}, "psum_scatter group"},
		{"more blocks on one device", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			xs := []*tensor.Tensor{x}
			if one(c) {
				xs = append(xs, x)
			}
			return c.PsumScatterGroupStart(xs, dp, make([]int, len(xs)))
		}, "psum_scatter group"},
		{"a panic on one device before the group", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			if one(c) {
				panic("device 1 fails")
			}
			return c.PsumScatterGroupStart([]*tensor.Tensor{x}, dp, []int{0})
		}, "device 1 fails"},
		{"a donated block", func(c *shard.Ctx, x *tensor.Tensor) *shard.Handle {
			y := tensor.MulScalar(x, 1)
			tensor.Donate(y)
			return c.PsumScatterGroupStart([]*tensor.Tensor{y}, dp, []int{0})
		}, op + "operand f32[2,6]{dp} was donated (tensor.Donate)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := shard.MapErr(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				return tc.fn(c, x).Wait()
			})
			err := mapWithin(t, func() error { _, err := f(x); return err })
			var de *shard.DeviceError
			require.True(t, errors.As(err, &de), "want a *DeviceError, got %v", err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "runtime error")
		})
	}
}

func TestHostileAllGatherInvariantTargets(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"dp"})
	const op = "shard.Ctx.AllGatherInvariantTargets: "
	const start = "shard.GatherTargets.Start: "
	x := tensor.Ones(tensor.Float32, 4, 6)
	dp := shard.Axes{"dp"}
	one := func(c *shard.Ctx) bool { return c.AxisIndex("dp") == 1 }
	gather := func(c *shard.Ctx, shapes [][]int, dims []int, xs ...*tensor.Tensor) *tensor.Tensor {
		tg := c.AllGatherInvariantTargets(shapes, dp, dims)
		tg.Start(xs)
		return tg.Wait()[0]
	}
	cases := []struct {
		name string
		fn   func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor
		want string
	}{
		{"no shapes", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return gather(c, nil, nil)
		}, op + "0 shapes and 0 dimensions"},
		{"fewer dims than shapes", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return gather(c, [][]int{{2, 6}, {2, 6}}, []int{0}, x, x)
		}, op + "2 shapes and 1 dimensions"},
		{"a dimension out of range", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return gather(c, [][]int{{2, 6}}, []int{2}, x)
		}, op + "dim 2 out of range for a block f32[2,6]"},
		{"a negative dimension out of range", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return gather(c, [][]int{{2, 6}}, []int{-3}, x)
		}, op + "dim -3 out of range for a block f32[2,6]"},
		{"a scalar shape", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return gather(c, [][]int{{}}, []int{0}, tensor.Scalar(1))
		}, op + "dim 0 out of range for a block f32[]"},
		{"a negative size", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return gather(c, [][]int{{2, -6}}, []int{0}, x)
		}, op + "block 0: negative dimension in f32[2,-6]"},
		{"an axis the mesh lacks", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			tg := c.AllGatherInvariantTargets([][]int{{2, 6}}, shard.Axes{"tp"}, []int{0})
			tg.Start([]*tensor.Tensor{x})
			return tg.Wait()[0]
		}, op + "mesh Mesh('dp': 2) has no axis \"tp\""},
		{"other shapes on one device", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			if one(c) {
				return gather(c, [][]int{{12}}, []int{0}, tensor.Reshape(x, 12))
			}
			return gather(c, [][]int{{2, 6}}, []int{0}, x)
		}, "all_gather group"},
		{"a nil block", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return gather(c, [][]int{{2, 6}}, []int{0}, nil)
		}, start + "block 0 is nil"},
		{"fewer blocks than targets", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return gather(c, [][]int{{2, 6}, {2, 6}}, []int{0, 0}, x)
		}, start + "1 blocks for 2 targets"},
		{"an int32 block", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return gather(c, [][]int{{2, 6}}, []int{0}, tensor.AsType(x, tensor.Int32))
		}, start + "block 0 i32[2,6]{dp} for a target of blocks f32[2,6]"},
		{"a bf16 block on one device", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			if one(c) {
				x = tensor.AsType(x, tensor.BFloat16)
			}
			return gather(c, [][]int{{2, 6}}, []int{0}, x)
		}, start + "block 0 bf16[2,6]{dp} for a target of blocks f32[2,6]"},
		{"a panic on one device between take and start", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			tg := c.AllGatherInvariantTargets([][]int{{2, 6}}, dp, []int{0})
			if one(c) {
				panic("device 1 fails")
			}
			tg.Start([]*tensor.Tensor{x})
			return tg.Wait()[0]
		}, "device 1 fails"},
		{"a block out of range", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			tg := c.AllGatherInvariantTargets([][]int{{2, 6}}, dp, []int{0})
			tg.Block(1)
			return x
		}, "shard.GatherTargets.Block: block 1 of 1 targets"},
		{"a negative block", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			tg := c.AllGatherInvariantTargets([][]int{{2, 6}}, dp, []int{0})
			tg.Block(-1)
			return x
		}, "shard.GatherTargets.Block: block -1 of 1 targets"},
		{"waited twice", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			tg := c.AllGatherInvariantTargets([][]int{{2, 6}}, dp, []int{0})
			tg.Start([]*tensor.Tensor{x})
			tg.Wait()
			return tg.Wait()[0]
		}, "shard.GatherTargets.Wait: the targets were waited for already"},
		{"strided blocks waited twice", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			tg := c.AllGatherInvariantTargets([][]int{{2, 6}}, dp, []int{1}) // not lent
			tg.Start([]*tensor.Tensor{x})
			tg.Wait()
			return tg.Wait()[0]
		}, "shard.GatherTargets.Wait: the targets were waited for already"},
		{"a group waited twice", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			h := c.PsumScatterGroupStart([]*tensor.Tensor{x}, dp, []int{0})
			h.Wait()
			return h.Wait()
		}, "shard.Handle.Wait: the started psum_scatter group was already waited for"},
		{"waited before started", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			tg := c.AllGatherInvariantTargets([][]int{{2, 6}}, dp, []int{0})
			return tg.Wait()[0]
		}, "shard.GatherTargets.Wait: the targets were not started"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := shard.MapErr(m, shard.P("dp"), shard.P(), tc.fn)
			err := mapWithin(t, func() error { _, err := f(x); return err })
			var de *shard.DeviceError
			require.True(t, errors.As(err, &de), "want a *DeviceError, got %v", err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "runtime error")
		})
	}
}

// Dimensions counted from the end name the same dimension as from the
// front, also when the devices count them differently, and the targets
// keep their own copies of the shapes and dimensions given.
func TestHostileGroupedNegativeDims(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"dp"})
	dp := shard.Axes{"dp"}
	x := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 2, 4)
	scatter := func(front bool) *tensor.Tensor {
		return shard.Map(m, shard.P(), shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			d := 1
			if !front && c.AxisIndex("dp") == 0 {
				d = -1
			}
			return c.PsumScatterGroupStart([]*tensor.Tensor{x}, dp, []int{d}).Wait()
		})(x)
	}
	require.Equal(t, shard.Gather(scatter(true)).Float32s(), shard.Gather(scatter(false)).Float32s())

	gather := func(dim int) *tensor.Tensor {
		return shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			shapes, dims := [][]int{x.Shape()}, []int{dim}
			tg := c.AllGatherInvariantTargets(shapes, dp, dims)
			shapes[0][0], dims[0] = 99, 1 // the caller's slices, reused
			tg.Start([]*tensor.Tensor{x})
			return tg.Wait()[0]
		})(x)
	}
	want := shard.Gather(gather(0))
	require.Equal(t, []int{2, 4}, want.Shape())
	require.Equal(t, x.Float32s(), want.Float32s())
	got := shard.Gather(gather(-2))
	require.Equal(t, want.Shape(), got.Shape())
	require.Equal(t, want.Float32s(), got.Float32s())
}

// A Ctx kept past its Map call fails naming the op when it is used again,
// with the grouped collectives as with the others.
func TestHostileGroupedStaleCtx(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"dp"})
	var stale *shard.Ctx
	shard.Map(m, shard.P(), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		if c.AxisIndex("dp") == 0 {
			stale = c
		}
		return x
	})(tensor.Ones(tensor.Float32, 2))
	x := tensor.Ones(tensor.Float32, 2)
	for name, fn := range map[string]func(){
		"PsumScatterGroupStart": func() {
			stale.PsumScatterGroupStart([]*tensor.Tensor{x}, shard.Axes{"dp"}, []int{0}).Wait()
		},
		"AllGatherInvariantTargets": func() {
			tg := stale.AllGatherInvariantTargets([][]int{{2}}, shard.Axes{"dp"}, []int{0})
			tg.Start([]*tensor.Tensor{x})
			tg.Wait()
		},
	} {
		t.Run(name, func(t *testing.T) {
			done := make(chan any, 1)
			go func() {
				defer func() { done <- recover() }()
				fn()
			}()
			select {
			case r := <-done:
				require.NotNil(t, r, "a stale Ctx was used without a panic")
				msg := fmt.Sprint(r)
				assert.Contains(t, msg, "a Ctx is valid only inside fn")
				assert.NotContains(t, msg, "runtime error")
			case <-time.After(20 * time.Second):
				require.FailNow(t, "a stale Ctx's collective did not return")
			}
		})
	}
}

// Empty blocks (a dimension of size 0) are reduce-scattered and gathered
// as empty parts and results, beside a block that is not empty.
func TestHostileGroupedEmptyBlocks(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"dp"})
	dp := shard.Axes{"dp"}
	x := tensor.FromFloat32([]float32{1, 2, 3, 4}, 4)
	got := shard.Map(m, shard.P(), shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.PsumScatterGroupStart([]*tensor.Tensor{tensor.Zeros(tensor.Float32, 0, 6), x}, dp, []int{0, 0}).Wait()
	})(x)
	require.Equal(t, []float32{2, 4, 6, 8}, shard.Gather(got).Float32s())

	outs := shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) []*tensor.Tensor {
		tg := c.AllGatherInvariantTargets([][]int{{0, 3}, {2}}, dp, []int{0, 0})
		tg.Start([]*tensor.Tensor{tensor.Zeros(tensor.Float32, 0, 3), x})
		return tg.Wait()
	})(x)
	require.Equal(t, []int{0, 3}, outs[0].Shape())
	require.Equal(t, []float32{1, 2, 3, 4}, outs[1].Float32s())
}

// A nil Ctx (collectives called outside shard.Map) panics naming the op.
func TestHostileGroupedNilCtx(t *testing.T) {
	var c *shard.Ctx
	x := tensor.Ones(tensor.Float32, 2)
	require.PanicsWithValue(t, "shard.Ctx.PsumScatterGroupStart: nil Ctx (collectives run inside shard.Map's fn, on the Ctx it is given)",
		func() { c.PsumScatterGroupStart([]*tensor.Tensor{x}, shard.Axes{"dp"}, []int{0}) })
	require.PanicsWithValue(t, "shard.Ctx.AllGatherInvariantTargets: nil Ctx (collectives run inside shard.Map's fn, on the Ctx it is given)",
		func() { c.AllGatherInvariantTargets([][]int{{2}}, shard.Axes{"dp"}, []int{0}) })
}
