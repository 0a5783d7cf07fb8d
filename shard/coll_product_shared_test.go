package shard_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// A fold sharing its forward products (FoldedGradient.ShareForward) has
// the devices of its group compute their products x·w together where
// they have few rows and w is wide enough: the products (MatMul and
// MatMulBiasAct, also inside a gradient's forward pass), the input
// gradients through them (x's cotangent G·wᵀ, shared where w has 32 rows
// a device or more) are bit for bit those each device computes alone, and
// the host's, over one axis or two, with the groups of a 2-D mesh meeting in
// one slot; rows from 64 up and too few columns a device are computed
// alone without a meeting; with w in storage of each device's own the
// devices meet and each computes its own rows.
func TestShareForward(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mesh    *shard.Mesh
		axes    shard.Axes
		rows, n int  // rows of x a device, columns of w
		own     bool // each device's w in storage of its own
		met     int  // products the devices met for (Comm's shared_product calls)
	}{
		{"8 devices", shard.NewMesh([]int{8}, []string{"dp"}), shard.Axes{"dp"}, 32, 256, false, 4},
		{"dp of dp×tp", guideMesh(), shard.Axes{"dp"}, 5, 128, false, 4},
		{"dp×tp", guideMesh(), shard.Axes{"tp", "dp"}, 3, 256, false, 4},
		{"2 devices", shard.NewMesh([]int{2}, []string{"dp"}), shard.Axes{"dp"}, 63, 64, false, 4},
		{"64 rows", shard.NewMesh([]int{2}, []string{"dp"}), shard.Axes{"dp"}, 64, 64, false, 0},
		{"narrow: the input gradient only", shard.NewMesh([]int{8}, []string{"dp"}), shard.Axes{"dp"}, 8, 248, false, 1},
		{"own storage", shard.NewMesh([]int{4}, []string{"dp"}), shard.Axes{"dp"}, 8, 128, true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const k = 256
			m := tc.mesh
			x := tensor.Normal(tensor.NewKey(1), m.Size()*tc.rows, k)
			w := tensor.Normal(tensor.NewKey(2), k, tc.n)
			b := tensor.Normal(tensor.NewKey(3), tc.n)
			type args struct{ X, W, B *tensor.Tensor }
			type out struct{ Y, Z, GX *tensor.Tensor }
			// The products and x's gradient through both, with the fold
			// sharing them or not.
			step := func(share bool, comm *shard.Comm) out {
				return shard.Map(m, shard.Specs{"X": shard.P(m.AxisNames()), "W": shard.P(), "B": shard.P()},
					shard.P(m.AxisNames()), func(c *shard.Ctx, in args) out {
						wv := c.Vary(in.W, tc.axes...)
						if tc.own {
							wv = tensor.Add(wv, tensor.Zeros(tensor.Float32, wv.Shape()...)) // the same values, storage of the device's own
						}
						f := c.FoldPsumScatter(wv, tc.axes, 0)
						if share {
							f.ShareForward()
						}
						y := tensor.MatMul(in.X, wv)
						z := tensor.MatMulBiasAct(in.X, wv, in.B, tensor.ActRelu)
						gx := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor {
							return tensor.Sum(tensor.Tanh(tensor.MatMulBiasAct(x, wv, in.B, tensor.ActTanh)))
						})(in.X)
						assert.Nil(t, f.Wait(), "x's gradient takes no product of w's cotangent")
						vary := m.AxisNames()
						return out{c.Vary(y, vary...), c.Vary(z, vary...), c.Vary(gx, vary...)}
					}, shard.WithComm(comm))(args{x, w, b})
			}
			var cs, cn shard.Comm
			got, want := step(true, &cs), step(false, &cn)
			assert.Equal(t, tc.met, cs.Calls("shared_product"), "products met for")
			assert.Zero(t, cn.Calls("shared_product"))
			for _, p := range [][2]*tensor.Tensor{{got.Y, want.Y}, {got.Z, want.Z}, {got.GX, want.GX}} {
				g, w := shard.Gather(p[0]).Float32s(), shard.Gather(p[1]).Float32s()
				require.Len(t, g, len(w))
				for i := range w {
					require.Equal(t, math.Float32bits(w[i]), math.Float32bits(g[i]), "element %d", i)
				}
			}
			// And against the product on the host.
			ref := tensor.MatMul(x, w).Float32s()
			for i, v := range shard.Gather(got.Y).Float32s() {
				require.Equal(t, math.Float32bits(ref[i]), math.Float32bits(v), "element %d against the host", i)
			}
		})
	}
}

// ShareForward after Wait panics naming the method.
func TestShareForwardAfterWait(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"dp"})
	w := tensor.Normal(tensor.NewKey(2), 4, 6)
	shard.Map(m, shard.P(), shard.P(), func(c *shard.Ctx, w *tensor.Tensor) *tensor.Tensor {
		f := c.FoldPsumScatter(c.Vary(w, "dp"), shard.Axes{"dp"}, 0)
		f.Wait()
		assert.PanicsWithValue(t, "shard.FoldedGradient.ShareForward: called after Wait or WaitThen", f.ShareForward)
		return w
	})(w)
}
