package shard_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// twoGroupOperand is twoGroupPlan's operand, rows of 8 float32 whose first
// two are 100r+k and its negation.
func twoGroupOperand() *tensor.Tensor {
	const width = 8
	var xd []float32
	for r := range 2 {
		for k := range 4 {
			row := make([]float32, width)
			row[0], row[1] = float32(100*r+k), float32(-100*r-k)
			xd = append(xd, row...)
		}
	}
	return tensor.FromFloat32(xd, 8, width)
}

// In one process the groups of a ragged all-to-all meet on their own: on a
// 2×2 mesh, the ep groups of dp index 0 exchange while the devices of dp
// index 1 have not reached the exchange yet (they wait for the first
// group's to end, which would never happen if the exchange waited for
// every device of the mesh), and both groups get the single group's rows.
func TestRaggedAllToAllGroupsMeetOnTheirOwn(t *testing.T) {
	m := shard.NewMesh([]int{2, 2}, []string{"dp", "ep"})
	var first atomic.Int32
	firstDone := make(chan struct{})
	f := shard.MapErr(m, shard.P("ep"), shard.P("dp", "ep"), func(c *shard.Ctx, in twoGroupPlan) *tensor.Tensor {
		dp := c.AxisIndex("dp")
		if dp == 1 {
			select {
			case <-firstDone:
			case <-time.After(20 * time.Second):
				panic("the devices of dp index 0 did not exchange without those of dp index 1")
			}
		}
		y := c.RaggedAllToAllRows(in.X, twoGroupRows, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
		if dp == 0 && first.Add(1) == 2 {
			close(firstDone)
		}
		return tensor.ExpandDims(y, 0)
	})
	out, err := f(newTwoGroupPlan(twoGroupOperand()))
	require.NoError(t, err)
	y := shard.Gather(out)
	require.Equal(t, []int{2, 2 * twoGroupRows, 8}, y.Shape())
	v := y.Float32s()
	for dp := range 2 {
		var col []float32
		for i := range 2 * twoGroupRows {
			col = append(col, v[(dp*2*twoGroupRows+i)*8])
		}
		assert.Equal(t, []float32{0, 100, 101, 1, 2, 102, 0, 3, 103, 0, 0, 0, 0, 0}, col, "dp index %d", dp)
	}
}

// The staged psum (a small float32 block), the float32 all-gather (into a
// target or not) and the psum_scatter, started or not, meet by group too: on a 2×2 mesh, the devices of dp index 0 sum and gather
// over ep while those of dp index 1 have not issued the collective yet.
func TestSmallCollectivesGroupsMeetOnTheirOwn(t *testing.T) {
	m := shard.NewMesh([]int{2, 2}, []string{"dp", "ep"})
	for _, tc := range []struct {
		name string
		coll func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor
		want []float32 // per device, in mesh order
	}{
		{"psum", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor { return c.Psum(x, "ep") }, []float32{1, 1, 5, 5}},
		{"all_gather", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Sum(tensor.Mul(c.AllGatherInvariant(x, shard.Axes{"ep"}, 0, true), tensor.FromFloat32([]float32{1, 10}, 2)))
		}, []float32{10, 10, 32, 32}},
		{"psum started", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor { return c.PsumStart(x, "ep").Wait() }, []float32{1, 1, 5, 5}},
		{"all_gather started", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			y := c.AllGatherInvariantStart(x, shard.Axes{"ep"}, 0, true).Wait()
			return tensor.Sum(tensor.Mul(y, tensor.FromFloat32([]float32{1, 10}, 2)))
		}, []float32{10, 10, 32, 32}},
		{"all_gather target", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			y := c.AllGatherInvariantTarget(tensor.Float32, []int{1}, shard.Axes{"ep"}, 0, true).Start(x).Wait()
			return tensor.Sum(tensor.Mul(y, tensor.FromFloat32([]float32{1, 10}, 2)))
		}, []float32{10, 10, 32, 32}},
		{"psum_scatter", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			// Device (dp, ep) sums [v, 10v] over ep and keeps part ep.
			return c.PsumScatter(tensor.Mul(tensor.Concat(0, x, x), tensor.FromFloat32([]float32{1, 10}, 2)), shard.Axes{"ep"}, 0, true)
		}, []float32{1, 10, 5, 50}},
		{"psum_scatter started", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.PsumScatterStart(tensor.Mul(tensor.Concat(0, x, x), tensor.FromFloat32([]float32{1, 10}, 2)), shard.Axes{"ep"}, 0, true).Wait()
		}, []float32{1, 10, 5, 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first atomic.Int32
			firstDone := make(chan struct{})
			f := shard.MapErr(m, shard.P("dp", "ep"), shard.P("dp", "ep"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				dp := c.AxisIndex("dp")
				if dp == 1 {
					select {
					case <-firstDone:
					case <-time.After(20 * time.Second):
						panic("the devices of dp index 0 did not meet without those of dp index 1")
					}
				}
				y := tc.coll(c, tensor.Reshape(x, 1))
				if dp == 0 && first.Add(1) == 2 {
					close(firstDone)
				}
				return tensor.Reshape(y, 1, 1)
			})
			out, err := f(tensor.FromFloat32([]float32{0, 1, 2, 3}, 2, 2))
			require.NoError(t, err)
			assert.Equal(t, tc.want, shard.Gather(out).Float32s())
		})
	}
}

// A device failing while the other group has gone on past the exchange
// that its group's members wait in fails the call without leaving any
// device waiting: the first group waits in a collective over the whole
// mesh, its failure's release.
func TestRaggedAllToAllGroupsFailure(t *testing.T) {
	m := shard.NewMesh([]int{2, 2}, []string{"dp", "ep"})
	f := shard.MapErr(m, shard.P("ep"), shard.P(), func(c *shard.Ctx, in twoGroupPlan) *tensor.Tensor {
		if c.AxisIndex("dp") == 1 && c.AxisIndex("ep") == 1 {
			panic("device failed")
		}
		y := c.RaggedAllToAllRows(in.X, twoGroupRows, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
		return c.Psum(tensor.Sum(y), "dp", "ep")
	})
	done := make(chan error, 1)
	go func() {
		_, err := f(newTwoGroupPlan(twoGroupOperand()))
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "device failed")
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not return after a device failed")
	}
}
