package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// psumColl is the all-reduce sum (see collective): Ctx.Psum and Ctx.Pmean,
// the psum of propagation's pending sums, and the transpose of every
// implicit pvary. Between processes the local blocks' sum is all-reduced.
var psumColl = &collective{kind: "psum", cross: eachGroup((*crossGroup).allreduceSum)}

var psumOp *tensor.Op

func init() {
	psumOp = &tensor.Op{
		Name: "psum",
		// Moves 16-bit data itself; its VJP reads the cotangent before it returns.
		Traits: tensor.Traits{Half: tensor.NativeHalf, Placement: tensor.SyncVJP, Types: tensor.TypesFloat64 | tensor.TypesInt64},
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return psumImpl(in[0], pp.(*collParams))
		},
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, _ any) []*tensor.Tensor {
			// The cotangent of a sum reaches every summand unchanged.
			return []*tensor.Tensor{remark(g, in[0])}
		},
		JVP:   collLinearJVP(&psumOp),
		Batch: collBatch(&psumOp, false),
	}
	register(psumColl, psumOp)
}

// psum sums x over the axes; an x that is invariant over some of them is
// first made varying (so the result is n·x, as in JAX).
func psum(e *devEnv, x *tensor.Tensor, axes []string) *tensor.Tensor {
	x, p := psumArgs("shard.Psum", e, x, axes)
	return tensor.Apply(psumOp, p, x)
}

// psumArgs checks the operand of a psum (op names the caller) and returns
// it marked varying over the axes, with the collective's parameters.
func psumArgs(op string, e *devEnv, x *tensor.Tensor, axes []string) (*tensor.Tensor, *collParams) {
	m := e.maskOf(op, axes)
	e.group(op, axes)
	if x.DType() == tensor.Bool {
		panic(fmt.Sprintf("%s: %v: bool blocks cannot be summed", op, x))
	}
	x = tensor.Vary(x, e.Local(maskOf(x)|m))
	return x, &collParams{env: e, axes: slices.Clone(axes), mask: m}
}

func psumImpl(x *tensor.Tensor, p *collParams) *tensor.Tensor {
	e := p.env
	g := e.group("shard.Psum", p.axes)
	if g.size == 1 {
		// A sum over one device is the value itself (every device takes
		// this path for the same axes, so no rendezvous is skipped by some
		// and awaited by others). It is still a call, of 0 bytes.
		e.account(psumColl, 0)
		return e.marked(x, maskOf(x)&^p.mask)
	}
	if staged(e, x) {
		stage(e, e.run.next(e), g, x)
		// The group reads its own staged rows only.
		s := e.run.meet(e, &call{coll: psumColl, axes: p.axes, x: x, members: g.members})
		defer e.run.leave(s)
		return psumStaged(e, x, p, s)
	}
	s := e.run.meet(e, &call{coll: psumColl, axes: p.axes, x: x})
	defer e.run.leave(s)
	return psumDone(e, x, p, s)
}

// stagedMax is the size, in elements, up to which a float32 psum in one
// process is staged (see staged).
const stagedMax = 4096

// staged reports whether a psum of x is staged: for a small float32 block
// (a bias's gradient, a loss) in a mesh within one process, each member
// copies its block into a row of a buffer the group shares in the slot
// before it arrives (stage), and once every member has arrived each sums
// the rows into a result of its own (psumStaged). The members then meet
// once, instead of meeting, summing parts of one shared result and
// meeting again before the blocks may be reused (psumDone), which costs
// each device two waits for the slowest of them.
func staged(e *devEnv, x *tensor.Tensor) bool {
	return x.DType() == tensor.Float32 && x.Size() <= stagedMax && !e.mesh.spans()
}

// stage copies x into member g.rank's row of the group's staging buffer
// in slot s, before the device arrives there. A block that does not fit
// the buffer (a collective issued inconsistently, which the rendezvous
// then reports) is not copied.
func stage(e *devEnv, s *slot, g group, x *tensor.Tensor) {
	n := x.Size()
	rows := sharedResult(s, g.key, func() *tensor.Tensor { return tensor.Empty(tensor.Float32, g.size, n) })
	if rows.DType() == tensor.Float32 && slices.Equal(rows.Shape(), []int{g.size, n}) {
		copy(rows.BorrowFloat32()[g.rank*n:(g.rank+1)*n], x.BorrowFloat32())
	}
}

// psumStaged computes this device's result of a staged psum once every
// member has arrived in slot s: the sum of the staged rows, in the order
// psumDone sums the blocks (so the same bits).
func psumStaged(e *devEnv, x *tensor.Tensor, p *collParams, s *slot) *tensor.Tensor {
	g := e.group("shard.Psum", p.axes)
	n := x.Size()
	rows := sharedResult(s, g.key, nil)
	all := rows.BorrowFloat32()
	ins := make([][]float32, g.size)
	for r := range ins {
		ins[r] = all[r*n : (r+1)*n]
	}
	out := tensor.Empty(tensor.Float32, x.Shape()...) // every element is written
	sumFloat32(out.BorrowFloat32(), ins, 0, n)
	e.doneWithShared(s, g, rows)
	e.account(psumColl, int64(2*(g.size-1))*int64(x.Bytes())/int64(g.size))
	return e.markedFresh(out, maskOf(x)&^p.mask)
}

// psumDone computes this device's result of a psum once every device has
// arrived in its slot s (and the other processes' part is in it).
func psumDone(e *devEnv, x *tensor.Tensor, p *collParams, s *slot) *tensor.Tensor {
	g := e.group("shard.Psum", p.axes)
	out := sharedResult(s, g.key, func() *tensor.Tensor {
		if x.DType() == tensor.Int32 || x.DType() == tensor.Float64 || x.DType() == tensor.Int64 {
			return tensor.Zeros(x.DType(), x.Shape()...) // summed into
		}
		return tensor.Empty(x.DType(), x.Shape()...) // every chunk is written
	})
	lo, hi := chunk(x.Size(), g.size, g.rank)
	dt := x.DType()
	if _, done := s.remote.Load(g.key); done {
		dt = tensor.Bool // summed with the other processes already: nothing to do
	}
	switch dt {
	case tensor.Float32:
		// Borrowed, not pinned: the blocks and the result may still be
		// donated (tensor.Donate) once every device is past the barrier.
		ins := make([][]float32, g.size)
		for r, m := range g.members {
			ins[r] = s.calls[m].x.BorrowFloat32()
		}
		sumFloat32(out.BorrowFloat32()[lo:hi], ins, lo, hi)
	case tensor.Int32:
		dst := out.RawInt32()[lo:hi]
		for _, m := range g.members {
			src := s.calls[m].x.RawInt32()[lo:hi]
			for i, v := range src {
				dst[i] += v
			}
		}
	case tensor.Float64:
		// In float64, in rank order: every process and kernel set agrees.
		dst := out.BorrowFloat64()[lo:hi]
		for _, m := range g.members {
			for i, v := range s.calls[m].x.BorrowFloat64()[lo:hi] {
				dst[i] += v
			}
		}
	case tensor.Int64:
		dst := out.BorrowInt64()[lo:hi]
		for _, m := range g.members {
			for i, v := range s.calls[m].x.BorrowInt64()[lo:hi] {
				dst[i] += v
			}
		}
	case tensor.BFloat16, tensor.Float16:
		// Widened, summed in float32 as float32 blocks are, rounded once.
		ins := make([][]uint16, g.size)
		for r, m := range g.members {
			ins[r] = s.calls[m].x.RawUint16()[lo:hi]
		}
		sumHalf(dt, out.RawUint16()[lo:hi], ins)
	}
	e.run.barrier(e, s)
	e.account(psumColl, int64(2*(g.size-1))*int64(x.Bytes())/int64(g.size))
	return e.markShared(s, g, out, maskOf(x)&^p.mask)
}

// Psum sums x over the given mesh axes (an all-reduce): the result is the
// same on every device of each group, invariant over the axes. Over axes
// of total size 1 it is x itself, without a rendezvous or a copy (and so
// not checked against the other devices' collectives); Comm counts it as a
// call of 0 bytes. Over no axes at all it is x, as jax.lax.psum(x, ()) is:
// a sum over the empty set of devices, with no call (Pmean, Pmax and Pmin
// likewise).
func (c *Ctx) Psum(x *tensor.Tensor, axes ...string) *tensor.Tensor {
	checkLocal("shard.Ctx.Psum", c, x)
	if len(axes) == 0 {
		return x
	}
	return psum(c.env, x, axes)
}

// Pmean averages x over the given axes: Psum divided by the number of
// devices along them. x must be float32 or float64.
func (c *Ctx) Pmean(x *tensor.Tensor, axes ...string) *tensor.Tensor {
	checkLocal("shard.Ctx.Pmean", c, x)
	if x.DType() != tensor.Float32 && x.DType() != tensor.Float64 {
		panic(fmt.Sprintf("shard.Ctx.Pmean: %v: want float32 or float64", x))
	}
	if len(axes) == 0 {
		return x
	}
	if x.DType() == tensor.Float64 {
		return tensor.Div(psum(c.env, x, axes), tensor.ScalarFloat64(float64(c.AxisSize(axes...))))
	}
	return tensor.MulScalar(psum(c.env, x, axes), 1/float32(c.AxisSize(axes...)))
}

// SumLikePsum writes dst = Σ blocks[r] with the bits a float32 Psum over a
// group of len(blocks) devices in one process gives, blocks[r] being the
// block of the group's r-th device (Ctx.AxisIndex over the Psum's axes):
// for host code that combines figures the devices recorded, after the Map
// call, instead of making them meet for it. Every block must be as long as
// dst.
func SumLikePsum(dst []float32, blocks [][]float32) {
	for r, b := range blocks {
		if len(b) != len(dst) {
			panic(fmt.Sprintf("shard.SumLikePsum: block %d has %d elements, dst %d", r, len(b), len(dst)))
		}
	}
	if len(blocks) == 0 {
		clear(dst)
		return
	}
	sumFloat32(dst, blocks, 0, len(dst))
}
