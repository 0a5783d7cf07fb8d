package tensor

import (
	"fmt"
	"sync/atomic"
)

// This file holds what Vmap (ad_vmap.go) and forward mode (ad_jvp.go)
// share: the levels whose values wrap other values, as JAX's BatchTracer
// and JVPTracer wrap theirs.
//
// A level is one transformation in progress: a Trace (reverse mode), a
// BatchTrace (Vmap) or a JVPTrace (forward mode). Levels are ordered by
// when they were made (one counter for all of them), and a value of a
// level wraps values of earlier levels only. Apply finds the latest level
// among its operands and lets it act first: a Trace records a node and
// computes the op on the primal values, a BatchTrace calls the op's
// batching rule on the whole batches, a JVPTrace calls the op on the
// primals and its JVP rule on the tangents. Each does so by applying ops
// to the values one level down, so the earlier levels act in turn, and
// transformations compose in any order: per-example gradients (Vmap of a
// gradient), gradients of a vmapped function, Hessians (forward mode over
// reverse mode), nested Vmaps.

// xlevel is a level whose values wrap others: a BatchTrace or a JVPTrace.
type xlevel interface {
	levelID() uint64
	// apply computes op on operands at least one of which is a value of
	// this level, the latest level among them. wantState is set when a
	// trace recording the op wants the state its VJP receives (then the
	// op's outputs must be this level's values computed by the op's own
	// ImplN, which ops that declare Through do).
	apply(op *Op, params any, in []*Tensor, wantState bool) ([]*Tensor, any)
	// noData panics: op tried to read the data of x, a value of this
	// level.
	noData(op string, x *Tensor)
}

// xval is the content of a value of an xlevel: for a BatchTrace the
// batched value (the batch dimension first), for a JVPTrace the primal
// and its tangent.
type xval struct {
	lvl xlevel
	val *Tensor
	tan *Tensor
	// owned is set on a value of a BatchTrace whose batch an op's rule
	// computed for it alone (no other value wraps the same header), so
	// that donating the value donates the batch (RecycleIntermediates
	// inside Vmap). It is cleared if another value comes to wrap it.
	owned atomic.Bool
}

// newXValue returns a value of level lvl with the given header fields
// and content (val, and tan for a JVPTrace), header and content in one
// allocation.
func newXValue(dt DType, shape []int, loc *Local, lvl xlevel, val, tan *Tensor) *Tensor {
	box := new(xbox)
	box.set(dt, shape, loc, lvl, val, tan)
	return &box.t
}

// xbox holds a value of an xlevel: its header, the header's extension
// and the content.
type xbox struct {
	t Tensor
	e tensorExt
	x xval
}

// set makes box.t the value newXValue describes.
func (box *xbox) set(dt DType, shape []int, loc *Local, lvl xlevel, val, tan *Tensor) {
	box.x.lvl, box.x.val, box.x.tan = lvl, val, tan
	box.e = tensorExt{local: loc, xv: &box.x}
	box.t = Tensor{dtype: dt, shape: shape, ext: &box.e}
}

// levelIDOf returns the id of the latest level of x: the trace of its
// node, or its xlevel (0 for a plain value).
func levelIDOf(x *Tensor) uint64 {
	switch {
	case x.node != nil:
		return x.node.trace.id
	case x.xv() != nil:
		return x.xv().lvl.levelID()
	}
	return 0
}

// checkNesting panics, naming op, if x belongs to a level later than id:
// a value of an inner transformation given to an outer one.
func checkNesting(op string, x *Tensor, id uint64) {
	if levelIDOf(x) > id {
		panic(fmt.Sprintf("%s: %v belongs to a transformation (a trace, Vmap or JVP) started after this one; values of inner transformations cannot enter outer ones", op, x))
	}
}

// hostLevel returns the value whose data a reader of t reads: t itself,
// or the primal of a forward-mode value (traced or not). Reading a value
// inside Vmap panics naming op.
func (t *Tensor) hostLevel(op string) *Tensor {
	for t.xv() != nil {
		if t.xv().tan == nil {
			t.xv().lvl.noData(op, t)
		}
		t = t.xv().val
	}
	return t
}

// InsideVmap reports whether t is a value inside Vmap: it stands for a
// batch of values, one per example, and has no data of its own (reading
// it panics), though every op works on it. Code that inspects data on the
// host (a bounds check, say) skips such a value and leaves the check to
// the ops, which see the whole batch. A value inside forward mode only
// (JVP) has data: its primal's.
func (t *Tensor) InsideVmap() bool {
	for t.xv() != nil {
		if t.xv().tan == nil {
			return true
		}
		t = t.xv().val
	}
	return false
}

// passThrough calls the implementation of an op that declares Through
// with operands as they are: its Impl applies other ops, which dispatch
// on the values themselves.
func passThrough(op *Op, params any, in []*Tensor, wantState bool) ([]*Tensor, any) {
	if op.ImplN == nil {
		return []*Tensor{callImpl(op, in, params)}, nil
	}
	impl := op.ImplN
	if wantState && op.ImplVJP != nil {
		impl = op.ImplVJP
	}
	return callImplN(op, impl, in, params)
}

// applyAll applies op (single- or multi-output) to in.
func applyAll(op *Op, params any, in []*Tensor) []*Tensor {
	if op.ImplN == nil {
		return []*Tensor{applyIn(op, params, in)}
	}
	return applyNIn(op, params, in)
}

// Through says which transformations pass through an op (Traits.Through).
type Through uint8

const (
	// ThroughVmap: the op's Impl (or ImplN) and its VJP only apply other
	// ops and never read the data of their operands (a checkpoint's
	// program, a custom rule's functions). When the op's operands are
	// values inside Vmap and a trace records the op (a gradient taken
	// inside the vmapped function), Apply calls its implementation with
	// those values as they are, and its VJP gets batched cotangents; the
	// ops inside compute on whole batches through their own rules. When
	// no trace records it, the op's Batch rule runs if it has one.
	ThroughVmap Through = 1 << iota
	// ThroughJVP is ThroughVmap for forward mode: the op's implementation
	// receives the primal-and-tangent values, and the ops inside carry
	// the tangents.
	ThroughJVP
)

// Has reports whether every flag of q is set in t.
func (t Through) Has(q Through) bool { return t&q == q }

// levelIDs hands out level ids; traces take theirs from traceIDs, which
// it is (one order for all levels).
func newLevelID() uint64 { return traceIDs.Add(1) }

// mayDiff reports whether x may need derivatives: it is traced or is a
// value of a Vmap or forward-mode level. Ops with a cheaper forward-only
// form (the fused losses) use that form only for plain values.
func mayDiff(x *Tensor) bool { return x.node != nil || x.xv() != nil }
