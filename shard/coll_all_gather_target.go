package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// GatherTarget is a device's place in an invariant all-gather, taken
// before the block it gathers is computed: in one process the gather
// lends the device its block of the shared result (Block), for the
// producer of the block to write it there (optim.StepInto, say), and
// Start then gathers without copying it. A training step with a sharded
// update gathers its updated parameter blocks this way: the optimizer
// writes each block straight into the replicated parameter.
//
// Take targets with Ctx.AllGatherInvariantTarget and start each once,
// inside the fn that took it, on the same device; a target never started
// fails the Map call. Like every collective, targets are taken, and
// started, in the same order on every device.
type GatherTarget struct {
	c     *Ctx
	axes  Axes
	axis  int
	tiled bool
	dtype tensor.DType
	shape []int
	// Set when a block is lent: the reserved slot, the shared result,
	// the lent block, the parameters of the call and its pending entry
	// (p and pending point into params and entry, the target's own).
	s       *slot
	out     *tensor.Tensor
	block   *tensor.Tensor
	p       *collParams
	pending *inflight
	started bool

	params  collParams
	entry   inflight
	axesBuf [2]string // axes and shape, when short enough
	dimsBuf [4]int
}

// AllGatherInvariantTarget takes the device's place in
// AllGatherInvariant(x, axes, axis, tiled) of a block x of dtype dt and
// the given shape, to be started later with the block (GatherTarget.Start).
// The collectives the device issues in between take their places after
// it. In one process, a float32 block that is one contiguous run of the
// result (axis 0, or every dimension before axis of size 1) is lent:
// Block returns it. Otherwise (between processes, other dtypes, blocks
// strided in the result, one device) nothing is lent and Start runs
// AllGatherInvariantStart.
func (c *Ctx) AllGatherInvariantTarget(dt tensor.DType, shape []int, axes Axes, axis int, tiled bool) *GatherTarget {
	const op = "shard.Ctx.AllGatherInvariantTarget"
	e := c.env
	g := e.group(op, axes)
	t := &GatherTarget{c: c, axis: axis, tiled: tiled, dtype: dt}
	t.axes = append(t.axesBuf[:0:len(t.axesBuf)], axes...)
	t.shape = append(t.dimsBuf[:0:len(t.dimsBuf)], shape...)
	xs := slices.Clone(shape)
	a := axis
	if !tiled {
		if a < 0 {
			a += len(shape) + 1
		}
		if a >= 0 && a <= len(shape) {
			xs = slices.Insert(xs, a, 1)
		}
	} else if a < 0 {
		a += len(shape)
	}
	if a < 0 || a >= len(xs) || tiled && len(shape) == 0 {
		panic(fmt.Sprintf("%s: axis %d out of range for a block %s (tiled %v)", op, axis, typeNotation(dt, shape), tiled))
	}
	contiguous := !slices.ContainsFunc(xs[:a], func(d int) bool { return d != 1 })
	if dt != tensor.Float32 || e.mesh.spans() || g.size == 1 || !contiguous {
		return t
	}
	outShape := slices.Clone(xs)
	outShape[a] *= g.size
	n := 1
	for _, d := range shape {
		n *= d
	}
	t.s = e.run.reserve(e)
	t.out = sharedResult(t.s, g.key, func() *tensor.Tensor { return tensor.Empty(dt, outShape...) })
	t.block = tensor.WrapFloat32(t.out.BorrowFloat32()[g.rank*n:(g.rank+1)*n:(g.rank+1)*n], shape...)
	t.params = collParams{env: e, axes: t.axes, mask: e.maskOf(op, axes), dim: a, tiled: tiled}
	t.p = &t.params
	t.entry = inflight{run: e.run, s: t.s, c: t.call(t.block)}
	t.pending = &t.entry
	e.run.addPending(e.dev, t.pending)
	return t
}

// call is the device's call of the target's all-gather with block x. Its
// group reads only its own shared result: in one process it meets on its
// own (call.members).
func (t *GatherTarget) call(x *tensor.Tensor) *call {
	return &call{coll: allGatherColl, axes: t.p.axes, x: x, p: t.p, extra: collKey("axis", t.p.dim, t.tiled),
		members: t.c.env.group("shard.GatherTarget", t.axes).members}
}

// Block returns the device's block of the all-gather's result, for the
// producer of the block to write into before Start, or nil if nothing is
// lent. It is the block's only writable view, valid until Start: the
// result is read-only once started.
func (t *GatherTarget) Block() *tensor.Tensor { return t.block }

// Start starts the all-gather with the device's block x and returns at
// once; h.Wait() returns what AllGatherInvariant(x, axes, axis, tiled)
// would have, bit for bit. An x whose storage is the lent block (the
// producer wrote into Block) is not copied; any other x is copied into
// the block. As AllGatherInvariantStart, it is not differentiable, and
// Wait must be called once, inside the fn that started it, on the same
// device. Start panics if x is not a block of the target's dtype and
// shape, or if the target was started already.
func (t *GatherTarget) Start(x *tensor.Tensor) *Handle {
	const op = "shard.GatherTarget.Start"
	c, e := t.c, t.c.env
	checkLocal(op, c, x)
	if t.started {
		panic(fmt.Sprintf("%s: %v: the target was started already", op, x))
	}
	if x.DType() != t.dtype || !slices.Equal(x.BorrowShape(), t.shape) {
		panic(fmt.Sprintf("%s: %v for a target of blocks %s", op, x, typeNotation(t.dtype, t.shape)))
	}
	t.started = true
	if t.s == nil {
		return c.AllGatherInvariantStart(x, t.axes, t.axis, t.tiled)
	}
	if dst, src := t.block.BorrowFloat32(), x.BorrowFloat32(); len(src) > 0 && &dst[0] != &src[0] {
		copy(dst, src)
	}
	e.run.dropPending(e.dev, t.pending)
	g := e.group(op, t.axes)
	return e.startReductionAt(c, t.call(x), t.s, func(s *slot) *tensor.Tensor {
		e.account(allGatherColl, int64(g.size-1)*int64(x.Bytes()))
		return e.markShared(s, g, t.out, maskOf(x)&^t.p.mask)
	})
}
