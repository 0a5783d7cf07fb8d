package tensor

import (
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/gonox/gonox/tensor/internal/vec"
)

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
	// A value may also be traced by inner traces: use tr's own level.
	ys, wrt = atLevel(tr, ys), atLevel(tr, wrt)

	// The nodes ys depend on, latest first.
	nodes := reachable(tr, ys)
	b := backward{tr: tr, retain: retain, pass: &backwardPass{}, nodes: nodes}
	if !b.order.sort(nodes) {
		for i, n := range nodes {
			n.slot.Store(int32(i))
		}
	}
	recycle := tr.recycle && !retain
	nspare := 0
	if recycle {
		nspare = len(ys) + len(wrt)
	}
	spareBuf := b.reserve(nodes, recycle, nspare)
	b.gs = make([]nodeSlots, len(nodes))
	for i, y := range ys {
		if y.node != nil && y.node.trace == tr && cots[i] != nil {
			b.add(y.node, int(y.outIdx), cots[i], nil)
		}
	}
	// kept: the nodes whose cotangents are asked for (they stay in their
	// slots); spare: the values RecycleIntermediates must not donate.
	for _, w := range wrt {
		if k := b.index(w); k >= 0 {
			b.gs[k].kept = true
		}
	}
	var spare valueSet
	if recycle {
		spare = spareValues(spareBuf, tr, ys, wrt)
		// The forward values no VJP saved are dead now: their storage
		// serves the backward pass's own allocations.
		for _, n := range nodes {
			for _, o := range n.results() {
				if o.node == nil && !spare.has(o) {
					b.dead = donateOrDefer(o, b.dead)
				}
			}
		}
	}
	finalAfter, f := b.finalCotangents(wrt), 0
	for i := range nodes {
		b.visit(spare, i)
		for ; f < len(finalAfter) && finalAfter[f].after == i; f++ {
			w := finalAfter[f].wrt
			if gs := b.gs[b.index(wrt[w])].gs; gs != nil && gs[wrt[w].outIdx] != nil {
				tr.final(w, gs[wrt[w].outIdx])
			}
		}
	}
	out := b.gradients(wrt)
	if b.pass.taken > 0 {
		cotangentReuses.Add(b.pass.taken)
	}
	b.dropUnread(out)
	for _, x := range b.dead {
		if !slices.Contains(out, x) {
			Donate(x)
		}
	}
	if tr.recycle && !retain {
		paceAfterBackward()
	}
	return out
}

// finalCotangent says that the cotangent of wrt[wrt] is final once node
// after (an index into the pass's nodes) has run: the last of its
// consumers in the visiting order.
type finalCotangent struct{ after, wrt int }

// finalCotangents returns, when the trace has an OnFinalCotangent hook,
// the wrt values whose cotangents become final during the pass, by the
// node after which they do (in the visiting order; wrt order for one
// node). The last consumer of each node is found by index, not in a map:
// the pass runs once per step on each device.
func (b *backward) finalCotangents(wrt []*Tensor) []finalCotangent {
	if b.tr.final == nil {
		return nil
	}
	lastUse := make([]int32, len(b.nodes))
	for k := range lastUse {
		lastUse[k] = -1
	}
	for i, n := range b.nodes {
		for _, e := range n.inputs {
			if e.n != nil {
				if k := b.indexOf(e.n); k >= 0 {
					lastUse[k] = int32(i)
				}
			}
		}
	}
	var out []finalCotangent
	seen := map[*Tensor]bool{}
	for w, x := range wrt {
		if x.node == nil || x.node.trace != b.tr || seen[x] {
			continue
		}
		seen[x] = true
		if k := b.indexOf(x.node); k >= 0 && lastUse[k] >= 0 {
			out = append(out, finalCotangent{int(lastUse[k]), w})
		}
	}
	slices.SortStableFunc(out, func(p, q finalCotangent) int { return cmp.Compare(p.after, q.after) })
	return out
}

// backward is the state of one run of Backward beyond its maps (which
// Backward passes to its phases, so that they stay on its stack): the
// cotangent slots, the pass that owns cotangents, and the values
// RecycleIntermediates frees once every node has run.
type backward struct {
	tr     *Trace
	retain bool
	// nodes are the nodes the pass visits, latest first, and gs their
	// cotangent slots, index for index.
	nodes []*node
	gs    []nodeSlots
	order nodeOrder
	// slots holds the cotangent slots of the nodes not reached yet, cut
	// from one allocation.
	slots []*Tensor
	pass  *backwardPass
	dead  []*Tensor
	// ptrBlock and phBlock are the unused rest of the blocks vjpArgs
	// cuts argument slices and placeholders from.
	ptrBlock []*Tensor
	phBlock  []Tensor
}

// atLevel returns xs with each value traced by tr (at any level)
// replaced by its level of tr, in a copy if any is replaced.
func atLevel(tr *Trace, xs []*Tensor) []*Tensor {
	cloned := false
	for i, x := range xs {
		if l := x.levelOf(tr); l != nil && l != x {
			if !cloned {
				xs, cloned = slices.Clone(xs), true
			}
			xs[i] = l
		}
	}
	return xs
}

// outputs returns the number of outputs of the nodes.
func outputs(nodes []*node) int {
	total := 0
	for _, n := range nodes {
		total += int(n.nout)
	}
	return total
}

// nodeSlots are the cotangent slots of a node (nil until a cotangent
// reaches it; deleted once its VJP ran, unless kept) and whether they are
// asked for (kept: they stay).
type nodeSlots struct {
	gs   []*Tensor
	kept bool
}

// index returns the index in b.nodes of the node of x's level of b's
// trace (atLevel), -1 if it has none or the pass does not visit it.
func (b *backward) index(x *Tensor) int {
	if x.node == nil || x.node.trace != b.tr {
		return -1
	}
	return b.indexOf(x.node)
}

// orderSpan bounds the span of sequence numbers nodeOrder indexes.
const orderSpan = 64

// nodeOrder indexes a pass's nodes by sequence number when the numbers
// span fewer than orderSpan (a small graph's): index[seq-lo] is the
// node's place in the pass's list, -1 where no node has that number.
type nodeOrder struct {
	dense bool
	lo    uint64
	index [orderSpan]int8
}

// sort sorts nodes by sequence number, latest first, and reports whether
// o indexes them. The numbers are distinct; when they span fewer than
// orderSpan, each node goes to its number's place in an array on the
// stack and back in order, and o keeps each node's index: a comparison
// sort's swaps stored two pointers each and the nodes' slot hints were an
// atomic store each (an XCHG, which waits for the store buffer to drain),
// and while the collector marks, every pointer store into the heap takes
// a write barrier. Otherwise nodes are sorted by comparison, and the
// caller sets their slot hints.
func (o *nodeOrder) sort(nodes []*node) bool {
	if len(nodes) == 0 {
		return false
	}
	lo, hi := nodes[0].seq, nodes[0].seq
	for _, n := range nodes[1:] {
		lo, hi = min(lo, n.seq), max(hi, n.seq)
	}
	if hi-lo >= orderSpan {
		slices.SortFunc(nodes, func(a, b *node) int { return cmp.Compare(b.seq, a.seq) })
		return false
	}
	var at [orderSpan]*node
	for _, n := range nodes {
		at[n.seq-lo] = n
	}
	o.dense, o.lo = true, lo
	k := 0
	for i := orderSpan - 1; i >= 0; i-- {
		o.index[i] = -1
		if n := at[i]; n != nil {
			if nodes[k] != n {
				nodes[k] = n
			}
			o.index[i] = int8(k)
			k++
		}
	}
	return true
}

// indexOf returns the index of n in b.nodes, -1 if it is not there: the
// node's slot hint if it holds, else by binary search.
func (b *backward) indexOf(n *node) int {
	if b.order.dense {
		if d := n.seq - b.order.lo; d < orderSpan {
			if k := int(b.order.index[d]); k >= 0 && b.nodes[k] == n {
				return k
			}
		}
		return -1
	}
	if k := int(n.slot.Load()); k < len(b.nodes) && b.nodes[k] == n {
		return k
	}
	k, ok := slices.BinarySearchFunc(b.nodes, n.seq, func(m *node, seq uint64) int { return cmp.Compare(seq, m.seq) })
	if !ok || b.nodes[k] != n {
		return -1
	}
	return k
}

// valueSet is a set of tensors, sorted by address for has when it holds
// more than valueSetScan (a step's parameters and loss, typically fewer,
// are scanned: a sort and a binary search through a comparison function
// cost more there).
type valueSet []*Tensor

// valueSetScan is the size up to which a valueSet is scanned.
const valueSetScan = 16

// has reports whether x is in s.
func (s valueSet) has(x *Tensor) bool {
	if len(s) <= valueSetScan {
		return slices.Contains(s, x)
	}
	_, ok := slices.BinarySearchFunc(s, x, compareAddr)
	return ok
}

// compareAddr orders tensors by address (the collector does not move
// heap objects).
func compareAddr(a, b *Tensor) int {
	return cmp.Compare(uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b)))
}

// spareValues returns the values RecycleIntermediates must not donate:
// the outputs ys and the values wrt gradients are asked for, in buf's
// storage (of capacity len(ys)+len(wrt)).
func spareValues(buf []*Tensor, tr *Trace, ys, wrt []*Tensor) valueSet {
	s := valueSet(buf[:0])
	for _, list := range [2][]*Tensor{ys, wrt} {
		for _, x := range list {
			if x.node != nil && x.node.trace == tr {
				s = append(s, x.primal)
			}
		}
	}
	if len(s) > valueSetScan {
		slices.SortFunc(s, compareAddr)
	}
	return s
}

// add accumulates cotangent g of output i of n, produced by the VJP of
// node from (nil: the seed), into n's slots.
func (b *backward) add(n *node, i int, g *Tensor, from *node) {
	want := n.outAval(i)
	if !sameShape(g.shape, want.shape) || g.dtype != want.dtype {
		who := "the seed"
		if from != nil {
			who = "VJP of " + from.op.Name
		}
		panic(fmt.Sprintf("tensor.Backward: %s produced cotangent %v for %v", who, g, want.placeholder()))
	}
	slot := &b.gs[b.indexOf(n)]
	gs := slot.gs
	if gs == nil {
		// Once per node: a node's slots are deleted only after its VJP
		// ran, when every node that feeds it a cotangent has run.
		k := int(n.nout)
		gs, b.slots = b.slots[:k:k], b.slots[k:]
		slot.gs = gs
	}
	p := b.pass
	switch {
	case gs[i] == nil:
		gs[i] = g
	case p.writable(gs[i]) && accumulable(gs[i], g):
		addInto(gs[i], g)
		p.drop(g)
	default:
		sum := Add(gs[i], g)
		p.claimNew(sum, gs[i], g)
		p.drop(gs[i])
		p.drop(g)
		gs[i] = sum
	}
}

// visit runs the VJP of node k on the cotangents its outputs received,
// adds the results to its inputs' slots and drops what is dead. Unless the
// node's slots are kept (asked for), they are deleted.
func (b *backward) visit(spare valueSet, k int) {
	n, gs, kept := b.nodes[k], b.gs[k].gs, b.gs[k].kept
	if gs == nil || n.op == leafOp || !n.op.differentiable() {
		return
	}
	if n.freed {
		panic(fmt.Sprintf("tensor.Backward: the graph through op %q was already used by a backward pass that did not retain it", n.op.Name))
	}
	donated := b.pass.donate(n, gs, kept)
	ins, outs := b.vjpArgs(n)
	res := callVJP(n.op, n.params, n.state, gs, ins, outs, n.need())
	if len(res) != len(n.inputs) {
		panic(fmt.Sprintf("tensor.Backward: VJP of %q returned %d cotangents for %d inputs", n.op.Name, len(res), len(n.inputs)))
	}
	b.pass.settle(n, gs, res, donated, kept)
	// n's cotangents first: one that n's VJP passed through to other
	// slots as well may then be the sole holder of its storage when its
	// results are added to those slots (accumulated in place).
	if !kept {
		b.gs[k].gs = nil
		for _, g := range gs {
			if !slices.Contains(res, g) {
				b.pass.dropConsumed(n, g)
			}
		}
	}
	for i, e := range n.inputs {
		if e.n != nil && res[i] != nil {
			b.add(e.n, e.out, res[i], n)
		}
	}
	if !b.retain {
		b.dead = n.releaseResiduals(b.tr.recycle, spare, b.dead)
		n.free()
	}
}

// vjpArgs returns the residuals of n for its VJP: the values it saved,
// shape-only placeholders for the others. The placeholders and the
// slices are cut from blocks the pass allocates once (reserve), never
// reused: a VJP may keep what it is given.
func (b *backward) vjpArgs(n *node) (ins, outs []*Tensor) {
	nin := len(n.ins)
	if !slices.Contains(n.ins, nil) && !slices.Contains(n.outs, nil) {
		return n.ins, n.outs
	}
	args := b.ptrs(nin + len(n.outs))
	for i := range args {
		var x *Tensor
		if i < nin {
			x = n.ins[i]
		} else {
			x = n.outs[i-nin]
		}
		if x == nil {
			x = b.placeholder(&n.avals[i])
		}
		args[i] = x
	}
	return args[:nin:nin], args[nin:]
}

// reserve allocates the cotangent slots of nodes, the room for the dead
// values if the pass recycles, the blocks vjpArgs cuts from for the
// placeholders of nodes and nspare pointers for spareValues, which it
// returns: the pointers in one allocation, the headers in another (rather
// than a few at a time).
func (b *backward) reserve(nodes []*node, recycle bool, nspare int) []*Tensor {
	ph, ptr := 0, 0
	for _, n := range nodes {
		if n.op == leafOp || !n.op.differentiable() {
			continue
		}
		k := 0
		for _, set := range [2][]*Tensor{n.ins, n.outs} {
			for _, x := range set {
				if x == nil {
					k++
				}
			}
		}
		if k > 0 {
			ph += k
			ptr += len(n.ins) + len(n.outs)
		}
	}
	nslots, ndead := outputs(nodes), 0
	if recycle {
		ndead = len(nodes)
	}
	buf := make([]*Tensor, nslots+ndead+nspare+ptr)
	b.slots = buf[:nslots:nslots]
	b.dead = buf[nslots : nslots : nslots+ndead]
	spare := buf[nslots+ndead : nslots+ndead+nspare : nslots+ndead+nspare]
	b.ptrBlock = buf[nslots+ndead+nspare:]
	if ph > 0 {
		b.phBlock = make([]Tensor, ph)
	}
	return spare
}

// ptrs returns k pointer slots cut from the pass's current block.
func (b *backward) ptrs(k int) []*Tensor {
	if len(b.ptrBlock) < k {
		b.ptrBlock = make([]*Tensor, max(k, 16))
	}
	p := b.ptrBlock[:k:k]
	b.ptrBlock = b.ptrBlock[k:]
	return p
}

// placeholder returns a placeholder for a, cut from the pass's current
// block of headers.
func (b *backward) placeholder(a *avalRec) *Tensor {
	if len(b.phBlock) == 0 {
		b.phBlock = make([]Tensor, 8)
	}
	t := &b.phBlock[0]
	b.phBlock = b.phBlock[1:]
	// t is fresh (zero): store only what is set (a whole header's
	// assignment stored every pointer word, each a write barrier while
	// the collector marks).
	t.dtype = a.dtype
	if a.shape != nil {
		t.shape = a.shape
	}
	if a.ext != nil {
		t.ext = a.ext
	}
	return t
}

// dropUnread drops the cotangents left in slots that no VJP read and no
// caller asked for (those of leaves not in wrt, of non-differentiable
// ops): the pass owns some of them, and they are dead.
func (b *backward) dropUnread(out []*Tensor) {
	for _, s := range b.gs {
		if s.kept {
			continue
		}
		for _, g := range s.gs {
			if g != nil && !slices.Contains(out, g) {
				b.pass.drop(g)
			}
		}
	}
}

// need returns the need mask of n's VJP: the inputs traced by its trace.
func (n *node) need() uint64 {
	var need uint64
	for i, e := range n.inputs {
		if e.n != nil {
			need |= needBit(i)
		}
	}
	return need
}

// gradients returns the cotangent of each wrt value (at tr's level),
// placed ones settled, zeros for values the outputs do not depend on.
func (b *backward) gradients(wrt []*Tensor) []*Tensor {
	out := make([]*Tensor, len(wrt))
	for i, w := range wrt {
		var gs []*Tensor
		if k := b.index(w); k >= 0 {
			gs = b.gs[k].gs
		}
		if gs == nil || gs[w.outIdx] == nil {
			if productsTaken(w) {
				continue // nil: its products' cotangents went elsewhere
			}
			z := ZerosLike(w)
			z.setLocal(w.local())
			out[i] = z
			continue
		}
		g0 := gs[w.outIdx]
		g := settle(g0)
		if g != g0 && b.pass.owns(g0) && countsHeaders(g) && !slices.Contains(gs, g) {
			// A placed gradient with its pending sums done is a new
			// header: it takes the place of the one it reduced, which is
			// dead.
			b.pass.drop(g0)
			g.cot = b.pass
			gs[w.outIdx] = g // for a value asked for twice
		}
		if ax := w.axes(); ax != nil && g.axes() == nil && len(ax) == len(g.shape) && b.pass.owns(g) && !slices.Contains(out[:i], g) {
			// A cotangent the pass made is seen by no one yet: it takes
			// the logical axes of its value in place, so that callers
			// naming gradients (autodiff's trees) need no second header
			// over its storage.
			g.setAxes(ax) // names are never changed once set: shared
		}
		out[i] = g
	}
	return out
}

// Reusing cotangent buffers.
//
// A backward pass allocates a cotangent for nearly every node, most of
// them dead as soon as the node before has used them. Where the pass owns
// a cotangent outright, it reuses its storage instead of allocating:
//
//   - accumulating into an owned cotangent adds in place, and
//   - an owned cotangent is donated to the VJP of an op that consumes it
//     once through an elementwise backward kernel (ReLU, GELU, BiasAct,
//     ...: Traits declaring TakesCotangent), which then writes its result
//     over it (takeDonated).
//
// Ownership is decided conservatively, per pass, and only at the
// outermost level (untraced cotangents, untraced residuals): a cotangent is
// owned if it is a new tensor returned by the VJP of an op whose Traits
// declare FreshVJP (its VJP results have storage of their own: matmul, the
// activations, BiasAct, the binary elementwise ops, transpose, softmax)
// or a sum the pass made, appears in exactly one accumulation slot, and
// shares its storage with no other cotangent, operand or result of that
// VJP. Seeds, results of other ops and anything the caller can see are
// never owned, so the values are bit for bit those of a pass that
// allocates everything; tests check this. An owned cotangent is donated
// once consumed only if the consuming VJP ran untraced: under an outer
// trace (gradients of gradients) that VJP's ops may have saved it.
//
// A placed cotangent (package shard) is owned if the VJP of a Distributed
// op returned it as a new header, computed untraced; the pass only donates
// it once dead (its layout counts the headers over its blocks, see
// BlockHolder), never writes into it.

// cotangentReuse switches the reuse off (tests compare both ways), and
// cotangentReuses counts in-place accumulations and taken donations.
var (
	cotangentReuse  = true
	cotangentReuses atomic.Int64
)

// backwardPass is the identity of one Backward call, which tensors it owns
// point to (Tensor.cot), and the cotangent it has donated to the VJP
// running now, if any.
type backwardPass struct {
	donated *Tensor
	// extra counts, for an owned cotangent that a VJP passed through to
	// several accumulation slots (Add's, to both operands), the slots
	// beyond one that still hold it: each consumer's drop takes one, and
	// the last donates it. Such a cotangent is not writable meanwhile.
	extra map[*Tensor]int
	// taken counts the donations VJPs took, added to cotangentReuses at
	// the end of the pass (one atomic add rather than one after each
	// VJP: an atomic read-modify-write waits for the VJP's stores).
	taken int64
}

// owns reports whether the pass owns t: it may donate t once dead.
func (p *backwardPass) owns(t *Tensor) bool { return cotangentReuse && t.cot == p }

// writable reports whether the pass owns t's storage outright: it may
// also write into it (accumulate in place, hand it to a kernel).
func (p *backwardPass) writable(t *Tensor) bool {
	return p.owns(t) && !t.cotShared && p.extra[t] == 0
}

// drop donates t (see Donate) if the pass owns it: a cotangent that died
// inside the backward pass, which the caller never saw.
func (p *backwardPass) drop(t *Tensor) {
	if t != nil && p.owns(t) {
		if k := p.extra[t]; k > 0 {
			// Another slot still holds it.
			if k == 1 {
				delete(p.extra, t)
			} else {
				p.extra[t] = k - 1
			}
			return
		}
		t.cot, t.cotShared = nil, false
		Donate(t)
	}
}

// dropConsumed drops t after the VJP of n has consumed it. A shard.Map
// block is dropped only if that VJP is one of the FreshVJP ops' (matmul,
// the activations, BiasAct), which compute on the device alone, or is
// declared SyncVJP (package shard's synchronous collectives): another
// op's VJP may start an asynchronous collective, whose operand the other
// devices may still be reading after this one has returned from it.
//
// Any cotangent is dropped only if the VJP of n ran untraced (no operand
// or result of n is traced): otherwise an op of that VJP may have been
// recorded by an outer trace (gradients of gradients) that saved t, an
// untraced cotangent, as a residual of its own.
func (p *backwardPass) dropConsumed(n *node, t *Tensor) {
	if t == nil || !doneWith(n.op, t) || !untracedVJP(n) {
		return
	}
	p.drop(t)
}

// doneWith reports whether the VJP of op has finished reading its
// cotangent t when it returns: t is not a shard.Map block, or op's VJP
// computes on the device alone (FreshVJP) or is synchronous (SyncVJP).
func doneWith(op *Op, t *Tensor) bool {
	return t.local() == nil || op.Traits.Reuse.Has(FreshVJP) || op.Traits.Placement.Has(SyncVJP)
}

// untracedVJP reports whether no operand or result of n is traced: its
// VJP's ops then run untraced, and no trace saves what they read.
func untracedVJP(n *node) bool {
	for _, x := range n.ins {
		if x != nil && x.node != nil {
			return false
		}
	}
	for _, x := range n.outs {
		if x != nil && x.node != nil {
			return false
		}
	}
	return true
}

// hostVJP reports whether no operand or result of n is a value of a Vmap
// or forward-mode level: such an op's rule (its tangent, say) may read
// the cotangent after the kernel has written over it.
func hostVJP(n *node) bool {
	for _, x := range n.ins {
		if x != nil && x.xv() != nil {
			return false
		}
	}
	for _, x := range n.outs {
		if x != nil && x.xv() != nil {
			return false
		}
	}
	return true
}

// plainF32 reports whether t is untraced, unsharded float32 data with
// storage of its own to speak of.
func plainF32(t *Tensor) bool {
	return t.dtype == Float32 && t.node == nil && t.layout() == nil && len(t.f32()) > 0
}

// storage identifies t's float32 buffer (nil if it has none).
func storage(t *Tensor) *float32 {
	if t == nil || len(t.f32()) == 0 {
		return nil
	}
	return unsafe.SliceData(t.f32())
}

// claimNew takes ownership of sum, a new result computed from a and b, if
// its storage is its own (for a placed sum: if it is a new header).
func (p *backwardPass) claimNew(sum, a, b *Tensor) {
	if cotangentReuse && plainF32(sum) && storage(sum) != storage(a) && storage(sum) != storage(b) {
		sum.cot = p
	}
	if cotangentReuse && countsHeaders(sum) && sum != a && sum != b {
		sum.cot = p
	}
}

// countsHeaders reports whether t is an untraced placed tensor whose
// layout counts the headers over it (BlockHolder): donating t then never
// frees blocks that another header, layout or caller still reaches, so the
// pass may donate a placed cotangent that is a header of its own.
func countsHeaders(t *Tensor) bool {
	if t == nil || t.node != nil || t.layout() == nil {
		return false
	}
	_, ok := t.layout().(BlockHolder)
	return ok
}

// placedOwnable reports whether r, a cotangent the VJP of n returned for
// the cotangents gs, is a placed header the pass may own: n is a
// Distributed op (package shard's, whose VJPs return new results computed
// by propagated ops, or their own cotangent) and r is a header that VJP
// made (madeBy). Placed cotangents are never accumulated in place nor
// donated to a kernel; owning one only lets the pass donate it once dead.
func placedOwnable(n *node, gs []*Tensor, r *Tensor) bool {
	return cotangentReuse && n.op.distributed() && countsHeaders(r) && madeBy(n, gs, r)
}

// syncOwnable reports whether r, a cotangent the VJP of n returned for the
// cotangents gs, is a shard.Map block the pass may own to donate once dead
// (never to write into: a collective's result is read by the other
// devices too): n is declared SyncVJP and r is an untraced header that VJP
// made (madeBy). Donating it drops this device's hold on the storage
// alone.
func syncOwnable(n *node, gs []*Tensor, r *Tensor) bool {
	return cotangentReuse && n.op.Traits.Placement.Has(SyncVJP) && r.node == nil && r.layout() == nil && r.local() != nil && madeBy(n, gs, r)
}

// batchOwnable reports whether r, a cotangent the VJP of n returned for
// the cotangents gs, is a value inside Vmap the pass may own to donate
// once dead (never to write into: its data is the batch behind it): n is
// declared FreshVJP, r is a header that VJP made (madeBy), and the batch
// behind r is r's alone (xval.owned), so that donating r donates the
// batch (a vmapped gradient's cotangents recycled as outside Vmap).
func batchOwnable(n *node, gs []*Tensor, r *Tensor) bool {
	return cotangentReuse && n.op.Traits.Reuse.Has(FreshVJP) && r.node == nil && r.xv() != nil && r.xv().tan == nil &&
		r.xv().owned.Load() && madeBy(n, gs, r)
}

// madeBy reports whether r is a header the VJP of n made for the
// cotangents gs: the VJP ran untraced, with untraced cotangents (so no
// outer trace saved r), and r is none of gs nor of n's operands and
// results.
func madeBy(n *node, gs []*Tensor, r *Tensor) bool {
	if !untracedVJP(n) || slices.Contains(n.ins, r) || slices.Contains(n.outs, r) {
		return false
	}
	for _, g := range gs {
		if g != nil && (g.node != nil || g == r) {
			return false
		}
	}
	return true
}

// firstAdded returns the index of the first result in res that is r and
// goes to a slot (added).
func firstAdded(res []*Tensor, r *Tensor, added func(int) bool) int {
	for j, q := range res {
		if q == r && added(j) {
			return j
		}
	}
	return -1
}

// viewOfOwned reports whether r, a result of the VJP of n for the
// cotangents gs, is a new header over the storage of a cotangent in gs that
// the pass owns outright and drops once n has consumed it (n is not kept,
// and its VJP ran untraced), over no operand or result of n and shared
// with no other result: the pass may then own r as it owned that
// cotangent.
func viewOfOwned(p *backwardPass, n *node, gs, res []*Tensor, r *Tensor, kept bool) bool {
	if kept || !plainF32(r) || r.rec == nil || !untracedVJP(n) {
		return false
	}
	var src *Tensor
	for _, g := range gs {
		if g != nil && g.rec == r.rec {
			if src != nil || g == r || !p.writable(g) || !plainF32(g) {
				return false
			}
			src = g
		}
	}
	if src == nil {
		return false
	}
	for _, q := range res {
		if q != nil && q != r && q.rec == r.rec {
			return false
		}
	}
	for _, x := range n.ins {
		if x != nil && x.rec == r.rec {
			return false
		}
	}
	for _, x := range n.outs {
		if x != nil && x.rec == r.rec {
			return false
		}
	}
	return true
}

// accumulable reports whether g can be added into a in place: same dtype,
// length and shard.Map mark, both untraced host data.
func accumulable(a, g *Tensor) bool {
	return plainF32(a) && plainF32(g) && a.local() == g.local() && len(a.f32()) == len(g.f32())
}

// addInto adds g to dst elementwise, in place: the bits of Add(dst, g).
func addInto(dst, g *Tensor) {
	cotangentReuses.Add(1)
	d, s := dst.f32(), g.f32()
	if serial(len(d)*costCheap, isLocal(dst, g)) {
		vec.AddVV(d, d, s)
		return
	}
	parallelFor(len(d), costCheap, 8, false, func(lo, hi int) { vec.AddVV(d[lo:hi], d[lo:hi], s[lo:hi]) })
}

// donate offers the cotangent of node n to its VJP if the op consumes it
// through an overwriting kernel and the pass owns it, and returns it (nil
// if not offered). Only at the outermost level: the VJP's ops must not be
// traced, or the donated buffer could end up in a graph.
func (p *backwardPass) donate(n *node, gs []*Tensor, kept bool) *Tensor {
	if !n.op.Traits.Reuse.Has(TakesCotangent) || kept || len(gs) != 1 || gs[0] == nil || !p.writable(gs[0]) || !untracedVJP(n) || !hostVJP(n) {
		return nil
	}
	p.donated = gs[0]
	return gs[0]
}

// takeDonated returns a new header over x's storage if the backward pass
// running has donated x to the op being evaluated, and nil otherwise. The
// op's kernel must allow its output to be x.
func takeDonated(x *Tensor) *Tensor {
	p := x.cot
	if p == nil || p.donated != x {
		return nil
	}
	p.donated = nil
	x.hold()
	return &Tensor{dtype: x.dtype, shape: x.shape, data: x.data, rec: x.rec}
}

// takeDonatedOver reports whether the backward pass running has donated x
// to the op being evaluated, and if so takes the donation for the op to
// write over x itself (see applyBwdOver): the op must not return x.
func takeDonatedOver(x *Tensor) bool {
	p := x.cot
	if p == nil || p.donated != x {
		return false
	}
	p.donated = nil
	return true
}

// settle decides, after the VJP of n returned res for the cotangents gs,
// which results the pass owns. donated is the cotangent offered to the VJP
// (nil if none); kept reports that n's cotangents stay in their slots.
func (p *backwardPass) settle(n *node, gs, res []*Tensor, donated *Tensor, kept bool) {
	taken := donated != nil && p.donated == nil
	p.donated = nil
	if taken {
		p.taken++
	}
	if !cotangentReuse {
		return
	}
	added := func(j int) bool { return res[j] != nil && n.inputs[j].n != nil }
	for i, r := range res {
		if !added(i) {
			continue
		}
		count := 0
		for j := range res {
			if added(j) && res[j] == r {
				count++
			}
		}
		inGs := 0
		for _, g := range gs {
			if g == r {
				inGs++
			}
		}
		if inGs > 0 {
			// A cotangent passed through: still owned only if it ends up
			// in exactly one slot (n's own is dropped unless kept).
			if taken && r == donated {
				panic("tensor: internal error: VJP of " + n.op.Name + " returned the cotangent it was donated")
			}
			switch {
			case !p.owns(r) || i != firstAdded(res, r, added):
				// Decided at r's first slot.
			case inGs > 1 || kept || (count > 1 && (p.extra[r] > 0 || !untracedVJP(n))):
				r.cot, r.cotShared = nil, false
				delete(p.extra, r)
			case count > 1:
				// n's slot passes to count slots: each drops it once.
				if p.extra == nil {
					p.extra = map[*Tensor]int{}
				}
				p.extra[r] = count - 1
			}
			continue
		}
		if count == 1 && r.cot == nil && viewOfOwned(p, n, gs, res, r, kept) {
			// A view of n's owned cotangent (Reshape's VJP): n's header
			// dies once consumed, the view takes its ownership.
			r.cot = p
			continue
		}
		if count == 1 && r.cot == nil && placedOwnable(n, gs, r) {
			r.cot = p
			continue
		}
		if count == 1 && r.cot == nil && (syncOwnable(n, gs, r) || batchOwnable(n, gs, r)) {
			r.cot, r.cotShared = p, true
			continue
		}
		if !n.op.Traits.Reuse.Has(FreshVJP) || count > 1 || !plainF32(r) || r.cot != nil {
			continue
		}
		s := storage(r)
		own := true
		for j, q := range res {
			if j != i && q != r && storage(q) == s {
				own = false
			}
		}
		for _, g := range gs {
			if storage(g) == s && !(taken && g == donated) {
				own = false
			}
		}
		for _, x := range n.ins {
			if storage(x) == s {
				own = false
			}
		}
		for _, x := range n.outs {
			if storage(x) == s {
				own = false
			}
		}
		if own {
			r.cot = p
		}
	}
}
