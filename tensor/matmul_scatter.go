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
	stacked := p.stacked(a, b) // a's rows and g's: those of the product of its rows
	if (len(a.shape) != 2 && !stacked) || len(g.shape) != len(a.shape) || a.dtype != Float32 || g.dtype != Float32 ||
		a.IsTraced() || g.IsTraced() || a.xv() != nil || g.xv() != nil || a.layout() != nil || g.layout() != nil {
		return false
	}
	// The taker reads g after the VJP has returned (and other devices
	// read it): g's storage must be the taker's to hold. Shared with
	// another header (a view of a cotangent the pass still accumulates
	// into, one passed to several slots), it is copied; alone, the pass
	// may still donate the header once dead but no longer writes into
	// it (accumulate in place, hand it to an overwriting kernel).
	shared := g.rec == nil || g.rec.refs.Load() != 1
	own, ra := g, a
	if stacked {
		// Views of the rows; g's, of storage g alone held, is then as g
		// (the pass no longer writes into it) and donated as a copy is.
		own, ra = rowsOf(g), rowsOf(a)
	}
	if shared {
		c := newOutUninit(Float32, own.shape)
		copy(c.f32(), own.f32())
		c.setLocal(g.local())
		dropView(own, g)
		own = c
	}
	pp, qq := ra, own // d b = aᵀ·g
	if p.tb {
		pp, qq = own, ra // b stored transposed: d b = gᵀ·a
	}
	taken := t.TakeProductCotangent(b, pp, qq)
	dropView(ra, a)
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
	rows, cols, pr := productPart(op, ps, qs, dim, lo, hi)
	out := newOutUninit(Float32, []int{rows, cols})
	pr.rows(out.f32(), 0, rows, partThreads(ps, qs))
	return out
}

// SumProductsPartThen computes the part SumProductsPart(ps, qs, dim, lo,
// hi) returns block of rows by block of rows, without forming it: each
// block, once summed over every term, is handed to then (a PieceStep: at
// is the offset of its first element in the part, row-major, and g its
// elements, whole rows) and its buffer is reused for the next block. then
// is called for every element of the part exactly once, in order, on the
// calling goroutine, and must not keep g. An optimizer step applied there
// (AdamStepIntoOverMomentsLater) reads each block of the gradient while it
// is in cache, and the gradient is never written to memory: the kernel of
// a reduce-scatter folded into its products and into the update that
// consumes it (see shard.FoldedGradient.WaitThen). Each block is computed
// with the same multiply-adds in the same order as in SumProductsPart (the
// terms in order, each a gemm of the block's rows): the same bits where the
// gemm computes a row the same way whatever rows it is given, as the
// float32 kernels do for these products.
func SumProductsPartThen(ps, qs []*Tensor, dim, lo, hi int, then PieceStep) {
	const op = "tensor.SumProductsPartThen"
	rows, cols, pr := productPart(op, ps, qs, dim, lo, hi)
	if then == nil {
		panic(op + ": nil then")
	}
	if rows == 0 || cols == 0 {
		return
	}
	// Blocks of at most partBlockRows rows, about equal.
	nb := (rows + partBlockRows - 1) / partBlockRows
	per := (rows + nb - 1) / nb
	buf := newOutUninit(Float32, []int{per, cols})
	threads := partThreads(ps, qs)
	for r := 0; r < rows; r += per {
		r1 := min(r+per, rows)
		g := buf.f32()[:(r1-r)*cols]
		pr.rows(g, r, r1, threads)
		then(r*cols, g)
	}
	Donate(buf)
}

// partBlockRows is the most rows of a block of SumProductsPartThen: 128
// rows of 1024 float32 columns (512 KiB) stay in L2 (1 MiB a Zen 5 core,
// 2 MiB a Sapphire Rapids one) between the products and the step that
// reads them. One core computed the DP benchmark's 1024×1024 part of 512
// rows and its Adam step in blocks of 48 to 128 rows at the cost of the
// part then the step (BenchmarkFoldedAdam/devices=1, Zen 5, load ~5:
// 190-218 GFLOP/s for every block size and for "after"). On Sapphire
// Rapids, where the gemm packs the right operand from 17 rows when its
// rows are 4 KiB apart, the 8-device DP step's parts of 98 and 128 rows
// cost ~1 CPU-ms a step less as one block each than as two of 49 and 64
// (each block reads and packs all of q): see docs/performance.md, "The
// 8-device forward products computed by the devices together". A variable
// for the benchmark.
var partBlockRows = 128

// A PieceStep applies one step of an elementwise optimizer to the
// elements [at, at+len(g)) of one parameter, row-major, given their
// gradient g: the step's other operands (the parameter, its moments, the
// coefficients) are bound when the PieceStep is made
// (AdamStepIntoOverMomentsLater, SGDStepIntoLater). It lets the gradient
// arrive in pieces, each used while it is in cache (SumProductsPartThen).
type PieceStep func(at int, g []float32)

// productsPart is one part of Σᵢ psᵢᵀ·qsᵢ (SumProductsPart): the terms'
// float32 storage and where the part's window starts in each.
type productsPart struct {
	ps, qs [][]float32
	ks     []int // the terms' rows
	m, n   int   // the whole product's dimensions
	cols   int   // the part's columns
	p0, q0 int   // the first column of the window in ps and qs
}

// productPart checks SumProductsPart's arguments, naming op, and returns
// the part's dimensions and its terms.
func productPart(op string, ps, qs []*Tensor, dim, lo, hi int) (rows, cols int, pr productsPart) {
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
	pr = productsPart{m: m, n: n, cols: cols, p0: p0, q0: q0}
	for i, p := range ps {
		if p.shape[0] > 0 {
			pr.ps = append(pr.ps, p.f32())
			pr.qs = append(pr.qs, qs[i].f32())
			pr.ks = append(pr.ks, p.shape[0])
		}
	}
	return rows, cols, pr
}

// partThreads returns the gemm's thread budget for a part of the products
// of ps and qs: the calling goroutine alone when an operand is a
// shard.Map block.
func partThreads(ps, qs []*Tensor) int {
	if isLocal(ps...) || isLocal(qs...) {
		return 1
	}
	return 0
}

// rows computes rows [r0, r1) of the part into out (r1-r0 rows of
// pr.cols): each term one gemm accumulated (beta = 1) in the terms' order.
func (pr *productsPart) rows(out []float32, r0, r1, threads int) {
	if len(pr.ps) == 0 { // every term had no rows
		clear(out)
		return
	}
	beta := float32(0) // the first term overwrites
	for i, p := range pr.ps {
		gemm.Sgemm(true, false, r1-r0, pr.cols, pr.ks[i], 1, p[pr.p0+r0:], pr.m, pr.qs[i][pr.q0:], pr.n, beta, out, pr.cols, threads)
		beta = 1
	}
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

// A product of few rows computed by the devices together.
//
// In a data-parallel step every device multiplies its own rows by the same
// replicated weight: with 8 devices of 32 rows each (a batch of 256), each
// device's product x·w streams the whole of w from memory for 32 rows,
// and the gemm runs at ~60% of its speed on 256 rows (Sapphire Rapids).
// Together, the devices of a process gather their rows into one operand
// and each computes a block of columns of the product of every row, so
// that w is read once: package shard's device environment does it
// (ProductTaker) for the products it was asked to share
// (shard.FoldedGradient.ShareForward).

// ProductTaker is implemented by the environment of a device inside
// shard.Map (tensor.Local's Env) that may compute a product together with
// the other devices. When MatMul, MatMulBiasAct (or an op built on them)
// computes x·w for float32 matrices x [m, k] and w [k, n], neither
// transposed, or the VJP of a product computes the cotangent of its left
// operand as x·wᵀ (x the output's cotangent, w [n, k] the right operand),
// and x carries a Local mark whose Env implements this interface, it
// calls TakeProduct(x, w, transW) first: a non-nil result is the product,
// storage the caller takes as its own (fresh, or the device's rows of a
// result the devices share, RowsView: it may write the bias and the
// activation over it), with the bits the caller would have computed;
// nil, the caller computes it as usual. It is called on the device's
// goroutine; x and w must not be modified.
type ProductTaker interface {
	TakeProduct(x, w *Tensor, transW bool) *Tensor
}

// takeProduct offers the product a·b (p its params) to a's environment
// (ProductTaker) and returns its result, or nil if it did not take it.
func takeProduct(a, b *Tensor, p *matmulParams) *Tensor {
	if p.ta || p.tb {
		return nil
	}
	return takeProductOf(a, b, false)
}

// takeProductOfT is takeProductOf for op(a)·op(b): nil for a transposed.
func takeProductOfT(a, b *Tensor, ta, tb bool) *Tensor {
	if ta {
		return nil
	}
	return takeProductOf(a, b, tb)
}

// takeProductOf offers a·b, or a·bᵀ with tb, to a's environment
// (ProductTaker) and returns its result, or nil if it did not take it.
func takeProductOf(a, b *Tensor, tb bool) *Tensor {
	l := a.local()
	if l == nil || len(a.shape) != 2 || len(b.shape) != 2 || a.dtype != Float32 || b.dtype != Float32 {
		return nil
	}
	t, ok := l.Env.(ProductTaker)
	if !ok {
		return nil
	}
	return t.TakeProduct(a, b, tb)
}

// RowsView returns rows [r0, r1) of x, a float32 matrix of untraced host
// storage, as a header of its own over x's storage: no copy. It holds the
// storage as a header of x does (Donate drops that hold; the storage goes
// back to the allocator cache once every holder has dropped it), and its
// elements are x's: writing one writes the other. It keeps x's shard.Map
// mark. The devices of a shared product take their rows of the group's
// result this way (ProductTaker).
func RowsView(x *Tensor, r0, r1 int) *Tensor {
	const op = "tensor.RowsView"
	checkNil(op, "x", x)
	if len(x.shape) != 2 || !markedOperand(x) {
		panic(fmt.Sprintf("%s: %v: want a float32 matrix of untraced host storage", op, x))
	}
	if r0 < 0 || r1 > x.shape[0] || r0 >= r1 {
		panic(fmt.Sprintf("%s: rows [%d, %d) of %v", op, r0, r1, x))
	}
	n := x.shape[1]
	v := x.shallow() // holds the storage
	v.shape = []int{r1 - r0, n}
	v.data = raw(x.f32()[r0*n : r1*n : r1*n])
	return v
}

// ProductColumnsInto computes columns [j0, j1) of a·b, for float32
// matrices a [m, k] and b [k, n], or of a·bᵀ with transB (b [n, k]), into
// the same columns of out [m, n], leaving its other columns as they are:
// the kernel of a product the devices of a process compute together,
// each blocks of columns from every device's rows (see ProductTaker).
// Where the block has more columns than a kernel tile has rows (12 on
// AVX-512, 6 on AVX2; 32 and more suffice for every kernel set), every
// element gets the bits of MatMulT(a, b, false, transB) and of the
// product of any of a's rows by b: the gemm then computes an element the
// same way whatever rows and columns it is given (the same k blocks, each
// summed in order); a narrower block may be computed as its transpose,
// within float rounding. It computes on the calling goroutine when any
// operand is a shard.Map block.
func ProductColumnsInto(out, a, b *Tensor, transB bool, j0, j1 int) {
	const op = "tensor.ProductColumnsInto"
	checkNil(op, "out a b", out, a, b)
	if len(a.shape) != 2 || len(b.shape) != 2 || len(out.shape) != 2 || a.dtype != Float32 || b.dtype != Float32 || out.dtype != Float32 {
		panic(fmt.Sprintf("%s: %v, %v into %v: want float32 matrices", op, a, b, out))
	}
	m, k := a.shape[0], a.shape[1]
	kb, n := b.shape[0], b.shape[1]
	if transB {
		kb, n = n, kb
	}
	if k != kb || out.shape[0] != m || out.shape[1] != n {
		panic(fmt.Sprintf("%s: %v, %v (transposed %v) into %v: want a [m,k], b [k,n] (or [n,k] transposed) and out [m,n]", op, a, b, transB, out))
	}
	for _, x := range []*Tensor{out, a, b} {
		if !markedOperand(x) {
			panic(fmt.Sprintf("%s: %v: want untraced host storage", op, x))
		}
	}
	if j0 < 0 || j1 > n || j0 > j1 {
		panic(fmt.Sprintf("%s: columns [%d, %d) of a product of %d", op, j0, j1, n))
	}
	if j0 == j1 || m == 0 {
		return
	}
	threads := 0
	if isLocal(out, a, b) {
		threads = 1
	}
	bs, ldb := b.f32()[j0:], n
	if transB {
		bs, ldb = b.f32()[j0*k:], k
	}
	gemm.Sgemm(false, transB, m, j1-j0, k, 1, a.f32(), k, bs, ldb, 0, out.f32()[j0:], n, threads)
}
