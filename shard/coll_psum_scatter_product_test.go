package shard_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// PsumScatterProductStart is PsumScatter(MatMulT(p, q, true, false))
// within float rounding (the sums' order differs), along either
// dimension, over one axis or two, with blocks gathered (few rows) or
// read where they are, and over a group of one device (no fold: the
// product itself).
func TestPsumScatterProductStart(t *testing.T) {
	m := guideMesh() // dp=4, tp=2
	for _, tc := range []struct {
		axes shard.Axes
		dim  int
		rows int // of each device: 64 and more are not gathered
	}{
		{shard.Axes{"tp"}, 0, 6}, {shard.Axes{"tp"}, 1, 64},
		{shard.Axes{"dp"}, 0, 64}, {shard.Axes{"dp"}, 1, 6},
		{shard.Axes{"dp", "tp"}, 0, 6}, {shard.Axes{"tp", "dp"}, 1, 80},
	} {
		t.Run(fmt.Sprintf("%v/dim%d/rows=%d", tc.axes, tc.dim, tc.rows), func(t *testing.T) {
			const mcols, ncols = 16, 24
			rows := tc.rows
			p := tensor.Normal(tensor.NewKey(1), m.Size()*rows, mcols)
			q := tensor.Normal(tensor.NewKey(2), m.Size()*rows, ncols)
			type out struct{ Got, Want *tensor.Tensor }
			spec := shard.P([]string{"dp", "tp"})
			y := shard.Map(m, spec, spec, func(c *shard.Ctx, in [2]*tensor.Tensor) out {
				got := c.PsumScatterProductStart(in[0], in[1], tc.axes, tc.dim).Wait()
				want := c.PsumScatter(tensor.MatMulT(in[0], in[1], true, false), tc.axes, tc.dim, true)
				return out{c.Vary(got, "dp", "tp"), c.Vary(want, "dp", "tp")}
			})([2]*tensor.Tensor{p, q})
			require.Equal(t, y.Want.Shape(), y.Got.Shape())
			got, want := shard.Gather(y.Got).Float64s(), shard.Gather(y.Want).Float64s()
			for i := range want {
				assert.InDelta(t, want[i], got[i], 1e-5*(1+math.Abs(want[i])), "element %d", i)
			}
		})
	}
	one := shard.NewMesh([]int{1}, []string{"dp"})
	y := shard.Map(one, shard.P(), shard.P("dp"), func(c *shard.Ctx, in [2]*tensor.Tensor) *tensor.Tensor {
		return c.PsumScatterProductStart(in[0], in[1], shard.Axes{"dp"}, 0).Wait()
	})([2]*tensor.Tensor{tensor.Normal(tensor.NewKey(3), 5, 4), tensor.Normal(tensor.NewKey(4), 5, 3)})
	assert.Equal(t, []int{4, 3}, y.Shape())
}

// FoldPsumScatter takes a weight's product cotangents in a backward pass
// run inside Map: the fold's parts plus the reduce-scatter of what the
// backward pass still returns for the weight (here a penalty on it) are
// the reduce-scatter of its whole gradient; without other uses the
// backward pass returns nil for it.
func TestFoldPsumScatter(t *testing.T) {
	m := shard.NewMesh([]int{4}, []string{"dp"})
	x := tensor.Normal(tensor.NewKey(1), 4*3, 8)
	w := tensor.Normal(tensor.NewKey(2), 8, 5)
	for _, penalty := range []bool{false, true} {
		t.Run(fmt.Sprintf("penalty=%v", penalty), func(t *testing.T) {
			type out struct{ Got, Want *tensor.Tensor }
			loss := func(w, x *tensor.Tensor) *tensor.Tensor {
				l := tensor.Sum(tensor.Tanh(tensor.MatMul(x, w)))
				if penalty {
					l = tensor.Add(l, tensor.Sum(tensor.Mul(w, w)))
				}
				return l
			}
			type args struct{ X, W *tensor.Tensor }
			y := shard.Map(m, shard.Specs{"X": shard.P("dp"), "W": shard.P()}, shard.P("dp"), func(c *shard.Ctx, in args) out {
				wv := c.Vary(in.W, "dp")
				want := c.PsumScatter(autodiff.Grad(func(w *tensor.Tensor) *tensor.Tensor { return loss(w, in.X) })(wv), shard.Axes{"dp"}, 0, true)
				f := c.FoldPsumScatter(wv, shard.Axes{"dp"}, 0)
				rest := autodiff.Grad(func(w *tensor.Tensor) *tensor.Tensor { return loss(w, in.X) })(wv)
				got := f.Wait()
				assert.Equal(t, 1, f.Folded())
				if penalty {
					require.NotNil(t, rest)
					got = tensor.Add(got, c.PsumScatter(rest, shard.Axes{"dp"}, 0, true))
				} else {
					assert.Nil(t, rest, "the product was the weight's only use")
				}
				return out{got, want}
			})(args{x, w})
			got, want := shard.Gather(y.Got).Float64s(), shard.Gather(y.Want).Float64s()
			require.Len(t, got, len(want))
			for i := range want {
				assert.InDelta(t, want[i], got[i], 1e-5*(1+math.Abs(want[i])), "element %d", i)
			}
		})
	}
}

// FoldedGradient.WaitThen hands the device's part of a fold that took
// one product to the step block by block, with the bits of Wait's part
// (the same products); a fold that took two products, or none, reports
// false and leaves Wait to the caller.
func TestFoldedGradientWaitThen(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"dp"})
	x := tensor.Normal(tensor.NewKey(1), 2*70, 8)
	w := tensor.Normal(tensor.NewKey(2), 8, 300)
	type args struct{ X, W *tensor.Tensor }
	type out struct{ Got, Want *tensor.Tensor }
	for _, uses := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("products=%d", uses), func(t *testing.T) {
			loss := func(w, x *tensor.Tensor) *tensor.Tensor {
				l := tensor.Sum(x)
				for range uses {
					l = tensor.Add(l, tensor.Sum(tensor.Tanh(tensor.MatMul(x, w))))
				}
				return l
			}
			y := shard.Map(m, shard.Specs{"X": shard.P("dp"), "W": shard.P()}, shard.P("dp"), func(c *shard.Ctx, in args) out {
				wv := c.Vary(in.W, "dp")
				f := c.FoldPsumScatter(wv, shard.Axes{"dp"}, 1)
				autodiff.Grad(func(w *tensor.Tensor) *tensor.Tensor { return loss(w, in.X) })(wv)
				got := make([]float32, 8*150)
				next := 0
				took := f.WaitThen(func(at int, g []float32) {
					assert.Equal(t, next, at)
					next += copy(got[at:], g)
				})
				assert.Equal(t, uses == 1, took)
				var want *tensor.Tensor
				if took {
					assert.Equal(t, len(got), next)
					// Again, with Wait.
					f2 := c.FoldPsumScatter(wv, shard.Axes{"dp"}, 1)
					autodiff.Grad(func(w *tensor.Tensor) *tensor.Tensor { return loss(w, in.X) })(wv)
					want = f2.Wait()
				} else {
					want = f.Wait()
					if want == nil {
						want = tensor.Zeros(tensor.Float32, 8, 150)
					}
					copy(got, want.Float32s())
				}
				return out{c.Local(tensor.FromFloat32(got, 8, 150)), c.Local(want)}
			})(args{x, w})
			require.Equal(t, shard.Gather(y.Want).Float32s(), shard.Gather(y.Got).Float32s())
		})
	}
}
