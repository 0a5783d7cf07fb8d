package shard_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

type ctxFn = func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor

// TestAsyncPpermuteMatchesSync: each started collective, waited for after
// some work, gives what the synchronous one gives.
func TestAsyncPpermuteMatchesSync(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	r := rand.New(rand.NewPCG(7, 7))
	x := randT(r, 16, 3)
	work := func(x *tensor.Tensor) *tensor.Tensor { return tensor.MatMul(x, tensor.Transpose(x)) }
	cases := []struct {
		name        string
		sync, async ctxFn
	}{
		{"ring shift +1 over dp", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.RingShift(x, shard.Axes{"dp"}, 1)
		}, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			h := c.RingShiftStart(x, shard.Axes{"dp"}, 1)
			work(x)
			return h.Wait()
		}},
		{"ring shift -1 over tp,dp", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.RingShift(x, shard.Axes{"tp", "dp"}, -1)
		}, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			h := c.RingShiftStart(x, shard.Axes{"tp", "dp"}, -1)
			work(x)
			return h.Wait()
		}},
		{"ppermute with a missing destination", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.Ppermute(x, shard.Axes{"dp"}, [][2]int{{0, 1}, {1, 2}, {2, 3}})
		}, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.PpermuteStart(x, shard.Axes{"dp"}, [][2]int{{0, 1}, {1, 2}, {2, 3}}).Wait()
		}},
		{"two in flight, waited in reverse order, around a psum", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			a := c.RingShift(x, shard.Axes{"dp"}, 1)
			b := c.RingShift(x, shard.Axes{"tp"}, 1)
			s := c.Psum(x, "dp", "tp")
			return tensor.Add(tensor.Add(a, tensor.MulScalar(b, 2)), c.Vary(s, "dp", "tp"))
		}, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			ha := c.RingShiftStart(x, shard.Axes{"dp"}, 1)
			hb := c.RingShiftStart(x, shard.Axes{"tp"}, 1)
			s := c.Psum(x, "dp", "tp")
			b := hb.Wait()
			a := ha.Wait()
			return tensor.Add(tensor.Add(a, tensor.MulScalar(b, 2)), c.Vary(s, "dp", "tp"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := shard.P([]string{"dp", "tp"})
			var cs, ca shard.Comm
			want := shard.Gather(shard.Map(m, spec, spec, tc.sync, shard.WithComm(&cs))(x))
			got := shard.Gather(shard.Map(m, spec, spec, tc.async, shard.WithComm(&ca))(x))
			assert.Equal(t, want.Float32s(), got.Float32s())
			for _, d := range m.Devices() {
				assert.Equal(t, cs.Bytes(d, "ppermute"), ca.Bytes(d, "ppermute"), "bytes sent by device %d", d.ID())
			}
			assert.Equal(t, cs.Calls("ppermute"), ca.Calls("ppermute"))
		})
	}
}

// syncAllGatherMatMulRing and syncMatMulReduceScatterRing are the ring
// recipes with synchronous shifts (shard's recipes before they overlapped):
// the reference the asynchronous ones must match exactly (same sums in the
// same order), and the baseline of BenchmarkCollectiveMatMul.
func syncAllGatherMatMulRing(c *shard.Ctx, x, w *tensor.Tensor, axes shard.Axes, bidirectional bool) *tensor.Tensor {
	n := c.AxisSize(axes...)
	idx := c.AxisIndex(axes...)
	k := x.Dim(-1)
	mod := func(i int) int { return ((i % n) + n) % n }
	if !bidirectional {
		s := k / n
		cols := func(j int) *tensor.Tensor { return tensor.SliceAxis(x, -1, j*s, (j+1)*s) }
		out := tensor.MatMul(cols(idx), w)
		for i := 1; i < n; i++ {
			w = c.RingShift(w, axes, 1)
			out = tensor.Add(out, tensor.MatMul(cols(mod(idx-i)), w))
		}
		return out
	}
	h := k / (2 * n)
	cols := func(j, half int) *tensor.Tensor {
		return tensor.SliceAxis(x, -1, (2*j+half)*h, (2*j+half+1)*h)
	}
	parts := tensor.Split(w, 0, 2)
	up, down := parts[0], parts[1]
	out := tensor.Add(tensor.MatMul(cols(idx, 0), up), tensor.MatMul(cols(idx, 1), down))
	for i := 1; i < n; i++ {
		up = c.RingShift(up, axes, 1)
		down = c.RingShift(down, axes, -1)
		out = tensor.Add(out, tensor.MatMul(cols(mod(idx-i), 0), up))
		out = tensor.Add(out, tensor.MatMul(cols(mod(idx+i), 1), down))
	}
	return out
}

func syncMatMulReduceScatterRing(c *shard.Ctx, x, w *tensor.Tensor, axes shard.Axes, bidirectional bool) *tensor.Tensor {
	n := c.AxisSize(axes...)
	idx := c.AxisIndex(axes...)
	b := x.Dim(0)
	mod := func(i int) int { return ((i % n) + n) % n }
	if !bidirectional {
		s := b / n
		rows := func(j int) *tensor.Tensor { return tensor.SliceAxis(x, 0, j*s, (j+1)*s) }
		acc := tensor.MatMul(rows(mod(idx-(n-1))), w)
		for i := n - 2; i >= 0; i-- {
			acc = c.RingShift(acc, axes, -1)
			acc = tensor.Add(acc, tensor.MatMul(rows(mod(idx-i)), w))
		}
		return acc
	}
	h := b / (2 * n)
	rows := func(j, half int) *tensor.Tensor {
		return tensor.SliceAxis(x, 0, (2*j+half)*h, (2*j+half+1)*h)
	}
	top := tensor.MatMul(rows(mod(idx-(n-1)), 0), w)
	bottom := tensor.MatMul(rows(mod(idx-1), 1), w)
	for i, j := n-2, 2; i >= 0; i, j = i-1, j+1 {
		top = c.RingShift(top, axes, -1)
		bottom = c.RingShift(bottom, axes, 1)
		top = tensor.Add(top, tensor.MatMul(rows(mod(idx-i), 0), w))
		bottom = tensor.Add(bottom, tensor.MatMul(rows(mod(idx-j), 1), w))
	}
	return tensor.Concat(0, top, bottom)
}

type recipeCase struct {
	name        string
	in          shard.Specs
	out         shard.Spec
	sync, async func(c *shard.Ctx, in pair) *tensor.Tensor
}

// recipeCases are the ring recipes, each with its synchronous reference.
func recipeCases() []recipeCase {
	fsdp := shard.Specs{"A": shard.P("dp", nil), "B": shard.P("dp", nil)}
	rs := shard.Specs{"A": shard.P(nil, []string{"dp", "tp"}), "B": shard.P([]string{"dp", "tp"}, nil)}
	var cs []recipeCase
	for _, bidi := range []bool{false, true} {
		cs = append(cs, recipeCase{fmt.Sprintf("all-gather ring bidirectional=%v", bidi), fsdp, shard.P("dp", nil),
			func(c *shard.Ctx, in pair) *tensor.Tensor {
				return syncAllGatherMatMulRing(c, in.A, in.B, shard.Axes{"dp"}, bidi)
			},
			func(c *shard.Ctx, in pair) *tensor.Tensor {
				return shard.AllGatherMatMulRing(c, in.A, in.B, shard.Axes{"dp"}, bidi)
			}})
		cs = append(cs, recipeCase{fmt.Sprintf("reduce-scatter ring bidirectional=%v", bidi), rs, shard.P([]string{"dp", "tp"}, nil),
			func(c *shard.Ctx, in pair) *tensor.Tensor {
				return syncMatMulReduceScatterRing(c, in.A, in.B, shard.Axes{"dp", "tp"}, bidi)
			},
			func(c *shard.Ctx, in pair) *tensor.Tensor {
				return shard.MatMulReduceScatterRing(c, in.A, in.B, shard.Axes{"dp", "tp"}, bidi)
			}})
	}
	return cs
}

// TestAsyncRecipesMatchSync: the overlapped recipes give exactly the
// values and gradients of the synchronous ones, and the product computed
// on the host.
func TestAsyncRecipesMatchSync(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	r := rand.New(rand.NewPCG(8, 8))
	x, w := randT(r, 64, 128), randT(r, 128, 16)
	want := tensor.MatMul(x, w).Float64s()
	for _, tc := range recipeCases() {
		t.Run(tc.name, func(t *testing.T) {
			fs := shard.Map(m, tc.in, tc.out, tc.sync)
			fa := shard.Map(m, tc.in, tc.out, tc.async)
			ys, ya := shard.Gather(fs(pair{x, w})), shard.Gather(fa(pair{x, w}))
			assert.Equal(t, ys.Float32s(), ya.Float32s(), "same sums in the same order")
			assert.InDeltaSlice(t, want, ya.Float64s(), 1e-3)

			loss := func(f func(pair) *tensor.Tensor) func(pair) *tensor.Tensor {
				return func(p pair) *tensor.Tensor { return tensor.Sum(tensor.Square(f(p))) }
			}
			gs := autodiff.Grad(loss(fs))(pair{x, w})
			ga := autodiff.Grad(loss(fa))(pair{x, w})
			assert.Equal(t, shard.Gather(gs.A).Float32s(), shard.Gather(ga.A).Float32s())
			assert.Equal(t, shard.Gather(gs.B).Float32s(), shard.Gather(ga.B).Float32s())
			// And against the host: d/dx sum((xw)²) = 2(xw)wᵀ.
			y := tensor.MatMul(x, w)
			assert.InDeltaSlice(t, tensor.MulScalar(tensor.MatMul(y, tensor.Transpose(w)), 2).Float64s(), shard.Gather(ga.A).Float64s(), 1e-2)
			assert.InDeltaSlice(t, tensor.MulScalar(tensor.MatMul(tensor.Transpose(x), y), 2).Float64s(), shard.Gather(ga.B).Float64s(), 1e-2)
		})
	}
}

// TestAsyncGradients checks the VJP of started collectives against finite
// differences of the whole Map, with the backward taken outside Map and
// inside fn.
func TestAsyncGradients(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(9, 9))
	cases := []struct {
		name    string
		in, out shard.Spec
		x       *tensor.Tensor
		f       ctxFn
	}{
		{"ppermute with a missing destination", shard.P("dp"), shard.P([]string{"dp", "tp"}), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			h := c.PpermuteStart(scale(c, x), shard.Axes{"dp"}, [][2]int{{0, 1}, {1, 2}, {2, 3}})
			return tensor.Square(h.Wait())
		}},
		{"ring shift over two axes with work in between", shard.P([]string{"tp", "dp"}), shard.P([]string{"tp", "dp"}), randT(r, 16), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			h := c.RingShiftStart(x, shard.Axes{"tp", "dp"}, -1)
			y := tensor.Square(scale(c, x))
			return tensor.Add(y, tensor.Square(scale(c, h.Wait())))
		}},
		{"two shifts chained", shard.P("dp"), shard.P([]string{"dp", "tp"}), randT(r, 8, 2), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			h := c.RingShiftStart(scale(c, x), shard.Axes{"dp"}, 1)
			y := h.Wait()
			h2 := c.RingShiftStart(tensor.Square(y), shard.Axes{"dp", "tp"}, 1)
			return tensor.Mul(h2.Wait(), y)
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
	// Taken inside fn, where the backward pass is part of the Map call.
	x := randT(r, 8, 3)
	inside := shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor {
			return tensor.Sum(tensor.Square(c.RingShiftStart(x, shard.Axes{"dp"}, 1).Wait()))
		})(x)
	})
	assert.InDeltaSlice(t, tensor.MulScalar(x, 2).Float64s(), shard.Gather(inside(x)).Float64s(), 1e-6,
		"the gradient of a shifted square comes back shifted back: 2x")
}

// TestAsyncFailures: misuse and failures end the Map call with a clear
// error and never hang; no goroutine is left behind.
func TestAsyncFailures(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	x := tensor.Ones(tensor.Float32, 8, 4)
	cases := []struct {
		name string
		f    ctxFn
		dev  int // the failing device, -1 for any
		msg  string
	}{
		{"never waited", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			c.RingShiftStart(x, shard.Axes{"dp"}, 1)
			return x
		}, -1, "asynchronous collective(s) never waited for, the first #0 ppermute(f32[2,4]{dp} over dp, perm [[0 1] [1 2] [2 3] [3 0]], async)"},
		{"waited twice", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			h := c.RingShiftStart(x, shard.Axes{"dp"}, 1)
			h.Wait()
			return h.Wait()
		}, -1, "shard.Handle.Wait: the ppermute of float32[2 4] was already waited for"},
		{"started on one device, synchronous on the others", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			if c.Device().ID() == 3 {
				return c.RingShiftStart(x, shard.Axes{"dp"}, 1).Wait()
			}
			return c.RingShift(x, shard.Axes{"dp"}, 1)
		}, 3, "collective #0 mismatch"},
		{"a device fails while the others wait", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			h := c.RingShiftStart(x, shard.Axes{"dp"}, 1)
			if c.Device().ID() == 5 {
				panic("device 5 fails")
			}
			y := h.Wait()
			return c.RingShiftStart(y, shard.Axes{"dp"}, 1).Wait()
		}, 5, "device 5 fails"},
		{"a device returns without starting", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			if c.Device().ID() == 2 {
				return x
			}
			return c.RingShiftStart(x, shard.Axes{"dp"}, 1).Wait()
		}, 2, "returned after 0 collectives"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			within(t, 5*time.Second, func() {
				_, err = shard.MapErr(m, shard.P("dp"), shard.P("dp"), tc.f)(x)
			})
			var de *shard.DeviceError
			require.ErrorAs(t, err, &de)
			if tc.dev >= 0 {
				assert.Equal(t, tc.dev, de.Device.ID())
			}
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

// TestAsyncUnderCheckpoint: inside autodiff.Checkpoint, whatever the
// policy recomputes, the overlapped recipe's gradients equal the
// synchronous one's.
func TestAsyncUnderCheckpoint(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	r := rand.New(rand.NewPCG(10, 10))
	x, w := randT(r, 64, 128), randT(r, 128, 16)
	fsdp := shard.Specs{"A": shard.P("dp", nil), "B": shard.P("dp", nil)}
	for _, pc := range []struct {
		name string
		pol  autodiff.Policy
	}{{"nothing saved", nil}, {"dots saved", autodiff.DotsSaveable}, {"everything saved", autodiff.EverythingSaveable}} {
		t.Run(pc.name, func(t *testing.T) {
			mk := func(product func(c *shard.Ctx, x, w *tensor.Tensor, axes shard.Axes, bidi bool) *tensor.Tensor) func(pair) *tensor.Tensor {
				f := shard.Map(m, fsdp, shard.P("dp", nil), func(c *shard.Ctx, in pair) *tensor.Tensor {
					return autodiff.Checkpoint(func(p pair) *tensor.Tensor {
						return product(c, p.A, p.B, shard.Axes{"dp"}, true)
					}, pc.pol)(in)
				})
				return func(p pair) *tensor.Tensor { return tensor.Sum(tensor.Square(f(p))) }
			}
			gs := autodiff.Grad(mk(syncAllGatherMatMulRing))(pair{x, w})
			ga := autodiff.Grad(mk(shard.AllGatherMatMulRing))(pair{x, w})
			assert.Equal(t, shard.Gather(gs.A).Float32s(), shard.Gather(ga.A).Float32s())
			assert.Equal(t, shard.Gather(gs.B).Float32s(), shard.Gather(ga.B).Float32s())
		})
	}
}

// TestAsyncSecondDerivative: the VJP of a started shift is itself made of
// started shifts, so it differentiates again: for f(x) = Σ shift(x)³,
// ∇f = 3x² and ∇Σ∇f = 6x on every device.
func TestAsyncSecondDerivative(t *testing.T) {
	m := guideMesh()
	x := randT(rand.New(rand.NewPCG(11, 11)), 8, 3)
	f := shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		grad := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor {
			y := c.RingShiftStart(x, shard.Axes{"dp"}, 1).Wait()
			return tensor.Sum(tensor.Mul(y, tensor.Square(y)))
		})
		return autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(grad(x)) })(x)
	})
	assert.InDeltaSlice(t, tensor.MulScalar(x, 6).Float64s(), shard.Gather(f(x)).Float64s(), 1e-5)
}
