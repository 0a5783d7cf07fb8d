package shard

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/gonox/gonox/tensor"
)

// This file holds the reduce-scatter folded into the product it reduces:
// PsumScatterProductStart, and FoldPsumScatter, which hands it the weight
// gradients of a backward pass as the products' VJPs would compute them
// (tensor.ProductCotangentTaker). See "Folded weight gradients" in doc.go.

// psumScatterProductColl names the folded reduce-scatter in Comm
// ("psum_scatter_product": the bytes the reduce-scatter of the whole
// product would have sent); its slots are psum_scatter's.
var psumScatterProductColl = &collective{kind: "psum_scatter_product"}

// PsumScatterProductStart starts PsumScatter(MatMulT(p, q, true, false),
// axes, scatterDim, true) — the reduce-scatter of pᵀ·q, for float32
// matrices p [rows, m] and q [rows, n] (a layer's input and its output's
// cotangent: pᵀ·q is the device's weight gradient) — and returns at once.
// Inside one process the product is never formed whole: h.Wait() meets
// the other devices and computes the device's part of the sum from every
// device's p and q (tensor.SumProductsPart: the same multiply-adds as the
// products, 1/n of the product's bytes written, no summation pass); the
// last device done with the operands releases every device's, so no
// device waits for the others to finish reading. The part is that of the
// unfolded reduce-scatter up to the order of the sums: the partial
// products are accumulated one after another into the part, where
// psum_scatter sums whole products elementwise (and the gemm may block a
// part differently from the whole product). On a mesh spanning
// processes, and over one device, the product is computed and
// reduce-scattered as PsumScatterStart does.
//
// p and q must have the same shapes on every device, and the dimension
// scatterDim of pᵀ·q (0: m, 1: n) must be divisible by the number of
// devices over the axes. Like PsumStart it is not
// differentiable; Wait must be called once, inside the fn that started
// it, on the same device.
func (c *Ctx) PsumScatterProductStart(p, q *tensor.Tensor, axes Axes, scatterDim int) *Handle {
	h, _ := c.psumScatterProductStart(p, q, axes, scatterDim)
	return h
}

// psumScatterProductStart is PsumScatterProductStart, which also returns
// where the caller may leave a tensor.PieceStep before h.Wait() (nil when
// the product is computed whole and reduce-scattered): the part is then
// handed to it block by block (tensor.SumProductsPartThen) and never
// formed, and Wait returns nil.
func (c *Ctx) psumScatterProductStart(p, q *tensor.Tensor, axes Axes, scatterDim int) (*Handle, *tensor.PieceStep) {
	const op = "shard.Ctx.PsumScatterProductStart"
	checkLocal(op, c, p)
	checkLocal(op, c, q)
	if p.Rank() != 2 || q.Rank() != 2 || p.Dim(0) != q.Dim(0) || p.DType() != tensor.Float32 || q.DType() != tensor.Float32 {
		panic(fmt.Sprintf("%s: %v and %v: want float32 matrices with as many rows", op, p, q))
	}
	e := c.env
	g := e.group(op, axes)
	if !e.foldsInProcess(g) {
		return c.PsumScatterStart(tensor.MatMulT(p, q, true, false), axes, scatterDim, true), nil
	}
	if scatterDim != 0 && scatterDim != 1 {
		panic(fmt.Sprintf("%s: scatter dimension %d of %v ᵀ· %v; want 0 or 1", op, scatterDim, p, q))
	}
	size := []int{p.Dim(1), q.Dim(1)}[scatterDim]
	if size%g.size != 0 {
		panic(fmt.Sprintf("%s: %vᵀ·%v: dim %d (%d) is not divisible by %s=%d", op, p, q, scatterDim, size, axesLabel(DimSpec(axes)), g.size))
	}
	mask := e.maskOf(op, axes) | maskOf(p) | maskOf(q)
	prm := &collParams{env: e, axes: slices.Clone(axes), mask: e.maskOf(op, axes), dim: scatterDim, tiled: true}
	// Short blocks are gathered into one operand each (every device
	// copies its rows in before it arrives), for one product with the
	// rows of every device: a product of few rows a device does not
	// amortise its packing and its passes over the part.
	var gp, gq *tensor.Tensor
	if p.Dim(0) < foldGatherRows {
		gp, gq = gatherRows(e, g, p, q)
	}
	// The other devices read the call's blocks until every one is done:
	// headers of the collective's own hold their storage meanwhile, and
	// the last device done donates every device's (no device waits for
	// the others to finish reading, as a barrier would make it).
	ownP := snapshotOf(p)
	ownQ := snapshotOf(q)
	cl := &call{coll: psumScatterColl, axes: prm.axes, x: ownP, data: ownQ, p: prm,
		extra: fmt.Sprintf("product f32[_,%d]ᵀ·f32[_,%d] dim %d", p.Dim(1), q.Dim(1), scatterDim)}
	then := new(tensor.PieceStep)
	partBytes := int64(size/g.size) * int64([]int{q.Dim(1), p.Dim(1)}[scatterDim]) * 4
	h := e.startReduction(c, cl, func(s *slot) *tensor.Tensor {
		ps, qs := []*tensor.Tensor{gp}, []*tensor.Tensor{gq}
		if gp != nil {
			// A view with this device's mark: the product runs on the
			// device's goroutine alone, as with its own blocks, not on
			// the worker pool (whose spinning workers would take the
			// cores the other devices compute on).
			ps[0] = e.marked(gp, mask)
			defer tensor.Donate(ps[0])
		} else {
			ps, qs = make([]*tensor.Tensor, g.size), make([]*tensor.Tensor, g.size)
			for r, m := range g.members {
				ps[r], qs[r] = s.calls[m].x, s.calls[m].data.(*tensor.Tensor)
			}
		}
		part := size / g.size
		var out *tensor.Tensor
		if *then != nil {
			tensor.SumProductsPartThen(ps, qs, scatterDim, g.rank*part, (g.rank+1)*part, *then)
		} else {
			out = tensor.SumProductsPart(ps, qs, scatterDim, g.rank*part, (g.rank+1)*part)
		}
		if e.run.lastOut(s) {
			for _, cl := range s.calls {
				tensor.Donate(cl.x, cl.data.(*tensor.Tensor))
			}
			// The gathered operands of every group.
			s.shared.Range(func(_, v any) bool {
				tensor.Donate(v.(*lazyResult).t)
				return true
			})
		}
		// What the unfolded reduce-scatter would have sent, under a kind
		// of its own.
		e.account(psumScatterProductColl, int64(g.size-1)*partBytes)
		if out == nil {
			return nil
		}
		return e.markedFresh(out, mask)
	})
	return h, then
}

// foldGatherRows is the number of rows per device below which
// PsumScatterProductStart gathers the devices' blocks for one product
// (8 devices' 32 rows each of a batch of 256: 0.92 s of samples for the
// weight gradients of 150 DP steps as 8 products of 32 rows a part,
// against 0.65 s on 2 devices as 2 of 128).
const foldGatherRows = 64

// gatherRows copies p and q into the rows of this device (its rank in g)
// of two float32 tensors the devices of g share in their next slot, and
// returns them: every device's rows, in rank order, once all have arrived.
// Rows gathered before for the same group are taken as they are
// (gatherInto: a layer input that its shared forward product gathered),
// and q's gathered rows are recorded for a later gather of them (the
// input gradient's shared product, whose operand is q).
func gatherRows(e *devEnv, g group, p, q *tensor.Tensor) (gp, gq *tensor.Tensor) {
	s := e.run.next(e)
	// Two shared results in the slot: the group's key for p, its
	// complement (negative, no group's key) for q.
	gp = e.gatherInto(s, g, g.key, p)
	gq = e.gatherInto(s, g, ^g.key, q)
	e.keepGathered(g, q, gq)
	return gp, gq
}

// foldsInProcess reports whether the devices of g read each other's
// operands: the group has more than one device and the mesh lies in this
// process (on a mesh spanning processes every slot takes part in the
// cross-process exchange, which knows only the unfolded reduce-scatter).
func (e *devEnv) foldsInProcess(g group) bool {
	return g.size > 1 && !e.mesh.spans()
}

// FoldedGradient is the weight gradient of one value, reduce-scattered
// as the backward pass computes it (FoldPsumScatter).
type FoldedGradient struct {
	c     *Ctx
	run   *run // the run whose backward passes it folds
	key   foldKey
	axes  []string
	dim   int
	hs    []*Handle
	thens []*tensor.PieceStep // by handle: psumScatterProductStart's
	taken bool                // Wait has run: the fold no longer takes products
	share bool                // the forward products are shared (ShareForward)
}

// foldKey identifies a value by its storage and shape: the operand a
// product's VJP sees is a header of the trace's own over the same storage.
type foldKey struct {
	data  unsafe.Pointer
	shape [2]int
}

// foldKeyOf returns the key of float32 matrix w.
func foldKeyOf(w *tensor.Tensor) foldKey {
	return foldKey{unsafe.Pointer(unsafe.SliceData(w.BorrowFloat32())), [2]int{w.Dim(0), w.Dim(1)}}
}

// FoldPsumScatter arranges for the cotangent of w, a float32 matrix of
// this device (a parameter's varying copy, about to be differentiated),
// to be reduce-scattered over the axes along scatterDim (a tiled
// PsumScatter) as the backward pass computes it, rather than computed
// whole and reduced after: in the backward passes run on this device
// until Wait, each product's VJP (MatMul, MatMulT and MatMulBiasAct with
// w as the right operand) that would compute w's cotangent as pᵀ·q hands
// p and q to PsumScatterProductStart instead, and adds nothing to w's
// cotangent. What the backward pass still returns for w is the rest: the
// cotangents of w's other uses (w transposed or reshaped first, an
// elementwise use, a product in bfloat16, a product inside Vmap or
// differentiated twice), or nil if there are none and a product was
// taken (a gradient tree then has an empty position there: pytree.Flatten
// skips it); its reduce-scatter plus Wait's result is the reduce-scatter
// of w's whole cotangent.
//
// Every device must fold the same values in the same order, as it issues
// collectives. Products of a w whose scatterDim (of pᵀ·q) is not
// divisible by the number of devices are not taken, nor any over axes of
// one device (there is nothing to reduce).
func (c *Ctx) FoldPsumScatter(w *tensor.Tensor, axes Axes, scatterDim int) *FoldedGradient {
	const op = "shard.Ctx.FoldPsumScatter"
	checkLocal(op, c, w)
	if w.Rank() != 2 || w.DType() != tensor.Float32 || (scatterDim != 0 && scatterDim != 1) {
		panic(fmt.Sprintf("%s: %v along dimension %d: want a float32 matrix and dimension 0 or 1", op, w, scatterDim))
	}
	f := &FoldedGradient{c: c, run: c.env.run, key: foldKeyOf(w), axes: slices.Clone(axes), dim: scatterDim}
	e := c.env
	if e.folds == nil {
		e.folds = map[foldKey]*FoldedGradient{}
	}
	if _, dup := e.folds[f.key]; dup {
		panic(fmt.Sprintf("%s: %v is folded already", op, w))
	}
	e.folds[f.key] = f
	return f
}

// Folded returns the number of products whose cotangent f has taken.
func (f *FoldedGradient) Folded() int { return len(f.hs) }

// Wait stops f from taking products and returns the sum of the
// reduce-scattered cotangents it took, waiting for each (nil if it took
// none). It must be called once, inside the fn that called
// FoldPsumScatter, after the backward pass.
func (f *FoldedGradient) Wait() *tensor.Tensor {
	if f.taken {
		panic("shard.FoldedGradient.Wait: called twice, or after WaitThen")
	}
	f.taken = true
	delete(f.c.env.folds, f.key)
	defer f.c.env.dropGatheredAfterFolds()
	var sum *tensor.Tensor
	for _, h := range f.hs {
		part := h.Wait()
		if sum == nil {
			sum = part
			continue
		}
		s := tensor.Add(sum, part)
		tensor.Donate(sum, part)
		sum = s
	}
	return sum
}

// WaitThen is Wait for a caller that consumes the gradient piece by
// piece: if f took exactly one product and folds it in this process, it
// waits for it and hands the device's part of the sum to step, block of
// rows by block of rows (tensor.SumProductsPartThen: every element once,
// on this goroutine, the part never formed whole), and reports true. An
// elementwise optimizer step there (tensor.AdamStepIntoOverMomentsLater)
// updates each block of the parameter while its gradient is in cache.
// Otherwise (no product or several, or a mesh spanning processes, where
// the products are reduce-scattered whole) it does nothing and reports
// false: the caller then calls Wait. Like Wait it must be called once,
// inside the fn that called FoldPsumScatter, after the backward pass.
func (f *FoldedGradient) WaitThen(step tensor.PieceStep) bool {
	if f.taken {
		panic("shard.FoldedGradient.WaitThen: called after Wait or WaitThen")
	}
	if len(f.hs) != 1 || f.thens[0] == nil || step == nil {
		return false
	}
	f.taken = true
	delete(f.c.env.folds, f.key)
	defer f.c.env.dropGatheredAfterFolds()
	*f.thens[0] = step
	f.hs[0].Wait()
	return true
}

// TakeProductCotangent implements tensor.ProductCotangentTaker: the
// product's cotangent pᵀ·q of a value folded on this device
// (FoldPsumScatter) starts its reduce-scatter.
func (e *devEnv) TakeProductCotangent(w, p, q *tensor.Tensor) bool {
	if len(e.folds) == 0 {
		return false
	}
	f := e.folds[foldKeyOf(w)]
	if f == nil || f.run != e.run || w.Dim(0) != p.Dim(1) || w.Dim(1) != q.Dim(1) {
		return false
	}
	if l := p.Local(); l != nil && l.Env != e {
		return false
	}
	if l := q.Local(); l != nil && l.Env != e {
		return false
	}
	if g := e.group("shard.Ctx.FoldPsumScatter", f.axes); g.size == 1 || w.Dim(f.dim)%g.size != 0 {
		return false // nothing to reduce, or parts that do not divide
	}
	h, then := f.c.psumScatterProductStart(p, q, f.axes, f.dim)
	f.hs, f.thens = append(f.hs, h), append(f.thens, then)
	return true
}

// TookProductCotangents implements tensor.ProductCotangentTaker: w is
// folded on this device and its fold took a product's cotangent.
func (e *devEnv) TookProductCotangents(w *tensor.Tensor) bool {
	if len(e.folds) == 0 {
		return false
	}
	f := e.folds[foldKeyOf(w)]
	return f != nil && f.run == e.run && len(f.hs) > 0
}

// dropGatheredAfterFolds forgets the device's gathered rows
// (gatheredRows) once no fold is left to gather rows.
func (e *devEnv) dropGatheredAfterFolds() {
	if len(e.folds) == 0 && len(e.gathered) > 0 {
		e.dropGathered(func(*gatheredRows) bool { return true })
	}
}
