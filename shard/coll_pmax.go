package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// pmaxColl and pminColl are the elementwise maximum and minimum over
// devices (see collective), applied by one op: Ctx.Pmax and Ctx.Pmin.
// Between processes the local extreme is all-reduced.
var (
	pmaxColl = &collective{kind: "pmax", cross: eachGroup(func(x *crossGroup) { x.allreduceExtreme(ReduceMax) })}
	pminColl = &collective{kind: "pmin", cross: eachGroup(func(x *crossGroup) { x.allreduceExtreme(ReduceMin) })}
)

var pmaxOp *tensor.Op

func init() {
	pmaxOp = &tensor.Op{
		Name:   "pmax",
		Traits: tensor.Traits{Half: tensor.NativeHalf, Types: tensor.TypesFloat64 | tensor.TypesInt64},
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return pmaxImpl(in[0], pp.(*collParams))
		},
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, out *tensor.Tensor, pp any) []*tensor.Tensor {
			// The cotangent goes to the devices holding the extreme value,
			// split evenly among ties.
			p := pp.(*collParams)
			x := in[0]
			dt := tensor.Float32 // widened for a half cotangent
			if g.DType() == tensor.Float64 {
				dt = tensor.Float64 // a share of 1/3 exact to float64
			}
			hit := tensor.AsType(tensor.Equal(x, out), dt)
			count := psum(p.env, hit, p.axes)
			share := tensor.Div(hit, count)
			if share.DType() != g.DType() {
				share = tensor.Convert(share, g.DType()) // a half cotangent
			}
			return []*tensor.Tensor{tensor.Mul(remark(g, x), share)}
		},
		Save: tensor.SaveInputs(0) | tensor.SaveOutput,
		// The mean of the tangents of the devices holding the extreme
		// value (the VJP's split of the cotangent, transposed).
		JVP: func(prim, tan, outs []*tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(*collParams)
			x := prim[0]
			hit := tensor.AsType(tensor.Equal(x, outs[0]), tensor.Float32)
			t := likeMarked(tan[0], x)
			if hit.DType() != t.DType() {
				hit = tensor.Convert(hit, t.DType())
			}
			return []*tensor.Tensor{tensor.Div(psum(p.env, tensor.Mul(hit, t), p.axes), psum(p.env, hit, p.axes))}
		},
		Batch: collBatch(&pmaxOp, false),
	}
	register(pmaxColl, pmaxOp)
	register(pminColl, pmaxOp)
}

func pmaxImpl(x *tensor.Tensor, p *collParams) *tensor.Tensor {
	e := p.env
	g := e.group("shard.Pmax", p.axes)
	coll := pminColl
	if p.max {
		coll = pmaxColl
	}
	s := e.run.meet(e, &call{coll: coll, axes: p.axes, x: x, extra: coll.kind, p: p})
	defer e.run.leave(s)
	e.account(coll, int64(2*(g.size-1))*int64(x.Bytes())/int64(g.size))
	if _, done := s.remote.Load(g.key); done {
		// Reduced with the other processes already (allreduceExtreme).
		e.run.barrier(e, s) // every local device meets once per collective
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
	e.run.barrier(e, s)
	return e.marked(tensor.WithLocal(out, nil), maskOf(x)&^p.mask)
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
