package tensor

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// This file holds the autodiff graph: traces, the nodes Apply records on
// the tensors it traces (apply.go is the dispatch that decides to record),
// Named and Producer. Backward runs the graph (ad_backward.go).

// Trace is one differentiation in progress: the tensors it traces carry
// nodes that record how they were computed. Traces nest: a trace created
// later is inner to those created before it, and ops on tensors of several
// traces record a node for each, innermost first, so gradients of gradients
// work. There is no global tape: the graph hangs on the tensors, so several
// goroutines may differentiate at once, each with its own trace.
type Trace struct {
	id      uint64
	seq     atomic.Uint64
	capture func(x *Tensor) *Tensor
	// recordAll makes the trace record every op, differentiable or not,
	// with all its inputs and outputs (remat compiles such a graph), and
	// list its nodes in recorded, so that Remat can release what they hold
	// once it has compiled them.
	recordAll bool
	recMu     sync.Mutex
	recorded  []*node
	// recycle makes Backward donate the intermediates its nodes saved
	// (see RecycleIntermediates).
	recycle bool
	// final is called by Backward with each cotangent asked for once it
	// is final (see OnFinalCotangent).
	final func(i int, g *Tensor)
}

// OnFinalCotangent makes Backward call f(i, g) as soon as the cotangent g
// of wrt[i] is final: once the last node that feeds it has run, while the
// nodes recorded before that one still wait. A data-parallel step starts
// the reduction of each gradient there, so that it travels while the rest
// of the backward pass computes (PyTorch DDP's gradient hooks). f runs on
// the goroutine of Backward, once for each wrt value some node gives a
// cotangent to; g is the value Backward returns for it (before any naming
// with its logical axes), which f must not modify.
func (tr *Trace) OnFinalCotangent(f func(i int, g *Tensor)) { tr.final = f }

// RecycleIntermediates makes Backward, when it frees the residuals of the
// graph (retain false), donate the intermediate values the graph saved for
// the backward pass (activations, the inputs a matmul keeps, ...), so that
// their storage goes to the allocator cache (see Donate) instead of to the
// collector. The traced outputs of the function (the values Backward
// starts from) and the values gradients are asked for are spared.
//
// Checkpoints (Remat) that tr differentiates recycle their own
// intermediates too: the values their function computed that backward
// does not keep, once they are compiled, and the values backward
// recomputed, once it is done.
//
// It is an opt-in because intermediates may have escaped into the
// caller's variables: after Backward such an escaped intermediate is
// donated, and any use of it panics naming the op rather than reading
// recycled memory. Only outermost (untraced) values are donated.
func (tr *Trace) RecycleIntermediates() { tr.recycle = true }

var traceIDs atomic.Uint64 // orders traces; the only package-level state

// NewTrace returns a new trace, inner to every trace that exists already.
func NewTrace() *Trace { return &Trace{id: traceIDs.Add(1)} }

// NewCaptureTrace returns a trace that, when an op mixes one of its tensors
// with a tensor traced by an outer trace, first replaces the outer tensor
// by capture(x), which must return a tensor traced by this trace (usually
// a new Leaf) or panic. Remat and shard.Map use it to see the values their
// function closes over.
func NewCaptureTrace(capture func(x *Tensor) *Tensor) *Trace {
	return &Trace{id: traceIDs.Add(1), capture: capture}
}

// Leaf returns x traced by tr as an independent variable: a tensor with the
// same value whose gradient Backward can compute.
func (tr *Trace) Leaf(x *Tensor) *Tensor {
	// The node and the traced header in one allocation: the header keeps
	// the node anyway, and the node keeps only x's data, which x does.
	return tr.leafInto(new(leafRec), x, tr.seq.Add(1))
}

// Leaves returns Leaf of each of xs, their nodes and headers in one
// allocation (a model's parameters, traced at the start of every step).
// Any of the leaves keeps the allocation, and so every x, alive.
func (tr *Trace) Leaves(xs ...*Tensor) []*Tensor {
	recs := make([]leafRec, len(xs))
	out := make([]*Tensor, len(xs))
	// One atomic add for every leaf's sequence number: an atomic
	// read-modify-write waits for the stores before it (the zeroing of
	// the block just allocated) to leave the store buffer.
	seq := tr.seq.Add(uint64(len(xs))) - uint64(len(xs))
	for i, x := range xs {
		out[i] = tr.leafInto(&recs[i], x, seq+uint64(i)+1)
	}
	return out
}

// leafInto makes l, a zero record, the record of x traced by tr as a
// leaf, with sequence number seq (taken from tr.seq), and returns its
// traced header.
func (tr *Trace) leafInto(l *leafRec, x *Tensor, seq uint64) *Tensor {
	if x.node != nil && x.node.trace == tr {
		panic(fmt.Sprintf("Trace.Leaf: %v is already traced by this trace", x))
	}
	if levelIDOf(x) > tr.id {
		if x.node != nil {
			panic(fmt.Sprintf("Trace.Leaf: %v is traced by an inner trace", x))
		}
		panic(fmt.Sprintf("Trace.Leaf: %v is a value of a Vmap or JVP started after this trace", x))
	}
	n, t := &l.n, &l.t
	// l is fresh (zero): set only what is not zero. Assigning a whole
	// node stored each of its pointer words, and while the collector
	// marks, every pointer store takes a write barrier.
	n.op, n.trace, n.seq, n.nout = leafOp, tr, seq, 1
	x.twinInto(t)
	// The shape record shares x's shape, as the traced header does: the
	// record keeps x alive anyway (t.primal), and shapes never change.
	a := &l.aval[0]
	a.shape, a.dtype = x.shape[:len(x.shape):len(x.shape)], x.dtype
	if e := avalExt(x); e != nil {
		a.ext = e
	}
	n.avals = l.aval[:]
	t.node, t.outIdx, t.primal = n, 0, x
	return t
}

// leafRec is a leaf's node and traced header (Trace.Leaf), and the
// node's record of the leaf's shape: a leaf needs none of the inline
// storage of an op's node (nodeBuf).
type leafRec struct {
	n    node
	t    Tensor
	aval [1]avalRec
}

// Primal returns x without the node of trace tr (x itself if tr does not
// trace it); nodes of other, outer traces stay.
func (tr *Trace) Primal(x *Tensor) *Tensor { return x.primalOf(tr) }

// TracedBy reports whether x carries a node of trace tr.
func (x *Tensor) TracedBy(tr *Trace) bool { return x.levelOf(tr) != nil }

// levelOf returns the level of x that trace tr records: x itself or one of
// its primals (when inner traces also trace the value), or nil.
func (x *Tensor) levelOf(tr *Trace) *Tensor {
	for t := x; t != nil && t.node != nil; t = t.primal {
		if t.node.trace == tr {
			return t
		}
	}
	return nil
}

var leafOp = &Op{Name: "leaf"}

type edge struct {
	n   *node
	out int
}

// node is one recorded op: what its VJP needs (the saved residuals, the
// shapes of the rest), where its inputs came from, and its place in the
// trace. It is kept small: every traced op makes one, and a graph keeps
// them all until its backward pass (a small-tensor recurrence keeps
// mostly nodes). Placeholders for the values it does not save are made
// only when its VJP runs (backward.vjpArgs).
type node struct {
	op       *Op
	params   any
	trace    *Trace
	seq      uint64
	inputs   []edge    // producers traced by the same trace
	ins      []*Tensor // saved primal inputs, nil where not saved
	outs     []*Tensor // saved primal outputs, nil where not saved
	avals    []avalRec // the shapes of the inputs, then of the outputs
	state    any
	interIns uint64 // bit i: ins[i] is an intermediate of the trace
	ndims    int32  // of buf().dims used
	nout     int32
	freed    bool
	// slot is the node's index in the nodes of the last Backward pass
	// that visits it: a hint that backward.indexOf checks (concurrent
	// passes over one graph may overwrite it).
	slot atomic.Int32
}

// nodeBuf is the inline storage of a traced op's node, allocated with it
// (opRec), for the common ops (up to nodeInline inputs, one output), so
// that recording one costs a single allocation.
type nodeBuf struct {
	inputs [nodeInline]edge
	// ins holds the primal inputs while the op runs (node.primals), and
	// after record only those the VJP saves.
	ins   [nodeInline]*Tensor
	out   [1]*Tensor
	avals [nodeInline + 1]avalRec
	// dims holds the shapes of avals: a record sharing its value's shape
	// would share the allocation that holds the value's header (newHeader
	// puts the shape there), and so keep the value's data alive. Nine
	// hold a binary op's on rank-3 values and dense's on a rank-3 input;
	// a tenth would put a recycling trace's node with its traced result
	// (opRecTwin) in the 768-byte size class rather than 704.
	dims [9]int
	// res holds a single-output op's primal result while it is being
	// recorded (applyTraced), and after that only as results, while the
	// trace recycles.
	res [1]*Tensor
	// results are the primal outputs, kept when the trace recycles.
	results []*Tensor
	// rec is what a recordAll trace's node holds until Remat has
	// compiled the graph.
	rec *recording
}

// buf returns the inline storage of a traced op's node, nil for a leaf's
// (whose record lies in its leafRec). It is not a field of the node, nor
// are the fields only op nodes use: a leaf's record and an op's node with
// its result's header then fall in smaller size classes of the allocator
// (320 and 704 bytes rather than 384 and 768).
func (n *node) buf() *nodeBuf {
	if n.op == leafOp {
		return nil
	}
	// Every other node is the first field of an opRec (newNode).
	return &(*opRec)(unsafe.Pointer(n)).buf
}

// results returns the primal outputs n keeps while its trace recycles.
func (n *node) results() []*Tensor {
	if b := n.buf(); b != nil {
		return b.results
	}
	return nil
}

// opRec is a traced op's node and its inline storage in one allocation,
// and, for a recycling trace, the header of a single-output op's traced
// result and the slice record returns it in: the node keeps its results
// until the backward pass anyway when the trace recycles, so the header
// lying in the node's allocation keeps nothing longer.
type opRec struct {
	n   node
	buf nodeBuf
}

// opRecTwin is an opRec with room for the traced result (recycling
// traces).
type opRecTwin struct {
	opRec
	twin   Tensor
	traced [1]*Tensor
}

// newNode returns a new node of op recorded by tr, with its inline
// storage, and the room for a single-output op's traced result: nil
// unless tr recycles (see opRec).
func newNode(op *Op, params any, tr *Trace) (*node, *opRecTwin) {
	var r *opRec
	var rt *opRecTwin
	if tr.recycle && op.ImplN == nil && op.differentiable() {
		rt = &opRecTwin{}
		r = &rt.opRec
	} else {
		r = &opRec{}
	}
	n := &r.n
	n.op, n.params, n.trace = op, params, tr
	return n, rt
}

// recording is what a recordAll trace's node holds until Remat has
// compiled the graph (releaseRecording): every primal input and output.
type recording struct {
	raw, rawOuts []*Tensor
}

// avalRec is the shape-only record of a value: what a placeholder for it
// holds (dtype, shape, and in ext the shard.Map mark and abstract layout),
// and no data.
type avalRec struct {
	shape []int
	dtype DType
	ext   *tensorExt
}

// placeholder returns a new shape-only tensor for the record.
func (a *avalRec) placeholder() *Tensor {
	return &Tensor{dtype: a.dtype, shape: a.shape, ext: a.ext}
}

// avalExt returns the rarely set fields of a shape-only record of x: its
// mark and abstract layout. It is x's own record when that holds nothing
// else (records are never changed, so they can be shared).
func avalExt(x *Tensor) *tensorExt {
	e := x.ext
	if e == nil || e.layout == nil && e.axes == nil && e.xv == nil {
		return e
	}
	switch {
	case e.layout != nil:
		return &tensorExt{local: e.local, layout: abstractLayout(e.layout)}
	case e.local != nil:
		return e.local.rec()
	}
	return nil
}

// setAval records the shape of x as n.avals[i] (zero: n is being
// recorded), the shape in the node's own storage when it fits.
func (n *node) setAval(i int, x *Tensor) {
	var dims []int
	if b := n.buf(); b != nil {
		dims = b.dims[n.ndims:]
	}
	// The record's ext, nil but for placed values, is stored only when
	// set (a whole record's store took a write barrier for each pointer
	// word while the collector marks).
	a, r := &n.avals[i], avalIn(x, dims)
	a.shape, a.dtype = r.shape, r.dtype
	if r.ext != nil {
		a.ext = r.ext
	}
	if len(x.shape) <= len(dims) {
		n.ndims += int32(len(x.shape))
	}
}

// avalIn returns the shape record of x, its shape copied into dims if it
// fits there, into an allocation of its own if not.
func avalIn(x *Tensor, dims []int) avalRec {
	var own []int
	if k := len(x.shape); k <= len(dims) {
		own = dims[:k:k]
		copy(own, x.shape)
	} else {
		own = slices.Clone(x.shape)
	}
	return avalRec{shape: own, dtype: x.dtype, ext: avalExt(x)}
}

// outAval returns the shape record of output i.
func (n *node) outAval(i int) *avalRec { return &n.avals[len(n.avals)-int(n.nout)+i] }

const nodeInline = 4

// aval returns a shape-only placeholder for x: dtype, shape and local mark,
// no data.
func aval(x *Tensor) *Tensor {
	return &Tensor{dtype: x.dtype, shape: slices.Clone(x.shape), ext: avalExt(x)}
}

// primal strips the node of trace tr from x, if it has one.
func (x *Tensor) primalOf(tr *Trace) *Tensor {
	if x.node != nil && x.node.trace == tr {
		return x.primal
	}
	return x
}

// StopGradient returns x with every autodiff node removed: the value is
// treated as a constant by all traces.
func StopGradient(x *Tensor) *Tensor {
	checkNil("tensor.StopGradient", "x", x)
	for x.node != nil {
		x = x.primal
	}
	return x
}

// operands copies the operands in of n's op into n's inline storage of
// saved inputs when they fit (record keeps there only those the VJP
// saves), makes them what n's trace records (prepareOperands), links n
// to their producers and returns their primal values in the same slice,
// and the op's save mask. n keeps no reference to in itself: a caller's
// variadic slice of operands stays on its stack.
func (n *node) operands(in []*Tensor, loc *Local) ([]*Tensor, SaveMask) {
	var ops []*Tensor
	if len(in) <= nodeInline {
		ops = n.buf().ins[:len(in)]
		n.inputs, n.ins = n.buf().inputs[:len(in)], ops
	} else {
		// The primal values apart from n.ins: the op's implementation
		// may keep its operand slice.
		ops = make([]*Tensor, len(in))
		n.inputs, n.ins = make([]edge, len(in)), make([]*Tensor, len(in))
	}
	copy(ops, in)
	top := n.trace
	prepareOperands(n.op, ops, top, loc)
	save := n.op.saveMask(n.params)
	for i, x := range ops {
		if x.node != nil && x.node.trace == top {
			n.inputs[i] = edge{x.node, int(x.outIdx)}
			if i < 64 && save.input(i) && x.node.op != leafOp {
				n.interIns |= 1 << i
			}
		}
		ops[i] = x.primalOf(top)
	}
	return ops, save
}

// record fills in node n of its op applied to the operands whose primal
// values are prim (operands), which computed outs and state, and returns
// the outputs traced by n's trace, the header of a single output in tw if
// it is not nil (newNode). The node holds the residuals the op's save
// mask selects and the shapes of every operand and result.
func (n *node) record(prim, outs []*Tensor, save SaveMask, state any, tw *opRecTwin) []*Tensor {
	top, buf := n.trace, n.buf()
	n.seq, n.state, n.nout = top.seq.Add(1), state, int32(len(outs))
	if top.recordAll {
		// Held until Remat has compiled the graph (releaseRecording).
		buf.rec = &recording{raw: slices.Clone(prim), rawOuts: outs}
		for _, x := range prim {
			x.hold()
		}
		for _, o := range outs {
			o.hold()
		}
		top.recMu.Lock()
		top.recorded = append(top.recorded, n)
		top.recMu.Unlock()
	}
	// prim is n.ins (operands): only the inputs the VJP saves stay there,
	// and so reachable from the node.
	if k := len(prim) + len(outs); k <= len(buf.avals) {
		n.avals = buf.avals[:k]
	} else {
		n.avals = make([]avalRec, k)
	}
	for i, p := range prim {
		n.setAval(i, p)
		if !save.input(i) {
			n.ins[i] = nil
			continue
		}
		n.ins[i] = p
		p.hold()
	}
	if top.recycle {
		buf.results = outs
	}
	var res []*Tensor
	if tw != nil && len(outs) == 1 {
		res = tw.traced[:]
	} else {
		res = make([]*Tensor, len(outs))
	}
	if len(outs) == 1 {
		n.outs = buf.out[:]
	} else {
		n.outs = make([]*Tensor, len(outs))
	}
	for i, o := range outs {
		n.setAval(len(prim)+i, o)
		if save&SaveOutput != 0 {
			n.outs[i] = o
			o.hold()
		}
		var t *Tensor
		if tw != nil && len(outs) == 1 {
			t = &tw.twin
			o.twinInto(t)
		} else {
			t = o.twin()
		}
		t.node, t.outIdx, t.primal = n, int32(i), o
		res[i] = t
	}
	if !top.recycle && !top.recordAll {
		buf.res = [1]*Tensor{} // only what the VJP saves stays reachable
	}
	return res
}

// Named returns x tagged with a name, as jax.ad_checkpoint.checkpoint_name
// does: an identity whose result remat policies can select by name and
// Residuals reports under that name.
func Named(x *Tensor, name string) *Tensor {
	checkNil("tensor.Named", "x", x)
	return Apply(nameOp, name, x)
}

var nameOp *Op

func init() {
	nameOp = &Op{
		Name:     "name",
		Sharding: ShardingRule{Family: ShardLinear},
		Impl:     func(in []*Tensor, _ any) *Tensor { return in[0].shallow() },
		VJP: func(g *Tensor, _ []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{g}
		},
		JVP:    linearJVP(&nameOp),
		Batch:  sameOpBatch(&nameOp),
		Traits: Traits{Half: NativeHalf, Types: TypesAll}, // an identity: half data passes as it is
	}
}

// NodeInfo describes the op that produced a traced tensor.
type NodeInfo struct {
	// Op is the primitive; Label is its name, or the user's name for a
	// value tagged with Named.
	Op    *Op
	Label string
	// Params are the op's static parameters.
	Params any
}

// Producer returns the op that produced x under its innermost trace, and
// false if x is not traced or is a leaf.
func (x *Tensor) Producer() (NodeInfo, bool) {
	if x.node == nil || x.node.op == leafOp {
		return NodeInfo{}, false
	}
	return x.node.info(), true
}

func (n *node) info() NodeInfo {
	label := n.op.Name
	if n.op == nameOp {
		label = n.params.(string)
	}
	return NodeInfo{Op: n.op, Label: label, Params: n.params}
}

// donateOrDefer donates the dead intermediate x at once if its header is
// the only holder of its storage (no node still to run saved it, no view
// shares it), so that the rest of the backward pass reuses the storage;
// otherwise it appends x to dead, which Backward donates at the end.
func donateOrDefer(x *Tensor, dead []*Tensor) []*Tensor {
	if x.donated {
		return dead
	}
	if r := x.rec; r != nil && x.layout() == nil && r.refs.Load() == 1 {
		Donate(x)
		return dead
	}
	return append(dead, x)
}

// free drops n's references to its residuals and state, once they are
// released: the node can take part in no backward pass any more.
func (n *node) free() {
	n.ins, n.outs, n.state, n.freed = nil, nil, nil, true
	if b := n.buf(); b != nil {
		b.ins, b.out = [nodeInline]*Tensor{}, [1]*Tensor{}
	}
}

// releaseResiduals drops the node's hold on the values it saved. With
// recycle it appends to dead those that are untraced intermediates of its
// trace (its outputs, inputs computed by other nodes), except spare:
// Backward donates them once every node has run (a value may be saved by
// several nodes).
func (n *node) releaseResiduals(recycle bool, spare valueSet, dead []*Tensor) []*Tensor {
	for i, x := range n.ins {
		if x == nil {
			continue
		}
		x.release()
		if recycle && i < 64 && n.interIns&(1<<i) != 0 && x.node == nil && !spare.has(x) {
			dead = donateOrDefer(x, dead)
		}
	}
	for _, o := range n.outs {
		if o != nil {
			o.release()
		}
	}
	if b := n.buf(); b != nil {
		if recycle {
			for _, o := range b.results {
				if o.node == nil && !spare.has(o) {
					dead = donateOrDefer(o, dead)
				}
			}
		}
		b.results = nil
	}
	return dead
}
