package shard

// This file holds what the collectives of Ctx share: the collective
// descriptor and its registry, their parameters, the marking of blocks
// with the axes they vary over, the accounting of bytes, and the results
// the devices of a group share.

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gonox/gonox/tensor"
)

// collective describes one kind of collective of Ctx to the machinery all
// collectives share: the rendezvous (map_run.go) checks that every device
// issued the same one, the cross-process exchange (xproc_exchange.go)
// calls its cross function, Comm counts it under its kind. Each is
// declared once, in its file coll_<kind>.go, beside what the generic code
// does not need to know (see "Adding a collective" in doc.go):
//
//   - its tensor op (or ops), whose Impl is the in-process exchange: the
//     device meets the other devices of its group (run.meet, with a call
//     naming the collective) and computes its result from their calls;
//     whose VJP is the collective's transpose;
//   - its Ctx method, which checks the operands and applies the op.
//
// A collective added later carries more here, not elsewhere: a rule the
// generic code applies to every collective (a fingerprint checked where
// data crosses processes, a batching rule for vmap) reads these fields or
// the ops'.
type collective struct {
	// kind names the collective: Comm counts its bytes and calls under
	// it, and errors and the cross-process checks print it.
	kind string
	// ops are the tensor ops its Ctx methods apply; every one has a VJP
	// (collectives are differentiable). Set by register.
	ops []*tensor.Op
	// cross runs the cross-process part of a slot of this collective on
	// a mesh that spans processes, once every device of this process has
	// arrived and before any of them reads the slot: it brings into the
	// slot what the devices of other processes contribute (their calls,
	// or a shared result per group). Most collectives build it with
	// eachGroup from one of the exchanges of xproc_exchange.go.
	cross func(r *run, s *slot) error
	// quiet, if set, reports whether the cross-process exchange of a
	// started slot of this collective waits without spinning (see
	// run.exchange); nil: it may spin.
	quiet func(r *run, s *slot) bool
	// needs, for a collective exchanged with crossGroup.parts, returns
	// the part of member src's block x that member dst reads.
	needs func(c *call, g group, src, dst int, x *tensor.Tensor) region
	// rowsDiffer is set when the devices' blocks may differ in their
	// leading dimension (ragged_all_to_all): the rendezvous then compares
	// dtypes and params, not shapes (the params carry the trailing ones).
	rowsDiffer bool
	// wire and unwire carry a call's per-device data (call.data, which
	// differs between devices: ragged_all_to_all's offsets and sizes)
	// across processes beside its block, as integers: wire encodes this
	// device's, unwire rebuilds a remote device's from its block and the
	// integers. Both nil for a collective whose calls carry no data.
	wire   func(c *call) []int
	unwire func(x *tensor.Tensor, v []int) any
}

// collectives lists every registered collective, in registration order.
var collectives []*collective

// register records c with the ops that apply it and checks that it is
// complete; each collective's file calls it once, from the init that
// makes its ops.
func register(c *collective, ops ...*tensor.Op) {
	if c.kind == "" || c.cross == nil || len(ops) == 0 || (c.wire == nil) != (c.unwire == nil) {
		panic(fmt.Sprintf("shard: internal error: collective %q registered without a kind, a cross-process exchange or an op, or with only one of wire and unwire", c.kind))
	}
	for _, op := range ops {
		if op == nil || (op.VJP == nil && op.VJPNeed == nil && op.VJPN == nil) {
			panic(fmt.Sprintf("shard: internal error: collective %q: an op without a VJP", c.kind))
		}
	}
	c.ops = ops
	collectives = append(collectives, c)
}

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

// collKey is what the devices' calls of an all-gather ("axis d ...") or a
// psum_scatter ("dim d ...") must agree on besides the dtype and shape,
// "<word> d tiled" or "<word> d stacked": a constant for the first two
// dimensions (the update issues hundreds a step).
func collKey(word string, dim int, tiled bool) string {
	if dim == 0 || dim == 1 {
		switch word {
		case "axis":
			return [2][2]string{{"axis 0 stacked", "axis 0 tiled"}, {"axis 1 stacked", "axis 1 tiled"}}[dim][b2i(tiled)]
		case "dim":
			return [2][2]string{{"dim 0 stacked", "dim 0 tiled"}, {"dim 1 stacked", "dim 1 tiled"}}[dim][b2i(tiled)]
		}
	}
	return word + " " + strconv.Itoa(dim) + " " + tiledWord(tiled)
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
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

// remarkFresh is remark of a cotangent the VJP made itself: the header
// remark replaces is donated, so that the storage goes back to the
// allocator cache once the returned header is donated.
func remarkFresh(g, like *tensor.Tensor) *tensor.Tensor {
	y := remark(g, like)
	if y != g && !g.IsTraced() {
		tensor.Donate(g)
	}
	return y
}

// checkLocal panics, naming op, unless x is a live tensor that a
// collective of c's device can take: a block of c's device or a host
// tensor, not nil, donated, a global sharded tensor or another device's
// block.
// checkCtx panics, naming op, if c is nil: a Ctx comes only from Map's
// call of fn.
func checkCtx(op string, c *Ctx) {
	if c == nil {
		panic(op + ": nil Ctx (collectives run inside shard.Map's fn, on the Ctx it is given)")
	}
}

func checkLocal(op string, c *Ctx, x *tensor.Tensor) {
	switch {
	case x == nil:
		panic(op + ": nil operand")
	case x.IsDonated():
		panic(fmt.Sprintf("%s: operand %v was donated (tensor.Donate)", op, x))
	}
	if l := x.Local(); l != nil && l.Env != c.env {
		panic(fmt.Sprintf("%s: %v belongs to another device or Map call", op, x))
	}
	if x.Layout() != nil {
		panic(fmt.Sprintf("%s: %v is a global sharded tensor; collectives take blocks inside shard.Map", op, x))
	}
}

// account charges bytes sent to this device in collective c and counts
// the collective once.
func (e *devEnv) account(c *collective, bytes int64) {
	e.run.comm.add(e.mesh.devices[e.dev], c.kind, bytes)
	if e.dev == e.run.first {
		e.run.comm.count(c.kind)
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

// placeAt copies the whole of src into dst (freshly allocated) at offset
// along axis.
func placeAt(dst, src *tensor.Tensor, axis, offset int) {
	off := make([]int, src.Rank())
	off[axis] = offset
	copyTensorRegion(dst, make([]int, dst.Rank()), src, off, off, src.BorrowShape())
}

// sliceAxis returns x[start:start+n] along axis.
func sliceAxis(x *tensor.Tensor, axis, start, n int) *tensor.Tensor {
	return tensor.SliceAxis(x, axis, start, start+n)
}

// Rules of the collectives for Vmap (inside shard.Map) and forward mode.
// Every device maps the same batch (the function is SPMD), so a
// collective of a batch is the collective of the whole batch at once, its
// dimension arguments past the batch dimension; the linear collectives'
// tangents travel the way their primals do.

// collBatch is the batching rule of a collective whose params are a
// *collParams: the collective on the batch, its dims (dim, dim2) shifted
// past the batch dimension if shift is set.
func collBatch(op **tensor.Op, shift bool) func([]*tensor.Tensor, []bool, any) []*tensor.Tensor {
	return func(in []*tensor.Tensor, _ []bool, pp any) []*tensor.Tensor {
		p := *pp.(*collParams)
		if shift {
			p.dim++
			p.dim2++
		}
		return []*tensor.Tensor{tensor.Apply(*op, &p, in[0])}
	}
}

// collLinearJVP is the JVP rule of a linear collective: the collective of
// the tangent, marked as varying over the primal's axes first.
func collLinearJVP(op **tensor.Op) func(prim, tan, outs []*tensor.Tensor, pp any) []*tensor.Tensor {
	return func(prim, tan, _ []*tensor.Tensor, pp any) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.Apply(*op, pp, likeMarked(tan[0], prim[0]))}
	}
}

// likeMarked returns the tangent t marked as varying over the axes its
// primal x varies over (t as it is if it varies over others).
func likeMarked(t, x *tensor.Tensor) *tensor.Tensor {
	if l := x.Local(); l != nil && maskOf(t)&^l.Mask == 0 {
		return tensor.Vary(t, l)
	}
	return t
}
