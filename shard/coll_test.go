package shard

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// TestCollectivesRegistered: every collective Ctx issues is one of the
// registered descriptors (Comm counts nothing else), every registered
// collective has a kind, ops with VJPs and a cross-process exchange, and
// the collectives that exchange parts of blocks say which parts.
func TestCollectivesRegistered(t *testing.T) {
	kinds := map[string]bool{}
	for _, c := range collectives {
		kinds[c.kind] = true
		require.NotEmpty(t, c.ops, c.kind)
		for _, op := range c.ops {
			assert.True(t, op.VJP != nil || op.VJPNeed != nil || op.VJPN != nil, "%s: op %s has no VJP", c.kind, op.Name)
		}
		assert.NotNil(t, c.cross, c.kind)
	}
	for _, c := range []*collective{psumScatterColl, allToAllColl, ppermuteColl, ppermuteStartColl} {
		assert.NotNil(t, c.needs, c.kind)
	}

	m := NewMesh([]int{4, 2}, []string{"dp", "tp"})
	var comm Comm
	f := Map(m, P("dp"), P("dp"), func(c *Ctx, x *tensor.Tensor) *tensor.Tensor {
		y := c.Psum(x, "tp")
		y = tensor.Add(y, c.Pmax(x, "dp"))
		y = tensor.Add(y, c.Pmin(x, "dp"))
		y = tensor.Add(y, c.PsumScatter(c.AllGather(x, Axes{"dp"}, 0, true), Axes{"dp"}, 0, true))
		y = tensor.Add(y, tensor.Sum(c.AllGatherInvariant(x, Axes{"tp"}, 0, false), 0))
		y = tensor.Add(y, c.Ppermute(x, Axes{"dp"}, [][2]int{{0, 1}, {1, 0}}))
		y = tensor.Add(y, c.RingShiftStart(x, Axes{"dp"}, 1).Wait())
		y = tensor.Add(y, c.AllToAll(x, Axes{"tp"}, 1, 1, true))
		rows := c.Local(tensor.FromInt32([]int32{0, 2}, 2))
		sizes := c.Local(tensor.FromInt32([]int32{2, 2}, 2))
		z := c.RaggedAllToAll(x, tensor.ZerosLike(x), rows, sizes, rows, sizes, Axes{"tp"})
		return c.Psum(tensor.Add(y, z), "tp")
	}, WithComm(&comm))
	f(tensor.Ones(tensor.Float32, 16, 2))
	for _, k := range comm.Kinds() {
		assert.True(t, kinds[k], "Comm counted %q, which no registered collective is", k)
	}
	for _, k := range []string{"psum", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute", "all_to_all", "ragged_all_to_all"} {
		assert.True(t, slices.Contains(comm.Kinds(), k), "no %s issued", k)
	}
}
