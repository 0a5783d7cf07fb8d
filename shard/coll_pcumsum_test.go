package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestToyCollective exercises pcumsum, the collective that
// coll_pcumsum_toy_test.go adds through "Adding a collective" alone:
// inside Map, over one axis and over two in either order, forward and
// reversed, counted by Comm, differentiable (finite differences and a
// hand-worked gradient). Under mpirun (shard/mpi/ci.sh) the mesh spans
// the processes and the same registration carries it between them.
func TestToyCollective(t *testing.T) {
	m := guideMesh() // dp=4, tp=2
	// prefix returns the blocks (of rows each) of host x summed in prefix
	// (or suffix) order: the reference, a plain loop.
	prefix := func(x *tensor.Tensor, blocks int, reverse bool) []float32 {
		v := x.Float32s()
		n := len(v) / blocks
		out := make([]float32, len(v))
		for b := range blocks {
			for q := range blocks {
				if q == b || (q < b) != reverse {
					for i := range n {
						out[b*n+i] += v[q*n+i]
					}
				}
			}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		spec    shard.Spec
		axes    shard.Axes
		rows    int
		reverse bool
	}{
		{"dp", shard.P("dp"), shard.Axes{"dp"}, 8, false},
		{"dp reversed", shard.P("dp"), shard.Axes{"dp"}, 8, true},
		{"dp and tp", shard.P([]string{"dp", "tp"}), shard.Axes{"dp", "tp"}, 16, false},
		{"tp and dp reversed", shard.P([]string{"tp", "dp"}), shard.Axes{"tp", "dp"}, 16, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := tensor.Reshape(tensor.AsType(tensor.Arange(tc.rows*3), tensor.Float32), tc.rows, 3)
			var comm shard.Comm
			f := shard.Map(m, tc.spec, tc.spec, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				return c.Pcumsum(x, tc.axes, tc.reverse)
			}, shard.WithComm(&comm))
			y := f(x)
			blocks := m.AxisSize(tc.axes...)
			assert.Equal(t, prefix(x, blocks, tc.reverse), shard.Gather(y).Float32s())
			assert.Equal(t, 1, comm.Calls("pcumsum"))
			assert.Equal(t, []string{"pcumsum"}, comm.Kinds())

			// d sum(w·y) / dx = the suffix (prefix when reversed) sums of w.
			w := tensor.Reshape(tensor.AsType(tensor.Arange(tc.rows*3), tensor.Float32), tc.rows, 3)
			grad := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Mul(f(x), w))
			})(x)
			assert.Equal(t, prefix(w, blocks, !tc.reverse), shard.Gather(grad).Float32s())

			err := autodiff.CheckGrad(func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Square(f(xs[0]))
			}, []*tensor.Tensor{x}, autodiff.CheckOptions{})
			require.NoError(t, err)
		})
	}
}

// TestToyCollectiveMismatch: the rendezvous checks the new collective's
// calls as any other's, here a device that reverses when the others do
// not.
func TestToyCollectiveMismatch(t *testing.T) {
	if shard.ProcessCount() > 1 {
		t.Skip("a failing device ends an MPI job")
	}
	m := guideMesh()
	_, err := shard.MapErr(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.Pcumsum(x, shard.Axes{"dp"}, c.AxisIndex("dp") == 2)
	})(tensor.Zeros(tensor.Float32, 8, 3))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pcumsum(")
	assert.Contains(t, err.Error(), "reverse true")
	assert.Contains(t, err.Error(), "mismatch")
}
