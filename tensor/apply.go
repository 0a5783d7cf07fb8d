package tensor

import (
	"fmt"
	"slices"
)

// The engine's dispatch: the one path every op call takes, reading only
// the op's declaration (op.go).
//
//	Apply, ApplyN
//	  scan         nil, donated and shape-only operands; the latest level
//	               (trace, Vmap, forward mode); the union of shard.Map
//	               marks; placed operands
//	  xlevel       the latest level is a BatchTrace or a JVPTrace: its
//	               rule computes the op on the values one level down
//	               (ad_vmap.go, ad_jvp.go), which dispatch again
//	  placed       an operand is a global placed tensor and the op is not
//	               Distributed: the placer computes it (placed_seam.go)
//	  untraced     callImpl, callImplN: half operands widened as the op's
//	               Traits.Half says; the result marked like its operands
//	  traced       applyTraced: captures (remat, shard.Map), implicit
//	               pvary, the op computed on the primal values through
//	               this same path, and a node recorded (ad_graph.go)
//
// and callVJP, the one path of every VJP call (Backward, a checkpoint's
// backward pass), which widens half cotangents as the forward did and
// calls the VJP form the op declared. A transformation that dispatches on
// the values it sees (the placer on placed tensors, Vmap on batched
// values, forward mode on primal-and-tangent values) hooks in at scan;
// one that runs a rule of the op calls it where callVJP calls the VJP.

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
	top, up, loc, placed := scan(op, in)
	if top != nil && up == nil && !placed {
		// The traced path keeps no reference to in (the node copies
		// the operands it records): a caller's variadic slice stays on
		// its stack.
		return applyTraced(op, params, in, top, loc, nil)[0]
	}
	return apply1(op, params, ownOperands(in), top, up, loc, placed)
}

// ownOperands returns a copy of in that the callee may keep, in one
// allocation of its size (as a caller's variadic slice was).
func ownOperands(in []*Tensor) []*Tensor {
	switch len(in) {
	case 1:
		a := [1]*Tensor{in[0]}
		return a[:]
	case 2:
		a := [2]*Tensor{in[0], in[1]}
		return a[:]
	case 3:
		a := [3]*Tensor{in[0], in[1], in[2]}
		return a[:]
	}
	return slices.Clone(in)
}

// applyIn is Apply for a slice of operands that the caller made for the
// call (which the implementation may keep): no copy of it is made.
func applyIn(op *Op, params any, in []*Tensor) *Tensor {
	checkKernels(op)
	top, up, loc, placed := scan(op, in)
	return apply1(op, params, in, top, up, loc, placed)
}

// apply1 is Apply after scan, the operands in memory the callee may
// keep: an implementation, a function value, may keep its operand slice
// as far as the compiler knows.
func apply1(op *Op, params any, in []*Tensor, top *Trace, up xlevel, loc *Local, placed bool) *Tensor {
	if up != nil {
		outs, _ := up.apply(op, params, in, false)
		return outs[0]
	}
	if placed {
		return applyPlaced(op, params, in, loc)[0]
	}
	if top == nil {
		out := callImpl(op, in, params)
		return finish(op, out, in, loc)
	}
	return applyTraced(op, params, in, top, loc, nil)[0]
}

// ApplyN is Apply for primitives with several outputs.
func ApplyN(op *Op, params any, in ...*Tensor) []*Tensor {
	if op.ImplN == nil {
		panic(fmt.Sprintf("tensor.ApplyN: op %q has no ImplN", op.Name))
	}
	checkKernels(op)
	top, up, loc, placed := scan(op, in)
	if top != nil && up == nil && !placed {
		return applyTraced(op, params, in, top, loc, nil) // as in Apply
	}
	return applyN1(op, params, ownOperands(in), top, up, loc, placed)
}

// applyNIn is applyIn for ApplyN.
func applyNIn(op *Op, params any, in []*Tensor) []*Tensor {
	if op.ImplN == nil {
		panic(fmt.Sprintf("tensor.ApplyN: op %q has no ImplN", op.Name))
	}
	checkKernels(op)
	top, up, loc, placed := scan(op, in)
	return applyN1(op, params, in, top, up, loc, placed)
}

// applyN1 is ApplyN after scan, the operands in memory the callee may
// keep (see apply1).
func applyN1(op *Op, params any, in []*Tensor, top *Trace, up xlevel, loc *Local, placed bool) []*Tensor {
	if up != nil {
		outs, _ := up.apply(op, params, in, false)
		return outs
	}
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
	return applyTraced(op, params, in, top, loc, nil)
}

// scan finds the innermost trace among the inputs and the latest xlevel
// (up, nil unless it is later than that trace), computes the union of
// block marks and reports whether an operand is a global placed tensor that
// op does not handle itself (then the placer computes it). It panics on a
// nil operand and on one without data (donated, or a placeholder).
//
// An operand that is, or is traced over, a value of an xlevel is never
// handed to the placer at this level: the trace or the level peels it
// first, and the placer meets the placed values inside.
func scan(op *Op, in []*Tensor) (top *Trace, up xlevel, loc *Local, placed bool) {
	dist := op.distributed()
	wrapped := false
	for _, x := range in {
		if x == nil {
			panic(fmt.Sprintf("tensor: op %q: nil *Tensor operand", op.Name))
		}
		if x.placeholder() {
			x.mustHaveData("tensor: op " + op.Name) // panics
		}
		if x.layout() != nil && !dist {
			placed = true
		}
		if x.node != nil && (top == nil || x.node.trace.id > top.id) {
			top = x.node.trace
		}
		if x.xv() != nil {
			wrapped = true
			if x.node == nil && (up == nil || x.xv().lvl.levelID() > up.levelID()) {
				up = x.xv().lvl
			}
		}
		if x.local() != nil {
			loc = unionLocal(op.Name, loc, x.local())
		}
	}
	if wrapped {
		placed = false
		if top != nil && up != nil && top.id > up.levelID() {
			up = nil
		}
	}
	return top, up, loc, placed
}

// finish sets the block mark of an op result, copying the header if the
// implementation returned one of its inputs.
func finish(op *Op, out *Tensor, in []*Tensor, loc *Local) *Tensor {
	if out == nil {
		panic(fmt.Sprintf("tensor: op %q returned nil", op.Name))
	}
	if slices.Contains(in, out) {
		out = out.shallow()
		out.setAxes(nil)
	}
	if loc != nil && out.local() == nil {
		if out.ext == nil {
			out.ext = loc.rec()
		} else {
			out.setLocal(loc)
		}
	}
	return out
}

// applyCore computes op on inputs that may be traced by traces other than
// the one being recorded, returning outputs and the state for the VJP
// (ImplVJP's when the op has one).
func applyCore(op *Op, params any, in []*Tensor) ([]*Tensor, any) {
	if op.ImplN == nil && !slices.ContainsFunc(in, isXValue) {
		return []*Tensor{applyIn(op, params, in)}, nil
	}
	top, up, loc, placed := scan(op, in)
	if up != nil {
		return up.apply(op, params, in, true)
	}
	if op.ImplN == nil {
		return []*Tensor{applyIn(op, params, in)}, nil
	}
	if placed {
		return applyPlaced(op, params, in, loc), nil
	}
	if top != nil {
		var st any
		outs := applyTraced(op, params, in, top, loc, &st)
		return outs, st
	}
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

// isXValue reports whether x is a value of a Vmap or forward-mode level.
func isXValue(x *Tensor) bool { return x != nil && x.xv() != nil }

// applyTraced applies op to inputs of which some are traced, top being
// the innermost of their traces: it computes the op on their primal
// values (through applyCore, so outer traces record it too) and records a
// node of top on the results. The op's state goes to stateOut if set.
func applyTraced(op *Op, params any, in []*Tensor, top *Trace, loc *Local, stateOut *any) []*Tensor {
	n, tw := newNode(op, params, top)
	prim, save := n.operands(in, loc)
	var outs []*Tensor
	var state any
	if op.ImplN == nil && !slices.ContainsFunc(prim, isXValue) {
		// applyCore's single-output case, with the result's slice in the
		// node: one allocation fewer per traced op.
		b := n.buf()
		b.res[0] = applyIn(op, params, prim)
		outs = b.res[:]
	} else {
		outs, state = applyCore(op, params, prim)
	}
	if stateOut != nil {
		*stateOut = state
	}
	if !top.recordAll && (!op.differentiable() || !slices.ContainsFunc(outs, func(o *Tensor) bool { return o.dtype.IsFloat() })) {
		// Non-differentiable: results are constants for every trace.
		for i, o := range outs {
			outs[i] = StopGradient(o)
		}
		return outs
	}
	return n.record(prim, outs, save, state, tw)
}

// prepareOperands makes the operands of a traced op (in, the node's
// copy) what top records: a value of an outer trace replaced by its
// capture (a capture trace: remat, shard.Map), and, inside shard.Map, a
// differentiable input that varies over fewer mesh axes than the result
// broadcast over the others (an implicit pvary: its cotangent is then
// summed over them).
func prepareOperands(op *Op, in []*Tensor, top *Trace, loc *Local) {
	if top.capture != nil {
		for i, x := range in {
			if x.node != nil && x.node.trace != top && !x.TracedBy(top) {
				c := top.capture(x)
				if !c.TracedBy(top) {
					panic(fmt.Sprintf("tensor: capture of %v for op %q did not return a tensor of the capturing trace", x, op.Name))
				}
				in[i] = c
			}
		}
	}
	if op.differentiable() && loc != nil && !op.Traits.Placement.Has(HandlesVary) {
		for i, x := range in {
			if x.dtype.IsFloat() && x.node != nil && x.node.trace == top && localMask(x) != loc.Mask {
				in[i] = Apply(pvaryOp, loc, x)
			}
		}
	}
}

// Half precision (see dtype_half.go): Apply widens the half operands of an
// op whose Traits.Half is WidenHalf, runs its float32 implementation and
// rounds the float32 results to the operands' dtype; callVJP does the same
// around the VJP.

// callImpl runs op.Impl, widening half operands if the op asks for it.
func callImpl(op *Op, in []*Tensor, params any) *Tensor {
	checkTypes(op, in)
	if !op.widensHalf() {
		return op.Impl(in, params)
	}
	has, common := halfOperands(in)
	if !has {
		return op.Impl(in, params)
	}
	out := op.Impl(widenAll(in), params)
	return roundResult(out, common)
}

// callImplN is callImpl for multi-output implementations (ImplN or
// ImplVJP).
func callImplN(op *Op, impl func([]*Tensor, any) ([]*Tensor, any), in []*Tensor, params any) ([]*Tensor, any) {
	checkTypes(op, in)
	if !op.widensHalf() {
		return impl(in, params)
	}
	has, common := halfOperands(in)
	if !has {
		return impl(in, params)
	}
	outs, state := impl(widenAll(in), params)
	for i, o := range outs {
		outs[i] = roundResult(o, common)
	}
	return outs, state
}

// halfOperands reports whether any operand is a half host tensor, and the
// dtype the float32 results of a widened op are rounded to: the common
// dtype of the float operands, or Float32 when they differ.
func halfOperands(in []*Tensor) (has bool, common DType) {
	for _, x := range in {
		d := x.dtype
		if !d.IsFloat() {
			continue
		}
		if d.isHalf() && x.layout() == nil {
			has = true
		}
		if common == 0 {
			common = d
		} else if common != d {
			common = Float32
		}
	}
	return has, common
}

// widenAll returns in with its half host operands widened to float32.
func widenAll(in []*Tensor) []*Tensor {
	w := make([]*Tensor, len(in))
	for i, x := range in {
		if x.dtype.isHalf() && x.layout() == nil {
			w[i] = widen(x)
		} else {
			w[i] = x
		}
	}
	return w
}

// roundResult rounds a float32 result of a widened op to dt (a half
// dtype; anything else leaves it as it is).
func roundResult(out *Tensor, dt DType) *Tensor {
	if out == nil || out.dtype != Float32 || !dt.isHalf() || out.layout() != nil {
		return out
	}
	return narrow(out, dt)
}

// callVJP runs the VJP of op with cotangents gs, residuals ins and outs
// (placeholders where Save did not keep them), state and need mask (the
// inputs that want a cotangent, for VJPNeed). If op widens half operands
// and any cotangent or residual is half, the VJP runs on float32 values
// and each input's cotangent is rounded to that input's dtype; the
// conversions are ops, so under an outer trace gradients of gradients see
// them.
func callVJP(op *Op, params, state any, gs, ins, outs []*Tensor, need uint64) []*Tensor {
	if op.widensHalf() && anyHalf(gs, ins, outs) {
		res := vjpForm(op, params, state, widenVJPArgs(gs), widenVJPArgs(ins), widenVJPArgs(outs), need)
		for i, r := range res {
			if r != nil && i < len(ins) && r.dtype != ins[i].dtype && r.dtype.IsFloat() && ins[i].dtype.IsFloat() {
				res[i] = Convert(r, ins[i].dtype)
			}
		}
		return res
	}
	return vjpForm(op, params, state, gs, ins, outs, need)
}

// vjpForm calls the VJP form op declares.
func vjpForm(op *Op, params, state any, gs, ins, outs []*Tensor, need uint64) []*Tensor {
	switch {
	case op.VJPN != nil:
		return op.VJPN(gs, ins, outs, params, state)
	case op.VJPNeed != nil:
		return op.VJPNeed(gs[0], ins, outs[0], params, need)
	}
	return op.VJP(gs[0], ins, outs[0], params)
}

// anyHalf reports whether a VJP argument is a half host tensor.
func anyHalf(sets ...[]*Tensor) bool {
	for _, set := range sets {
		for _, x := range set {
			if x != nil && x.dtype.isHalf() && x.layout() == nil {
				return true
			}
		}
	}
	return false
}

// widenVJPArgs returns xs with half host tensors converted to float32
// (placeholders become float32 placeholders).
func widenVJPArgs(xs []*Tensor) []*Tensor {
	w := make([]*Tensor, len(xs))
	for i, x := range xs {
		switch {
		case x == nil || !x.dtype.isHalf() || x.layout() != nil:
			w[i] = x
		case x.placeholder():
			w[i] = &Tensor{dtype: Float32, shape: x.shape, ext: x.localExt()}
		default:
			w[i] = Convert(x, Float32)
		}
	}
	return w
}

// bwdKernel is the float32 computation of a fused backward op (bwdOp):
// z = kernel(g, x) elementwise, cost per element.
type bwdKernel struct {
	kernel func(d, g, x []float32)
	cost   int
}

// apply computes the op on float32 host operands of one shape.
func (k *bwdKernel) apply(g, x *Tensor) *Tensor {
	out := takeDonated(g) // kernels allow dst == g
	if out == nil {
		out = newOutUninit(Float32, g.shape)
	}
	map2F32(k.kernel, out.f32(), g.f32(), x.f32(), k.cost, isLocal(g, x))
	return out
}

// applyBwd returns Apply(op, nil, g, x) for a fused backward op: on plain
// operands, perhaps a device's blocks (see markedOperand), of one shape its
// kernel, which Apply would call, without the dispatch and its operand
// slice. VJPs call it on their cotangents.
func applyBwd(op *Op, g, x *Tensor) *Tensor {
	if op.bwd == nil || !markedOperand(g) || !markedOperand(x) || !sameShape(g.shape, x.shape) {
		return Apply(op, nil, g, x)
	}
	out := op.bwd.apply(g, x)
	markResult(op, out, g, x)
	return out
}

// applyBwdOver is applyBwd for a VJP that reads the result itself and
// never returns it (dense's, which sums and multiplies it): when the
// backward pass has donated g to the running op, the kernel writes over g
// and g itself is the result, without a second header over its storage.
// The pass drops g once the VJP has returned, as it drops any cotangent
// consumed.
func applyBwdOver(op *Op, g, x *Tensor) *Tensor {
	if op.bwd == nil || !markedOperand(g) || !markedOperand(x) || !sameShape(g.shape, x.shape) ||
		unionLocal(op.Name, g.local(), x.local()) != g.local() || !takeDonatedOver(g) {
		return applyBwd(op, g, x)
	}
	map2F32(op.bwd.kernel, g.f32(), g.f32(), x.f32(), op.bwd.cost, isLocal(g, x))
	return g
}
