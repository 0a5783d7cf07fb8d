package tensor

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// This file holds the machinery that transformations (package autodiff,
// package shard) build on: primitives (Op), Apply, traces and the backward
// pass. Users of gonox rarely need it; authors of new primitives do.

// SaveMask selects which inputs and outputs of a primitive its VJP needs.
// Only those are kept alive for the backward pass (and counted by
// Residuals); the others reach the VJP as shape-only placeholders.
type SaveMask uint64

const (
	// SaveOutput keeps the output(s) of the op for its VJP.
	SaveOutput SaveMask = 1 << 63
	// SaveAllInputs keeps every input, however many there are.
	SaveAllInputs SaveMask = 1 << 62

	maxMaskInput = 62
)

// SaveInputs returns a mask that keeps the given inputs (indices below 62;
// use SaveAllInputs for ops with more inputs).
func SaveInputs(idx ...int) SaveMask {
	var m SaveMask
	for _, i := range idx {
		if i < 0 || i >= maxMaskInput {
			panic(fmt.Sprintf("tensor.SaveInputs: input index %d out of range [0,%d)", i, maxMaskInput))
		}
		m |= 1 << uint(i)
	}
	return m
}

func (m SaveMask) input(i int) bool {
	return m&SaveAllInputs != 0 || (i < maxMaskInput && m&(1<<uint(i)) != 0)
}

// Op is a primitive operation: a forward implementation and its
// vector-Jacobian product. Every op in this package is an Op; packages add
// their own (shard's collectives, autodiff.CustomVJP).
type Op struct {
	// Name names the op in residual reports and remat policies
	// ("matmul", "all_gather", ...).
	Name string

	// Impl computes the single output from host inputs that carry no
	// autodiff node. It must return a new *Tensor (it may share storage
	// with an input). Exactly one of Impl and ImplN is set.
	Impl func(in []*Tensor, params any) *Tensor
	// ImplN computes several outputs and an optional state that its VJPN
	// receives (internal residuals).
	ImplN func(in []*Tensor, params any) (outs []*Tensor, state any)
	// ImplVJP, if set, replaces ImplN when the op is being differentiated:
	// it computes the outputs and the state VJPN will need, which ImplN
	// may skip (shard.Map keeps per-device graphs only then).
	ImplVJP func(in []*Tensor, params any) (outs []*Tensor, state any)

	// VJP maps the output cotangent g to one cotangent per input (nil for
	// an input that gets none). in holds the inputs: those selected by Save
	// with their data, the others as shape-only placeholders; out is the
	// output if Save has SaveOutput, else a placeholder. A nil VJP (and
	// VJPN) makes the op non-differentiable: its outputs are never traced.
	VJP func(g *Tensor, in []*Tensor, out *Tensor, params any) []*Tensor
	// VJPN is VJP for ImplN ops. gs has nil for outputs that received no
	// cotangent.
	VJPN func(gs []*Tensor, in []*Tensor, outs []*Tensor, params any, state any) []*Tensor
	// VJPNeed, if set, is used instead of VJP and is told which inputs
	// want a cotangent: bit i of need is set for input i (bit 63 stands
	// for every input from 63 on). It may return nil for the others and
	// skip their work — the input batch of a first layer, a target.
	VJPNeed func(g *Tensor, in []*Tensor, out *Tensor, params any, need uint64) []*Tensor

	// Save selects the residuals the VJP needs.
	Save SaveMask
	// SaveFor, if set, overrides Save for ops whose needs depend on their
	// parameters.
	SaveFor func(params any) SaveMask

	// Distributed ops accept global sharded tensors (shard.Put, Map, ...).
	// All others panic when given one.
	Distributed bool

	// SyncVJP ops' VJPs have read their cotangent when they return, also
	// on a shard.Map device: they compute on the device alone or through
	// synchronous collectives, which meet the other devices at a barrier
	// after reading every operand. A backward pass may then donate a
	// cotangent it made itself once such a VJP has consumed it (see
	// Donate); an op whose VJP starts an asynchronous transfer of its
	// cotangent must leave it unset.
	SyncVJP bool

	// HandlesVary ops track shard.Map's varying axes themselves (a
	// checkpoint's recorded ops broadcast their invariant operands inside):
	// Apply inserts no implicit pvary for their operands.
	HandlesVary bool

	// NativeHalf ops take bfloat16 and float16 operands as they are:
	// Apply neither widens them to float32 nor rounds the result, and the
	// VJP receives half cotangents (package shard's collectives, which
	// move 16-bit data and accumulate sums in float32 themselves).
	NativeHalf bool

	// freshVJP: every tensor the VJP returns that is not one of its
	// cotangent arguments has storage nothing else references (see
	// ad_backward.go). donates: the VJP consumes its cotangent once, through
	// an op whose Impl may write its result over it (takeDonated).
	freshVJP, donates bool
}

func (op *Op) differentiable() bool { return op.VJP != nil || op.VJPN != nil || op.VJPNeed != nil }

// Wants reports whether a need mask passed to Op.VJPNeed asks for the
// cotangent of input i.
func Wants(need uint64, i int) bool { return need&(1<<uint(min(i, 63))) != 0 }

// needBit returns the bit of input i in a need mask.
func needBit(i int) uint64 { return 1 << uint(min(i, 63)) }

func (op *Op) saveMask(params any) SaveMask {
	if op.SaveFor != nil {
		return op.SaveFor(params)
	}
	return op.Save
}

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
}

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
	if x.node != nil && x.node.trace == tr {
		panic(fmt.Sprintf("Trace.Leaf: %v is already traced by this trace", x))
	}
	if x.node != nil && x.node.trace.id > tr.id {
		panic(fmt.Sprintf("Trace.Leaf: %v is traced by an inner trace", x))
	}
	n := &node{op: leafOp, trace: tr, seq: tr.seq.Add(1), nout: 1}
	n.outAval = []*Tensor{aval(x)}
	t := x.twin()
	t.node, t.outIdx, t.primal = n, 0, x
	return t
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

type node struct {
	op       *Op
	params   any
	trace    *Trace
	seq      uint64
	inputs   []edge    // producers traced by the same trace
	ins      []*Tensor // saved primal inputs, or placeholders
	outs     []*Tensor // saved primal outputs, or placeholders
	outAval  []*Tensor // shape-only outputs
	state    any
	nout     int
	freed    bool
	interIns uint64    // bit i: ins[i] is an intermediate of the trace
	results  []*Tensor // the primal outputs, kept when the trace recycles
	raw      []*Tensor // recordAll traces: every primal input
	rawOuts  []*Tensor // recordAll traces: every primal output

	// Inline storage for the common ops (up to nodeInline inputs, one
	// output), so recording one costs a single allocation.
	bufInputs [nodeInline]edge
	bufIns    [nodeInline]*Tensor
	bufPrim   [nodeInline]*Tensor
	bufAvals  [nodeInline + 1]Tensor
	bufOut    [2][1]*Tensor // outs, outAval
}

const nodeInline = 4

// aval returns a shape-only placeholder for x: dtype, shape and local mark,
// no data.
func aval(x *Tensor) *Tensor {
	return &Tensor{dtype: x.dtype, shape: x.shape, local: x.local, layout: abstractLayout(x.layout)}
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

// Apply evaluates the single-output primitive op on the inputs and, if any
// input is traced, records a node so the result can be differentiated.
//
// Apply also propagates shard.Map block marks (the result varies over the
// union of the mesh axes its inputs vary over). When an operand is a global
// placed tensor (shard.Put) and op is not Distributed, Apply hands the call
// to the placer that package shard installs (see SetPlacer): the result is
// a placed tensor computed block by block on the mesh.
func Apply(op *Op, params any, in ...*Tensor) *Tensor {
	if op.Impl == nil {
		panic(fmt.Sprintf("tensor.Apply: op %q has no Impl (use ApplyN)", op.Name))
	}
	checkKernels(op)
	top, loc, placed := scan(op, in)
	if placed {
		return applyPlaced(op, params, in, loc)[0]
	}
	if top == nil {
		out := callImpl(op, in, params)
		return finish(op, out, in, loc)
	}
	outs := applyTraced(op, params, in, top, loc)
	return outs[0]
}

// ApplyN is Apply for primitives with several outputs.
func ApplyN(op *Op, params any, in ...*Tensor) []*Tensor {
	if op.ImplN == nil {
		panic(fmt.Sprintf("tensor.ApplyN: op %q has no ImplN", op.Name))
	}
	checkKernels(op)
	top, loc, placed := scan(op, in)
	if placed {
		return applyPlaced(op, params, in, loc)
	}
	if top == nil {
		outs, _ := callImplN(op, op.ImplN, in, params)
		for i, o := range outs {
			outs[i] = finish(op, o, in, loc)
		}
		return outs
	}
	return applyTraced(op, params, in, top, loc)
}

// finish sets the block mark of an op result, copying the header if the
// implementation returned one of its inputs.
func finish(op *Op, out *Tensor, in []*Tensor, loc *Local) *Tensor {
	if out == nil {
		panic(fmt.Sprintf("tensor: op %q returned nil", op.Name))
	}
	if slices.Contains(in, out) {
		out = out.shallow()
		out.axes = nil
	}
	if out.local == nil {
		out.local = loc
	}
	return out
}

// scan finds the innermost trace among the inputs, computes the union of
// block marks and reports whether an operand is a global placed tensor that
// op does not handle itself (then the placer computes it).
func scan(op *Op, in []*Tensor) (top *Trace, loc *Local, placed bool) {
	for _, x := range in {
		if x == nil {
			panic(fmt.Sprintf("tensor: op %q: nil *Tensor operand", op.Name))
		}
		if x.placeholder() {
			x.mustHaveData("tensor: op " + op.Name) // panics
		}
		if x.layout != nil && !op.Distributed {
			placed = true
		}
		if x.node != nil && (top == nil || x.node.trace.id > top.id) {
			top = x.node.trace
		}
		if x.local != nil {
			loc = unionLocal(op.Name, loc, x.local)
		}
	}
	return top, loc, placed
}

// applyCore computes op on inputs that may be traced by traces other than
// the one being recorded, returning outputs and the state for the VJP.
func applyCore(op *Op, params any, in []*Tensor) ([]*Tensor, any) {
	if op.ImplN != nil {
		top, loc, placed := scan(op, in)
		if placed {
			return applyPlaced(op, params, in, loc), nil
		}
		if top == nil {
			impl := op.ImplN
			if op.ImplVJP != nil {
				impl = op.ImplVJP
			}
			outs, state := callImplN(op, impl, in, params)
			for i, o := range outs {
				outs[i] = finish(op, o, in, loc)
			}
			return outs, state
		}
		var st any
		outs := applyTracedState(op, params, in, top, loc, &st)
		return outs, st
	}
	return []*Tensor{Apply(op, params, in...)}, nil
}

func applyTraced(op *Op, params any, in []*Tensor, top *Trace, loc *Local) []*Tensor {
	return applyTracedState(op, params, in, top, loc, nil)
}

func applyTracedState(op *Op, params any, in []*Tensor, top *Trace, loc *Local, stateOut *any) []*Tensor {
	// in belongs to the caller: copy it before substituting an operand.
	cloned := false
	set := func(i int, x *Tensor) {
		if !cloned {
			in = slices.Clone(in)
			cloned = true
		}
		in[i] = x
	}
	if top.capture != nil {
		for i, x := range in {
			if x.node != nil && x.node.trace != top && !x.TracedBy(top) {
				c := top.capture(x)
				if !c.TracedBy(top) {
					panic(fmt.Sprintf("tensor: capture of %v for op %q did not return a tensor of the capturing trace", x, op.Name))
				}
				set(i, c)
			}
		}
	}
	diff := op.differentiable()
	// Implicit pvary: a differentiable input that varies over fewer mesh
	// axes than the result is broadcast over the others; its cotangent must
	// then be summed over them.
	if diff && loc != nil && !op.HandlesVary {
		for i, x := range in {
			if x.dtype.IsFloat() && x.node != nil && x.node.trace == top && localMask(x) != loc.Mask {
				set(i, Apply(pvaryOp, loc, x))
			}
		}
	}
	n := &node{op: op, params: params, trace: top, state: nil}
	small := len(in) <= nodeInline
	var prim []*Tensor
	if small {
		prim = n.bufPrim[:len(in)]
	} else {
		prim = make([]*Tensor, len(in))
	}
	for i, x := range in {
		prim[i] = x.primalOf(top)
	}
	outs, state := applyCore(op, params, prim)
	if stateOut != nil {
		*stateOut = state
	}
	anyFloat := false
	for _, o := range outs {
		if o.dtype.IsFloat() {
			anyFloat = true
		}
	}
	if (!diff || !anyFloat) && !top.recordAll {
		// Non-differentiable: results are constants for every trace.
		for i, o := range outs {
			outs[i] = StopGradient(o)
		}
		return outs
	}
	n.seq, n.state, n.nout = top.seq.Add(1), state, len(outs)
	if small {
		n.inputs, n.ins = n.bufInputs[:len(in)], n.bufIns[:len(in)]
	} else {
		n.inputs, n.ins = make([]edge, len(in)), make([]*Tensor, len(in))
	}
	avals := 0
	newAval := func(x *Tensor) *Tensor {
		if avals < len(n.bufAvals) {
			a := &n.bufAvals[avals]
			avals++
			*a = Tensor{dtype: x.dtype, shape: x.shape, local: x.local, layout: abstractLayout(x.layout)}
			return a
		}
		return aval(x)
	}
	save := op.saveMask(params)
	for i, x := range in {
		if x.node != nil && x.node.trace == top {
			n.inputs[i] = edge{x.node, x.outIdx}
		}
		if save.input(i) {
			n.ins[i] = prim[i]
			prim[i].hold()
			if i < 64 && x.node != nil && x.node.trace == top && x.node.op != leafOp {
				n.interIns |= 1 << i
			}
		} else {
			n.ins[i] = newAval(prim[i])
		}
	}
	if top.recycle {
		n.results = outs
	}
	if top.recordAll {
		// Held until Remat has compiled the graph (releaseRecording).
		n.raw = slices.Clone(prim)
		n.rawOuts = outs
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
	// Only the inputs the VJP saves may stay reachable from the node.
	n.bufPrim = [nodeInline]*Tensor{}
	res := make([]*Tensor, len(outs))
	if len(outs) == 1 {
		n.outs, n.outAval = n.bufOut[0][:], n.bufOut[1][:]
	} else {
		n.outs, n.outAval = make([]*Tensor, len(outs)), make([]*Tensor, len(outs))
	}
	for i, o := range outs {
		n.outAval[i] = newAval(o)
		if save&SaveOutput != 0 {
			n.outs[i] = o
			o.hold()
		} else {
			n.outs[i] = n.outAval[i]
		}
		t := o.twin()
		t.node, t.outIdx, t.primal = n, i, o
		res[i] = t
	}
	return res
}

// Backward runs the backward pass of trace tr: given the outputs ys (traced
// by tr) and their cotangents, it returns the cotangent of each tensor in
// wrt (zeros for one the outputs do not depend on). Nodes run in the reverse
// of the order they were recorded in, so SPMD devices issue the collectives
// of their backward passes in the same order.
//
// Unless retain is set, Backward frees the residuals of the nodes it visits
// as it goes, and a second backward pass over the same graph panics.
//
// A cotangent that the backward pass computed itself carries the logical
// axes (WithLogicalAxes) of its wrt value, so that naming the gradient
// like its parameter needs no second header over its storage.
func Backward(tr *Trace, ys, cots, wrt []*Tensor, retain bool) []*Tensor {
	if len(ys) != len(cots) {
		panic(fmt.Sprintf("tensor.Backward: %d outputs but %d cotangents", len(ys), len(cots)))
	}
	var nodes []*node
	seen := map[*node]bool{}
	var stack []*node
	push := func(n *node) {
		if n != nil && !seen[n] {
			seen[n] = true
			stack = append(stack, n)
		}
	}
	// A value may also be traced by inner traces: use tr's own level.
	ys = slices.Clone(ys)
	for i, y := range ys {
		if l := y.levelOf(tr); l != nil {
			ys[i] = l
			push(l.node)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		nodes = append(nodes, n)
		for _, e := range n.inputs {
			push(e.n)
		}
	}
	slices.SortFunc(nodes, func(a, b *node) int {
		switch {
		case a.seq > b.seq:
			return -1
		case a.seq < b.seq:
			return 1
		}
		return 0
	})
	grads := make(map[*node][]*Tensor, len(nodes))
	// The cotangent slots of every node, cut from one allocation.
	total := 0
	for _, n := range nodes {
		total += n.nout
	}
	slots := make([]*Tensor, total)
	pass := &backwardPass{}
	// add accumulates cotangent g of output i of n, produced by the VJP
	// of node from (nil: the seed).
	add := func(n *node, i int, g *Tensor, from *node) {
		want := n.outAval[i]
		if !sameShape(g.shape, want.shape) || g.dtype != want.dtype {
			who := "the seed"
			if from != nil {
				who = "VJP of " + from.op.Name
			}
			panic(fmt.Sprintf("tensor.Backward: %s produced cotangent %v for %v", who, g, want))
		}
		gs := grads[n]
		if gs == nil {
			// Once per node: a node's slots are deleted only after its
			// VJP ran, when every node that feeds it a cotangent has run.
			gs, slots = slots[:n.nout:n.nout], slots[n.nout:]
			grads[n] = gs
		}
		switch {
		case gs[i] == nil:
			gs[i] = g
		case pass.writable(gs[i]) && accumulable(gs[i], g):
			addInto(gs[i], g)
			pass.drop(g)
		default:
			sum := Add(gs[i], g)
			pass.claimNew(sum, gs[i], g)
			pass.drop(gs[i])
			pass.drop(g)
			gs[i] = sum
		}
	}
	for i, y := range ys {
		if y.node != nil && y.node.trace == tr && cots[i] != nil {
			add(y.node, y.outIdx, cots[i], nil)
		}
	}
	wrt = slices.Clone(wrt)
	keep := map[*node]bool{}
	for i, w := range wrt {
		if l := w.levelOf(tr); l != nil {
			wrt[i] = l
			keep[l.node] = true
		}
	}
	// The values RecycleIntermediates must not donate: the outputs and
	// the values gradients are asked for.
	var spare map[*Tensor]bool
	var dead []*Tensor
	if tr.recycle && !retain {
		spare = make(map[*Tensor]bool, len(ys)+len(wrt))
		for _, y := range ys {
			if y.node != nil && y.node.trace == tr {
				spare[y.primal] = true
			}
		}
		for _, w := range wrt {
			if w.node != nil && w.node.trace == tr {
				spare[w.primal] = true
			}
		}
	}
	for _, n := range nodes {
		gs := grads[n]
		if gs == nil || n.op == leafOp || !n.op.differentiable() {
			continue
		}
		if n.freed {
			panic(fmt.Sprintf("tensor.Backward: the graph through op %q was already used by a backward pass that did not retain it", n.op.Name))
		}
		donated := pass.donate(n, gs, keep[n])
		res, widened := halfVJP(n, gs)
		switch {
		case widened: // bfloat16/float16 operands (dtype_half.go)
		case n.op.VJPN != nil:
			res = n.op.VJPN(gs, n.ins, n.outs, n.params, n.state)
		case n.op.VJPNeed != nil:
			var need uint64
			for i, e := range n.inputs {
				if e.n != nil {
					need |= needBit(i)
				}
			}
			res = n.op.VJPNeed(gs[0], n.ins, n.outs[0], n.params, need)
		default:
			res = n.op.VJP(gs[0], n.ins, n.outs[0], n.params)
		}
		if len(res) != len(n.inputs) {
			panic(fmt.Sprintf("tensor.Backward: VJP of %q returned %d cotangents for %d inputs", n.op.Name, len(res), len(n.inputs)))
		}
		pass.settle(n, gs, res, donated, keep[n])
		for i, e := range n.inputs {
			if e.n != nil && res[i] != nil {
				add(e.n, e.out, res[i], n)
			}
		}
		if !keep[n] {
			delete(grads, n)
			for _, g := range gs {
				if !slices.Contains(res, g) {
					pass.dropConsumed(n, g)
				}
			}
		}
		if !retain {
			dead = n.releaseResiduals(tr.recycle, spare, dead)
			n.free()
		}
	}
	out := make([]*Tensor, len(wrt))
	for i, w := range wrt {
		if w.node != nil && w.node.trace == tr {
			if gs := grads[w.node]; gs != nil && gs[w.outIdx] != nil {
				g0 := gs[w.outIdx]
				g := settle(g0)
				if g != g0 && pass.owns(g0) && countsHeaders(g) && !slices.Contains(gs, g) {
					// A placed gradient with its pending sums done is
					// a new header: it takes the place of the one it
					// reduced, which is dead.
					pass.drop(g0)
					g.cot = pass
					gs[w.outIdx] = g // for a value asked for twice
				}
				if ax := w.axes; ax != nil && g.axes == nil && len(ax) == len(g.shape) && pass.owns(g) && !slices.Contains(out[:i], g) {
					// A cotangent the pass made is seen by no one yet: it
					// takes the logical axes of its value in place, so
					// that callers naming gradients (autodiff's trees) need
					// no second header over its storage.
					g.axes = slices.Clone(ax)
				}
				out[i] = g
				continue
			}
		}
		z := ZerosLike(w)
		z.local = w.local
		out[i] = z
	}
	for _, x := range dead {
		if !slices.Contains(out, x) {
			Donate(x)
		}
	}
	return out
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
		Name:       "name",
		NativeHalf: true, // an identity: half data passes as it is
		Impl:       func(in []*Tensor, _ any) *Tensor { return in[0].shallow() },
		VJP: func(g *Tensor, _ []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{g}
		},
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

// free drops n's references to its residuals and state, once they are
// released: the node can take part in no backward pass any more.
func (n *node) free() {
	n.ins, n.outs, n.state, n.freed = nil, nil, nil, true
	n.bufIns, n.bufOut[0] = [nodeInline]*Tensor{}, [1]*Tensor{}
}

// releaseResiduals drops the node's hold on the values it saved. With
// recycle it appends to dead those that are untraced intermediates of its
// trace (its outputs, inputs computed by other nodes), except spare:
// Backward donates them once every node has run (a value may be saved by
// several nodes).
func (n *node) releaseResiduals(recycle bool, spare map[*Tensor]bool, dead []*Tensor) []*Tensor {
	for i, x := range n.ins {
		if x == nil {
			continue
		}
		x.release()
		if recycle && i < 64 && n.interIns&(1<<i) != 0 && x.node == nil && !spare[x] {
			dead = append(dead, x)
		}
	}
	for _, o := range n.outs {
		if o != nil {
			o.release()
		}
	}
	if recycle {
		for _, o := range n.results {
			if o.node == nil && !spare[o] {
				dead = append(dead, o)
			}
		}
	}
	n.results = nil
	return dead
}
