package tensor

import (
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// Reusing cotangent buffers.
//
// A backward pass allocates a cotangent for nearly every node, most of
// them dead as soon as the node before has used them. Where the pass owns
// a cotangent outright, it reuses its storage instead of allocating:
//
//   - accumulating into an owned cotangent adds in place, and
//   - an owned cotangent is donated to the VJP of an op that consumes it
//     once through an elementwise backward kernel (ReLU, GELU, BiasAct,
//     ...), which then writes its result over it (takeDonated).
//
// Ownership is decided conservatively, per pass, and only at the
// outermost level (untraced cotangents, untraced residuals): a cotangent is
// owned if it is a new tensor returned by the VJP of an op marked freshVJP
// (one whose VJP results have storage of their own: matmul, the
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
}

// owns reports whether the pass owns t: it may donate t once dead.
func (p *backwardPass) owns(t *Tensor) bool { return cotangentReuse && t.cot == p }

// writable reports whether the pass owns t's storage outright: it may
// also write into it (accumulate in place, hand it to a kernel).
func (p *backwardPass) writable(t *Tensor) bool { return p.owns(t) && !t.cotShared }

// drop donates t (see Donate) if the pass owns it: a cotangent that died
// inside the backward pass, which the caller never saw.
func (p *backwardPass) drop(t *Tensor) {
	if t != nil && p.owns(t) {
		t.cot, t.cotShared = nil, false
		Donate(t)
	}
}

// dropConsumed drops t after the VJP of n has consumed it. A shard.Map
// block is dropped only if that VJP is one of the freshVJP ops' (matmul,
// the activations, BiasAct), which compute on the device alone, or is
// marked Op.SyncVJP (package shard's synchronous collectives): another
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
// computes on the device alone (freshVJP) or is synchronous (SyncVJP).
func doneWith(op *Op, t *Tensor) bool {
	return t.local == nil || op.freshVJP || op.SyncVJP
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

// plainF32 reports whether t is untraced, unsharded float32 data with
// storage of its own to speak of.
func plainF32(t *Tensor) bool {
	return t.dtype == Float32 && t.node == nil && t.layout == nil && len(t.f32) > 0
}

// storage identifies t's float32 buffer (nil if it has none).
func storage(t *Tensor) *float32 {
	if t == nil || len(t.f32) == 0 {
		return nil
	}
	return unsafe.SliceData(t.f32)
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
	if t == nil || t.node != nil || t.layout == nil {
		return false
	}
	_, ok := t.layout.(BlockHolder)
	return ok
}

// placedOwnable reports whether r, a cotangent the VJP of n returned for
// the cotangents gs, is a placed header the pass may own: n is a
// Distributed op (package shard's, whose VJPs return new results computed
// by propagated ops, or their own cotangent) and r is a header that VJP
// made (madeBy). Placed cotangents are never accumulated in place nor
// donated to a kernel; owning one only lets the pass donate it once dead.
func placedOwnable(n *node, gs []*Tensor, r *Tensor) bool {
	return cotangentReuse && n.op.Distributed && countsHeaders(r) && madeBy(n, gs, r)
}

// syncOwnable reports whether r, a cotangent the VJP of n returned for the
// cotangents gs, is a shard.Map block the pass may own to donate once dead
// (never to write into: a collective's result is read by the other
// devices too): n is marked SyncVJP and r is an untraced header that VJP
// made (madeBy). Donating it drops this device's hold on the storage
// alone.
func syncOwnable(n *node, gs []*Tensor, r *Tensor) bool {
	return cotangentReuse && n.op.SyncVJP && r.node == nil && r.layout == nil && r.local != nil && madeBy(n, gs, r)
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

// accumulable reports whether g can be added into a in place: same dtype,
// length and shard.Map mark, both untraced host data.
func accumulable(a, g *Tensor) bool {
	return plainF32(a) && plainF32(g) && a.local == g.local && len(a.f32) == len(g.f32)
}

// addInto adds g to dst elementwise, in place: the bits of Add(dst, g).
func addInto(dst, g *Tensor) {
	cotangentReuses.Add(1)
	d, s := dst.f32, g.f32
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
	if !n.op.donates || kept || len(gs) != 1 || gs[0] == nil || !p.writable(gs[0]) || !untracedVJP(n) {
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
	return &Tensor{dtype: x.dtype, shape: x.shape, f32: x.f32, rec: x.rec}
}

// settle decides, after the VJP of n returned res for the cotangents gs,
// which results the pass owns. donated is the cotangent offered to the VJP
// (nil if none); kept reports that n's cotangents stay in their slots.
func (p *backwardPass) settle(n *node, gs, res []*Tensor, donated *Tensor, kept bool) {
	taken := donated != nil && p.donated == nil
	p.donated = nil
	if taken {
		cotangentReuses.Add(1)
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
			if p.owns(r) && (count > 1 || inGs > 1 || kept) {
				r.cot, r.cotShared = nil, false
			}
			continue
		}
		if count == 1 && r.cot == nil && placedOwnable(n, gs, r) {
			r.cot = p
			continue
		}
		if count == 1 && r.cot == nil && syncOwnable(n, gs, r) {
			r.cot, r.cotShared = p, true
			continue
		}
		if !n.op.freshVJP || count > 1 || !plainF32(r) || r.cot != nil {
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
