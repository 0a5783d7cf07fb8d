package shard_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestGatherTargets: the grouped all-gathers of blocks written into their
// lent blocks or copied there, gathered along their first dimension or
// along one after dimensions of size 1, give each block's
// AllGatherInvariant bit for bit, and count the same bytes and calls;
// with a block strided in its result, or over an axis of one device,
// nothing is lent and the blocks are gathered one by one, to the same
// bits.
func TestGatherTargets(t *testing.T) {
	defer goleak.VerifyNone(t)
	r := rand.New(rand.NewPCG(9, 10))
	x := randT(r, 16, 8) // a device's block: 2×8
	blocks := func(x *tensor.Tensor, strided bool) ([]*tensor.Tensor, []int) {
		xs := []*tensor.Tensor{tensor.MulScalar(x, 3), tensor.Reshape(x, 1, 2, 8), tensor.Reshape(tensor.SliceAxis(x, 1, 0, 5), 10)}
		dims := []int{0, 1, 0}
		if strided {
			xs, dims = append(xs, x), append(dims, 1)
		}
		return xs, dims
	}
	for _, tc := range []struct {
		name          string
		mesh          *shard.Mesh
		axes          shard.Axes
		strided, lent bool
	}{
		{"over dp", guideMesh(), shard.Axes{"dp"}, false, true},
		{"over tp,dp", guideMesh(), shard.Axes{"tp", "dp"}, false, true},
		{"a strided block", guideMesh(), shard.Axes{"dp"}, true, false},
		{"over an axis of one device", shard.NewMesh([]int{8, 1}, []string{"dp", "tp"}), shard.Axes{"tp"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flat := func(c *shard.Ctx, ys []*tensor.Tensor) *tensor.Tensor {
				for i, y := range ys {
					ys[i] = tensor.Reshape(y, y.Size())
				}
				return c.Vary(tensor.Concat(0, ys...), "dp", "tp")
			}
			sync := func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				xs, dims := blocks(x, tc.strided)
				out := make([]*tensor.Tensor, len(xs))
				for i, b := range xs {
					out[i] = c.AllGatherInvariant(b, tc.axes, dims[i], true)
				}
				return flat(c, out)
			}
			group := func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				xs, dims := blocks(x, tc.strided)
				shapes := make([][]int, len(xs))
				for i, b := range xs {
					shapes[i] = b.Shape()
				}
				tg := c.AllGatherInvariantTargets(shapes, tc.axes, dims)
				c.Psum(x, "dp") // a collective after the targets' place
				// Lent in one process only (between processes, under
				// mpirun, block by block).
				require.Equal(t, tc.lent && shard.ProcessCount() == 1, tg.Block(0) != nil)
				if blk := tg.Block(0); blk != nil {
					copy(blk.BorrowFloat32(), xs[0].Float32s())
					xs[0] = blk // written into its block; the others copied
				}
				tg.Start(xs)
				return flat(c, tg.Wait())
			}
			requireGroupedLikeEach(t, tc.mesh, x, sync, group, "all_gather")
		})
	}
}

// TestGatherTargetsErrors: lent targets never started fail the Map call
// naming them; a second start, and blocks of other shapes, panic.
func TestGatherTargetsErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	x := tensor.Ones(tensor.Float32, 16, 8)
	spec := shard.P([]string{"dp", "tp"})
	for _, tc := range []struct {
		name string
		fn   func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor
		want string
	}{
		{"never started", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			c.AllGatherInvariantTargets([][]int{x.Shape()}, shard.Axes{"dp"}, []int{0})
			return x
		}, "all_gather group"},
		{"started twice", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			tg := c.AllGatherInvariantTargets([][]int{x.Shape()}, shard.Axes{"dp"}, []int{0})
			tg.Start([]*tensor.Tensor{x})
			tg.Wait()
			tg.Start([]*tensor.Tensor{x})
			return x
		}, "started already"},
		{"another shape", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			tg := c.AllGatherInvariantTargets([][]int{x.Shape()}, shard.Axes{"dp"}, []int{0})
			tg.Start([]*tensor.Tensor{tensor.Reshape(x, 16)})
			return x
		}, "for a target of blocks f32[2,8]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := shard.MapErr(m, spec, spec, tc.fn)(x)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
