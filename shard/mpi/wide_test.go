//go:build mpi

package mpi_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// wideRows returns n rows of k float64 values that are not sums of a few
// powers of two (so the order of a sum shows in its bits), the same on
// every process.
func wideRows(n, k int) []float64 {
	r := rand.New(rand.NewPCG(30, uint64(n)))
	v := make([]float64, n*k)
	for i := range v {
		v[i] = r.NormFloat64() * math.Exp(4*r.Float64())
	}
	return v
}

// rankOrderSum sums the rows of v (n rows of k) in rank order from zero,
// as one process's psum does.
func rankOrderSum(v []float64, rows []int, k int) []float64 {
	out := make([]float64, k)
	for _, r := range rows {
		for i := range k {
			out[i] += v[r*k+i]
		}
	}
	return out
}

// TestFloat64CollectivesAcrossProcesses: Psum, Pmean, Pmax, Pmin,
// PsumScatter, AllGather, AllToAll, RaggedAllToAll, RingShift and
// RingShiftStart of float64 (and int64, uint8) blocks between processes
// give one process's values bit for bit (sums in rank order), and Put and
// Gather move float64, int64 and uint8 arrays.
func TestFloat64CollectivesAcrossProcesses(t *testing.T) {
	m, n := lineMesh()
	const k = 3
	v := wideRows(n, k)
	x := tensor.FromFloat64s(v, n, k)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	sum := rankOrderSum(v, all, k)
	run := func(in, out shard.Spec, a *tensor.Tensor, f func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
		return shard.Gather(shard.Map(m, in, out, f)(a))
	}
	t.Run("Psum", func(t *testing.T) {
		got := run(shard.P("d"), shard.P(), x, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") })
		require.Equal(t, tensor.Float64, got.DType())
		assert.Equal(t, sum, got.Float64s(), "bit for bit the rank-order sum")
	})
	t.Run("Pmean", func(t *testing.T) {
		got := run(shard.P("d"), shard.P(), x, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Pmean(b, "d") })
		want := make([]float64, k)
		for i, s := range sum {
			want[i] = s / float64(n)
		}
		assert.Equal(t, want, got.Float64s())
	})
	t.Run("Psum int64", func(t *testing.T) {
		// Beyond int32: 2^40 + r·2^33 + r.
		iv := make([]int64, n)
		var want int64
		for r := range iv {
			iv[r] = 1<<40 + int64(r)<<33 + int64(r)
			want += iv[r]
		}
		got := run(shard.P("d"), shard.P(), tensor.FromInt64(iv, n, 1), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") })
		assert.Equal(t, []int64{want}, got.Int64s())
	})
	t.Run("Pmax Pmin", func(t *testing.T) {
		mx, mn := make([]float64, k), make([]float64, k)
		for i := range k {
			mx[i], mn[i] = math.Inf(-1), math.Inf(1)
			for r := range n {
				mx[i], mn[i] = max(mx[i], v[r*k+i]), min(mn[i], v[r*k+i])
			}
		}
		got := run(shard.P("d"), shard.P(), x, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Pmax(b, "d") })
		assert.Equal(t, mx, got.Float64s())
		got = run(shard.P("d"), shard.P(), x, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Pmin(b, "d") })
		assert.Equal(t, mn, got.Float64s())
		// int64 beyond 2^53: device r holds 2^60 + r (the max), -(2^60 + r) (the min).
		iv := make([]int64, 2*n)
		for r := range n {
			iv[2*r], iv[2*r+1] = 1<<60+int64(r), -(1<<60 + int64(r))
		}
		gi := run(shard.P("d"), shard.P(), tensor.FromInt64(iv, n, 2), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Pmax(b, "d") })
		assert.Equal(t, []int64{1<<60 + int64(n-1), -(1 << 60)}, gi.Int64s())
		gi = run(shard.P("d"), shard.P(), tensor.FromInt64(iv, n, 2), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Pmin(b, "d") })
		assert.Equal(t, []int64{1 << 60, -(1<<60 + int64(n-1))}, gi.Int64s())
	})
	t.Run("PsumScatter", func(t *testing.T) {
		// x [n, k] replicated: the sum is x added n times in rank order;
		// device r keeps row r.
		got := run(shard.P(), shard.P("d"), x, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.PsumScatter(b, shard.Axes{"d"}, 0, true)
		})
		want := make([]float64, len(v))
		for i, e := range v {
			for range n {
				want[i] += e
			}
		}
		assert.Equal(t, want, got.Float64s())
	})
	t.Run("AllGather", func(t *testing.T) {
		got := run(shard.P("d"), shard.P(), x, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.AllGatherInvariant(b, shard.Axes{"d"}, 0, true)
		})
		assert.Equal(t, v, got.Float64s())
		iv := tensor.FromInt64([]int64{1 << 50, -3, 7, 1<<62 + 1, 0, 5, 6, 9}[:n], n)
		gi := run(shard.P("d"), shard.P(), iv, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.AllGatherInvariant(b, shard.Axes{"d"}, 0, true)
		})
		assert.Equal(t, iv.Int64s(), gi.Int64s())
		u8 := tensor.FromUint8([]uint8{0, 1, 2, 255, 128, 7, 8, 9}[:n], n)
		gu := run(shard.P("d"), shard.P(), u8, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.AllGatherInvariant(b, shard.Axes{"d"}, 0, true)
		})
		assert.Equal(t, u8.Uint8s(), gu.Uint8s())
	})
	t.Run("AllToAll", func(t *testing.T) {
		a := tensor.FromFloat64s(wideRows(n*n, 1), n*n)
		got := run(shard.P("d"), shard.P("d"), a, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.AllToAll(b, shard.Axes{"d"}, 0, 0, true)
		})
		assert.Equal(t, tensor.Reshape(tensor.Transpose(tensor.Reshape(a, n, n)), n*n).Float64s(), got.Float64s())
	})
	t.Run("RingShift", func(t *testing.T) {
		got := run(shard.P("d"), shard.P("d"), x, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.RingShift(b, shard.Axes{"d"}, 1)
		}).Float64s()
		for r := range n {
			p := (r + n - 1) % n
			assert.Equal(t, v[k*p:k*p+k], got[k*r:k*r+k], "device %d", r)
		}
		got = run(shard.P("d"), shard.P("d"), x, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.RingShiftStart(b, shard.Axes{"d"}, 1).Wait()
		}).Float64s()
		for r := range n {
			p := (r + n - 1) % n
			assert.Equal(t, v[k*p:k*p+k], got[k*r:k*r+k], "asynchronous, device %d", r)
		}
	})
	t.Run("RaggedAllToAll", func(t *testing.T) {
		// Device r sends its row j to device j, which writes it at row r:
		// the transpose of [n·n, 2] rows.
		var io, ss, oo, rs []int32
		for r := range n {
			for j := range n {
				io, ss, oo, rs = append(io, int32(j)), append(ss, 1), append(oo, int32(r)), append(rs, 1)
			}
		}
		ins := []*tensor.Tensor{tensor.FromInt32(io, n*n), tensor.FromInt32(ss, n*n), tensor.FromInt32(oo, n*n), tensor.FromInt32(rs, n*n)}
		f := shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, in []*tensor.Tensor) *tensor.Tensor {
			out := c.Local(tensor.Zeros(in[0].DType(), in[0].Shape()...))
			return c.RaggedAllToAll(in[0], out, in[1], in[2], in[3], in[4], shard.Axes{"d"})
		})
		for _, a := range []*tensor.Tensor{
			tensor.FromFloat64s(wideRows(n*n, 2), n*n, 2),
			tensor.AsType(tensor.Reshape(tensor.Arange(2*n*n), n*n, 2), tensor.Int64),
			tensor.AsType(tensor.Reshape(tensor.Arange(2*n*n), n*n, 2), tensor.Uint8),
		} {
			got := shard.Gather(f(append([]*tensor.Tensor{a}, ins...)))
			require.Equal(t, a.DType(), got.DType())
			want := tensor.Reshape(tensor.Transpose(tensor.Reshape(a, n, n, 2), 1, 0, 2), n*n, 2)
			assert.Equal(t, want.Float64s(), got.Float64s(), "%v", a)
		}
	})
	t.Run("Put Gather", func(t *testing.T) {
		i64 := tensor.AsType(tensor.Reshape(tensor.Arange(n*2), n, 2), tensor.Int64)
		u8 := tensor.AsType(tensor.Reshape(tensor.Arange(n*4), n, 4), tensor.Uint8)
		for _, a := range []*tensor.Tensor{x, i64, u8} {
			for _, spec := range []shard.Spec{shard.P(), shard.P("d")} {
				y := shard.Put(a, shard.NewSharding(m, spec))
				assert.Equal(t, a.Float64s(), shard.Gather(y).Float64s(), "%v %v", a, spec)
			}
		}
	})
}

// TestFloat64PsumOverOneAxis: on the guide's mesh (dp=4, tp=2) a psum
// over dp sums devices that lie on different processes and not in
// process order; it equals the rank-order sum of each tp column.
func TestFloat64PsumOverOneAxis(t *testing.T) {
	m := guideMesh(t)
	const k = 2
	v := wideRows(8, k)
	x := tensor.FromFloat64s(v, 4, 2, k) // block [1,1,k] on device (dp, tp)
	got := shard.Gather(shard.Map(m, shard.P("dp", "tp"), shard.P(nil, "tp"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.Psum(b, "dp")
	})(x)).Float64s()
	for tp := range 2 {
		want := rankOrderSum(v, []int{tp, 2 + tp, 4 + tp, 6 + tp}, k)
		assert.Equal(t, want, got[tp*k:(tp+1)*k], "column tp=%d", tp)
	}
}
