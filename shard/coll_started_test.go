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

// TestStartedReductionsMatchSync: PsumStart, PsumScatterStart and
// AllGatherInvariantStart, waited for after other work and around
// synchronous collectives, give the synchronous results bit for bit, and
// count the same bytes and calls.
func TestStartedReductionsMatchSync(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	r := rand.New(rand.NewPCG(3, 4))
	x := randT(r, 16, 8)
	work := func(x *tensor.Tensor) *tensor.Tensor { return tensor.MatMul(x, tensor.Transpose(x)) }
	cases := []struct {
		name        string
		sync, async ctxFn
	}{
		{"psum over dp", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.Vary(c.Psum(x, "dp"), "dp")
		}, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			h := c.PsumStart(x, "dp")
			work(x)
			return c.Vary(h.Wait(), "dp")
		}},
		{"psum_scatter over dp,tp along dim 1", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Tile(c.PsumScatter(x, shard.Axes{"tp", "dp"}, 1, true), 1, 8)
		}, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			h := c.PsumScatterStart(x, shard.Axes{"tp", "dp"}, 1, true)
			work(x)
			return tensor.Tile(h.Wait(), 1, 8)
		}},
		{"three in flight around a synchronous psum, waited in reverse", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			a := c.PsumScatter(x, shard.Axes{"dp"}, 1, true)
			b := c.Psum(tensor.MulScalar(x, 3), "tp")
			s := c.Psum(x, "dp", "tp")
			d := c.Psum(x, "dp")
			return tensor.Add(tensor.Add(tensor.Tile(a, 1, 4), c.Vary(b, "tp")), c.Vary(tensor.Add(s, d), "dp", "tp"))
		}, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			ha := c.PsumScatterStart(x, shard.Axes{"dp"}, 1, true)
			hb := c.PsumStart(tensor.MulScalar(x, 3), "tp")
			s := c.Psum(x, "dp", "tp")
			hd := c.PsumStart(x, "dp")
			d := hd.Wait()
			b := hb.Wait()
			a := ha.Wait()
			return tensor.Add(tensor.Add(tensor.Tile(a, 1, 4), c.Vary(b, "tp")), c.Vary(tensor.Add(s, d), "dp", "tp"))
		}},
		{"two all_gathers over dp in flight, waited in reverse", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			a := c.AllGatherInvariant(x, shard.Axes{"dp"}, 0, true)
			b := c.AllGatherInvariant(tensor.MulScalar(x, 3), shard.Axes{"dp"}, 0, true)
			return tensor.SliceAxis(c.Vary(tensor.Add(a, b), "dp"), 0, 0, 2)
		}, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			ha := c.AllGatherInvariantStart(x, shard.Axes{"dp"}, 0, true)
			hb := c.AllGatherInvariantStart(tensor.MulScalar(x, 3), shard.Axes{"dp"}, 0, true)
			work(x)
			b := hb.Wait()
			a := ha.Wait()
			return tensor.SliceAxis(c.Vary(tensor.Add(a, b), "dp"), 0, 0, 2)
		}},
		{"all_gathers over tp stacked along dim 1 and over dp,tp in float64, around a psum", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			a := c.AllGatherInvariant(x, shard.Axes{"tp"}, 1, false)
			s := c.Psum(x, "dp")
			d := c.AllGatherInvariant(tensor.AsType(x, tensor.Float64), shard.Axes{"dp", "tp"}, 1, true)
			y := tensor.Add(tensor.SliceAxis(tensor.Reshape(a, 2, 16), 1, 0, 8), c.Vary(s, "dp"))
			return tensor.Add(c.Vary(y, "tp"), c.Vary(tensor.AsType(tensor.SliceAxis(d, 1, 8, 16), tensor.Float32), "dp", "tp"))
		}, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			ha := c.AllGatherInvariantStart(x, shard.Axes{"tp"}, 1, false)
			s := c.Psum(x, "dp")
			hd := c.AllGatherInvariantStart(tensor.AsType(x, tensor.Float64), shard.Axes{"dp", "tp"}, 1, true)
			d := hd.Wait()
			a := ha.Wait()
			y := tensor.Add(tensor.SliceAxis(tensor.Reshape(a, 2, 16), 1, 0, 8), c.Vary(s, "dp"))
			return tensor.Add(c.Vary(y, "tp"), c.Vary(tensor.AsType(tensor.SliceAxis(d, 1, 8, 16), tensor.Float32), "dp", "tp"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := shard.P([]string{"dp", "tp"})
			var cs, ca shard.Comm
			want := shard.Gather(shard.Map(m, spec, spec, tc.sync, shard.WithComm(&cs))(x))
			got := shard.Gather(shard.Map(m, spec, spec, tc.async, shard.WithComm(&ca))(x))
			assert.Equal(t, want.Float32s(), got.Float32s())
			for _, k := range []string{"psum", "psum_scatter", "all_gather"} {
				for _, d := range m.Devices() {
					assert.Equal(t, cs.Bytes(d, k), ca.Bytes(d, k), "%s bytes sent by device %d", k, d.ID())
				}
				assert.Equal(t, cs.Calls(k), ca.Calls(k), k)
			}
		})
	}
}

// TestStartedReductionNeverWaited: a started reduction never waited for
// fails the Map call naming it, and waiting twice panics.
func TestStartedReductionNeverWaited(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	x := tensor.Ones(tensor.Float32, 16, 8)
	spec := shard.P([]string{"dp", "tp"})
	_, err := shard.MapErr(m, spec, spec, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		c.PsumScatterStart(x, shard.Axes{"dp"}, 1, true)
		return x
	})(x)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "never waited for")
	assert.Contains(t, err.Error(), "psum_scatter")
	_, err = shard.MapErr(m, spec, spec, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		h := c.PsumStart(x, "dp")
		h.Wait()
		return h.Wait()
	})(x)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already waited for")
}

// TestCommWaited: Comm.Waited counts the time a device waits in a
// collective for a slower device.
func TestCommWaited(t *testing.T) {
	m := shard.NewMeshOn(shard.Devices()[:2], []int{2}, []string{"d"})
	x := tensor.Ones(tensor.Float32, 2, 256)
	var comm shard.Comm
	// Device 1 starts its work once device 0 is about to wait, so that a
	// busy machine, running device 0 late, cannot reverse the roles.
	ready := make(chan struct{})
	shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		if c.AxisIndex("d") == 0 {
			close(ready)
		} else {
			<-ready
			for range 20 {
				x = tensor.Tanh(tensor.MatMul(tensor.Transpose(x), x)) // 256x256 products: well over a millisecond
				x = tensor.SliceAxis(x, 0, 0, 1)
			}
		}
		return c.Vary(c.Psum(x, "d"), "d")
	}, shard.WithComm(&comm))(x)
	d0, d1 := m.Devices()[0], m.Devices()[1]
	assert.Greater(t, comm.Waited(d0), comm.Waited(d1), "device 0 waits for device 1's work")
	comm.Reset()
	assert.Zero(t, comm.Waited(d0))
}
