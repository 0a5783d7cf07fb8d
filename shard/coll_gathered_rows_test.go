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

// Rows a device gathered for its group once are not copied again
// (gatheredRows): in a two-layer step whose folds share their forward
// products, the first product's rows are views of the group's result
// (viewRows), which the second product takes as its operand, the folds'
// gathered layer inputs (x for w1, h for w2) are the forward products'
// operands, and the input gradient's shared product takes w2's fold's
// gathered cotangent: four gathers in place a device and step. The
// folded gradients, the loss and x's gradient are bit for bit those of
// every gather copying its rows and every product its rows out
// (CopyGathered), over 8 and 4 devices and over the dp axis of a 2-D mesh
// (whose groups meet in one slot). With 64 rows a device nothing is
// shared or gathered.
func TestGatheredRowsReused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mesh    *shard.Mesh
		axes    shard.Axes
		rows    int
		inPlace int // gathers in place a step, over the devices
	}{
		{"8 devices", shard.NewMesh([]int{8}, []string{"dp"}), shard.Axes{"dp"}, 32, 4 * 8},
		{"4 devices", shard.NewMesh([]int{4}, []string{"dp"}), shard.Axes{"dp"}, 8, 4 * 4},
		{"dp of dp×tp", guideMesh(), shard.Axes{"dp"}, 5, 4 * guideMesh().Size()},
		{"64 rows", shard.NewMesh([]int{2}, []string{"dp"}), shard.Axes{"dp"}, 64, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const k, h, n = 96, 256, 256
			m := tc.mesh
			x := tensor.Normal(tensor.NewKey(1), m.Size()*tc.rows, k)
			w1 := tensor.Normal(tensor.NewKey(2), k, h)
			w2 := tensor.Normal(tensor.NewKey(3), h, n)
			b1, b2 := tensor.Normal(tensor.NewKey(4), h), tensor.Normal(tensor.NewKey(5), n)
			type args struct{ X, W1, W2, B1, B2 *tensor.Tensor }
			type out struct{ L, G1, G2, GX *tensor.Tensor }
			type params struct{ X, W1, W2 *tensor.Tensor }
			step := func(copied bool) (out, int64) {
				if copied {
					defer shard.CopyGathered()()
				}
				before := shard.GatheredInPlace()
				o := shard.Map(m, shard.Specs{"X": shard.P(m.AxisNames()), "W1": shard.P(), "W2": shard.P(), "B1": shard.P(), "B2": shard.P()},
					shard.Specs{"L": shard.P(m.AxisNames()), "G1": shard.P(m.AxisNames()), "G2": shard.P(m.AxisNames()), "GX": shard.P(m.AxisNames())},
					func(c *shard.Ctx, in args) out {
						vary := m.AxisNames()
						p := params{in.X, c.Vary(in.W1, tc.axes...), c.Vary(in.W2, tc.axes...)}
						f1 := c.FoldPsumScatter(p.W1, tc.axes, 0)
						f2 := c.FoldPsumScatter(p.W2, tc.axes, 0)
						f1.ShareForward()
						f2.ShareForward()
						var l *tensor.Tensor
						g := autodiff.Grad(func(p params) *tensor.Tensor {
							y := tensor.MatMulBiasAct(tensor.MatMulBiasAct(p.X, p.W1, in.B1, tensor.ActRelu), p.W2, in.B2, tensor.ActTanh)
							l = tensor.Sum(tensor.Mul(y, y))
							return l
						})(p)
						g1, g2 := f1.Wait(), f2.Wait()
						require.NotNil(t, g1)
						require.NotNil(t, g2)
						return out{c.Vary(tensor.Reshape(tensor.StopGradient(l), 1), vary...), g1, g2, g.X}
					})(args{x, w1, w2, b1, b2})
				return o, shard.GatheredInPlace() - before
			}
			want, none := step(true)
			got, inPlace := step(false)
			assert.Zero(t, none, "gathers in place with every gather copying")
			assert.Equal(t, int64(tc.inPlace), inPlace, "gathers in place")
			for i, p := range [][2]*tensor.Tensor{{got.L, want.L}, {got.G1, want.G1}, {got.G2, want.G2}, {got.GX, want.GX}} {
				g, w := shard.Gather(p[0]).Float32s(), shard.Gather(p[1]).Float32s()
				require.Len(t, g, len(w))
				for j := range w {
					require.Equal(t, math.Float32bits(w[j]), math.Float32bits(g[j]), fmt.Sprintf("output %d element %d", i, j))
				}
			}
		})
	}
}
