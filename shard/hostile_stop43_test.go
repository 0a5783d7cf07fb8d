package shard_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Hostile inputs to the collectives added in stops 42 and 43
// (Ctx.RaggedAllToAllTake, FoldedGradient.WaitThen): a programmer error on
// any device fails the Map call with a *DeviceError whose message names
// the op and the operands in type notation; no device crashes inside the
// collective (nil dereference, index out of range), and none is left
// waiting for the others, even when only one device's input is wrong.

// mapWithin runs f, which calls a MapErr function, on another goroutine
// and returns its error, failing the test if it has not returned in 20 s
// (a device left waiting in a collective).
func mapWithin(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the Map call did not return: a device waits in a collective")
		return nil
	}
}

func TestHostileRaggedAllToAllTake(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"ep"})
	type in struct {
		Plan  twoGroupPlan
		Index *tensor.Tensor
	}
	// Each device's index has 4 entries into its operand of 4 rows (8 rows
	// of twoGroupOperand's, split over ep); newTwoGroupPlan sends up to 4.
	good := []int{0, 1, 2, 3, 3, 2, 1, 0}
	take := func(c *shard.Ctx, p twoGroupPlan, x, index *tensor.Tensor, rows int) *tensor.Tensor {
		return c.RaggedAllToAllTake(x, index, rows, p.IO, p.SS, p.OO, p.RS, shard.Axes{"ep"})
	}
	placed := shard.Put(tensor.Zeros(tensor.Float32, 8, 8), shard.NewSharding(m, shard.P("ep")))
	const op = "shard.Ctx.RaggedAllToAllTake: "
	cases := []struct {
		name  string
		index []int
		fn    func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor
		want  string
	}{
		{"nil operand", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return take(c, p, nil, index, twoGroupRows)
		}, op + "operand operand is nil"},
		{"nil index", good, func(c *shard.Ctx, p twoGroupPlan, _ *tensor.Tensor) *tensor.Tensor {
			return take(c, p, p.X, nil, twoGroupRows)
		}, op + "operand index is nil"},
		{"nil sizes", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return c.RaggedAllToAllTake(p.X, index, twoGroupRows, p.IO, p.SS, p.OO, nil, shard.Axes{"ep"})
		}, op + "operand recvSizes is nil"},
		{"nil offsets on one device", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			io := p.IO
			if c.AxisIndex("ep") == 1 {
				io = nil
			}
			return c.RaggedAllToAllTake(p.X, index, twoGroupRows, io, p.SS, p.OO, p.RS, shard.Axes{"ep"})
		}, op + "operand inputOffsets is nil"},
		{"float32 index", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return take(c, p, p.X, tensor.AsType(index, tensor.Float32), twoGroupRows)
		}, op + "index f32[4]{ep} must be i32[m] and operand f32[4,8]{ep} have rows"},
		{"matrix index", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return take(c, p, p.X, tensor.Reshape(index, 2, 2), twoGroupRows)
		}, op + "index i32[2,2]{ep} must be i32[m] and operand f32[4,8]{ep} have rows"},
		{"scalar operand", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return take(c, p, tensor.Scalar(1), index, twoGroupRows)
		}, op + "index i32[4]{ep} must be i32[m] and operand f32[] have rows"},
		{"negative index on one device", []int{0, 1, 2, 3, 3, -1, 1, 0}, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return take(c, p, p.X, index, twoGroupRows)
		}, op + "index -1 out of range for operand f32[4,8]{ep}"},
		{"index past the rows on one device", []int{0, 1, 2, 3, 3, 2, 1, math.MaxInt32}, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return take(c, p, p.X, index, twoGroupRows)
		}, op + "index 2147483647 out of range for operand f32[4,8]{ep}"},
		{"index shorter than what is sent", []int{0, 1, 2, 3}, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return take(c, p, p.X, index, twoGroupRows)
		}, "of its index of 2 entries into operand f32[4,8]"},
		{"negative rows", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return take(c, p, p.X, index, -1)
		}, op + "negative output rows -1"},
		{"negative rows on one device", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return take(c, p, p.X, index, twoGroupRows-8*c.AxisIndex("ep"))
		}, op + "negative output rows -1"},
		{"too few output rows", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return take(c, p, p.X, index, 1)
		}, "of the output of rank"}, // which receiving device fails first varies
		{"float offsets", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return c.RaggedAllToAllTake(p.X, index, twoGroupRows, tensor.AsType(p.IO, tensor.Float32), p.SS, p.OO, p.RS, shard.Axes{"ep"})
		}, op + "offsets and sizes must be i32[2·u] (u entries per device along 2 devices), all of one length, got f32[4]{ep}"},
		{"offsets of another length", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return c.RaggedAllToAllTake(p.X, index, twoGroupRows, tensor.FromInts([]int{0, 1}), p.SS, p.OO, p.RS, shard.Axes{"ep"})
		}, op + "offsets and sizes must be i32[2·u] (u entries per device along 2 devices), all of one length, got i32[4]{ep}"},
		{"sizes the receivers do not expect", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return c.RaggedAllToAllTake(p.X, index, twoGroupRows, p.IO, p.SS, p.OO, tensor.FromInts([]int{1, 1, 1, 1}), shard.Axes{"ep"})
		}, "shard.Ctx.RaggedAllToAll: device rank "}, // which device fails first varies
		{"negative sizes", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return c.RaggedAllToAllTake(p.X, index, twoGroupRows, p.IO, tensor.FromInts([]int{-1, 2, 1, 0}), p.OO, p.RS, shard.Axes{"ep"})
		}, "shard.Ctx.RaggedAllToAll: device rank "},
		{"an axis the mesh lacks", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return c.RaggedAllToAllTake(p.X, index, twoGroupRows, p.IO, p.SS, p.OO, p.RS, shard.Axes{"dp"})
		}, op + "mesh Mesh('ep': 2) has no axis \"dp\""},
		{"no axes", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return c.RaggedAllToAllTake(p.X, index, twoGroupRows, p.IO, p.SS, p.OO, p.RS, nil)
		}, op + "no mesh axes given"},
		{"a global placed operand", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			return take(c, p, placed, index, twoGroupRows)
		}, op + "f32[8@ep,8] is a global sharded tensor; collectives take blocks inside shard.Map"},
		{"a donated operand", good, func(c *shard.Ctx, p twoGroupPlan, index *tensor.Tensor) *tensor.Tensor {
			x := tensor.MulScalar(p.X, 1)
			tensor.Donate(x)
			return take(c, p, x, index, twoGroupRows)
		}, op + "operand f32[4,8]{ep} was donated (tensor.Donate)"},
	}
	x := twoGroupOperand()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := shard.MapErr(m, shard.P("ep"), shard.P("ep"), func(ctx *shard.Ctx, a in) *tensor.Tensor {
				return c.fn(ctx, a.Plan, a.Index)
			})
			err := mapWithin(t, func() error {
				_, err := f(in{newTwoGroupPlan(x), tensor.FromInts(c.index)})
				return err
			})
			var de *shard.DeviceError
			require.True(t, errors.As(err, &de), "want a *DeviceError, got %v", err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "runtime error")
		})
	}

	// A block of another, finished Map call on a mesh of 4 (the call
	// has taken it back, donated): named with the op.
	m4 := shard.NewMesh([]int{4}, []string{"ep"})
	var other *tensor.Tensor
	shard.Map(m4, shard.P(), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		if c.AxisIndex("ep") == 0 {
			other = x
		}
		return x
	})(tensor.Zeros(tensor.Float32, 4, 8))
	err := mapWithin(t, func() error {
		_, err := shard.MapErr(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, p twoGroupPlan) *tensor.Tensor {
			return c.RaggedAllToAllTake(other, c.Local(tensor.FromInts([]int{0, 1, 2, 3})), twoGroupRows, p.IO, p.SS, p.OO, p.RS, shard.Axes{"ep"})
		})(newTwoGroupPlan(x))
		return err
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), op)
	assert.Contains(t, err.Error(), "f32[4,8]")
	assert.NotContains(t, err.Error(), "runtime error")

	// An empty index sending nothing is fine: zero rows everywhere.
	y, err := shard.MapErr(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, p twoGroupPlan) *tensor.Tensor {
		z := tensor.FromInts([]int{0, 0, 0, 0})
		return c.RaggedAllToAllTake(p.X, tensor.FromInts(nil), 3, z, z, z, z, shard.Axes{"ep"})
	})(newTwoGroupPlan(x))
	require.NoError(t, err)
	assert.Equal(t, make([]float32, 6*8), shard.Gather(y).Float32s())
}

// A nil operand to any collective fails its Map call naming the op, not
// with a nil dereference inside it.
func TestHostileCollectiveNilOperand(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"dp"})
	for _, c := range []struct {
		op string
		fn func(c *shard.Ctx)
	}{
		{"shard.Ctx.Psum", func(c *shard.Ctx) { c.Psum(nil, "dp") }},
		{"shard.Ctx.AllGather", func(c *shard.Ctx) { c.AllGather(nil, shard.Axes{"dp"}, 0, true) }},
		{"shard.Ctx.PsumScatter", func(c *shard.Ctx) { c.PsumScatter(nil, shard.Axes{"dp"}, 0, true) }},
		{"shard.Ctx.RingShift", func(c *shard.Ctx) { c.RingShift(nil, shard.Axes{"dp"}, 1) }},
		{"shard.Ctx.PsumStart", func(c *shard.Ctx) { c.PsumStart(nil, "dp") }},
		{"shard.Ctx.FoldPsumScatter", func(c *shard.Ctx) { c.FoldPsumScatter(nil, shard.Axes{"dp"}, 0) }},
		{"shard.Ctx.RaggedAllToAllRows", func(c *shard.Ctx) {
			z := tensor.FromInts([]int{0, 0})
			c.RaggedAllToAllRows(nil, 1, z, z, z, z, shard.Axes{"dp"})
		}},
	} {
		err := mapWithin(t, func() error {
			_, err := shard.MapErr(m, shard.P(), shard.P(), func(ctx *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				c.fn(ctx)
				return x
			})(tensor.Zeros(tensor.Float32, 2))
			return err
		})
		require.Error(t, err, c.op)
		assert.Contains(t, err.Error(), c.op+": ", c.op)
		assert.Contains(t, err.Error(), "nil", c.op)
		assert.NotContains(t, err.Error(), "runtime error", c.op)
	}
}

func TestHostileFoldedGradientWaitThen(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"dp"})
	type args struct{ X, W *tensor.Tensor }
	x := tensor.Normal(tensor.NewKey(1), 2*7, 8)
	w := tensor.Normal(tensor.NewKey(2), 8, 30) // each device's part: 8×15
	sgd := func(n int) tensor.PieceStep {
		_, _, st := tensor.SGDStepIntoLater(nil, tensor.Zeros(tensor.Float32, n), nil, 0, 1, false)
		return st
	}
	run := func(then func(c *shard.Ctx, f *shard.FoldedGradient)) error {
		return mapWithin(t, func() error {
			_, err := shard.MapErr(m, shard.Specs{"X": shard.P("dp"), "W": shard.P()}, shard.P(), func(c *shard.Ctx, a args) *tensor.Tensor {
				wv := c.Vary(a.W, "dp")
				f := c.FoldPsumScatter(wv, shard.Axes{"dp"}, 1)
				autodiff.Grad(func(w *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.MatMul(a.X, w)) })(wv)
				then(c, f)
				return tensor.Scalar(0)
			})(args{x, w})
			return err
		})
	}
	// The right step: every element once.
	require.NoError(t, run(func(c *shard.Ctx, f *shard.FoldedGradient) { require.True(t, f.WaitThen(sgd(8*15))) }))
	// A nil step takes nothing: the caller waits.
	require.NoError(t, run(func(c *shard.Ctx, f *shard.FoldedGradient) {
		require.False(t, f.WaitThen(nil))
		require.Equal(t, []int{8, 15}, f.Wait().Shape())
	}))
	for _, c := range []struct {
		name string
		then func(c *shard.Ctx, f *shard.FoldedGradient)
		want string
	}{
		{"twice", func(c *shard.Ctx, f *shard.FoldedGradient) {
			f.WaitThen(sgd(120))
			f.WaitThen(sgd(120))
		}, "shard.FoldedGradient.WaitThen: called after Wait or WaitThen"},
		{"after Wait", func(c *shard.Ctx, f *shard.FoldedGradient) {
			f.Wait()
			f.WaitThen(sgd(120))
		}, "shard.FoldedGradient.WaitThen: called after Wait or WaitThen"},
		{"a step of a smaller parameter", func(c *shard.Ctx, f *shard.FoldedGradient) { f.WaitThen(sgd(3)) },
			"tensor.SGDStepIntoLater: step of elements [0, 120) of a parameter of 3"},
		{"a step of a smaller parameter on one device", func(c *shard.Ctx, f *shard.FoldedGradient) {
			f.WaitThen(sgd(120 - 117*c.AxisIndex("dp")))
		}, "tensor.SGDStepIntoLater: step of elements [0, 120) of a parameter of 3"},
		{"a step panicking on one device", func(c *shard.Ctx, f *shard.FoldedGradient) {
			f.WaitThen(func(int, []float32) {
				if c.AxisIndex("dp") == 1 {
					panic("the step failed")
				}
			})
		}, "the step failed"},
		{"never waited for", func(c *shard.Ctx, f *shard.FoldedGradient) {},
			"asynchronous collective(s) never waited for, the first #0 psum_scatter(f32[7,8]{dp} over dp, product f32[_,8]ᵀ·f32[_,30] dim 1)"},
	} {
		err := run(c.then)
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
	}
}
