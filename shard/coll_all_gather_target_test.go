package shard_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestGatherTarget: an all-gather whose place was taken before its block
// was computed (Ctx.AllGatherInvariantTarget) gives AllGatherInvariant's
// result bit for bit and counts the same bytes and calls, whether the
// block was written into the lent block or is copied there, with
// collectives issued between the target and its start, and where
// nothing is lent (a strided block, float64); the lent block is the
// device's part of the result.
func TestGatherTarget(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	r := rand.New(rand.NewPCG(7, 8))
	x := randT(r, 16, 8)
	dp := shard.Axes{"dp"}
	cases := []struct {
		name        string
		lent        bool // whether the device's first target lends its block
		sync, async ctxFn
	}{
		{"written into the block, two in flight around a psum", true, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			a := c.AllGatherInvariant(tensor.MulScalar(x, 3), dp, 0, true)
			s := c.Psum(x, "dp")
			b := c.AllGatherInvariant(x, shard.Axes{"dp", "tp"}, 0, false)
			return sum4(c, a, s, b)
		}, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			ta := c.AllGatherInvariantTarget(tensor.Float32, x.Shape(), dp, 0, true)
			tb := c.AllGatherInvariantTarget(tensor.Float32, x.Shape(), shard.Axes{"dp", "tp"}, 0, false)
			s := c.Psum(x, "dp") // after both places
			blk := ta.Block()
			copy(blk.BorrowFloat32(), tensor.MulScalar(x, 3).Float32s())
			hb := tb.Start(x) // copied into its block
			ha := ta.Start(blk)
			return sum4(c, ha.Wait(), s, hb.Wait())
		}},
		{"strided (tiled along dim 1) and float64: nothing lent", false, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			a := c.AllGatherInvariant(x, shard.Axes{"tp"}, 1, true)
			d := c.AllGatherInvariant(tensor.AsType(x, tensor.Float64), dp, 0, true)
			return sum4(c, tensor.Reshape(a, 4, 8), c.Psum(x, "dp"), tensor.AsType(d, tensor.Float32))
		}, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			ta := c.AllGatherInvariantTarget(tensor.Float32, x.Shape(), shard.Axes{"tp"}, 1, true)
			td := c.AllGatherInvariantTarget(tensor.Float64, x.Shape(), dp, 0, true)
			a := ta.Start(x).Wait()
			d := td.Start(tensor.AsType(x, tensor.Float64)).Wait()
			return sum4(c, tensor.Reshape(a, 4, 8), c.Psum(x, "dp"), tensor.AsType(d, tensor.Float32))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := shard.P([]string{"dp", "tp"})
			var cs, ca shard.Comm
			want := shard.Gather(shard.Map(m, spec, spec, tc.sync, shard.WithComm(&cs))(x))
			got := shard.Gather(shard.Map(m, spec, spec, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				y := tc.async(c, x)
				return y
			}, shard.WithComm(&ca))(x))
			assert.Equal(t, want.Float32s(), got.Float32s())
			for _, k := range []string{"psum", "all_gather"} {
				for _, d := range m.Devices() {
					assert.Equal(t, cs.Bytes(d, k), ca.Bytes(d, k), "%s bytes sent by device %d", k, d.ID())
				}
				assert.Equal(t, cs.Calls(k), ca.Calls(k), k)
			}
			shard.Map(m, spec, spec, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				tg := c.AllGatherInvariantTarget(tensor.Float32, x.Shape(), shard.Axes{"tp"}, 1, true)
				if tc.lent {
					tg = c.AllGatherInvariantTarget(tensor.Float32, x.Shape(), dp, 0, true)
				}
				assert.Equal(t, tc.lent, tg.Block() != nil)
				blk := tg.Block()
				if blk != nil {
					copy(blk.BorrowFloat32(), x.Float32s())
					x = blk
				}
				g := tg.Start(x).Wait()
				if blk != nil { // the lent block is this device's rows of the result
					i := c.AxisIndex("dp")
					assert.Equal(t, x.Float32s(), tensor.SliceAxis(g, 0, 2*i, 2*i+2).Float32s())
				}
				return x
			})(x)
		})
	}
}

// sum4 adds a (rows of the gathered result), the psum s and b (stacked
// or gathered, as a 4×8 sum of its rows) on every device, for a 2×8
// block.
func sum4(c *shard.Ctx, a, s, b *tensor.Tensor) *tensor.Tensor {
	rows := func(y *tensor.Tensor) *tensor.Tensor {
		y = tensor.Reshape(y, -1, 8)
		return tensor.SliceAxis(y, 0, 0, 2)
	}
	y := tensor.Add(rows(a), rows(b))
	return tensor.Add(c.Vary(y, "dp", "tp"), c.Vary(s, "dp", "tp"))
}

// TestGatherTargetErrors: a lent target never started fails the Map call
// naming it; a second start, and a start with a block of another shape,
// panic.
func TestGatherTargetErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	x := tensor.Ones(tensor.Float32, 16, 8)
	spec := shard.P([]string{"dp", "tp"})
	_, err := shard.MapErr(m, spec, spec, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		c.AllGatherInvariantTarget(tensor.Float32, x.Shape(), shard.Axes{"dp"}, 0, true)
		return x
	})(x)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "never waited for")
	assert.Contains(t, err.Error(), "all_gather")
	_, err = shard.MapErr(m, spec, spec, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		tg := c.AllGatherInvariantTarget(tensor.Float32, x.Shape(), shard.Axes{"dp"}, 0, true)
		tg.Start(x).Wait()
		tg.Start(x)
		return x
	})(x)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "shard.GatherTarget.Start: f32[2,8]{dp,tp}: the target was started already")
	_, err = shard.MapErr(m, spec, spec, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		tg := c.AllGatherInvariantTarget(tensor.Float32, []int{2, 4}, shard.Axes{"dp"}, 0, true)
		return tg.Start(x).Wait()
	})(x)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "shard.GatherTarget.Start: f32[2,8]{dp,tp} for a target of blocks f32[2,4]")
	assert.Panics(t, func() {
		shard.Map(m, spec, spec, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			c.AllGatherInvariantTarget(tensor.Float32, x.Shape(), shard.Axes{"dp"}, 2, true)
			return x
		})(x)
	})
}
