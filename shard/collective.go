package shard

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gonox/gonox/tensor"
)

// collParams are the static parameters of a collective primitive.
type collParams struct {
	env   *devEnv
	axes  []string
	mask  uint64
	dim   int // gather axis, scatter dimension, split axis
	dim2  int // concat axis
	tiled bool
	perm  [][2]int
	max   bool // pmax (else pmin)
}

func tiledWord(tiled bool) string {
	if tiled {
		return "tiled"
	}
	return "stacked"
}

// marked returns x with the block mark for mask (x untraced).
func (e *devEnv) marked(x *tensor.Tensor, mask uint64) *tensor.Tensor {
	return tensor.WithLocal(x, e.Local(mask))
}

// markedFresh is marked for a header the collective made itself (a fresh
// result, or a view of its own over another block): out's header is
// donated once the marked one holds the storage, so that the storage goes
// back to the allocator cache when the result is donated in turn.
func (e *devEnv) markedFresh(out *tensor.Tensor, mask uint64) *tensor.Tensor {
	y := e.marked(out, mask)
	tensor.Donate(out)
	return y
}

// squeezeFresh removes dimension dim of a result the collective made
// itself, donating the header it replaces.
func squeezeFresh(out *tensor.Tensor, dim int) *tensor.Tensor {
	y := tensor.Squeeze(out, dim)
	if y != out {
		tensor.Donate(out)
	}
	return y
}

// remark gives a cotangent the mark of the input it belongs to.
func remark(g, like *tensor.Tensor) *tensor.Tensor {
	l := like.Local()
	if l == nil {
		return g
	}
	if g.IsTraced() {
		if maskOf(g)&^l.Mask != 0 {
			panic(fmt.Sprintf("shard: internal error: cotangent %v varies over more axes than %v", g, like))
		}
		return tensor.Vary(g, l)
	}
	return tensor.WithLocal(g, l)
}

func checkLocal(op string, c *Ctx, x *tensor.Tensor) {
	if l := x.Local(); l != nil && l.Env != c.env {
		panic(fmt.Sprintf("%s: %v belongs to another device or Map call", op, x))
	}
	if x.Layout() != nil {
		panic(fmt.Sprintf("%s: %v is a global sharded tensor; collectives take blocks inside shard.Map", op, x))
	}
}

// ---- psum / pmean ----

var psumOp, pmaxOp *tensor.Op

func init() {
	psumOp = &tensor.Op{
		Name:       "psum",
		SyncVJP:    true, // its VJP reads the cotangent before it returns
		NativeHalf: true,
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return psumImpl(in[0], pp.(*collParams))
		},
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, _ any) []*tensor.Tensor {
			// The cotangent of a sum reaches every summand unchanged.
			return []*tensor.Tensor{remark(g, in[0])}
		},
	}
	pmaxOp = &tensor.Op{
		Name:       "pmax",
		NativeHalf: true,
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

// account charges bytes sent to this device and counts the collective once.
func (e *devEnv) account(kind string, bytes int64) {
	e.run.comm.add(e.mesh.devices[e.dev], kind, bytes)
	if e.dev == e.run.first {
		e.run.comm.count(kind)
	}
}

type lazyResult struct {
	once  sync.Once
	t     *tensor.Tensor
	marks atomic.Int32 // local members that took their view (markShared)
}

// markShared returns this device's marked view of out, the shared result
// of group g in slot s. Once every member of g in this process has its
// view, out's own header is donated (tensor.Donate): the storage then
// lives exactly as long as the members' views, and goes to the allocator
// cache when they are donated in turn.
func (e *devEnv) markShared(s *slot, g group, out *tensor.Tensor, mask uint64) *tensor.Tensor {
	y := e.marked(out, mask)
	e.doneWithShared(s, g, out)
	return y
}

// doneWithShared records that this device no longer reads out, the shared
// result of group g in slot s, by its own header; the last local member
// donates that header.
func (e *devEnv) doneWithShared(s *slot, g group, out *tensor.Tensor) {
	local := int32(0)
	for _, m := range g.members {
		if e.mesh.isLocal(m) {
			local++
		}
	}
	if v, ok := s.shared.Load(g.key); ok && v.(*lazyResult).marks.Add(1) == local {
		tensor.Donate(out)
	}
}

// sharedResult returns the result tensor shared by the devices of group
// key in slot s, creating it once. Devices fill disjoint parts of it and
// then meet at a barrier; afterwards it is immutable and every device of
// the group returns it (shared storage, as the blocks are read-only).
func sharedResult(s *slot, key int, mk func() *tensor.Tensor) *tensor.Tensor {
	v, _ := s.shared.LoadOrStore(key, &lazyResult{})
	l := v.(*lazyResult)
	l.once.Do(func() { l.t = mk() })
	return l.t
}

// chunk returns the part [lo, hi) of n elements that rank r of g reduces.
func chunk(n, g, r int) (int, int) {
	return n * r / g, n * (r + 1) / g
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

// ---- all-gather ----

var allGatherOp, allGatherInvOp *tensor.Op

func init() {
	allGatherOp = &tensor.Op{
		Name:       "all_gather",
		SyncVJP:    true, // its VJP reads the cotangent before it returns
		NativeHalf: true,
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return allGatherImpl(in[0], pp.(*collParams), false)
		},
		VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(*collParams)
			return []*tensor.Tensor{psumScatter(p.env, g, p.axes, p.dim, p.tiled)}
		},
	}
	allGatherInvOp = &tensor.Op{
		Name:       "all_gather",
		SyncVJP:    true, // its VJP reads the cotangent before it returns
		NativeHalf: true,
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
	}
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
	extra := 1
	if tiled {
		extra = 0
	}
	a := normDim(op, x, axis, extra)
	if tiled && x.Rank() == 0 {
		panic(fmt.Sprintf("%s: %v: a tiled all-gather needs at least one dimension", op, x))
	}
	m := e.maskOf(op, axes)
	e.group(op, axes)
	x = tensor.Vary(x, e.Local(maskOf(x)|m))
	return tensor.Apply(o, &collParams{env: e, axes: slices.Clone(axes), mask: m, dim: a, tiled: tiled}, x)
}

func allGatherImpl(x *tensor.Tensor, p *collParams, invariant bool) *tensor.Tensor {
	e := p.env
	g := e.group("shard.AllGather", p.axes)
	s := e.run.meet(e, &call{kind: "all_gather", axes: p.axes, x: x, p: p, extra: fmt.Sprintf("axis %d %s", p.dim, tiledWord(p.tiled))})
	defer e.run.leave(s)
	// done meets the other members once out, the shared result, is whole,
	// and hands out this device's view of it.
	done := func(out *tensor.Tensor) *tensor.Tensor {
		e.run.barrier(s)
		e.account("all_gather", int64(g.size-1)*int64(x.Bytes()))
		mask := maskOf(x)
		if invariant {
			mask &^= p.mask
		}
		return e.markShared(s, g, out, mask)
	}
	if _, ok := s.remote.Load(g.key); ok {
		// Gathered with the other processes already (exchangeGather).
		return done(sharedResult(s, g.key, nil))
	}
	xs := x.Shape()
	if !p.tiled {
		xs = slices.Insert(xs, p.dim, 1)
	}
	outShape := slices.Clone(xs)
	outShape[p.dim] *= g.size
	if x.DType() == tensor.Float32 && !e.mesh.spans() {
		// Every member copies its block into the shared result (allocated
		// without zeroing: the blocks cover it), reading and writing
		// borrowed storage so that both may be donated later.
		out := sharedResult(s, g.key, func() *tensor.Tensor { return tensor.Empty(x.DType(), outShape...) })
		placeRuns(out.BorrowFloat32(), x.BorrowFloat32(), xs, p.dim, g.rank, g.size)
		return done(out)
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

// placeAt copies the whole of src into dst (freshly allocated) at offset
// along axis.
func placeAt(dst, src *tensor.Tensor, axis, offset int) {
	off := make([]int, src.Rank())
	off[axis] = offset
	copyTensorRegion(dst, make([]int, dst.Rank()), src, off, off, src.Shape())
}

// sliceAxis returns x[start:start+n] along axis.
func sliceAxis(x *tensor.Tensor, axis, start, n int) *tensor.Tensor {
	return tensor.SliceAxis(x, axis, start, start+n)
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

// ---- reduce-scatter ----

var psumScatterOp *tensor.Op

func init() {
	psumScatterOp = &tensor.Op{
		Name:       "psum_scatter",
		SyncVJP:    true, // its VJP reads the cotangent before it returns
		NativeHalf: true,
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return psumScatterImpl(in[0], pp.(*collParams))
		},
		VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(*collParams)
			return []*tensor.Tensor{allGather(p.env, g, p.axes, p.dim, p.tiled, false)}
		},
	}
}

func psumScatter(e *devEnv, x *tensor.Tensor, axes []string, dim int, tiled bool) *tensor.Tensor {
	const op = "shard.Ctx.PsumScatter"
	if x.Rank() == 0 {
		panic(fmt.Sprintf("%s: %v: needs at least one dimension", op, x))
	}
	d := normDim(op, x, dim, 0)
	m := e.maskOf(op, axes)
	g := e.group(op, axes)
	n := x.Dim(d)
	if tiled && n%g.size != 0 {
		panic(fmt.Sprintf("%s: %v: dim %d (%d) is not divisible by %s=%d", op, x, d, n, axesLabel(axes), g.size))
	}
	if !tiled && n != g.size {
		panic(fmt.Sprintf("%s: %v: untiled scatter needs dim %d (%d) equal to %s=%d", op, x, d, n, axesLabel(axes), g.size))
	}
	if x.DType() == tensor.Bool {
		panic(fmt.Sprintf("%s: %v: bool blocks cannot be summed", op, x))
	}
	x = tensor.Vary(x, e.Local(maskOf(x)|m))
	return tensor.Apply(psumScatterOp, &collParams{env: e, axes: slices.Clone(axes), mask: m, dim: d, tiled: tiled}, x)
}

func psumScatterImpl(x *tensor.Tensor, p *collParams) *tensor.Tensor {
	e := p.env
	g := e.group("shard.PsumScatter", p.axes)
	s := e.run.meet(e, &call{kind: "psum_scatter", axes: p.axes, x: x, p: p, extra: fmt.Sprintf("dim %d %s", p.dim, tiledWord(p.tiled))})
	defer e.run.leave(s)
	size := x.Dim(p.dim) / g.size
	dt := x.DType()
	// done meets the other members (the blocks are read until every
	// member is done) and hands out out, this member's part, a tensor of
	// the collective's own.
	done := func(out *tensor.Tensor) *tensor.Tensor {
		e.run.barrier(s)
		if !p.tiled {
			out = squeezeFresh(out, p.dim)
		}
		e.account("psum_scatter", int64(g.size-1)*int64(x.Bytes())/int64(g.size))
		return e.markedFresh(out, maskOf(x)|p.mask)
	}
	if v, ok := s.remote.Load(g.key); ok {
		if _, ok := v.(scattered); ok {
			// Reduce-scattered with the other processes: the shared
			// result is this process's member's part (exchangeScatter).
			return done(sharedResult(s, g.key, nil))
		}
		// All-reduced whole with the other processes (see exchange): this
		// member's part of the sum.
		full := sharedResult(s, g.key, nil)
		out := done(scatterSum(x, p.dim, size, g.rank, func(int) *tensor.Tensor { return full }, 1))
		e.doneWithShared(s, g, full)
		return out
	}
	if dt == tensor.Float32 || isHalf(dt) {
		return done(scatterSum(x, p.dim, size, g.rank, func(r int) *tensor.Tensor { return s.calls[g.members[r]].x }, g.size))
	}
	var out *tensor.Tensor
	for _, m := range g.members {
		part := sliceAxis(tensor.WithLocal(s.calls[m].x, nil), p.dim, g.rank*size, size)
		if out == nil {
			out = part
		} else {
			out = tensor.Add(out, part)
		}
	}
	return done(out)
}

// scatterSum returns part rank (of size along dim) of the sum of the n
// blocks block(0..n-1), shaped like x: each run of contiguous elements of
// the part is summed straight from every block by the psum kernel (in the
// psum's order, so the part is bit for bit that part of a psum), with no
// intermediate slices or partial sums. Half blocks are summed in float32
// and rounded once.
func scatterSum(x *tensor.Tensor, dim, size, rank int, block func(int) *tensor.Tensor, n int) *tensor.Tensor {
	shape := x.Shape()
	outer, inner := 1, 1
	for _, d := range shape[:dim] {
		outer *= d
	}
	for _, d := range shape[dim+1:] {
		inner *= d
	}
	run, stride := size*inner, shape[dim]*inner
	outShape := slices.Clone(shape)
	outShape[dim] = size
	out := tensor.Empty(x.DType(), outShape...) // every run is written
	if x.DType() == tensor.Float32 {
		// Borrowed, not pinned: the blocks and the result may still be
		// donated once every member is past the collective's barrier.
		dst := out.BorrowFloat32()
		src := make([][]float32, n)
		ins := make([][]float32, n)
		for r := range n {
			src[r] = block(r).BorrowFloat32()
		}
		for o := range outer {
			at := o*stride + rank*run
			for r := range n {
				ins[r] = src[r][at : at+run]
			}
			sumFloat32(dst[o*run:(o+1)*run], ins, 0, run)
		}
		return out
	}
	dst := out.RawUint16()
	src := make([][]uint16, n)
	ins := make([][]uint16, n)
	for r := range n {
		src[r] = block(r).RawUint16()
	}
	for o := range outer {
		at := o*stride + rank*run
		for r := range n {
			ins[r] = src[r][at : at+run]
		}
		sumHalf(x.DType(), dst[o*run:(o+1)*run], ins)
	}
	return out
}

// PsumScatter sums x over the axes and leaves each device one part of the
// sum along scatterDim (a reduce-scatter): with tiled, dimension scatterDim
// is split into equal parts; without, it must equal the number of devices
// and is removed. The result varies over the axes.
func (c *Ctx) PsumScatter(x *tensor.Tensor, axes Axes, scatterDim int, tiled bool) *tensor.Tensor {
	checkLocal("shard.Ctx.PsumScatter", c, x)
	return psumScatter(c.env, x, axes, scatterDim, tiled)
}

// ---- ppermute and ring shifts ----

var ppermuteOp *tensor.Op

func init() {
	ppermuteOp = &tensor.Op{
		Name:       "ppermute",
		NativeHalf: true,
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
	}
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
	s := e.run.meet(e, &call{kind: "ppermute", axes: p.axes, x: x, p: p, extra: fmt.Sprintf("perm %v", p.perm)})
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
	e.run.barrier(s)
	e.account("ppermute", sent)
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

// ---- all-to-all ----

var allToAllOp *tensor.Op

func init() {
	allToAllOp = &tensor.Op{
		Name:       "all_to_all",
		NativeHalf: true,
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return allToAllImpl(in[0], pp.(*collParams))
		},
		VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(*collParams)
			return []*tensor.Tensor{allToAll(p.env, g, p.axes, p.dim2, p.dim, p.tiled)}
		},
	}
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
	s := e.run.meet(e, &call{kind: "all_to_all", axes: p.axes, x: x, p: p, extra: fmt.Sprintf("split %d concat %d %s", p.dim, p.dim2, tiledWord(p.tiled))})
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
	e.run.barrier(s) // the blocks are read until every member is done
	shape := parts[0].Shape()
	shape[p.dim2] *= g.size
	out := tensor.Zeros(x.DType(), shape...)
	for j, part := range parts {
		placeAt(out, part, p.dim2, j*part.Dim(p.dim2))
	}
	tensor.Donate(parts...)
	e.account("all_to_all", int64(g.size-1)*int64(x.Bytes())/int64(g.size))
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
