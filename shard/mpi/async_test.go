//go:build mpi

package mpi_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

// TestNonblockingBinding: every rank sends a slice to the next rank and
// receives one from the previous with Isend and Irecv, completed by Test
// and Wait.
func TestNonblockingBinding(t *testing.T) {
	w := mpi.World()
	n, r := w.Size(), w.Rank()
	send := []float32{float32(r), float32(10 * r), float32(100 * r)}
	got := make([]float32, 3)
	prev := (r + n - 1) % n
	rq := mpi.Irecv(w, got, prev, 7)
	sq := mpi.Isend(w, send, (r+1)%n, 7)
	mpi.Waitall(sq, rq)
	assert.True(t, rq.Test(), "a completed request tests done")
	assert.Equal(t, []float32{float32(prev), float32(10 * prev), float32(100 * prev)}, got)

	// Two messages with the same tag arrive in the order they were sent.
	a, b := make([]int32, 1), make([]int32, 1)
	qa, qb := mpi.Irecv(w, a, prev, 8), mpi.Irecv(w, b, prev, 8)
	s1, s2 := mpi.Isend(w, []int32{1}, (r+1)%n, 8), mpi.Isend(w, []int32{2}, (r+1)%n, 8)
	for !qb.Test() {
	}
	mpi.Waitall(qa, s1, s2)
	assert.Equal(t, []int32{1, 2}, []int32{a[0], b[0]})
}

func randFloats(r *rand.Rand, shape ...int) *tensor.Tensor {
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

// TestAsyncAcrossProcesses: started ppermutes between devices of several
// processes give what the synchronous ones give, waited for after work
// and in any order.
func TestAsyncAcrossProcesses(t *testing.T) {
	m, n := lineMesh()
	x := randFloats(rand.New(rand.NewPCG(1, 1)), 4*n, 3)
	work := func(x *tensor.Tensor) *tensor.Tensor { return tensor.MatMul(x, tensor.Transpose(x)) }
	// A partial permutation: device 0 sends to the last; with three or
	// more devices the last also sends to device 1 (with two, device 1 is
	// the last, which may receive only once).
	partial := [][2]int{{0, n - 1}}
	if n >= 3 {
		partial = append(partial, [2]int{n - 1, 1})
	}
	type fn = func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor
	cases := []struct {
		name        string
		sync, async fn
	}{
		{"ring shift +1", func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.RingShift(b, shard.Axes{"d"}, 1)
		}, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			h := c.RingShiftStart(b, shard.Axes{"d"}, 1)
			work(b)
			return h.Wait()
		}},
		{"partial permutation", func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.Ppermute(b, shard.Axes{"d"}, partial)
		}, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.PpermuteStart(b, shard.Axes{"d"}, partial).Wait()
		}},
		{"both directions in flight around a psum", func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			up := c.RingShift(b, shard.Axes{"d"}, 1)
			down := c.RingShift(b, shard.Axes{"d"}, -1)
			s := c.Vary(c.Psum(b, "d"), "d")
			return tensor.Add(tensor.Add(up, tensor.MulScalar(down, 3)), s)
		}, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			hu := c.RingShiftStart(b, shard.Axes{"d"}, 1)
			hd := c.RingShiftStart(b, shard.Axes{"d"}, -1)
			s := c.Vary(c.Psum(b, "d"), "d")
			down := hd.Wait()
			up := hu.Wait()
			return tensor.Add(tensor.Add(up, tensor.MulScalar(down, 3)), s)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := floats(shard.Map(m, shard.P("d"), shard.P("d"), tc.sync)(x))
			got := floats(shard.Map(m, shard.P("d"), shard.P("d"), tc.async)(x))
			assert.Equal(t, want, got)
		})
	}
}

type mats struct{ A, B *tensor.Tensor }

// TestCollectiveMatMulsAcrossProcesses: the overlapped ring recipes over
// every device of the job compute x @ w and its gradients as the host
// does.
func TestCollectiveMatMulsAcrossProcesses(t *testing.T) {
	m, n := lineMesh()
	r := rand.New(rand.NewPCG(2, 2))
	x, w := randFloats(r, 4*n, 4*n), randFloats(r, 4*n, 8)
	y := tensor.MatMul(x, w)
	wantDX := tensor.MulScalar(tensor.MatMul(y, tensor.Transpose(w)), 2).Float64s()
	wantDW := tensor.MulScalar(tensor.MatMul(tensor.Transpose(x), y), 2).Float64s()
	for _, bidi := range []bool{false, true} {
		for _, rc := range []struct {
			name    string
			in      shard.Specs
			out     shard.Spec
			product func(c *shard.Ctx, in mats) *tensor.Tensor
		}{
			{"all-gather", shard.Specs{"A": shard.P("d", nil), "B": shard.P("d", nil)}, shard.P("d", nil), func(c *shard.Ctx, in mats) *tensor.Tensor {
				return shard.AllGatherMatMulRing(c, in.A, in.B, shard.Axes{"d"}, bidi)
			}},
			{"reduce-scatter", shard.Specs{"A": shard.P(nil, "d"), "B": shard.P("d", nil)}, shard.P("d", nil), func(c *shard.Ctx, in mats) *tensor.Tensor {
				return shard.MatMulReduceScatterRing(c, in.A, in.B, shard.Axes{"d"}, bidi)
			}},
		} {
			t.Run(fmt.Sprintf("%s bidirectional=%v", rc.name, bidi), func(t *testing.T) {
				f := shard.Map(m, rc.in, rc.out, rc.product)
				assert.InDeltaSlice(t, y.Float64s(), floats(f(mats{x, w})), 1e-4)
				g := autodiff.Grad(func(p mats) *tensor.Tensor { return tensor.Sum(tensor.Square(f(p))) })(mats{x, w})
				require.NotNil(t, g.A)
				assert.InDeltaSlice(t, wantDX, floats(g.A), 1e-3)
				assert.InDeltaSlice(t, wantDW, floats(g.B), 1e-3)
			})
		}
	}
}

// asyncHelper runs the failure scenarios of started collectives (see
// runHelper).
func asyncHelper(kind string, m *shard.Mesh, x *tensor.Tensor) {
	shift := func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.RingShiftStart(b, shard.Axes{"d"}, 1).Wait()
	}
	switch kind {
	case "async_panic":
		shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			h := c.RingShiftStart(b, shard.Axes{"d"}, 1)
			if c.Device().Process() == 1 {
				panic("boom after the start")
			}
			return h.Wait()
		})(x)
	case "async_hang":
		if mpi.Rank() != 1 {
			shard.Map(m, shard.P("d"), shard.P("d"), shift)(x)
		}
		time.Sleep(time.Minute)
	case "async_mismatch":
		shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			if c.Device().Process() == 1 {
				return c.RingShift(b, shard.Axes{"d"}, 1)
			}
			return shift(c, b)
		})(x)
	case "async_unwaited":
		shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			c.RingShiftStart(b, shard.Axes{"d"}, 1)
			return b
		})(x)
	default:
		agreeHelper(kind, m, x) // agree_test.go
	}
}
