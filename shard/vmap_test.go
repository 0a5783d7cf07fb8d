package shard_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// collCase is a function of a device's block with collectives, its specs
// and its operand (one example).
type collCase struct {
	name    string
	in, out shard.Spec
	x       *tensor.Tensor
	f       func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor
}

func collCases(r *rand.Rand) []collCase {
	return []collCase{
		{"psum", shard.P("dp"), shard.P(), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.Psum(scale(c, x), "dp", "tp"))
		}},
		{"pmax", shard.P("dp"), shard.P(), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.Pmax(scale(c, x), "dp", "tp"))
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
		{"psum_scatter", shard.P(nil, "tp"), shard.P([]string{"dp", "tp"}), randT(r, 8, 4), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.PsumScatter(scale(c, x), shard.Axes{"dp"}, 0, true))
		}},
		{"ppermute", shard.P("dp"), shard.P([]string{"dp", "tp"}), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(c.Ppermute(scale(c, x), shard.Axes{"dp"}, [][2]int{{0, 1}, {1, 2}, {2, 3}}))
		}},
		{"ppermute started", shard.P("dp"), shard.P([]string{"dp", "tp"}), randT(r, 8, 3), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			h := c.RingShiftStart(scale(c, x), shard.Axes{"dp"}, 1)
			return tensor.Square(h.Wait())
		}},
		{"all_to_all", shard.P("dp"), shard.P(nil, []string{"dp", "tp"}), randT(r, 8, 8), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Square(scale(c, c.AllToAll(x, shard.Axes{"dp"}, 1, 0, true)))
		}},
	}
}

// batchSpec returns s with a replicated batch dimension in front.
func batchSpec(s shard.Spec) shard.Spec { return append(shard.Spec{nil}, s...) }

// TestVmapInsideMap: a function with collectives vmapped inside shard.Map
// equals the loop over the examples inside the Map, bit for bit; no
// collective falls back to the loop.
func TestVmapInsideMap(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(21, 21))
	const b = 3
	for _, tc := range collCases(r) {
		t.Run(tc.name, func(t *testing.T) {
			xs := make([]*tensor.Tensor, b)
			for i := range xs {
				xs[i] = randT(r, tc.x.Shape()...)
			}
			batch := tensor.Stack(0, xs...)
			vm := shard.Map(m, batchSpec(tc.in), batchSpec(tc.out), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				return autodiff.Vmap(func(x *tensor.Tensor) *tensor.Tensor { return tc.f(c, x) }, autodiff.Strict())(x)
			})
			loop := shard.Map(m, batchSpec(tc.in), batchSpec(tc.out), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				var ys []*tensor.Tensor
				for _, e := range tensor.Unstack(x, 0) {
					ys = append(ys, tc.f(c, e))
				}
				return tensor.Stack(0, ys...)
			})
			want, got := shard.Gather(loop(batch)), shard.Gather(vm(batch))
			require.Equal(t, want.Shape(), got.Shape())
			require.Equal(t, want.Float32s(), got.Float32s())
		})
	}
}

// TestJVPInsideMap: forward mode through every collective: the JVP of the
// Map equals the transpose of its VJP.
func TestJVPInsideMap(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(22, 22))
	for _, tc := range collCases(r) {
		t.Run(tc.name, func(t *testing.T) {
			f := shard.Map(m, tc.in, tc.out, tc.f)
			tan := randT(r, tc.x.Shape()...)
			y, ty := autodiff.JVP(f, tc.x, tan)
			u := randT(r, y.Shape()...)
			_, back := autodiff.VJP(f, tc.x)
			lhs := tensor.Sum(tensor.Mul(ty, u)).Item()
			rhs := tensor.Sum(tensor.Mul(tan, back(u))).Item()
			require.InDelta(t, rhs, lhs, 1e-4*(1+abs(rhs)))
		})
	}
}

// TestVmapPlacedTensors: a vmapped function on placed tensors computes
// the same as on host tensors: the batches are placed and every op
// propagates (no gather under Strict); per-example gradients of a placed
// model too.
func TestVmapPlacedTensors(t *testing.T) {
	m := guideMesh()
	stop := shard.Strict(m)
	defer stop()
	r := rand.New(rand.NewPCG(23, 23))
	mlp := nn.NewMLP(tensor.NewKey(5), []int{6, 8, 4}, nn.MLPOptions{})
	xs := randT(r, 8, 6)
	labels := tensor.FromInt32([]int32{0, 1, 2, 3, 0, 1, 2, 3}, 8)

	placed := shard.Put(xs, shard.NewSharding(m, shard.P("dp")))
	want := autodiff.Vmap(mlp.Forward)(xs)
	got := autodiff.Vmap(mlp.Forward)(placed)
	require.NotNil(t, got.Layout(), "the result stays placed")
	require.InDeltaSlice(t, want.Float32s(), shard.Gather(got).Float32s(), 1e-6)

	loss := func(m nn.MLP, x, y *tensor.Tensor) *tensor.Tensor {
		return tensor.SoftmaxCrossEntropy(m.Forward(x), y)
	}
	grad := func(m nn.MLP, x, y *tensor.Tensor) nn.MLP {
		return autodiff.GradWith(func(m nn.MLP, e [2]*tensor.Tensor) *tensor.Tensor { return loss(m, e[0], e[1]) })(m, [2]*tensor.Tensor{x, y})
	}
	in := autodiff.InAxes(autodiff.None, autodiff.Axis(0), autodiff.Axis(0))
	hostPer := autodiff.Vmap3(grad, in)(mlp, xs, labels)
	pm := shard.FilterShard(mlp, m, shard.P())
	pl := shard.Put(labels, shard.NewSharding(m, shard.P("dp")))
	placedPer := autodiff.Vmap3(grad, in)(pm, placed, pl)
	gathered := pytree.Map(placedPer, shard.Gather)
	requireLeavesClose(t, hostPer, gathered, 1e-5)
}

func requireLeavesClose(t *testing.T, want, got any, tol float64) {
	t.Helper()
	wl, gl := pytree.Leaves(want), pytree.Leaves(got)
	require.Len(t, gl, len(wl))
	for i := range wl {
		require.Equal(t, wl[i].Shape(), gl[i].Shape())
		require.InDeltaSlice(t, wl[i].Float32s(), gl[i].Float32s(), tol)
	}
}

// TestVmapOfMap: a function that calls shard.Map, vmapped from outside,
// equals the loop over the examples: one Map call whose devices map the
// batch (no fallback).
func TestVmapOfMap(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(24, 24))
	for _, tc := range collCases(r) {
		t.Run(tc.name, func(t *testing.T) {
			f := shard.Map(m, tc.in, tc.out, tc.f)
			xs := tensor.Stack(0, randT(r, tc.x.Shape()...), randT(r, tc.x.Shape()...), randT(r, tc.x.Shape()...))
			got := autodiff.Vmap(f, autodiff.Strict())(xs)
			var want []*tensor.Tensor
			for _, x := range tensor.Unstack(xs, 0) {
				want = append(want, shard.Gather(f(x)))
			}
			require.Equal(t, tensor.Stack(0, want...).Float32s(), shard.Gather(got).Float32s())
		})
	}
}
