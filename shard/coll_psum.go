package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

var psumOp, pmaxOp *tensor.Op

func init() {
	psumOp = &tensor.Op{
		Name: "psum",
		// Moves 16-bit data itself; its VJP reads the cotangent before it returns.
		Traits: tensor.Traits{Half: tensor.NativeHalf, Placement: tensor.SyncVJP},
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return psumImpl(in[0], pp.(*collParams))
		},
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, _ any) []*tensor.Tensor {
			// The cotangent of a sum reaches every summand unchanged.
			return []*tensor.Tensor{remark(g, in[0])}
		},
	}
	pmaxOp = &tensor.Op{
		Name:   "pmax",
		Traits: tensor.Traits{Half: tensor.NativeHalf},
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return pmaxImpl(in[0], pp.(*collParams))
		},
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, out *tensor.Tensor, pp any) []*tensor.Tensor {
			// The cotangent goes to the devices holding the extreme value,
			// split evenly among ties.
			p := pp.(*collParams)
			x := in[0]
			hit := tensor.AsType(tensor.Equal(x, out), tensor.Float32)
			count := psum(p.env, hit, p.axes)
			share := tensor.Div(hit, count)
			if share.DType() != g.DType() {
				share = tensor.Convert(share, g.DType()) // a half cotangent
			}
			return []*tensor.Tensor{tensor.Mul(remark(g, x), share)}
		},
		Save: tensor.SaveInputs(0) | tensor.SaveOutput,
	}
}

// psum sums x over the axes; an x that is invariant over some of them is
// first made varying (so the result is n·x, as in JAX).
func psum(e *devEnv, x *tensor.Tensor, axes []string) *tensor.Tensor {
	m := e.maskOf("shard.Psum", axes)
	e.group("shard.Psum", axes)
	if x.DType() == tensor.Bool {
		panic(fmt.Sprintf("shard.Psum: %v: bool blocks cannot be summed", x))
	}
	x = tensor.Vary(x, e.Local(maskOf(x)|m))
	return tensor.Apply(psumOp, &collParams{env: e, axes: slices.Clone(axes), mask: m}, x)
}

func psumImpl(x *tensor.Tensor, p *collParams) *tensor.Tensor {
	e := p.env
	g := e.group("shard.Psum", p.axes)
	if g.size == 1 {
		// A sum over one device is the value itself (every device takes
		// this path for the same axes, so no rendezvous is skipped by some
		// and awaited by others). It is still a call, of 0 bytes.
		e.account("psum", 0)
		return e.marked(x, maskOf(x)&^p.mask)
	}
	s := e.run.meet(e, &call{kind: "psum", axes: p.axes, x: x})
	defer e.run.leave(s)
	out := sharedResult(s, g.key, func() *tensor.Tensor {
		if x.DType() == tensor.Int32 {
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
	case tensor.BFloat16, tensor.Float16:
		// Widened, summed in float32 as float32 blocks are, rounded once.
		ins := make([][]uint16, g.size)
		for r, m := range g.members {
			ins[r] = s.calls[m].x.RawUint16()[lo:hi]
		}
		sumHalf(dt, out.RawUint16()[lo:hi], ins)
	}
	e.run.barrier(s)
	e.account("psum", int64(2*(g.size-1))*int64(x.Bytes())/int64(g.size))
	return e.markShared(s, g, out, maskOf(x)&^p.mask)
}

func pmaxImpl(x *tensor.Tensor, p *collParams) *tensor.Tensor {
	e := p.env
	g := e.group("shard.Pmax", p.axes)
	kind := "pmin"
	if p.max {
		kind = "pmax"
	}
	s := e.run.meet(e, &call{kind: kind, axes: p.axes, x: x, extra: kind, p: p})
	defer e.run.leave(s)
	e.account(kind, int64(2*(g.size-1))*int64(x.Bytes())/int64(g.size))
	if _, done := s.remote.Load(g.key); done {
		// Reduced with the other processes already (see exchange).
		e.run.barrier(s) // every local device meets once per collective
		return e.marked(sharedResult(s, g.key, nil), maskOf(x)&^p.mask)
	}
	blocks := make([]*tensor.Tensor, g.size)
	for r, m := range g.members {
		blocks[r] = s.calls[m].x
	}
	out := blocks[0]
	for _, b := range blocks[1:] {
		if p.max {
			out = tensor.Maximum(tensor.WithLocal(out, nil), tensor.WithLocal(b, nil))
		} else {
			out = tensor.Minimum(tensor.WithLocal(out, nil), tensor.WithLocal(b, nil))
		}
	}
	// Other devices' blocks are read until every device is done: a device
	// may donate its block (tensor.Donate) once its collective returns.
	e.run.barrier(s)
	return e.marked(tensor.WithLocal(out, nil), maskOf(x)&^p.mask)
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
// devices along them. x must be float32.
func (c *Ctx) Pmean(x *tensor.Tensor, axes ...string) *tensor.Tensor {
	checkLocal("shard.Ctx.Pmean", c, x)
	if x.DType() != tensor.Float32 {
		panic(fmt.Sprintf("shard.Ctx.Pmean: %v: want float32", x))
	}
	if len(axes) == 0 {
		return x
	}
	return tensor.MulScalar(psum(c.env, x, axes), 1/float32(c.AxisSize(axes...)))
}

func (c *Ctx) pextreme(op string, x *tensor.Tensor, axes []string, isMax bool) *tensor.Tensor {
	checkLocal(op, c, x)
	if x.DType() == tensor.Bool {
		panic(fmt.Sprintf("%s: %v: not defined for bool", op, x))
	}
	if len(axes) == 0 {
		return x
	}
	e := c.env
	m := e.maskOf(op, axes)
	e.group(op, axes)
	if x.DType() == tensor.Bool {
		panic(fmt.Sprintf("%s: %v: not defined for bool", op, x))
	}
	x = tensor.Vary(x, e.Local(maskOf(x)|m))
	return tensor.Apply(pmaxOp, &collParams{env: e, axes: slices.Clone(axes), mask: m, max: isMax}, x)
}

// Pmax returns the elementwise maximum of x over the given axes. Its
// gradient goes to the devices that hold the maximum, split among ties.
func (c *Ctx) Pmax(x *tensor.Tensor, axes ...string) *tensor.Tensor {
	return c.pextreme("shard.Ctx.Pmax", x, axes, true)
}

// Pmin returns the elementwise minimum of x over the given axes.
func (c *Ctx) Pmin(x *tensor.Tensor, axes ...string) *tensor.Tensor {
	return c.pextreme("shard.Ctx.Pmin", x, axes, false)
}
