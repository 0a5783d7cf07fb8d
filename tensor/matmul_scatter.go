package tensor

import (
	"fmt"

	"github.com/gonox/gonox/tensor/internal/gemm"
)

// A weight gradient folded into its reduction.
//
// In a data-parallel step each device computes a product's weight
// gradient pᵀ·q from its own rows (p: the layer's input, q: the output's
// cotangent) and the gradients are then summed over the devices, often
// reduce-scattered (a sharded update keeps 1/n of each). Every device
// then writes a full gradient only for the reduction to read it again.
// Folded, each device computes its part of the sum from every device's p
// and q: the same products, 1/n of the gradient written, and no
// summation pass (the reduce-scatter fused with the dot, as GSPMD does for
// FSDP and ZeRO gradients). Package shard provides the collective
// (shard.Ctx.PsumScatterProductStart) and its device environment takes
// the products' cotangents over (ProductCotangentTaker); this file holds
// the kernel and the hook in the products' VJP.

// ProductCotangentTaker is implemented by the environment of a device
// inside shard.Map (tensor.Local's Env) that may take over the cotangent
// of a product's operand. When the VJP of a product (MatMul, MatMulT,
// MatMulBiasAct and the ops built on them) needs the cotangent of its
// right operand w, that cotangent is pᵀ·q of two untraced float32
// matrices with rows for rows (C = a·w: p = a, q = the cotangent of C; C
// = a·wᵀ: p = the cotangent of C, q = a), and w carries a Local mark whose
// Env implements this interface, the VJP calls TakeProductCotangent(w, p,
// q) instead of computing the product. If it reports true, the
// environment has taken the cotangent over (its owner accounts for pᵀ·q
// elsewhere) and the VJP adds nothing to w's cotangent from this product;
// if false, the VJP computes it as usual. It is called on the device's
// goroutine, during the backward pass; p and q must not be modified and
// must be held (a header of one's own, see WithLocal) if kept past the
// call: the backward pass then no longer writes into the cotangent
// among them.
//
// TookProductCotangents(w) reports whether the environment has taken
// every product cotangent of w it will take in the backward pass running
// on this goroutine; Backward then returns nil rather than zeros as the
// cotangent of a w that received nothing else.
type ProductCotangentTaker interface {
	TakeProductCotangent(w, p, q *Tensor) bool
	TookProductCotangents(w *Tensor) bool
}

// productsTaken reports whether w's environment took the products'
// cotangents of w (ProductCotangentTaker.TookProductCotangents).
func productsTaken(w *Tensor) bool {
	l := w.local()
	if l == nil || w.dtype != Float32 || len(w.shape) != 2 {
		return false
	}
	t, ok := l.Env.(ProductCotangentTaker)
	return ok && t.TookProductCotangents(w)
}

// takeProductCotangent offers the cotangent of operand b of the product
// C = op(a)·op(b) with cotangent g (p the product's params) to b's
// environment (ProductCotangentTaker) and reports whether it took it.
func takeProductCotangent(g, a, b *Tensor, p *matmulParams) bool {
	l := b.local()
	if l == nil || p.ta || b.dtype != Float32 {
		return false
	}
	t, ok := l.Env.(ProductCotangentTaker)
	if !ok {
		return false
	}
	if len(a.shape) != 2 || len(g.shape) != 2 || a.dtype != Float32 || g.dtype != Float32 ||
		a.IsTraced() || g.IsTraced() || a.xv() != nil || g.xv() != nil || a.layout() != nil || g.layout() != nil {
		return false
	}
	// The taker reads g after the VJP has returned (and other devices
	// read it): g's storage must be the taker's to hold. Shared with
	// another header (a view of a cotangent the pass still accumulates
	// into, one passed to several slots), it is copied; alone, the pass
	// may still donate the header once dead but no longer writes into
	// it (accumulate in place, hand it to an overwriting kernel).
	own := g
	if g.rec == nil || g.rec.refs.Load() != 1 {
		own = newOutUninit(Float32, g.shape)
		copy(own.f32(), g.f32())
		own.setLocal(g.local())
	}
	pp, qq := a, own // d b = aᵀ·g
	if p.tb {
		pp, qq = own, a // b stored transposed: d b = gᵀ·a
	}
	taken := t.TakeProductCotangent(b, pp, qq)
	switch {
	case own != g:
		Donate(own) // the taker holds its own header if it took it
	case taken && g.cot != nil:
		g.cotShared = true
	}
	return taken
}

// SumProductsPart returns part [lo, hi) along dim (0: rows, 1: columns)
// of Σᵢ psᵢᵀ·qsᵢ, for float32 matrices psᵢ [rowsᵢ, m] and qsᵢ [rowsᵢ, n]:
// an [hi-lo, n] or [m, hi-lo] float32 tensor, computed without forming
// any product whole. Each term is one gemm of the part (a window of psᵢ's
// columns or of qsᵢ's), accumulated into the result (beta = 1) in the
// order of the terms: within float rounding of summing the whole
// products. It is the kernel of a reduce-scatter folded into
// the products it reduces (see shard.Ctx.PsumScatterProductStart); the
// result is a plain tensor, computed on the calling goroutine when any
// operand is a shard.Map block.
func SumProductsPart(ps, qs []*Tensor, dim, lo, hi int) *Tensor {
	const op = "tensor.SumProductsPart"
	if len(ps) == 0 || len(ps) != len(qs) {
		panic(fmt.Sprintf("%s: %d left and %d right operands; want the same number, at least one", op, len(ps), len(qs)))
	}
	m, n := productPartDims(op, ps, qs)
	if dim != 0 && dim != 1 {
		panic(fmt.Sprintf("%s: dim %d; want 0 or 1", op, dim))
	}
	if size := [2]int{m, n}[dim]; lo < 0 || hi > size || lo >= hi {
		panic(fmt.Sprintf("%s: part [%d, %d) of dimension %d of f32[%d,%d]", op, lo, hi, dim, m, n))
	}
	rows, cols, p0, q0 := hi-lo, n, lo, 0
	if dim == 1 {
		rows, cols, p0, q0 = m, hi-lo, 0, lo
	}
	out := newOutUninit(Float32, []int{rows, cols}) // the first term has beta = 0
	threads := 0
	if isLocal(ps...) || isLocal(qs...) {
		threads = 1
	}
	beta := float32(0)
	for i, p := range ps {
		q := qs[i]
		k := p.shape[0]
		if k == 0 {
			continue
		}
		gemm.Sgemm(true, false, rows, cols, k, 1, p.f32()[p0:], m, q.f32()[q0:], n, beta, out.f32(), cols, threads)
		beta = 1
	}
	if beta == 0 { // every term had no rows
		clear(out.f32())
	}
	return out
}

// productPartDims checks SumProductsPart's operands and returns m and n.
func productPartDims(op string, ps, qs []*Tensor) (m, n int) {
	for i, p := range ps {
		q := qs[i]
		checkNil(op, fmt.Sprintf("ps[%d] qs[%d]", i, i), p, q)
		if len(p.shape) != 2 || len(q.shape) != 2 || p.dtype != Float32 || q.dtype != Float32 ||
			p.shape[0] != q.shape[0] || p.layout() != nil || q.layout() != nil || p.xv() != nil || q.xv() != nil {
			panic(fmt.Sprintf("%s: term %d: %v and %v; want float32 matrices with as many rows, on the host", op, i, p, q))
		}
		if i == 0 {
			m, n = p.shape[1], q.shape[1]
		} else if p.shape[1] != m || q.shape[1] != n {
			panic(fmt.Sprintf("%s: term %d: %v and %v; term 0 is f32[_,%d]ᵀ·f32[_,%d]", op, i, p, q, m, n))
		}
	}
	return m, n
}

// foldWeightCotangent returns need without the right operand's bit when
// b's environment takes its cotangent over (takeProductCotangent): the
// float32 products' VJPs (matmul, dense) call it before
// matmulCotangents.
func foldWeightCotangent(g, a, b *Tensor, p *matmulParams, need uint64) uint64 {
	if Wants(need, 1) && takeProductCotangent(g, a, b, p) {
		return need &^ needBit(1)
	}
	return need
}
