package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// allToAllColl is the all-to-all (see collective): Ctx.AllToAll, its own
// transpose, and propagation's reshards between dims. Between processes
// it brings the parts of the remote blocks the local members read.
var allToAllColl = &collective{kind: "all_to_all", cross: eachGroup((*crossGroup).parts), needs: partAlong}

var allToAllOp *tensor.Op

func init() {
	allToAllOp = &tensor.Op{
		Name:   "all_to_all",
		Traits: tensor.Traits{Half: tensor.NativeHalf, Types: tensor.TypesAll}, // moves data of any dtype
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return allToAllImpl(in[0], pp.(*collParams))
		},
		VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(*collParams)
			return []*tensor.Tensor{allToAll(p.env, g, p.axes, p.dim2, p.dim, p.tiled)}
		},
		JVP:   collLinearJVP(&allToAllOp),
		Batch: collBatch(&allToAllOp, true),
	}
	register(allToAllColl, allToAllOp)
}

func allToAll(e *devEnv, x *tensor.Tensor, axes []string, split, concat int, tiled bool) *tensor.Tensor {
	const op = "shard.Ctx.AllToAll"
	m := e.maskOf(op, axes)
	g := e.group(op, axes)
	sp := normDim(op, x, split, 0)
	var cc int
	if tiled {
		cc = normDim(op, x, concat, 0)
		if x.Dim(sp)%g.size != 0 {
			panic(fmt.Sprintf("%s: %v: split axis %d (%d) is not divisible by %s=%d", op, x, sp, x.Dim(sp), axesLabel(axes), g.size))
		}
	} else {
		cc = normDim(op, x, concat, 0) // position in the result, which has x's rank
		if x.Dim(sp) != g.size {
			panic(fmt.Sprintf("%s: %v: untiled split axis %d (%d) must equal %s=%d", op, x, sp, x.Dim(sp), axesLabel(axes), g.size))
		}
	}
	x = tensor.Vary(x, e.Local(maskOf(x)|m))
	return tensor.Apply(allToAllOp, &collParams{env: e, axes: slices.Clone(axes), mask: m, dim: sp, dim2: cc, tiled: tiled}, x)
}

func allToAllImpl(x *tensor.Tensor, p *collParams) *tensor.Tensor {
	e := p.env
	g := e.group("shard.AllToAll", p.axes)
	s := e.run.meet(e, &call{coll: allToAllColl, axes: p.axes, x: x, p: p, extra: fmt.Sprintf("split %d concat %d %s", p.dim, p.dim2, tiledWord(p.tiled))})
	defer e.run.leave(s)
	c := x.Dim(p.dim) / g.size
	parts := make([]*tensor.Tensor, g.size)
	for j, m := range g.members {
		src := tensor.WithLocal(s.calls[m].x, nil)
		part := sliceAxis(src, p.dim, g.rank*c, c)
		if !p.tiled {
			part = squeezeFresh(part, p.dim)
			y := tensor.ExpandDims(part, p.dim2)
			if y != part {
				tensor.Donate(part)
			}
			part = y
		}
		if part != src {
			tensor.Donate(src) // the part holds what it needs
		}
		parts[j] = part
	}
	e.run.barrier(e, s) // the blocks are read until every member is done
	shape := parts[0].Shape()
	shape[p.dim2] *= g.size
	out := tensor.Zeros(x.DType(), shape...)
	for j, part := range parts {
		placeAt(out, part, p.dim2, j*part.Dim(p.dim2))
	}
	tensor.Donate(parts...)
	e.account(allToAllColl, int64(g.size-1)*int64(x.Bytes())/int64(g.size))
	return e.markedFresh(out, maskOf(x)|p.mask)
}

// AllToAll is a block transpose between a local dimension and the mesh
// axes: each device splits x along splitAxis into one part per device,
// sends part j to device j, and concatenates what it receives along
// concatAxis in device order. Without tiled, splitAxis must equal the
// number of devices and is removed, and the received parts are stacked in
// a new dimension at concatAxis.
func (c *Ctx) AllToAll(x *tensor.Tensor, axes Axes, splitAxis, concatAxis int, tiled bool) *tensor.Tensor {
	checkLocal("shard.Ctx.AllToAll", c, x)
	return allToAll(c.env, x, axes, splitAxis, concatAxis, tiled)
}
