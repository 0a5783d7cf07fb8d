package shard_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestPsumScatterGroupStart: the grouped reduce-scatter of blocks of odd
// shapes, scattered along various dimensions over one or two axes, gives
// each block's PsumScatter part bit for bit, laid end to end, and counts
// the same bytes and calls; over an axis of one device it is the blocks'
// own parts.
func TestPsumScatterGroupStart(t *testing.T) {
	defer goleak.VerifyNone(t)
	r := rand.New(rand.NewPCG(5, 6))
	x := randT(r, 128, 8) // a device's block: 16×8, 128 elements
	blocks := []struct {
		off, dim int
		shape    []int
	}{
		{0, 0, []int{24, 3}},
		{40, 1, []int{5, 16}},
		{7, 1, []int{3, 8, 2}},
		{100, 0, []int{8}},
	}
	parts := func(c *shard.Ctx, x *tensor.Tensor) ([]*tensor.Tensor, []int) {
		flat := tensor.Reshape(x, x.Size())
		var xs []*tensor.Tensor
		var dims []int
		for _, b := range blocks {
			n := 1
			for _, d := range b.shape {
				n *= d
			}
			xs = append(xs, tensor.Reshape(tensor.MulScalar(tensor.SliceAxis(flat, 0, b.off, b.off+n), 1.5), b.shape...))
			dims = append(dims, b.dim)
		}
		return xs, dims
	}
	for _, tc := range []struct {
		name string
		mesh *shard.Mesh
		axes shard.Axes
	}{
		{"over dp,tp", shard.NewMesh([]int{4, 2}, []string{"dp", "tp"}), shard.Axes{"dp", "tp"}},
		{"over tp,dp", shard.NewMesh([]int{4, 2}, []string{"dp", "tp"}), shard.Axes{"tp", "dp"}},
		{"over dp", shard.NewMesh([]int{4, 2}, []string{"dp", "tp"}), shard.Axes{"dp"}},
		{"over tp", shard.NewMesh([]int{4, 2}, []string{"dp", "tp"}), shard.Axes{"tp"}},
		{"over an axis of one device", shard.NewMesh([]int{8, 1}, []string{"dp", "tp"}), shard.Axes{"tp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sync := func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				xs, dims := parts(c, x)
				out := make([]*tensor.Tensor, len(xs))
				for i, b := range xs {
					p := c.PsumScatter(b, tc.axes, dims[i], true)
					out[i] = tensor.Reshape(p, p.Size())
				}
				return tensor.Concat(0, out...)
			}
			group := func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				xs, dims := parts(c, x)
				h := c.PsumScatterGroupStart(xs, tc.axes, dims)
				tensor.MatMul(x, tensor.Transpose(x)) // work meanwhile
				return h.Wait()
			}
			requireGroupedLikeEach(t, tc.mesh, x, sync, group, "psum_scatter")
		})
	}
}

// TestPsumScatterGroupStartMisuse: blocks that are not float32, or
// dimensions that do not match the blocks, panic naming the call; devices
// that bring different blocks fail the Map call.
func TestPsumScatterGroupStartMisuse(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := guideMesh()
	x := tensor.Ones(tensor.Float32, 16, 8)
	spec := shard.P([]string{"dp", "tp"})
	for _, tc := range []struct {
		name string
		fn   func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor
		want string
	}{
		{"float64", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.PsumScatterGroupStart([]*tensor.Tensor{tensor.AsType(x, tensor.Float64)}, shard.Axes{"dp"}, []int{1}).Wait()
		}, "want float32 blocks"},
		{"dims", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.PsumScatterGroupStart([]*tensor.Tensor{x}, shard.Axes{"dp"}, nil).Wait()
		}, "1 blocks and 0 dimensions"},
		{"different blocks", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			xs := []*tensor.Tensor{x}
			if c.AxisIndex("dp") == 1 {
				xs = append(xs, x)
			}
			return c.PsumScatterGroupStart(xs, shard.Axes{"dp"}, slices.Repeat([]int{1}, len(xs))).Wait()
		}, "mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := shard.MapErr(m, spec, spec, tc.fn)(x)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// requireGroupedLikeEach requires Map(group) of x over mesh (both sharded
// over dp and tp) to give the values of Map(sync), one collective a block,
// and Comm to count the same calls and bytes of kind for every device.
func requireGroupedLikeEach(t *testing.T, mesh *shard.Mesh, x *tensor.Tensor, sync, group func(*shard.Ctx, *tensor.Tensor) *tensor.Tensor, kind string) {
	t.Helper()
	spec := shard.P([]string{"dp", "tp"})
	var cs, cg shard.Comm
	want := shard.Gather(shard.Map(mesh, spec, spec, sync, shard.WithComm(&cs))(x))
	got := shard.Gather(shard.Map(mesh, spec, spec, group, shard.WithComm(&cg))(x))
	require.Equal(t, want.Shape(), got.Shape())
	assert.Equal(t, want.Float32s(), got.Float32s())
	for _, d := range mesh.Devices() {
		assert.Equal(t, cs.Bytes(d, kind), cg.Bytes(d, kind), "bytes sent by device %d", d.ID())
	}
	assert.Equal(t, cs.Calls(kind), cg.Calls(kind))
}
