package tensor

import (
	"fmt"

	"github.com/gonox/gonox/tensor/internal/gemm"
	"github.com/gonox/gonox/tensor/internal/vec"
)

// act_product computes act(x) @ w, or the grouped product RaggedDot(act(x),
// w, groupSizes), without keeping act(x): the second layer of an MLP or of
// a mixture of experts' experts, whose input is the activation of the
// first layer's output. Composed, the activation op keeps its input for
// its derivative and the product keeps the activation's output for its
// weight gradient: two activations of the hidden width per layer. The op
// keeps only x (and w); the forward pass computes act(x) into a temporary
// that it recycles once the product has read it, and the backward pass
// recomputes it (one elementwise pass) for the weight gradient, recycles
// it, and applies the activation's derivative to the input's cotangent
// from x, as the activation's own VJP would.

// actProductParams are act_product's parameters: the activation and the
// product (matmul or ragged_dot) with its own parameters.
type actProductParams struct {
	act  Activation
	prod *Op
	pp   any
}

var actProductOp *Op

func init() {
	actProductOp = &Op{
		Name: "act_product",
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*actProductParams)
			var h *Tensor
			if p.roundsBF16() {
				h = actTempBF16(in[0], p.act)
			} else {
				h = actTemp(in[0], p.act)
			}
			out := p.prod.Impl(append([]*Tensor{h}, in[1:]...), p.pp)
			Donate(h)
			return out
		},
		VJPNeed: func(g *Tensor, in []*Tensor, out *Tensor, pp any, need uint64) []*Tensor {
			p := pp.(*actProductParams)
			x := in[0]
			if p.act.fromInput() && !higherOrder(g, x, in[1]) && g.layout() == nil {
				return actProductVJP(g, in, out, p, need)
			}
			h := p.act.apply(x)
			res := vjpForm(p.prod, p.pp, nil, []*Tensor{g}, append([]*Tensor{h}, in[1:]...), []*Tensor{out}, need)
			if dh := res[0]; dh != nil {
				if p.act.fromInput() {
					res[0] = Apply(p.act.bwd(), nil, dh, x)
				} else {
					res[0] = Apply(p.act.bwd(), nil, dh, h)
				}
				if dh != g && !dh.IsTraced() && dh.layout() == nil {
					Donate(dh)
				}
			}
			if !h.IsTraced() && h.layout() == nil {
				Donate(h)
			}
			return res
		},
		Save: SaveAllInputs,
		// d(act(x)·w) = (act'(x)·dx)·w + act(x)·dw: the product's rule at
		// h = act(x) with the tangent of h.
		JVP: func(x, t, outs []*Tensor, pp any) []*Tensor {
			p := pp.(*actProductParams)
			h := p.act.apply(x[0])
			th := append([]*Tensor(nil), t...)
			if t[0] != nil {
				if p.act.fromInput() {
					th[0] = Apply(p.act.bwd(), nil, t[0], x[0])
				} else {
					th[0] = Apply(p.act.bwd(), nil, t[0], h)
				}
			}
			return p.prod.JVP(append([]*Tensor{h}, x[1:]...), th, outs, p.pp)
		},
		// The product's batching rule at h = act(x).
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			p := pp.(*actProductParams)
			h := p.act.apply(in[0])
			return p.prod.Batch(append([]*Tensor{h}, in[1:]...), batched, p.pp)
		},
		// Package shard never meets the op: the public functions compose
		// for placed operands.
		Traits: Traits{Reuse: FreshVJP}, // products by gemm, derivatives by kernels
	}
}

// act_parts: (x) → (act(x), act'(x)) for an activation whose derivative
// needs its input, in one sweep (GELU's share their sigmoid). Not
// differentiable: act_product's first-order VJP takes it.
var actPartsOp *Op

func init() {
	actPartsOp = &Op{
		Name: "act_parts",
		ImplN: func(in []*Tensor, pp any) ([]*Tensor, any) {
			act, x := pp.(Activation), in[0]
			h, d := newOutUninit(Float32, x.shape), newOutUninit(Float32, x.shape)
			kernel, cost := act.kernel()
			grad := act.gradKernel()
			parts := func(lo, hi int) {
				if act == ActGelu {
					vec.GeluParts(h.f32()[lo:hi], d.f32()[lo:hi], x.f32()[lo:hi])
					return
				}
				kernel(h.f32()[lo:hi], x.f32()[lo:hi])
				grad(d.f32()[lo:hi], x.f32()[lo:hi])
			}
			n := len(x.f32())
			if serial(2*n*cost, isLocal(x)) {
				parts(0, n)
			} else {
				parallelFor(n, 2*cost, 16, false, parts)
			}
			return []*Tensor{h, d}, nil
		},
		Batch: sameOpBatch(&actPartsOp),
	}
}

// actProductVJP is act_product's VJP on untraced values for an activation
// whose derivative needs its input: act(x) and act'(x) in one sweep
// (act_parts), the product's VJP at act(x), and dx = dh·act'(x).
func actProductVJP(g *Tensor, in []*Tensor, out *Tensor, p *actProductParams, need uint64) []*Tensor {
	x := in[0]
	var h, d *Tensor
	var res []*Tensor
	if p.roundsBF16() && g.dtype == Float32 {
		h, d = actPartsBF16(x, p.act)
		res = p.bf16VJP(g, append([]*Tensor{h}, in[1:]...), need)
	} else {
		parts := ApplyN(actPartsOp, p.act, x)
		h, d = parts[0], parts[1]
		res = vjpForm(p.prod, p.pp, nil, []*Tensor{g}, append([]*Tensor{h}, in[1:]...), []*Tensor{out}, need)
	}
	if dh := res[0]; dh != nil {
		if r := dh.rec; dh != g && r != nil && r.refs.Load() == 1 && markedOperand(dh) && markedOver(dh, d) && sameShape(dh.shape, d.shape) {
			// dh is the product's fresh cotangent and its header the
			// only holder of its storage (no view shares it): dx =
			// dh·act'(x) over it, in the lines the product just wrote,
			// instead of into fresh storage.
			map2F32(vec.MulVV, dh.f32(), dh.f32(), d.f32(), costCheap, isLocal(dh, d))
		} else {
			res[0] = Mul(dh, d)
			if dh != g {
				Donate(dh)
			}
		}
	}
	Donate(h, d)
	return res
}

// actTemp returns act(x) for float32 x in fresh storage the caller
// recycles.
func actTemp(x *Tensor, act Activation) *Tensor {
	h := newOutUninit(Float32, x.shape)
	kernel, cost := act.kernel()
	if kernel == nil {
		copy(h.f32(), x.f32())
		return h
	}
	n := len(x.f32())
	if serial(n*cost, isLocal(x)) {
		kernel(h.f32(), x.f32())
		return h
	}
	parallelFor(n, cost, 16, false, func(lo, hi int) { kernel(h.f32()[lo:hi], x.f32()[lo:hi]) })
	return h
}

// roundsBF16 reports whether the product computes in bfloat16 on
// kernels that round a float32 operand as they read it (AVX-512 BF16,
// AMX), and so takes act(x) in bfloat16 as well, with the same bits.
func (p *actProductParams) roundsBF16() bool {
	var compute DType
	switch q := p.pp.(type) {
	case *matmulToParams:
		compute = q.compute
	case *raggedParams:
		compute = q.compute
	}
	return compute == BFloat16 && gemm.BF16Kernel() != "widen"
}

// actTempBF16 is actTemp rounding act(x) to bfloat16 (to nearest even,
// as the product would round it as it reads it): act(x) goes through a
// float32 buffer of actChunk elements that stays in L1, so the float32
// act(x) is never stored and the product reads the half-size result in
// place.
func actTempBF16(x *Tensor, act Activation) *Tensor {
	h := newOutUninit(BFloat16, x.shape)
	kernel, cost := act.kernel()
	run := func(lo, hi int) {
		buf := make([]float32, min(actChunk, hi-lo))
		for ; lo < hi; lo += len(buf) {
			t := buf[:min(len(buf), hi-lo)]
			if kernel == nil {
				copy(t, x.f32()[lo:])
			} else {
				kernel(t, x.f32()[lo:lo+len(t)])
			}
			vec.BF16FromF32(h.u16()[lo:lo+len(t)], t)
		}
	}
	n := len(x.f32())
	if serial(n*cost, isLocal(x)) {
		run(0, n)
	} else {
		parallelFor(n, cost, 16, false, run)
	}
	return h
}

// actPartsBF16 is act_parts with act(x) rounded to bfloat16 (see
// actTempBF16) and act'(x) in float32.
func actPartsBF16(x *Tensor, act Activation) (h, d *Tensor) {
	h, d = newOutUninit(BFloat16, x.shape), newOutUninit(Float32, x.shape)
	kernel, cost := act.kernel()
	grad := act.gradKernel()
	run := func(lo, hi int) {
		buf := make([]float32, min(actChunk, hi-lo))
		for ; lo < hi; lo += len(buf) {
			t := buf[:min(len(buf), hi-lo)]
			xs, ds := x.f32()[lo:lo+len(t)], d.f32()[lo:lo+len(t)]
			if act == ActGelu {
				vec.GeluParts(t, ds, xs)
			} else {
				kernel(t, xs)
				grad(ds, xs)
			}
			vec.BF16FromF32(h.u16()[lo:lo+len(t)], t)
		}
	}
	n := len(x.f32())
	if serial(2*n*cost, isLocal(x)) {
		run(0, n)
	} else {
		parallelFor(n, 2*cost, 16, false, run)
	}
	return h, d
}

// bf16VJP is the product's first-order VJP at in = (act(x) in bfloat16,
// w, ...) for a float32 cotangent g: the float32 cotangents of act(x) and
// w, with the bits of the product's VJP at the float32 act(x) (which the
// products would round as they read it).
func (p *actProductParams) bf16VJP(g *Tensor, in []*Tensor, need uint64) []*Tensor {
	q, ok := p.pp.(*matmulToParams)
	if !ok {
		// ragged_dot's cotangents are float32 whatever its operands.
		return p.prod.VJPNeed(g, in, nil, p.pp, need)
	}
	mm := func(x, y *Tensor, tx, ty bool, _ DType) *Tensor {
		return MatMulAs(x, y, tx, ty, q.compute, Float32)
	}
	if gr := roundOnce(g, q.compute, need, in...); gr != nil {
		res := matmulCotangents(gr, in[0], in[1], q.p, need, mm)
		gr.release()
		return res
	}
	return matmulCotangents(g, in[0], in[1], q.p, need, mm)
}

// actChunk is the float32 buffer of actTempBF16 (8 KiB).
const actChunk = 2048

// fusesAct reports whether act_product computes act(x) with these
// operands: float32 host tensors or shard.Map blocks and a fused
// activation; others compose.
func fusesAct(act Activation, xs ...*Tensor) bool {
	return act != ActIdentity && act < numActivations && hostF32(xs...)
}

// ActMatMul returns act(x) @ w for x [..., K] and w [K, N] (MatMul's
// semantics for those shapes), as one op that does not keep act(x) for
// the backward pass (act_product): the second layer of an MLP, the
// activation of the first layer's output as its input. The backward pass
// recomputes act(x) from x. Values and gradients are those of the
// composition MatMul(act(x), w) bit for bit; float64, half and placed
// operands compose.
func ActMatMul(act Activation, x, w *Tensor) *Tensor {
	checkNil("tensor.ActMatMul", "x w", x, w)
	return actMatMul("tensor.ActMatMul", act, x, w, 0)
}

// ActMatMulAs is ActMatMul with the product computed in dtype compute
// from float32 act(x) and w, each rounded as the product reads it, and a
// float32 result (MatMulAs(act(x), w, false, false, compute, Float32)):
// the second layer of an MLP under automatic mixed precision. The
// cotangents of x and w are float32.
func ActMatMulAs(act Activation, x, w *Tensor, compute DType) *Tensor {
	checkNil("tensor.ActMatMulAs", "x w", x, w)
	checkProductAs("tensor.ActMatMulAs", x, w, compute)
	return actMatMul("tensor.ActMatMulAs", act, x, w, compute)
}

// actMatMul is ActMatMul (compute 0) or ActMatMulAs.
func actMatMul(op string, act Activation, x, w *Tensor, compute DType) *Tensor {
	if act >= numActivations {
		panic(fmt.Sprintf("%s: %s: unknown activation %v", op, operands("@", x, w), act))
	}
	if len(x.shape) < 2 || len(w.shape) != 2 || !fusesAct(act, x, w) {
		if compute == 0 {
			return MatMul(act.apply(x), w)
		}
		return MatMulAs(act.apply(x), w, false, false, compute, Float32)
	}
	p := checkMatMul(op, x, w, false, false)
	ap := &actProductParams{act: act, prod: matmulOp, pp: p}
	if compute != 0 {
		ap.prod, ap.pp = matmulToOp, &matmulToParams{p: p, dt: Float32, compute: compute}
	}
	return Apply(actProductOp, ap, x, w)
}

// ActRaggedDot returns RaggedDot(act(x), w, groupSizes) as one op that
// does not keep act(x) for the backward pass (act_product): the second
// layer of a mixture of experts' experts. Values and gradients are those
// of the composition bit for bit; float64, half and placed operands, and
// group sizes that are placed or batched, compose.
func ActRaggedDot(act Activation, x, w, groupSizes *Tensor) *Tensor {
	checkNil("tensor.ActRaggedDot", "x w groupSizes", x, w, groupSizes)
	return actRaggedDot("tensor.ActRaggedDot", act, x, w, groupSizes, 0)
}

// ActRaggedDotAs is ActRaggedDot with the grouped product computed in
// dtype compute from float32 act(x) and w, as RaggedDotAs does: the
// second product of a mixture of experts' experts under automatic mixed
// precision. The result and the cotangents of x and w are float32.
func ActRaggedDotAs(act Activation, x, w, groupSizes *Tensor, compute DType) *Tensor {
	checkNil("tensor.ActRaggedDotAs", "x w groupSizes", x, w, groupSizes)
	checkProductAs("tensor.ActRaggedDotAs", x, w, compute)
	return actRaggedDot("tensor.ActRaggedDotAs", act, x, w, groupSizes, compute)
}

// actRaggedDot is ActRaggedDot (compute 0) or ActRaggedDotAs.
func actRaggedDot(op string, act Activation, x, w, groupSizes *Tensor, compute DType) *Tensor {
	if act >= numActivations {
		panic(fmt.Sprintf("%s: %s: unknown activation %v", op, operands("@", x, w), act))
	}
	if !fusesAct(act, x, w) || groupSizes.layout() != nil || groupSizes.xv() != nil {
		if compute == 0 {
			return RaggedDot(act.apply(x), w, groupSizes)
		}
		return RaggedDotAs(act.apply(x), w, groupSizes, compute)
	}
	checkRaggedDot(x, w, groupSizes)
	return Apply(actProductOp, &actProductParams{act: act, prod: raggedDotOp, pp: &raggedParams{compute: compute}}, x, w, groupSizes)
}
