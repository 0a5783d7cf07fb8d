package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// ppermuteColl is the collective permutation (see collective):
// Ctx.Ppermute and Ctx.RingShift, and their own transposes. Between
// processes it brings the remote blocks a local member receives.
var ppermuteColl = &collective{kind: "ppermute", cross: eachGroup((*crossGroup).parts), needs: ppermuteNeeds}

var ppermuteOp *tensor.Op

func init() {
	ppermuteOp = &tensor.Op{
		Name:   "ppermute",
		Traits: tensor.Traits{Half: tensor.NativeHalf, Types: tensor.TypesAll}, // moves data of any dtype
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return ppermuteImpl(in[0], pp.(*collParams))
		},
		VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(*collParams)
			inv := make([][2]int, len(p.perm))
			for i, pr := range p.perm {
				inv[i] = [2]int{pr[1], pr[0]}
			}
			return []*tensor.Tensor{ppermute(p.env, g, p.axes, inv)}
		},
		JVP:   collLinearJVP(&ppermuteOp),
		Batch: collBatch(&ppermuteOp, false),
	}
	register(ppermuteColl, ppermuteOp)
}

func ppermute(e *devEnv, x *tensor.Tensor, axes []string, perm [][2]int) *tensor.Tensor {
	const op = "shard.Ctx.Ppermute"
	m := e.maskOf(op, axes)
	checkPerm(op, e.group(op, axes), axes, perm)
	x = tensor.Vary(x, e.Local(maskOf(x)|m))
	return tensor.Apply(ppermuteOp, &collParams{env: e, axes: slices.Clone(axes), mask: m, perm: slices.Clone(perm)}, x)
}

func ppermuteImpl(x *tensor.Tensor, p *collParams) *tensor.Tensor {
	e := p.env
	g := e.group("shard.Ppermute", p.axes)
	s := e.run.meet(e, &call{coll: ppermuteColl, axes: p.axes, x: x, p: p, extra: fmt.Sprintf("perm %v", p.perm)})
	defer e.run.leave(s)
	me := g.meshRank[g.rank]
	// rankOf maps a mesh-order index to a member.
	member := func(meshRank int) int {
		for r, mr := range g.meshRank {
			if mr == meshRank {
				return g.members[r]
			}
		}
		panic("unreachable")
	}
	var out *tensor.Tensor
	sent := int64(0)
	for _, pr := range p.perm {
		if pr[1] == me {
			out = tensor.WithLocal(s.calls[member(pr[0])].x, nil) // received: shares the sender's block
		}
		if pr[0] == me && pr[1] != me {
			sent = int64(x.Bytes())
		}
	}
	if out == nil {
		out = tensor.Zeros(x.DType(), x.Shape()...)
	}
	// The received view holds the sender's storage once made; until every
	// device has made its own, a sender must not donate its block.
	e.run.barrier(e, s)
	e.account(ppermuteColl, sent)
	return e.markedFresh(out, maskOf(x)|p.mask)
}

// Ppermute sends x along the axes: each pair (src, dst) moves the block of
// device src to device dst; devices that receive nothing get zeros. Device
// indices count along the axes in mesh order (as jax.lax.ppermute does), so
// for a dimension sharded over several axes in another order, use
// RingShift.
func (c *Ctx) Ppermute(x *tensor.Tensor, axes Axes, perm [][2]int) *tensor.Tensor {
	checkLocal("shard.Ctx.Ppermute", c, x)
	return ppermute(c.env, x, axes, perm)
}

// RingShift shifts blocks around the ring of devices along the axes, in the
// order the axes are listed (the order of a dimension sharded over them):
// with offset 1 each device receives the block of the previous device, with
// -1 that of the next. It is correct over several axes whatever their mesh
// order, which a ppermute over logical indices is not (see the JAX sharding
// guide's "Why?" section).
func (c *Ctx) RingShift(x *tensor.Tensor, axes Axes, offset int) *tensor.Tensor {
	checkLocal("shard.Ctx.RingShift", c, x)
	g := c.env.group("shard.Ctx.RingShift", axes)
	perm := make([][2]int, g.size)
	for r := 0; r < g.size; r++ {
		d := ((r+offset)%g.size + g.size) % g.size
		perm[r] = [2]int{g.meshRank[r], g.meshRank[d]}
	}
	return ppermute(c.env, x, axes, perm)
}

func checkPerm(op string, g group, axes []string, perm [][2]int) {
	src, dst := map[int]bool{}, map[int]bool{}
	for _, pr := range perm {
		for _, v := range pr {
			if v < 0 || v >= g.size {
				panic(fmt.Sprintf("%s: pair %v out of range for %s=%d", op, pr, axesLabel(axes), g.size))
			}
		}
		if src[pr[0]] || dst[pr[1]] {
			panic(fmt.Sprintf("%s: %v is not a permutation: a source or destination repeats", op, perm))
		}
		src[pr[0]], dst[pr[1]] = true, true
	}
}

// ringPerm returns the pairs, in mesh order, of a shift by offset along a
// group's ranks.
func ringPerm(g group, offset int) [][2]int {
	perm := make([][2]int, g.size)
	for r := 0; r < g.size; r++ {
		d := ((r+offset)%g.size + g.size) % g.size
		perm[r] = [2]int{g.meshRank[r], g.meshRank[d]}
	}
	return perm
}

// ppermuteNeeds is the needs of a ppermute (and of a started one): member
// dst reads the whole block of member src if the permutation sends it
// there, else nothing.
func ppermuteNeeds(c *call, g group, src, dst int, _ *tensor.Tensor) region {
	from := g.meshRank[slices.Index(g.members, src)]
	to := g.meshRank[slices.Index(g.members, dst)]
	for _, pr := range c.p.perm {
		if pr[0] == from && pr[1] == to {
			return region{whole: true}
		}
	}
	return region{none: true}
}
