package shard_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// scale makes a block depend on the device, so gradients differ per device.
// The factor is device-dependent, so it is marked as varying.
func scale(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
	s := c.Vary(tensor.Scalar(float32(1+c.AxisIndex("dp", "tp"))/4), "dp", "tp")
	return tensor.Mul(x, s)
}

// TestCollectiveGradients checks the VJP of every collective against
// finite differences of the whole Map.
func TestCollectiveGradients(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(3, 3))
	type fn = func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor
	cases := []struct {
		name    string
		in, out shard.Spec
		x       *tensor.Tensor
		f       fn
	}{
		{"psum", shard.P("dp"), shard.P(), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.Psum(scale(c, x), "dp", "tp"))
		}},
		{"psum of invariant", shard.P(), shard.P(), randT(r, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.Psum(tensor.Square(x), "dp", "tp")
		}},
		{"pmean", shard.P("dp"), shard.P(), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.Pmean(scale(c, x), "dp", "tp"))
		}},
		{"pmax", shard.P("dp"), shard.P(), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.Pmax(scale(c, x), "dp", "tp"))
		}},
		{"pmin", shard.P("dp"), shard.P(), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.Pmin(scale(c, x), "dp", "tp"))
		}},
		{"all_gather tiled", shard.P("dp"), shard.P([]string{"dp", "tp"}), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(scale(c, c.AllGather(x, shard.Axes{"dp"}, 0, true)))
		}},
		{"all_gather stacked", shard.P(nil, "tp"), shard.P(nil, nil, []string{"dp", "tp"}), randT(r, 3, 4), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(scale(c, c.AllGather(x, shard.Axes{"tp"}, 1, false)))
		}},
		{"all_gather_invariant", shard.P("dp"), shard.P(), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.AllGatherInvariant(x, shard.Axes{"dp"}, 0, true))
		}},
		{"psum_scatter tiled", shard.P(nil, "tp"), shard.P([]string{"dp", "tp"}), randT(r, 8, 4), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.PsumScatter(scale(c, x), shard.Axes{"dp"}, 0, true))
		}},
		{"psum_scatter untiled", shard.P(), shard.P([]string{"dp", "tp"}), randT(r, 4, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.PsumScatter(scale(c, x), shard.Axes{"dp"}, 0, false))
		}},
		{"ppermute with a missing destination", shard.P("dp"), shard.P([]string{"dp", "tp"}), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.Ppermute(scale(c, x), shard.Axes{"dp"}, [][2]int{{0, 1}, {1, 2}, {2, 3}}))
		}},
		{"ring shift over two axes", shard.P([]string{"tp", "dp"}), shard.P([]string{"tp", "dp"}), randT(r, 16), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(scale(c, c.RingShift(x, shard.Axes{"tp", "dp"}, -1)))
		}},
		{"all_to_all tiled", shard.P("dp"), shard.P(nil, []string{"dp", "tp"}), randT(r, 8, 8), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(scale(c, c.AllToAll(x, shard.Axes{"dp"}, 1, 0, true)))
		}},
		{"all_to_all untiled", shard.P("dp"), shard.P([]string{"dp", "tp"}), randT(r, 8, 4), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(scale(c, c.AllToAll(x, shard.Axes{"dp"}, 1, 0, false)))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := shard.Map(m, tc.in, tc.out, tc.f)
			err := autodiff.CheckGrad(func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0]) },
				[]*tensor.Tensor{tc.x}, autodiff.CheckOptions{})
			require.NoError(t, err)
		})
	}
}

// TestPsumOverOneDevice: a psum over an axis of size 1 is the value itself,
// now invariant over that axis, and its gradient passes through.
func TestPsumOverOneDevice(t *testing.T) {
	m := shard.NewMesh([]int{1, 4}, []string{"one", "dp"})
	r := rand.New(rand.NewPCG(5, 5))
	x := randT(r, 4, 3)
	f := shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		y := c.Psum(c.Vary(tensor.Square(x), "one"), "one")
		require.Equal(t, []string{"dp"}, y.Local().AxisNames(), "psum over \"one\" leaves y invariant over it")
		return y
	})
	var comm shard.Comm
	g := shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.Psum(c.Vary(x, "one"), "one")
	}, shard.WithComm(&comm))
	assert.Equal(t, x.Float32s(), shard.Gather(g(x)).Float32s())
	assert.Equal(t, 1, comm.Calls("psum"))
	assert.Equal(t, int64(0), comm.Bytes(m.Devices()[0], "psum"))
	assert.Equal(t, tensor.Square(x).Float32s(), shard.Gather(f(x)).Float32s())
	err := autodiff.CheckGrad(func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0]) },
		[]*tensor.Tensor{x}, autodiff.CheckOptions{})
	require.NoError(t, err)
}

// raggedPlan builds per-device offsets and sizes in which device r sends
// (r+j)%2+1 rows to device j, stacked into global P("dp") int32 vectors.
func raggedPlan(n int) (io, ss, oo, rs *tensor.Tensor, rowsIn, rowsOut int) {
	size := func(r, j int) int { return (r+j)%2 + 1 }
	var ioD, ssD, ooD, rsD []int
	for r := 0; r < n; r++ {
		off := 0
		for j := 0; j < n; j++ {
			ioD = append(ioD, off)
			ssD = append(ssD, size(r, j))
			off += size(r, j)
			at := 0
			for k := 0; k < r; k++ {
				at += size(k, j)
			}
			ooD = append(ooD, at)
			rsD = append(rsD, size(j, r))
		}
		rowsIn = off
	}
	for j := 0; j < n; j++ {
		rowsOut += size(j, 0)
	}
	return tensor.FromInts(ioD), tensor.FromInts(ssD), tensor.FromInts(ooD), tensor.FromInts(rsD), rowsIn, rowsOut
}

type raggedIn struct {
	X              *tensor.Tensor
	IO, SS, OO, RS *tensor.Tensor
}

func TestRaggedAllToAll(t *testing.T) {
	m := shard.NewMesh([]int{4}, []string{"ep"})
	io, ss, oo, rs, rowsIn, rowsOut := raggedPlan(4)
	require.Equal(t, 6, rowsIn)
	require.Equal(t, 6, rowsOut)
	// Row k of device r's operand holds 100*r + k.
	var xd []float32
	for r := 0; r < 4; r++ {
		for k := 0; k < rowsIn; k++ {
			xd = append(xd, float32(100*r+k))
		}
	}
	x := tensor.FromFloat32(xd, 4*rowsIn, 1)
	f := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, in raggedIn) *tensor.Tensor {
		out := c.Local(tensor.Zeros(tensor.Float32, rowsOut, 1))
		return c.RaggedAllToAll(in.X, out, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
	})
	y := shard.Gather(f(raggedIn{x, io, ss, oo, rs})).Float32s()
	// Device 0 receives from each j, in order, (0+j)%2+1 rows from the
	// start of j's operand (j reserves its first rows for device 0).
	assert.Equal(t, []float32{0, 100, 101, 200, 300, 301}, y[:6])
	// Device 1's rows start after those j reserved for device 0.
	assert.Equal(t, []float32{1, 2, 102, 201, 202, 302}, y[6:12])

	g := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, in raggedIn) *tensor.Tensor {
		out := c.Local(tensor.Zeros(tensor.Float32, rowsOut, 2))
		return tensor.Square(scaleEP(c, c.RaggedAllToAll(in.X, out, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})))
	})
	r := rand.New(rand.NewPCG(4, 4))
	err := autodiff.CheckGrad(func(xs []*tensor.Tensor) *tensor.Tensor {
		return g(raggedIn{xs[0], io, ss, oo, rs})
	}, []*tensor.Tensor{randT(r, 4*rowsIn, 2)}, autodiff.CheckOptions{})
	require.NoError(t, err)
}

// A device whose receive sizes disagree with what the others send makes
// the ragged all-to-all panic naming the ranks, on every device, without
// any of them waiting forever at the barrier the collective ends with.
func TestRaggedAllToAllMismatch(t *testing.T) {
	m := shard.NewMesh([]int{4}, []string{"ep"})
	io, ss, oo, rs, rowsIn, rowsOut := raggedPlan(4)
	x := tensor.Zeros(tensor.Float32, 4*rowsIn, 1)
	f := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, in raggedIn) *tensor.Tensor {
		rs := in.RS
		if c.AxisIndex("ep") == 2 {
			rs = tensor.Add(rs, tensor.ScalarInt(1)) // expects one row too many from everyone
		}
		out := c.Local(tensor.Zeros(tensor.Float32, rowsOut+4, 1))
		return c.RaggedAllToAll(in.X, out, in.IO, in.SS, in.OO, rs, shard.Axes{"ep"})
	})
	requirePanicContains(t, func() { f(raggedIn{x, io, ss, oo, rs}) }, "shard.Ctx.RaggedAllToAll: device rank 2 expects")
}

func scaleEP(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
	return tensor.Mul(x, c.Vary(tensor.Scalar(float32(1+c.AxisIndex("ep"))/4), "ep"))
}

type dpIn struct {
	W *tensor.Tensor
	X *tensor.Tensor
}

// TestDataParallelGradients: gradients of a replicated weight are summed
// over the devices that used it, whether taken from outside the Map or
// inside it.
func TestDataParallelGradients(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(5, 5))
	w, x := randT(r, 6, 4), randT(r, 16, 6)
	loss := func(w, x *tensor.Tensor) *tensor.Tensor {
		return tensor.Mean(tensor.Square(tensor.Tanh(tensor.MatMul(x, w))))
	}
	baseV, baseG := autodiff.ValueAndGrad(func(w *tensor.Tensor) *tensor.Tensor { return loss(w, x) })(w)

	specs := shard.Specs{"W": shard.P(), "X": shard.P([]string{"dp", "tp"})}
	dp := shard.Map(m, specs, shard.P(), func(c *shard.Ctx, in dpIn) *tensor.Tensor {
		return c.Pmean(loss(in.W, in.X), "dp", "tp")
	})
	v, g := autodiff.ValueAndGrad(func(w *tensor.Tensor) *tensor.Tensor { return dp(dpIn{w, x}) })(w)
	assert.InDelta(t, baseV.Item(), v.Item(), 1e-6)
	assert.InDeltaSlice(t, baseG.Float64s(), g.Float64s(), 1e-6)
	assert.Nil(t, g.Layout(), "the gradient of a host weight is a host tensor")

	type out struct{ Loss, Grad *tensor.Tensor }
	inside := shard.Map(m, specs, shard.P(), func(c *shard.Ctx, in dpIn) out {
		l, g := autodiff.ValueAndGrad(func(w *tensor.Tensor) *tensor.Tensor {
			return c.Pmean(loss(w, in.X), "dp", "tp")
		})(in.W)
		return out{l, g}
	})(dpIn{w, x})
	assert.InDelta(t, baseV.Item(), inside.Loss.Item(), 1e-6)
	assert.InDeltaSlice(t, baseG.Float64s(), shard.Gather(inside.Grad).Float64s(), 1e-6)

	// The explicit way: vary the weight first, take local gradients, psum.
	explicit := shard.Map(m, specs, shard.P(), func(c *shard.Ctx, in dpIn) *tensor.Tensor {
		wv := c.Vary(in.W, "dp", "tp")
		g := autodiff.Grad(func(w *tensor.Tensor) *tensor.Tensor { return loss(w, in.X) })(wv)
		return tensor.MulScalar(c.Psum(g, "dp", "tp"), 1.0/8)
	})(dpIn{w, x})
	assert.InDeltaSlice(t, baseG.Float64s(), shard.Gather(explicit).Float64s(), 1e-6)
}

type raggedBufIn struct {
	X, Out         *tensor.Tensor
	IO, SS, OO, RS *tensor.Tensor
}

// The backward pass of a ragged all-to-all gives its cotangents' storage
// back to the allocator cache: a step's gradient of rows of 64 KiB (the
// cache's free lists) takes no fresh storage once warm. The cotangent of a
// constant output buffer is not computed at all.
func TestRaggedAllToAllGradRecycles(t *testing.T) {
	const width = 1 << 14 // float32 rows of 64 KiB
	m := shard.NewMesh([]int{4}, []string{"ep"})
	io, ss, oo, rs, rowsIn, rowsOut := raggedPlan(4)
	r := rand.New(rand.NewPCG(5, 5))
	in := raggedBufIn{X: randT(r, 4*rowsIn, width), Out: tensor.Zeros(tensor.Float32, 4*rowsOut, width), IO: io, SS: ss, OO: oo, RS: rs}
	step := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, in raggedBufIn) *tensor.Tensor {
		_, g := autodiff.ValueAndGradWith(func(x *tensor.Tensor, in raggedBufIn) *tensor.Tensor {
			y := c.RaggedAllToAll(x, in.Out, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
			return tensor.Sum(tensor.Square(y))
		}, autodiff.RecycleIntermediates())(in.X, in)
		return g
	})
	var fresh int64
	for i := range 4 {
		s0 := tensor.ReadCacheStats()
		g := step(in)
		if i == 3 {
			fresh = tensor.ReadCacheStats().FreshBytes - s0.FreshBytes
			// d/dx sum(y²) = 2x for every row sent (all are).
			assert.Equal(t, tensor.MulScalar(in.X, 2).Float32s(), shard.Gather(g).Float32s())
		}
		tensor.Donate(g)
	}
	// A device's cotangent is 6 rows of 64 KiB: before their storage went
	// back to the cache, each step took 2 of them per device.
	assert.Less(t, fresh, int64(rowsIn*width*4), "fresh bytes of a warm step")
}
