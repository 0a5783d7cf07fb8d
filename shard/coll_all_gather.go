package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// allGatherColl is the all-gather (see collective): Ctx.AllGather and
// Ctx.AllGatherInvariant, and the transpose of psum_scatter. Between
// processes one float32 block per process is gathered straight into the
// result (gatherFloat32), anything else brings the remote blocks.
var allGatherColl = &collective{kind: "all_gather", cross: eachGroup(func(x *crossGroup) {
	if !x.gatherFloat32() {
		x.blocks()
	}
})}

var allGatherOp, allGatherInvOp *tensor.Op

func init() {
	allGatherOp = &tensor.Op{
		Name: "all_gather",
		// Moves 16-bit data itself; its VJP reads the cotangent before it returns.
		Traits: tensor.Traits{Half: tensor.NativeHalf, Placement: tensor.SyncVJP, Types: tensor.TypesAll},
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return allGatherImpl(in[0], pp.(*collParams), false)
		},
		VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(*collParams)
			return []*tensor.Tensor{psumScatter(p.env, g, p.axes, p.dim, p.tiled)}
		},
		JVP:   collLinearJVP(&allGatherOp),
		Batch: collBatch(&allGatherOp, true),
	}
	allGatherInvOp = &tensor.Op{
		Name: "all_gather",
		// Moves 16-bit data itself; its VJP reads the cotangent before it returns.
		Traits: tensor.Traits{Half: tensor.NativeHalf, Placement: tensor.SyncVJP, Types: tensor.TypesAll},
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return allGatherImpl(in[0], pp.(*collParams), true)
		},
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			// Each device's block is one slice of the invariant result.
			p := pp.(*collParams)
			gr := p.env.group("shard.AllGatherInvariant", p.axes)
			x := in[0]
			var s *tensor.Tensor
			if p.tiled {
				d := x.Dim(p.dim)
				s = sliceAxis(g, p.dim, gr.rank*d, d)
			} else {
				s = sliceAxis(g, p.dim, gr.rank, 1)
			}
			part := tensor.Reshape(s, x.Shape()...)
			y := remark(part, x)
			// The headers made here are dead once y holds what they
			// hold (a view of g, say): donated, they let g's storage go
			// to the allocator cache once g is donated too.
			for _, h := range []*tensor.Tensor{s, part} {
				if h != g && h != y && !h.IsTraced() {
					tensor.Donate(h)
				}
			}
			return []*tensor.Tensor{y}
		},
		JVP:   collLinearJVP(&allGatherInvOp),
		Batch: collBatch(&allGatherInvOp, true),
	}
	register(allGatherColl, allGatherOp, allGatherInvOp)
}

func normDim(op string, x *tensor.Tensor, axis, extra int) int {
	r := x.Rank() + extra
	a := axis
	if a < 0 {
		a += r
	}
	if a < 0 || a >= r {
		panic(fmt.Sprintf("%s: axis %d out of range for %v", op, axis, x))
	}
	return a
}

func allGather(e *devEnv, x *tensor.Tensor, axes []string, axis int, tiled, invariant bool) *tensor.Tensor {
	op := "shard.Ctx.AllGather"
	o := allGatherOp
	if invariant {
		op, o = "shard.Ctx.AllGatherInvariant", allGatherInvOp
	}
	a := gatherDim(op, x, axis, tiled)
	m := e.maskOf(op, axes)
	e.group(op, axes)
	x = tensor.Vary(x, e.Local(maskOf(x)|m))
	return tensor.Apply(o, &collParams{env: e, axes: slices.Clone(axes), mask: m, dim: a, tiled: tiled}, x)
}

func allGatherImpl(x *tensor.Tensor, p *collParams, invariant bool) *tensor.Tensor {
	e := p.env
	g := e.group("shard.AllGather", p.axes)
	c := &call{coll: allGatherColl, axes: p.axes, x: x, p: p, extra: collKey("axis", p.dim, p.tiled)}
	mask := maskOf(x)
	if invariant {
		mask &^= p.mask
	}
	xs := x.Shape()
	if !p.tiled {
		xs = slices.Insert(xs, p.dim, 1)
	}
	outShape := slices.Clone(xs)
	outShape[p.dim] *= g.size
	if g.size == 1 {
		// Over one device: x itself, a view of its storage, with no
		// rendezvous or copy (as psumImpl over one device), still a call
		// of 0 bytes.
		e.account(allGatherColl, 0)
		return e.marked(tensor.Reshape(x, outShape...), mask)
	}
	if x.DType() == tensor.Float32 && !e.mesh.spans() {
		s, out := placeShared(e, g, x, p, xs, outShape)
		c.members = g.members // the group reads its own result only
		e.run.meet(e, c)
		defer e.run.leave(s)
		e.account(allGatherColl, int64(g.size-1)*int64(x.Bytes()))
		return e.markShared(s, g, out, mask)
	}
	s := e.run.meet(e, c)
	defer e.run.leave(s)
	// done meets the other members once out, the shared result, is whole,
	// and hands out this device's view of it.
	done := func(out *tensor.Tensor) *tensor.Tensor {
		e.run.barrier(e, s)
		e.account(allGatherColl, int64(g.size-1)*int64(x.Bytes()))
		return e.markShared(s, g, out, mask)
	}
	if _, ok := s.remote.Load(g.key); ok {
		// Gathered with the other processes already (gatherFloat32).
		return done(sharedResult(s, g.key, nil))
	}
	out := sharedResult(s, g.key, func() *tensor.Tensor { return tensor.Zeros(x.DType(), outShape...) })
	placeAt(out, tensor.Reshape(tensor.WithLocal(x, nil), xs...), p.dim, g.rank*xs[p.dim])
	if e.mesh.spans() && e.dev == firstLocalMember(e.mesh, g) {
		// The blocks of other processes' members, brought by the exchange.
		for r, m := range g.members {
			if !e.mesh.isLocal(m) {
				placeAt(out, tensor.Reshape(s.calls[m].x, xs...), p.dim, r*xs[p.dim])
			}
		}
	}
	return done(out)
}

// placeShared copies float32 block x (of shape xs) of member g.rank into
// the shared result (of shape outShape) of the all-gather the device
// issues next, in one process, and returns that collective's slot and the
// result. Every member copies its block into the shared result (allocated
// without zeroing: the blocks cover it), reading and writing borrowed
// storage so that both may be donated later. It does so before it
// arrives, so that the members meet once, when every block is in, rather
// than once to arrive and again when the blocks are copied. A block that
// does not fit the result (a collective issued inconsistently, which the
// rendezvous then reports) is not copied.
func placeShared(e *devEnv, g group, x *tensor.Tensor, p *collParams, xs, outShape []int) (*slot, *tensor.Tensor) {
	s := e.run.next(e)
	out := sharedResult(s, g.key, func() *tensor.Tensor { return tensor.Empty(x.DType(), outShape...) })
	if out.DType() == tensor.Float32 && slices.Equal(out.BorrowShape(), outShape) {
		placeRuns(out.BorrowFloat32(), x.BorrowFloat32(), xs, p.dim, g.rank, g.size)
	}
	return s, out
}

// AllGatherInvariantStart starts AllGatherInvariant(x, axes, axis, tiled)
// and returns at once; h.Wait() returns what AllGatherInvariant would
// have, bit for bit. In one process a float32 block is copied into the
// shared result before the device takes its place in the collective, and
// Wait waits until every block is in: a device that gathers several
// blocks (a training step's updated parameters) starts them all and
// waits for the others once, not once for each. Between processes, or
// for other dtypes, it gathers at once, as AllGatherInvariant does.
//
// As PsumStart, it is not differentiable, and Wait must be called once,
// inside the fn that started it, on the same device.
func (c *Ctx) AllGatherInvariantStart(x *tensor.Tensor, axes Axes, axis int, tiled bool) *Handle {
	const op = "shard.Ctx.AllGatherInvariantStart"
	checkLocal(op, c, x)
	e := c.env
	g := e.group(op, axes)
	if x.DType() != tensor.Float32 || e.mesh.spans() || g.size == 1 || x.IsTraced() {
		y := allGather(e, x, axes, axis, tiled, true)
		return &Handle{c: c, kind: "all_gather", fin: func() *tensor.Tensor { return y }}
	}
	a := gatherDim(op, x, axis, tiled)
	m := e.maskOf(op, axes)
	p := &collParams{env: e, axes: slices.Clone(axes), mask: m, dim: a, tiled: tiled}
	xs := x.BorrowShape() // read only
	if !tiled {
		xs = slices.Insert(slices.Clip(xs), a, 1) // a copy
	}
	outShape := slices.Clone(xs)
	outShape[a] *= g.size
	_, out := placeShared(e, g, x, p, xs, outShape)
	cl := &call{coll: allGatherColl, axes: p.axes, x: x, p: p, extra: collKey("axis", a, tiled), members: g.members}
	return e.startReduction(c, cl, func(s *slot) *tensor.Tensor {
		e.account(allGatherColl, int64(g.size-1)*int64(x.Bytes()))
		return e.markShared(s, g, out, maskOf(x)&^m)
	})
}

// placeRuns copies block (of shape xs) into part rank of dst, which is xs
// with dimension dim n times as long: one contiguous run per index of the
// dimensions before dim.
func placeRuns(dst, block []float32, xs []int, dim, rank, n int) {
	outer, inner := 1, 1
	for _, d := range xs[:dim] {
		outer *= d
	}
	for _, d := range xs[dim+1:] {
		inner *= d
	}
	run := xs[dim] * inner
	for o := range outer {
		at := o*n*run + rank*run
		copy(dst[at:at+run], block[o*run:(o+1)*run])
	}
}

// AllGather concatenates (tiled) or stacks (not tiled, a new dimension at
// axis) the blocks of x from the devices along the axes, in device order.
// The result is the same on those devices but, as in JAX, still counts as
// varying over the axes (its transpose is a reduce-scatter); use
// AllGatherInvariant for an invariant result.
func (c *Ctx) AllGather(x *tensor.Tensor, axes Axes, axis int, tiled bool) *tensor.Tensor {
	checkLocal("shard.Ctx.AllGather", c, x)
	return allGather(c.env, x, axes, axis, tiled, false)
}

// AllGatherInvariant is AllGather whose result is invariant over the axes
// (jax.lax.all_gather_invariant); its transpose is a slice, with no
// communication.
func (c *Ctx) AllGatherInvariant(x *tensor.Tensor, axes Axes, axis int, tiled bool) *tensor.Tensor {
	checkLocal("shard.Ctx.AllGatherInvariant", c, x)
	return allGather(c.env, x, axes, axis, tiled, true)
}

// gatherFloat32 all-gathers a float32 block per process straight into
// the shared result (MPI_Allgatherv from the block's storage into the
// result's), when that is a plain concatenation: each process has one
// member in the group, the members are ranked in process order, and the
// gathered dimension has no larger dimension before it. It reports
// whether it did; otherwise blocks brings the blocks.
func (x *crossGroup) gatherFloat32() bool {
	c := x.soleFloat32Call()
	if c == nil {
		return false
	}
	xs := c.x.Shape()
	if !c.p.tiled {
		xs = slices.Insert(xs, c.p.dim, 1)
	}
	for _, d := range xs[:c.p.dim] {
		if d != 1 {
			return false
		}
	}
	outShape := slices.Clone(xs)
	outShape[c.p.dim] *= len(x.members)
	out := tensor.Empty(tensor.Float32, outShape...) // every block is written
	counts := make([]int, len(x.procs))
	for i := range counts {
		counts[i] = c.x.Bytes()
	}
	x.g.Allgatherv(floatBytes(c.x.BorrowFloat32()), floatBytes(out.BorrowFloat32()), counts)
	storeRemote(x.s, x.key, out, true)
	return true
}

// gatherDim returns the dimension of x an all-gather named op stacks
// (untiled: a new dimension, which may be x.Rank()) or concatenates
// (tiled) the blocks along, panicking on an axis out of range.
func gatherDim(op string, x *tensor.Tensor, axis int, tiled bool) int {
	if !tiled {
		return normDim(op, x, axis, 1)
	}
	a := normDim(op, x, axis, 0)
	if x.Rank() == 0 {
		panic(fmt.Sprintf("%s: %v: a tiled all-gather needs at least one dimension", op, x))
	}
	return a
}
