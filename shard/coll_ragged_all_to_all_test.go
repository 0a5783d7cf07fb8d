package shard_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// twoGroupPlan is a ragged all-to-all over 2 devices with u = 2 groups
// per device, worked by hand. Device r's operand has 4 rows, 100r+k.
// Device 0 sends rows {0} and {1,2} to itself (groups 0 and 1) and {3} and
// {} to device 1; device 1 sends {0,1} and {2} to device 0 and {} and {3}
// to itself. Each receiver lays its rows out by group, senders in order
// within a group, and leaves one row free at the end:
//
//	device 0: group 0: 0 (from 0), 100, 101 (from 1); group 1: 1, 2 (from 0), 102 (from 1); then 0
//	device 1: group 0: 3 (from 0); group 1: 103 (from 1); then 0
type twoGroupPlan struct {
	X              *tensor.Tensor
	IO, SS, OO, RS *tensor.Tensor
}

func newTwoGroupPlan(x *tensor.Tensor) twoGroupPlan {
	// Per device, the entries for (device 0, group 0), (0, 1), (1, 0), (1, 1).
	io := []int{0, 1, 3, 4 /* device 0 */, 0, 2, 3, 3 /* device 1 */}
	ss := []int{1, 2, 1, 0, 2, 1, 0, 1}
	oo := []int{0, 3, 0, 2 /* where device 0's groups land */, 1, 5, 1, 1 /* device 1's */}
	rs := []int{1, 2, 2, 1 /* device 0 receives */, 1, 0, 0, 1 /* device 1 */}
	return twoGroupPlan{X: x, IO: tensor.FromInts(io), SS: tensor.FromInts(ss), OO: tensor.FromInts(oo), RS: tensor.FromInts(rs)}
}

const twoGroupRows = 7 // rows of each device's output (device 1 uses 2)

func TestRaggedAllToAllRowsGroups(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"ep"})
	const width = 8 // twoGroupOperand's rows of 8 float32: the outputs' storage is cached
	x := twoGroupOperand()
	var comm shard.Comm
	f := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, in twoGroupPlan) *tensor.Tensor {
		return c.RaggedAllToAllRows(in.X, twoGroupRows, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
	}, shard.WithComm(&comm))
	// The output's storage comes from the allocator cache, dirty: rows no
	// device writes must still read 0.
	for range 3 {
		for range 2 {
			tensor.Donate(tensor.Full(tensor.Float32, 7, twoGroupRows, width))
		}
		y := shard.Gather(f(newTwoGroupPlan(x))).Float32s()
		col := func(lo, hi int) []float32 {
			var v []float32
			for i := lo; i < hi; i++ {
				v = append(v, y[width*i])
				assert.Equal(t, make([]float32, width-2), y[width*i+2:width*(i+1)], "row %d", i)
			}
			return v
		}
		assert.Equal(t, []float32{0, 100, 101, 1, 2, 102, 0}, col(0, 7), "device 0")
		assert.Equal(t, []float32{3, 103, 0, 0, 0, 0, 0}, col(7, 14), "device 1")
		assert.Equal(t, float32(-102), y[width*5+1], "the rows move whole")
	}
	assert.Equal(t, 3, comm.Calls("ragged_all_to_all"))
	assert.Equal(t, 0, comm.Calls("all_to_all"))
	// Bytes each device sent the other: device 0 one row, device 1 three.
	assert.Equal(t, int64(3*1*width*4), comm.Bytes(m.Devices()[0], "ragged_all_to_all"))
	assert.Equal(t, int64(3*3*width*4), comm.Bytes(m.Devices()[1], "ragged_all_to_all"))
}

// The gradient of RaggedAllToAllRows is the transposed exchange, checked
// against finite differences, and the backward pass meets the devices
// once more (the transposed exchange) with no exchange of offsets.
func TestRaggedAllToAllRowsGrad(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"ep"})
	r := rand.New(rand.NewPCG(6, 6))
	var comm shard.Comm
	g := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, in twoGroupPlan) *tensor.Tensor {
		y := c.RaggedAllToAllRows(in.X, twoGroupRows, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
		s := c.Vary(tensor.Scalar(float32(1+c.AxisIndex("ep"))/2), "ep")
		return tensor.Square(tensor.Mul(y, s))
	}, shard.WithComm(&comm))
	loss := func(xs []*tensor.Tensor) *tensor.Tensor { return g(newTwoGroupPlan(xs[0])) }
	require.NoError(t, autodiff.CheckGrad(loss, []*tensor.Tensor{randT(r, 8, 3)}, autodiff.CheckOptions{}))

	comm.Reset()
	x := randT(r, 8, 3)
	grad := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(loss([]*tensor.Tensor{x})) })(x)
	assert.Equal(t, 2, comm.Calls("ragged_all_to_all"), "forward and backward exchange")
	assert.Equal(t, 0, comm.Calls("all_to_all"), "the offsets travelled with the forward exchange")
	// Row 4+3 (device 1's last, sent to device 1's second row, scale 1):
	// d/dx (x)² = 2x; row 3 of device 0 goes to device 1 (scale 1).
	xs, gs := x.Float32s(), grad.Float32s()
	for _, row := range []int{3, 7} {
		for c := range 3 {
			assert.InDelta(t, 2*xs[3*row+c], gs[3*row+c], 1e-5, "row %d", row)
		}
	}
	// Device 0's rows 0-2 land on device 0 (scale 1/2): (x/2)² gives x/2.
	assert.InDelta(t, xs[0]/2, gs[0], 1e-5)
	// Device 1's row 4 (its row 0) lands on device 0.
	assert.InDelta(t, xs[12]/2, gs[12], 1e-5)
}

// The buffer form and the rows form with u groups agree where the buffer
// is zeros, and inconsistent offsets panic naming the op.
func TestRaggedAllToAllGroupsBufferAndPanics(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"ep"})
	r := rand.New(rand.NewPCG(7, 7))
	x := randT(r, 8, 2)
	type io struct{ A, B *tensor.Tensor }
	f := shard.Map(m, shard.P("ep"), shard.Specs{"": shard.P("ep")}, func(c *shard.Ctx, in twoGroupPlan) io {
		a := c.RaggedAllToAllRows(in.X, twoGroupRows, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
		b := c.RaggedAllToAll(in.X, c.Local(tensor.Zeros(tensor.Float32, twoGroupRows, 2)), in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
		return io{a, b}
	})
	got := f(newTwoGroupPlan(x))
	assert.Equal(t, shard.Gather(got.A).Float32s(), shard.Gather(got.B).Float32s())

	bad := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, in twoGroupPlan) *tensor.Tensor {
		return c.RaggedAllToAllRows(in.X, twoGroupRows, in.IO, in.SS, in.OO, tensor.FromInts([]int{1, 2, 2}), shard.Axes{"ep"})
	})
	requirePanicContains(t, func() { bad(newTwoGroupPlan(x)) }, "shard.Ctx.RaggedAllToAllRows: offsets and sizes must be i32[2·u]")
	neg := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, in twoGroupPlan) *tensor.Tensor {
		return c.RaggedAllToAllRows(in.X, -1, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
	})
	requirePanicContains(t, func() { neg(newTwoGroupPlan(x)) }, "negative output rows")
	short := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, in twoGroupPlan) *tensor.Tensor {
		return c.RaggedAllToAllRows(in.X, 2, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
	})
	requirePanicContains(t, func() { short(newTwoGroupPlan(x)) }, "writes rows")
}

// Forward mode goes through RaggedAllToAllRows (a linear map: its JVP is
// the exchange of the tangent), inside Map as from outside.
func TestRaggedAllToAllRowsJVP(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"ep"})
	r := rand.New(rand.NewPCG(8, 8))
	f := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, in twoGroupPlan) *tensor.Tensor {
		return c.RaggedAllToAllRows(in.X, twoGroupRows, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
	})
	x, dx := randT(r, 8, 3), randT(r, 8, 3)
	y, dy := autodiff.JVP(func(x *tensor.Tensor) *tensor.Tensor { return f(newTwoGroupPlan(x)) }, x, dx)
	assert.Equal(t, shard.Gather(f(newTwoGroupPlan(x))).Float32s(), shard.Gather(y).Float32s())
	assert.Equal(t, shard.Gather(f(newTwoGroupPlan(dx))).Float32s(), shard.Gather(dy).Float32s())
}

// takeOrRows sends the rows of p's operand that index names over "ep":
// with RaggedAllToAllTake, or (take false) as RaggedAllToAllRows of
// tensor.Take, the composition it replaces.
func takeOrRows(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor, take bool) *tensor.Tensor {
	if take {
		return c.RaggedAllToAllTake(p.X, index, twoGroupRows, p.IO, p.SS, p.OO, p.RS, shard.Axes{"ep"})
	}
	return c.RaggedAllToAllRows(tensor.Take(p.X, index, 0), twoGroupRows, p.IO, p.SS, p.OO, p.RS, shard.Axes{"ep"})
}

// RaggedAllToAllTake equals RaggedAllToAllRows of tensor.Take, forward
// and backward bit for bit (the same rows moved, the cotangents summed in
// the same order), with an index that repeats and skips rows; one
// exchange each way, and an index out of range panics naming the op.
func TestRaggedAllToAllTake(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"ep"})
	r := rand.New(rand.NewPCG(9, 9))
	type in struct {
		Plan  twoGroupPlan
		Index *tensor.Tensor
	}
	var comm shard.Comm
	run := func(take bool) func(x *tensor.Tensor) *tensor.Tensor {
		f := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, a in) *tensor.Tensor {
			y := takeOrRows(c, a.Plan, a.Index, take)
			s := c.Vary(tensor.Scalar(float32(1+c.AxisIndex("ep"))/2), "ep")
			return tensor.Square(tensor.Mul(y, s))
		}, shard.WithComm(&comm))
		// Each device's operand has 3 rows, and its index 4 entries; one row
		// is not sent (its cotangent is zero).
		index := tensor.FromInts([]int{2, 0, 0, 2 /* device 0: row 1 unsent */, 1, 1, 0, 0 /* device 1: row 2 */})
		return func(x *tensor.Tensor) *tensor.Tensor { return f(in{newTwoGroupPlan(x), index}) }
	}
	x := randT(r, 6, 3)
	want, got := run(false), run(true)
	assert.Equal(t, shard.Gather(want(x)).Float32s(), shard.Gather(got(x)).Float32s())
	grad := func(f func(*tensor.Tensor) *tensor.Tensor) []float32 {
		return autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(f(x)) })(x).Float32s()
	}
	wantGrad := grad(want)
	comm.Reset()
	gotGrad := grad(got)
	assert.Equal(t, wantGrad, gotGrad)
	assert.Equal(t, make([]float32, 3), gotGrad[3:6], "device 0's row 1")
	assert.Equal(t, make([]float32, 3), gotGrad[15:18], "device 1's row 2")
	assert.NotEqual(t, make([]float32, 3), gotGrad[0:3])
	assert.Equal(t, 2, comm.Calls("ragged_all_to_all"), "forward and backward exchange")
	require.NoError(t, autodiff.CheckGrad(func(xs []*tensor.Tensor) *tensor.Tensor { return got(xs[0]) },
		[]*tensor.Tensor{x}, autodiff.CheckOptions{}))
	// Forward mode transposes the VJP, whose sum's own VJP is the
	// exchange of Take's rows again: the tangent moves as the rows do.
	ex := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, a in) *tensor.Tensor {
		p := a.Plan
		return c.RaggedAllToAllTake(p.X, a.Index, twoGroupRows, p.IO, p.SS, p.OO, p.RS, shard.Axes{"ep"})
	})
	index := tensor.FromInts([]int{2, 0, 0, 2, 1, 1, 0, 0})
	dx := randT(r, 6, 3)
	_, dy := autodiff.JVP(func(x *tensor.Tensor) *tensor.Tensor { return ex(in{newTwoGroupPlan(x), index}) }, x, dx)
	assert.Equal(t, shard.Gather(ex(in{newTwoGroupPlan(dx), index})).Float32s(), shard.Gather(dy).Float32s())

	bad := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, p twoGroupPlan) *tensor.Tensor {
		return c.RaggedAllToAllTake(p.X, tensor.FromInts([]int{0, 1, 2, 3}), twoGroupRows, p.IO, p.SS, p.OO, p.RS, shard.Axes{"ep"})
	})
	requirePanicContains(t, func() { bad(newTwoGroupPlan(x)) }, "shard.Ctx.RaggedAllToAllTake: index 3 out of range for operand f32[3,3]")
}

// RaggedAllToAllTake's VJP (the transposed exchange, then Take's sum)
// gives the bits of the composition's (the rows copied back, then
// tensor.SegmentSum in received order), here on rows of 19 float32 (the
// sums' vector part and their tail), an index that repeats rows and has
// entries nothing sends (their cotangent is 0), or that sends one row
// four times (its sum rounds differently in another order), under a
// random cotangent, into storage the allocator cache hands out dirty; a
// second-order gradient (the traced path) agrees too. A VJP that adds the
// received rows in another order, or lets a row's first contribution add
// to the cache's old values, fails it.
func TestRaggedAllToAllTakeGradOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		index  []int
		unsent int // a row of device 0 in no sent entry
		summed int // one that is
	}{
		// Device r's operand has 4 rows and its index 5 entries; entry 4
		// is not sent (the plan's groups cover entries 0-3).
		{"repeats", []int{2, 0, 0, 1, 2 /* device 0 */, 3, 1, 1, 0, 3 /* device 1 */}, 3, 0},
		{"one row four times", []int{1, 1, 1, 1, 2 /* device 0 */, 0, 0, 0, 0, 3 /* device 1 */}, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) { raggedTakeGradOrder(t, tc.index, tc.unsent, tc.summed) })
	}
}

func raggedTakeGradOrder(t *testing.T, indexInts []int, unsent, summed int) {
	m := shard.NewMesh([]int{2}, []string{"ep"})
	r := rand.New(rand.NewPCG(3, 4))
	const width = 19
	type in struct {
		Plan  twoGroupPlan
		Index *tensor.Tensor
		W     *tensor.Tensor
	}
	index := tensor.FromInts(indexInts)
	run := func(take bool) func(x, w *tensor.Tensor) *tensor.Tensor {
		f := shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, a in) *tensor.Tensor {
			y := takeOrRows(c, a.Plan, a.Index, take)
			return tensor.Mul(y, a.W)
		})
		return func(x, w *tensor.Tensor) *tensor.Tensor { return f(in{newTwoGroupPlan(x), index, w}) }
	}
	x, w := randT(r, 8, width), randT(r, 2*twoGroupRows, width)
	want, got := run(false), run(true)
	grad := func(f func(x, w *tensor.Tensor) *tensor.Tensor) []float32 {
		return autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(f(x, w)) })(x).Float32s()
	}
	wantGrad := grad(want)
	// The result's storage comes from the allocator cache, dirty.
	for range 4 {
		tensor.Donate(tensor.Full(tensor.Float32, 7, 4, width))
	}
	gotGrad := grad(got)
	require.Equal(t, wantGrad, gotGrad)
	assert.Equal(t, make([]float32, width), gotGrad[unsent*width:(unsent+1)*width], "device 0's row in no entry")
	assert.NotEqual(t, make([]float32, width), gotGrad[summed*width:(summed+1)*width])
	// Second order: d/dx of Σ (∂/∂x Σ y·w)² goes through the traced VJP.
	second := func(f func(x, w *tensor.Tensor) *tensor.Tensor) []float32 {
		return autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor {
			g := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Square(f(x, w))) })(x)
			return tensor.Sum(tensor.Square(g))
		})(x).Float32s()
	}
	assert.Equal(t, second(want), second(got))
}
