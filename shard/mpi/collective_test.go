//go:build mpi

package mpi_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// lineMesh spans every device of the job along one axis.
func lineMesh() (*shard.Mesh, int) {
	n := len(shard.Devices())
	return shard.NewMesh([]int{n}, []string{"d"}), n
}

func floats(x *tensor.Tensor) []float32 { return shard.Gather(x).Float32s() }

// TestCollectivesAcrossProcesses checks each collective's values on a
// mesh over all devices of the job against sums written out here.
func TestCollectivesAcrossProcesses(t *testing.T) {
	m, n := lineMesh()
	// Row r of x is {r, 10+r}: device r holds row r.
	xd := make([]float32, 2*n)
	for r := 0; r < n; r++ {
		xd[2*r], xd[2*r+1] = float32(r), float32(10+r)
	}
	x := tensor.FromFloat32(xd, n, 2)
	sumR := float32(n * (n - 1) / 2)
	run := func(out shard.Spec, f func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor) []float32 {
		return floats(shard.Map(m, shard.P("d"), out, f)(x))
	}
	t.Run("Psum", func(t *testing.T) {
		got := run(shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") })
		assert.Equal(t, []float32{sumR, float32(10*n) + sumR}, got)
	})
	t.Run("Pmean", func(t *testing.T) {
		got := run(shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Pmean(b, "d") })
		assert.InDeltaSlice(t, []float32{sumR / float32(n), 10 + sumR/float32(n)}, got, 1e-5)
	})
	t.Run("Pmax Pmin", func(t *testing.T) {
		got := run(shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Pmax(b, "d") })
		assert.Equal(t, []float32{float32(n - 1), float32(9 + n)}, got)
		got = run(shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Pmin(b, "d") })
		assert.Equal(t, []float32{0, 10}, got)
		// int32, with the device's index negated: the max is 0, the min -(n-1).
		ix := tensor.Neg(tensor.Reshape(tensor.Arange(n), n, 1))
		mx := shard.Gather(shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Pmax(b, "d") })(ix)).Ints()
		mn := shard.Gather(shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Pmin(b, "d") })(ix)).Ints()
		assert.Equal(t, []int{0}, mx)
		assert.Equal(t, []int{1 - n}, mn)
	})
	t.Run("AllGather", func(t *testing.T) {
		got := run(shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.AllGatherInvariant(b, shard.Axes{"d"}, 0, true)
		})
		assert.Equal(t, xd, got)
		got = run(shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.AllGather(b, shard.Axes{"d"}, 0, true)
		})
		for r := 0; r < n; r++ {
			assert.Equal(t, xd, got[r*2*n:(r+1)*2*n])
		}
	})
	t.Run("PsumScatter", func(t *testing.T) {
		// Every device holds all of x (replicated): the sum is n·x, and
		// device r keeps row r.
		got := floats(shard.Map(m, shard.P(), shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.PsumScatter(b, shard.Axes{"d"}, 0, true)
		})(x))
		want := make([]float32, len(xd))
		for i, v := range xd {
			want[i] = float32(n) * v
		}
		assert.Equal(t, want, got)
	})
	t.Run("RingShift", func(t *testing.T) {
		got := run(shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.RingShift(b, shard.Axes{"d"}, 1)
		})
		for r := 0; r < n; r++ {
			p := (r + n - 1) % n
			assert.Equal(t, xd[2*p:2*p+2], got[2*r:2*r+2])
		}
	})
	t.Run("AllToAll", func(t *testing.T) {
		// An n×n matrix with rows on devices comes back transposed.
		a := tensor.Reshape(tensor.AsType(tensor.Arange(n*n), tensor.Float32), n*n)
		got := floats(shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.AllToAll(b, shard.Axes{"d"}, 0, 0, true)
		})(a))
		want := tensor.Reshape(tensor.Transpose(tensor.Reshape(a, n, n)), n*n).Float32s()
		assert.Equal(t, want, got)
	})
	t.Run("AxisIndex", func(t *testing.T) {
		got := shard.Gather(shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.Vary(tensor.FromInt32([]int32{int32(c.AxisIndex("d"))}, 1), "d")
		})(x)).Ints()
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		assert.Equal(t, want, got)
	})
}

type raggedIn struct {
	X              *tensor.Tensor
	IO, SS, OO, RS *tensor.Tensor
}

// TestRaggedAllToAllAcrossProcesses: device r sends (r+j)%2+1 rows to
// device j.
func TestRaggedAllToAllAcrossProcesses(t *testing.T) {
	m, n := lineMesh()
	cnt := func(r, j int) int { return (r+j)%2 + 1 }
	var io, ss, oo, rs []int32
	// Every operand and output has rows rows: enough for the largest
	// share (with an odd n devices send and receive different counts).
	rows := 0
	for r := 0; r < n; r++ {
		in, out := 0, 0
		for j := 0; j < n; j++ {
			in += cnt(r, j)
			out += cnt(j, r)
		}
		rows = max(rows, in, out)
	}
	for r := 0; r < n; r++ {
		off := 0
		for j := 0; j < n; j++ {
			io = append(io, int32(off))
			off += cnt(r, j)
			ss = append(ss, int32(cnt(r, j)))
			o := 0
			for k := 0; k < r; k++ {
				o += cnt(k, j)
			}
			oo = append(oo, int32(o))
			rs = append(rs, int32(cnt(j, r)))
		}
	}
	var xd []float32
	for r := 0; r < n; r++ {
		for k := 0; k < rows; k++ {
			xd = append(xd, float32(100*r+k))
		}
	}
	in := raggedIn{tensor.FromFloat32(xd, n*rows, 1), tensor.FromInt32(io, n*n), tensor.FromInt32(ss, n*n), tensor.FromInt32(oo, n*n), tensor.FromInt32(rs, n*n)}
	f := shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, in raggedIn) *tensor.Tensor {
		out := c.Local(tensor.Zeros(tensor.Float32, rows, 1))
		return c.RaggedAllToAll(in.X, out, in.IO, in.SS, in.OO, in.RS, shard.Axes{"d"})
	})
	got := floats(f(in))
	var want []float32
	for j := 0; j < n; j++ {
		got := 0
		for r := 0; r < n; r++ {
			from := int(io[r*n+j])
			for k := 0; k < cnt(r, j); k++ {
				want = append(want, float32(100*r+from+k))
				got++
			}
		}
		for ; got < rows; got++ {
			want = append(want, 0) // rows nobody writes keep the output's zeros
		}
	}
	assert.Equal(t, want, got)

	// Its gradient, by finite differences through the whole job.
	g := shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, in raggedIn) *tensor.Tensor {
		out := c.Local(tensor.Zeros(tensor.Float32, rows, 2))
		return tensor.Square(scale(c, c.RaggedAllToAll(in.X, out, in.IO, in.SS, in.OO, in.RS, shard.Axes{"d"})))
	})
	r := rand.New(rand.NewPCG(4, 4))
	require.NoError(t, autodiff.CheckGrad(func(xs []*tensor.Tensor) *tensor.Tensor {
		return g(raggedIn{xs[0], in.IO, in.SS, in.OO, in.RS})
	}, []*tensor.Tensor{randT(r, n*rows, 2)}, autodiff.CheckOptions{}))
}

// scale multiplies a block by a factor that differs between devices, so
// gradients see which device did what.
func scale(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
	return tensor.Mul(x, c.Vary(tensor.Scalar(float32(1+c.AxisIndex("d"))/4), "d"))
}

func randT(r *rand.Rand, shape ...int) *tensor.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	d := make([]float32, n)
	for i := range d {
		d[i] = float32(r.NormFloat64())
	}
	return tensor.FromFloat32(d, shape...)
}

// TestCollectiveGradientsAcrossProcesses checks the VJP of every
// collective against finite differences, with devices on all processes.
func TestCollectiveGradientsAcrossProcesses(t *testing.T) {
	m, n := lineMesh()
	for _, tc := range []struct {
		name string
		out  shard.Spec
		f    func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor
	}{
		{"Psum", shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.Psum(scale(c, b), "d"))
		}},
		{"Pmax", shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.Pmax(scale(c, b), "d"))
		}},
		{"AllGather", shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(scale(c, c.AllGather(b, shard.Axes{"d"}, 0, true)))
		}},
		{"PsumScatter", shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			g := c.AllGather(scale(c, b), shard.Axes{"d"}, 0, true)
			return tensor.Square(c.PsumScatter(g, shard.Axes{"d"}, 0, true))
		}},
		{"RingShift", shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(scale(c, c.RingShift(scale(c, b), shard.Axes{"d"}, 1)))
		}},
		{"AllToAll", shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(scale(c, c.AllToAll(scale(c, b), shard.Axes{"d"}, 0, 0, true)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := shard.Map(m, shard.P("d"), tc.out, tc.f)
			r := rand.New(rand.NewPCG(7, 7)) // the same numbers on every process
			require.NoError(t, autodiff.CheckGrad(func(xs []*tensor.Tensor) *tensor.Tensor {
				return f(xs[0])
			}, []*tensor.Tensor{randT(r, n*n, 1)}, autodiff.CheckOptions{}))
		})
	}
}

// TestDataParallelGradientAcrossProcesses: the gradient of a replicated
// weight used with sharded data equals the one-process gradient.
func TestDataParallelGradientAcrossProcesses(t *testing.T) {
	m, n := lineMesh()
	r := rand.New(rand.NewPCG(5, 5))
	w, x := randT(r, 6, 3), randT(r, 4*n, 6)
	type dp struct{ W, X *tensor.Tensor }
	loss := shard.Map(m, shard.Specs{"W": shard.P(), "X": shard.P("d")}, shard.P(), func(c *shard.Ctx, in dp) *tensor.Tensor {
		return c.Psum(tensor.Sum(tensor.Square(tensor.MatMul(in.X, in.W))), "d")
	})
	gotL, got := autodiff.ValueAndGrad(func(p dp) *tensor.Tensor { return loss(p) })(dp{w, x})
	wantL, want := autodiff.ValueAndGrad(func(p dp) *tensor.Tensor {
		return tensor.Sum(tensor.Square(tensor.MatMul(p.X, p.W)))
	})(dp{w, x})
	assert.InDelta(t, wantL.Item(), shard.Gather(gotL).Item(), 1e-3)
	assert.InDeltaSlice(t, want.W.Float64s(), shard.Gather(got.W).Float64s(), 1e-3)
	assert.InDeltaSlice(t, want.X.Float64s(), shard.Gather(got.X).Float64s(), 1e-3)
}
