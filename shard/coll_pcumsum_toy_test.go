package shard

// This file adds a collective the way "Adding a collective" in doc.go
// says, to prove the recipe: it is what coll_pcumsum.go would hold were
// pcumsum part of the package (it is a _test.go file only because pcumsum
// is a toy); its test is coll_pcumsum_test.go. Nothing else in the
// package knows of it: the rendezvous checks its calls, Comm counts it,
// its gradient goes through its op's VJP, and between processes the
// exchange its descriptor names brings the remote blocks.
//
// pcumsum is the inclusive prefix sum over devices: the device of rank r
// along the axes gets the sum of the blocks of ranks 0..r (with reverse,
// of ranks r..n-1).

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// pcumsumColl is the prefix sum over devices (see collective). Between
// processes it brings the remote members' blocks, and the in-process
// exchange sums what it needs of them.
var pcumsumColl = &collective{kind: "pcumsum", cross: eachGroup((*crossGroup).blocks)}

// pcumsumParams are pcumsum's parameters (a collective may use
// collParams, or a type of its own).
type pcumsumParams struct {
	env     *devEnv
	axes    []string
	mask    uint64
	reverse bool
}

var pcumsumOp *tensor.Op

func init() {
	pcumsumOp = &tensor.Op{
		Name: "pcumsum",
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return pcumsumImpl(in[0], pp.(*pcumsumParams))
		},
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			// Block q reaches the results of ranks q..n-1: its cotangent
			// is the reverse prefix sum of theirs (and the other way).
			p := pp.(*pcumsumParams)
			return []*tensor.Tensor{remark(pcumsum(p.env, g, p.axes, !p.reverse), in[0])}
		},
	}
	register(pcumsumColl, pcumsumOp)
}

// pcumsum validates and applies the op to x, which is first made to vary
// over the axes.
func pcumsum(e *devEnv, x *tensor.Tensor, axes []string, reverse bool) *tensor.Tensor {
	const op = "shard.Ctx.Pcumsum"
	m := e.maskOf(op, axes)
	e.group(op, axes)
	if x.DType() == tensor.Bool {
		panic(fmt.Sprintf("%s: %v: bool blocks cannot be summed", op, x))
	}
	x = tensor.Vary(x, e.Local(maskOf(x)|m))
	return tensor.Apply(pcumsumOp, &pcumsumParams{env: e, axes: slices.Clone(axes), mask: m, reverse: reverse}, x)
}

// pcumsumImpl is the in-process exchange: meet the group, sum the blocks
// of the ranks this device covers in rank order, meet again (the others'
// blocks are read until every member is done), count the bytes.
func pcumsumImpl(x *tensor.Tensor, p *pcumsumParams) *tensor.Tensor {
	e := p.env
	g := e.group("shard.Ctx.Pcumsum", p.axes)
	s := e.run.meet(e, &call{coll: pcumsumColl, axes: p.axes, x: x, extra: fmt.Sprintf("reverse %v", p.reverse)})
	defer e.run.leave(s)
	out := tensor.Zeros(x.DType(), x.Shape()...)
	for r, m := range g.members {
		if r == g.rank || (r < g.rank) != p.reverse {
			out = tensor.Add(out, tensor.WithLocal(s.calls[m].x, nil))
		}
	}
	e.run.barrier(e, s)
	later := g.size - 1 - g.rank // the ranks this device's block goes to
	if p.reverse {
		later = g.rank
	}
	e.account(pcumsumColl, int64(later)*int64(x.Bytes()))
	return e.markedFresh(out, maskOf(x)|p.mask)
}

// Pcumsum returns on each device the sum of the blocks of x of the
// devices along axes up to and including it, in the order of the listed
// axes (the first major); with reverse, from it to the last. The result
// varies over the axes; its transpose is the prefix sum the other way.
func (c *Ctx) Pcumsum(x *tensor.Tensor, axes Axes, reverse bool) *tensor.Tensor {
	checkLocal("shard.Ctx.Pcumsum", c, x)
	return pcumsum(c.env, x, axes, reverse)
}
