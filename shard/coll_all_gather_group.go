package shard

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gonox/gonox/tensor"
)

// allGatherGroupColl is the slot of GatherTargets: the invariant
// all-gathers of several float32 blocks at one meeting of the devices. It
// only meets in one process (elsewhere GatherTargets gathers block by
// block), so it has no cross-process exchange, and it is not registered:
// Comm counts its all-gathers as all_gather calls, one a block.
var allGatherGroupColl = &collective{kind: "all_gather group"}

// GatherTargets is GatherTarget for several float32 blocks gathered over
// the same axes at once: in one process the devices take one slot, are
// lent their block of every result (Block) and meet once when every block
// is in, instead of once a block. A training step's sharded update
// gathers its updated parameters this way.
//
// Take it with Ctx.AllGatherInvariantTargets, start it once (Start) and
// wait for it once (Wait), inside the fn that took it, on the same
// device; targets never started fail the Map call.
type GatherTargets struct {
	c      *Ctx
	axes   Axes
	dims   []int
	shapes [][]int
	// Set when the blocks are lent: the reserved slot, the results shared
	// by the devices, the lent blocks, the parameters of the call and its
	// pending entry.
	s      *slot
	shared *sharedResults
	blocks []*tensor.Tensor
	p      collParams
	entry  inflight
	// Set once started: the handle of the lent gather, or the blocks' own
	// gathers; then the results.
	h      *Handle
	hs     []*Handle
	out    []*tensor.Tensor
	waited bool
}

// sharedResults are the results of a GatherTargets slot, made once by the
// first device to take its targets; marks counts the local members that
// took their views, the last of which donates the results' own headers.
type sharedResults struct {
	once  sync.Once
	outs  []*tensor.Tensor
	marks atomic.Int32
}

// gatherGroupKey keys a GatherTargets' results among a slot's shared
// values, by the group's key.
type gatherGroupKey struct{ group int }

// AllGatherInvariantTargets takes the device's place in the tiled
// AllGatherInvariant(x_i, axes, dims[i], true) of float32 blocks x_i of
// the given shapes, started later with the blocks (GatherTargets.Start).
// The collectives the device issues in between take their places after
// it. In one process, when every block is one contiguous run of its
// result (dims[i] 0, or every dimension before it of size 1), the blocks
// are lent (Block) and gathered at one meeting; otherwise (between
// processes, one device, blocks strided in their results) nothing is
// lent and Start starts each block's AllGatherInvariantStart.
//
// dims[i] is block i's gathered dimension, counted from the end if
// negative; the targets keep copies of shapes and dims. It panics
// (failing the Map call, with every device released) if shapes is empty
// or dims is not as long, if a shape has a negative size or a dimension
// is out of range, and if axes is empty or names an axis the mesh lacks;
// devices taking targets of different counts, sizes or dimensions fail
// the call when they meet (Start).
func (c *Ctx) AllGatherInvariantTargets(shapes [][]int, axes Axes, dims []int) *GatherTargets {
	const op = "shard.Ctx.AllGatherInvariantTargets"
	checkCtx(op, c)
	if len(shapes) == 0 || len(dims) != len(shapes) {
		panic(fmt.Sprintf("%s: %d shapes and %d dimensions: want one dimension a block, at least one block", op, len(shapes), len(dims)))
	}
	e := c.env
	g := e.group(op, axes)
	// The targets keep copies: the caller may reuse its slices.
	t := &GatherTargets{c: c, axes: slices.Clone(axes), dims: make([]int, len(dims)), shapes: make([][]int, len(shapes))}
	lend := g.size > 1 && !e.mesh.spans()
	total := 0
	for i, shape := range shapes {
		if slices.ContainsFunc(shape, func(n int) bool { return n < 0 }) {
			panic(fmt.Sprintf("%s: block %d: negative dimension in %s", op, i, typeNotation(tensor.Float32, shape)))
		}
		d := dims[i]
		if d < 0 {
			d += len(shape) // from the end, as AllGatherInvariant's dim
		}
		if d < 0 || d >= len(shape) {
			panic(fmt.Sprintf("%s: dim %d out of range for a block %s", op, dims[i], typeNotation(tensor.Float32, shape)))
		}
		t.dims[i], t.shapes[i] = d, slices.Clone(shape)
		lend = lend && !slices.ContainsFunc(shape[:d], func(n int) bool { return n != 1 })
		total += numelOf(shape)
	}
	if !lend {
		return t
	}
	t.s = e.run.reserve(e)
	v, _ := t.s.shared.LoadOrStore(gatherGroupKey{g.key}, &sharedResults{})
	t.shared = v.(*sharedResults)
	t.shared.once.Do(func() {
		t.shared.outs = make([]*tensor.Tensor, len(shapes))
		for i, shape := range t.shapes {
			out := slices.Clone(shape)
			out[t.dims[i]] *= g.size
			t.shared.outs[i] = tensor.Empty(tensor.Float32, out...)
		}
	})
	t.blocks = make([]*tensor.Tensor, len(shapes))
	for i, shape := range t.shapes {
		if o := t.shared.outs[i]; o.Rank() == len(shape) {
			n := numelOf(shape)
			t.blocks[i] = tensor.WrapFloat32(o.BorrowFloat32()[g.rank*n:(g.rank+1)*n:(g.rank+1)*n], shape...)
		} else { // inconsistent devices: the meeting reports it
			t.blocks[i] = tensor.Empty(tensor.Float32, shape...)
		}
	}
	t.p = collParams{env: e, axes: t.axes, mask: e.maskOf(op, axes)}
	key := groupKey(len(shapes), total, func(i int) int { return t.dims[i] })
	t.entry = inflight{run: e.run, s: t.s, c: &call{coll: allGatherGroupColl, axes: t.axes, x: t.blocks[0], p: &t.p, extra: key, members: g.members}}
	e.run.addPending(e.dev, &t.entry)
	return t
}

// Block returns the device's block i of the all-gathers' results, for the
// producer of the block to write into before Start, or nil if nothing is
// lent. It is the block's only writable view, valid until Start. It
// panics if i is not the index of a target.
func (t *GatherTargets) Block(i int) *tensor.Tensor {
	if i < 0 || i >= len(t.shapes) {
		panic(fmt.Sprintf("shard.GatherTargets.Block: block %d of %d targets", i, len(t.shapes)))
	}
	if t.s == nil {
		return nil
	}
	return t.blocks[i]
}

// Start starts the all-gathers with the device's blocks xs and returns at
// once. A block whose storage is the lent one (the producer wrote into
// Block) is not copied; any other is copied into it. Start panics if xs
// are not float32 blocks of the targets' shapes (a nil block included),
// or if the targets were started already.
func (t *GatherTargets) Start(xs []*tensor.Tensor) {
	const op = "shard.GatherTargets.Start"
	c, e := t.c, t.c.env
	if t.h != nil || t.hs != nil {
		panic(fmt.Sprintf("%s: the targets were started already", op))
	}
	if len(xs) != len(t.shapes) {
		panic(fmt.Sprintf("%s: %d blocks for %d targets", op, len(xs), len(t.shapes)))
	}
	for i, x := range xs {
		if x == nil {
			panic(fmt.Sprintf("%s: block %d is nil", op, i))
		}
		checkLocal(op, c, x)
		if x.DType() != tensor.Float32 || !slices.Equal(x.BorrowShape(), t.shapes[i]) {
			panic(fmt.Sprintf("%s: block %d %v for a target of blocks %s", op, i, x, typeNotation(tensor.Float32, t.shapes[i])))
		}
	}
	if t.s == nil {
		t.hs = make([]*Handle, len(xs))
		for i, x := range xs {
			t.hs[i] = c.AllGatherInvariantStart(x, t.axes, t.dims[i], true)
		}
		return
	}
	for i, x := range xs {
		if dst, src := t.blocks[i].BorrowFloat32(), x.BorrowFloat32(); len(src) > 0 && &dst[0] != &src[0] {
			copy(dst, src)
		}
	}
	e.run.dropPending(e.dev, &t.entry)
	g := e.group(op, t.axes)
	t.out = make([]*tensor.Tensor, len(xs))
	t.h = e.startReductionAt(c, t.entry.c, t.s, func(s *slot) *tensor.Tensor {
		local := int32(0)
		for _, m := range g.members {
			if e.mesh.isLocal(m) {
				local++
			}
		}
		for i, x := range xs {
			e.account(allGatherColl, int64(g.size-1)*int64(x.Bytes()))
			t.out[i] = e.marked(t.shared.outs[i], maskOf(x)&^t.p.mask)
		}
		if t.shared.marks.Add(1) == local {
			tensor.Donate(t.shared.outs...)
		}
		return nil
	})
}

// Wait waits for the all-gathers and returns their results, what
// AllGatherInvariant(xs[i], axes, dims[i], true) would have, bit for bit.
// It panics if the targets were not started, or were waited for already.
func (t *GatherTargets) Wait() []*tensor.Tensor {
	if t.waited {
		panic("shard.GatherTargets.Wait: the targets were waited for already")
	}
	switch {
	case t.h != nil:
		t.h.Wait()
	case t.hs != nil:
		t.out = make([]*tensor.Tensor, len(t.hs))
		for i, h := range t.hs {
			t.out[i] = h.Wait()
		}
	default:
		panic("shard.GatherTargets.Wait: the targets were not started")
	}
	t.waited = true
	return t.out
}
