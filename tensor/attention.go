package tensor

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/gonox/gonox/tensor/internal/gemm"
	"github.com/gonox/gonox/tensor/internal/vec"
)

// Scaled dot-product attention as one op forward and one backward, with
// FlashAttention's algorithm (Dao et al. 2022, FlashAttention-2's loop
// order) on the CPU: the keys are visited in blocks, each query keeps a
// running maximum and sum of its exponentials (an online softmax), and
// the T×S matrix of weights is never stored — only one block of it per
// goroutine, in cache. The forward keeps the output and the log-sum-exp
// of each query's logits; the backward recomputes each block's weights
// from them. Memory is linear in the sequence lengths, and a causal mask
// skips the blocks above the diagonal in both passes.

// attnParams are the static parameters of attention and its backward op.
type attnParams struct {
	scale  float32
	causal bool
	mask   bool // the last operand is a bool mask [Bm, Nm, Tm, Sm]
	glse   bool // backward: a cotangent of the log-sum-exp is an operand
	bf16   bool // the products in bfloat16 (DotProductAttentionAs)
}

// Block sizes: queries per block and keys per block. A block of logits
// (attnBr×attnBc floats, 32 KiB) and one of its gradient stay in L2 beside
// the key and value rows they come from.
const (
	attnBr = 64
	attnBc = 128
)

var attentionOp, attentionBwdOp *Op

func init() {
	attentionOp = &Op{
		Name:  "attention",
		ImplN: func(in []*Tensor, pp any) ([]*Tensor, any) { return attentionImpl(in, pp.(*attnParams)), nil },
		VJPN: func(gs, in, outs []*Tensor, pp any, _ any) []*Tensor {
			return attentionVJP(gs, in, outs, pp.(*attnParams))
		},
		Save:     SaveAllInputs | SaveOutput,
		JVP:      attentionJVP,
		Batch:    attentionBatch(&attentionOp, 2),
		Sharding: ShardingRule{Family: ShardAttention},
		Traits:   Traits{Reuse: FreshVJP}, // the backward op allocates its results
	}
	// attention_bwd: (q, k, v, out, lse, g[, glse][, mask]) → (dq, dk,
	// dv). Not differentiable itself: attention's VJP takes the
	// composition of ops instead when its values are traced (higher
	// derivatives) or carry tangents.
	attentionBwdOp = &Op{
		Name: "attention_bwd",
		ImplN: func(in []*Tensor, pp any) ([]*Tensor, any) {
			return attentionBwdImpl(in, pp.(*attnParams)), nil
		},
		Batch:    attentionBatch(&attentionBwdOp, 3),
		Sharding: ShardingRule{Family: ShardAttention},
	}
}

// DotProductAttention is scaled dot-product attention, as
// jax.nn.dot_product_attention with JAX's layout: q is f32[B,T,N,H] (batch,
// queries, heads, features per head), k is f32[B,S,N,H] and v f32[B,S,N,V],
// and the result is f32[B,T,N,V]:
//
//	out[b,t,n] = Σ_s softmax_s(scale · q[b,t,n]·k[b,s,n]) v[b,s,n]
//
// scale 0 means 1/√H. mask, if not nil, is a bool tensor that broadcasts to
// [B,N,T,S]: key s is visible to query t where it is true. causal also
// hides every key s > t (aligned at the top left, as JAX's is_causal).
// Hidden keys get exactly zero weight; a query that sees no key at all
// gets NaN, as in JAX with -Inf masking.
//
// It is one op (FlashAttention's algorithm, see attention.go): the T×S
// weights are never stored, forward or backward, so memory grows linearly
// with T and S, and the causal mask skips the blocks it hides. The
// backward pass keeps q, k, v, the output and one float per query.
// Placed operands split over the batch and head dimensions compute
// blockwise on their devices.
//
// It panics unless q, k and v are rank 4 of one float dtype with the
// shapes above, the mask is bool and broadcasts, and scale is finite.
func DotProductAttention(q, k, v, mask *Tensor, scale float32, causal bool) *Tensor {
	return dotProductAttention("tensor.DotProductAttention", q, k, v, mask, scale, causal, false)
}

// DotProductAttentionAs is DotProductAttention with its matrix products
// computed in dtype compute, Float32 or BFloat16: with BFloat16, q·kᵀ, the
// weights times v and the four products of the backward pass read their
// operands rounded to bfloat16 (to nearest even; the weights and their
// gradients block by block as the kernel makes them) and accumulate in
// float32, while the scaled logits, the mask, the softmax with its running
// maximum and sum, the saved log-sum-exp and the result are float32. This
// is what bf16 mixed precision runs in PyTorch's autocast (bmm in bf16,
// softmax in float32) and JAX with bf16 operands and float32
// accumulation, and what nn.MultiHeadAttention runs under a bf16 Policy.
// q, k and v are float32; gradients are float32, computed in bfloat16 too
// (the rounding passes cotangents straight through, as MatMulAs's). On
// CPUs with AVX-512 BF16 the products run on its kernel (two
// multiply-adds a lane where float32 does one); elsewhere they widen the
// rounded operands to float32, with the same values and slower than
// Float32.
//
// The results differ from DotProductAttention's by the operands' rounding
// (bfloat16 keeps 8 significant bits): against a float64 computation on
// the rounded operands, outputs and gradients stay within 6e-3 of their
// largest magnitude in the tests.
// With compute Float32 it is DotProductAttention (operands of any float
// dtype). It panics as DotProductAttention does, and if compute is
// neither Float32 nor BFloat16, or is BFloat16 and the operands are not
// float32.
func DotProductAttentionAs(q, k, v, mask *Tensor, scale float32, causal bool, compute DType) *Tensor {
	const op = "tensor.DotProductAttentionAs"
	if compute == Float32 {
		return dotProductAttention(op, q, k, v, mask, scale, causal, false)
	}
	checkNil(op, "q k v", q, k, v)
	if compute != BFloat16 || q.dtype != Float32 {
		panic(fmt.Sprintf("%s: %s: compute dtype %v: want float32 operands and a compute dtype float32 or bfloat16", op, operands(",", q, k, v), compute))
	}
	return dotProductAttention(op, q, k, v, mask, scale, causal, compute == BFloat16)
}

// dotProductAttention is DotProductAttention(As) for op, with the products
// in bfloat16 if bf16.
func dotProductAttention(op string, q, k, v, mask *Tensor, scale float32, causal, bf16 bool) *Tensor {
	checkNil(op, "q k v", q, k, v)
	desc := func() string { return operands(",", q, k, v) }
	if len(q.shape) != 4 || len(k.shape) != 4 || len(v.shape) != 4 ||
		!q.dtype.IsFloat() || k.dtype != q.dtype || v.dtype != q.dtype {
		panic(fmt.Sprintf("%s: %s: want q [batch, T, heads, H], k [batch, S, heads, H], v [batch, S, heads, V] of one float dtype", op, desc()))
	}
	B, T, N, H := q.shape[0], q.shape[1], q.shape[2], q.shape[3]
	S := k.shape[1]
	if !slices.Equal(k.shape, []int{B, S, N, H}) || v.shape[0] != B || v.shape[1] != S || v.shape[2] != N {
		panic(fmt.Sprintf("%s: %s: k must be [%d, S, %d, %d] and v [%d, S, %d, V] with the same S", op, desc(), B, N, H, B, N))
	}
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		panic(fmt.Sprintf("%s: %s: scale %g is not finite", op, desc(), scale))
	}
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(max(H, 1))))
	}
	if q.dtype == Float64 { // composed: the fused kernels are float32
		return attention64(q, k, v, mask, float64(scale), causal)
	}
	p := &attnParams{scale: scale, causal: causal, bf16: bf16}
	in := []*Tensor{q, k, v}
	if mask != nil {
		checkNil(op, "mask", mask)
		in = append(in, attentionMask(op, mask, B, N, T, S))
		p.mask = true
	}
	return applyNIn(attentionOp, p, in)[0]
}

// attentionMask checks that mask is bool and broadcasts to [B,N,T,S], and
// returns it with rank 4.
func attentionMask(op string, mask *Tensor, B, N, T, S int) *Tensor {
	full := []int{B, N, T, S}
	ok := mask.dtype == Bool && len(mask.shape) <= 4
	for i, d := range mask.shape {
		if ok && d != 1 && d != full[4-len(mask.shape)+i] {
			ok = false
		}
	}
	if !ok {
		panic(fmt.Sprintf("%s: mask %v: want bool broadcastable to [%d,%d,%d,%d] (batch, heads, queries, keys)", op, mask, B, N, T, S))
	}
	if len(mask.shape) < 4 {
		shape := append(ones(4-len(mask.shape)), mask.shape...)
		mask = Reshape(mask, shape...)
	}
	return mask
}

// attnDims are the sizes of an attention call and the row strides of its
// operands in the [B, T, N, ·] layout.
type attnDims struct {
	B, T, S, N, H, V int
	ldq, ldv         int // N·H and N·V
	mask             *Tensor
	mb, mn, mt, ms   int // element strides of the mask (0 where it broadcasts)
}

func attnDimsOf(q, k, v, mask *Tensor) attnDims {
	d := attnDims{B: q.shape[0], T: q.shape[1], N: q.shape[2], H: q.shape[3], S: k.shape[1], V: v.shape[3]}
	d.ldq, d.ldv = d.N*d.H, d.N*d.V
	if mask != nil {
		d.mask = mask
		st := contiguousStrides(mask.shape)
		for i, p := range []*int{&d.mb, &d.mn, &d.mt, &d.ms} {
			if mask.shape[i] > 1 {
				*p = st[i]
			}
		}
	}
	return d
}

// attentionImpl computes out [B,T,N,V] and lse [B,N,T].
func attentionImpl(in []*Tensor, p *attnParams) []*Tensor {
	q, k, v := in[0], in[1], in[2]
	var mask *Tensor
	if p.mask {
		mask = in[3]
	}
	d := attnDimsOf(q, k, v, mask)
	out := newOutUninit(Float32, []int{d.B, d.T, d.N, d.V})
	lse := newOutUninit(Float32, []int{d.B, d.N, d.T})
	nq := (d.T + attnBr - 1) / attnBr
	units := d.B * d.N * nq
	// A unit is one block of queries of one head: 2·bc·(H+V) flops per
	// query and key; parallelFor counts one unit of work per 64 flops.
	cost := max(1, attnBr*min(d.S, 4096)*(d.H+d.V)/32)
	if p.causal {
		cost /= 2
	}
	ops := attnF32{q: q.f32(), k: k.f32(), v: v.f32()}
	parallelFor(units, cost, 1, isLocal(q, k, v), func(lo, hi int) {
		bp, s := attnScratch(attnBr*attnBc + 2*attnBr)
		pr := attnProducts(ops)
		var bf *attnBF16
		if p.bf16 {
			bf = newAttnBF16(&d, ops, false)
			defer bf.release()
			pr = bf
		}
		for u := lo; u < hi; u++ {
			bn, qb := u/nq, zigzag(u%nq, nq)
			if bf != nil {
				bf.load(bn / d.N)
			}
			attnForwardBlock(&d, p, pr, out.f32(), lse.f32(), bn/d.N, bn%d.N, qb*attnBr, s)
		}
		attnPool.Put(bp)
	})
	return []*Tensor{out, lse}
}

// attnPool holds the attention kernels' scratch (a block of logits and
// the running maxima and sums forward, two blocks and a row vector
// backward: 33-66 KB), which each chunk of a parallel call allocated and
// zeroed afresh: at two threads 3 MB a step of examples/moe's model, 0.4
// MB at one.
var attnPool = sync.Pool{New: func() any { return new([]float32) }}

// attnScratch returns n float32s of scratch from attnPool (not zeroed:
// the kernels write what they read), and the pool's slice to put back.
func attnScratch(n int) (*[]float32, []float32) {
	bp := attnPool.Get().(*[]float32)
	if cap(*bp) < n {
		*bp = make([]float32, n)
	}
	return bp, (*bp)[:n]
}

// zigzag orders the query blocks of a head 0, n-1, 1, n-2, ...: under a
// causal mask block i costs about i+1 key blocks, so contiguous runs of
// this order (what parallelFor hands each goroutine) cost about the same.
func zigzag(i, n int) int {
	if i%2 == 0 {
		return i / 2
	}
	return n - 1 - i/2
}

// keyEnd is the number of keys the queries [t0, t1) may see.
func (d *attnDims) keyEnd(p *attnParams, t1 int) int {
	if p.causal {
		return min(d.S, t1)
	}
	return d.S
}

// visible is the number of leading keys of the block starting at key s0,
// cols wide, that query t may see under the causal mask (all cols
// without it). The kernels work on these prefixes only: the keys the
// causal mask hides cost neither an exponential nor a -Inf.
func (p *attnParams) visible(t, s0, cols int) int {
	if p.causal {
		return max(0, min(cols, t+1-s0))
	}
	return cols
}

// maskBlock sets the logits of the keys a mask operand hides to -Inf: s
// is the block of queries [t0, t0+rows) and keys [s0, s0+cols) with row
// stride cols.
func (d *attnDims) maskBlock(s []float32, b, n, t0, rows, s0, cols int) {
	if d.mask == nil {
		return
	}
	inf := float32(math.Inf(-1))
	m := d.mask.b()
	base := b*d.mb + n*d.mn
	for i := range rows {
		mi := base + (t0+i)*d.mt
		row := s[i*cols : (i+1)*cols]
		for j := range row {
			if !m[mi+(s0+j)*d.ms] {
				row[j] = inf
			}
		}
	}
}

// attnForwardBlock computes the output rows and log-sum-exps of the
// queries [t0, t0+attnBr) of head n of batch b. s is scratch for a block
// of logits and the running maxima and sums.
func attnForwardBlock(d *attnDims, p *attnParams, pr attnProducts, out, lse []float32, b, n, t0 int, s []float32) {
	rows := min(attnBr, d.T-t0)
	m, l := s[attnBr*attnBc:attnBr*attnBc+attnBr], s[attnBr*attnBc+attnBr:]
	inf := float32(math.Inf(-1))
	for i := range rows {
		m[i], l[i] = inf, 0
	}
	oo := (b*d.T+t0)*d.ldv + n*d.V
	end := d.keyEnd(p, t0+rows)
	for s0 := 0; s0 < end; s0 += attnBc {
		cols := min(attnBc, end-s0)
		blk := s[:rows*cols]
		at := attnBlock{b: b, n: n, t0: t0, rows: rows, s0: s0, cols: cols}
		pr.scores(d, at, p.scale, blk)
		d.maskBlock(blk, b, n, t0, rows, s0, cols)
		for i := range rows {
			full := blk[i*cols : (i+1)*cols]
			row := full[:p.visible(t0+i, s0, cols)]
			clear(full[len(row):])
			mx := inf
			if len(row) > 0 {
				mx = max(m[i], vec.MaxF32(row))
			}
			if mx == inf { // every key so far hidden
				clear(row)
				continue
			}
			sum := float32(vec.ExpShift(row, row, mx))
			if s0 > 0 {
				alpha := float32(math.Exp(float64(m[i] - mx)))
				l[i] *= alpha
				if alpha != 1 {
					o := out[oo+i*d.ldv : oo+i*d.ldv+d.V]
					vec.MulVS(o, o, alpha)
				}
			}
			m[i], l[i] = mx, l[i]+sum
		}
		beta := float32(1)
		if s0 == 0 {
			beta = 0
		}
		pr.weighted(d, at, blk, beta, out[oo:])
	}
	lo := (b*d.N+n)*d.T + t0
	for i := range rows {
		o := out[oo+i*d.ldv : oo+i*d.ldv+d.V]
		if end == 0 {
			clear(o) // no keys at all: a sum over nothing
			lse[lo+i] = inf
			continue
		}
		vec.MulVS(o, o, 1/l[i]) // a query that saw no key: 0·∞ = NaN
		lse[lo+i] = m[i] + float32(math.Log(float64(l[i])))
	}
}

// attentionBwdImpl computes dq, dk and dv from (q, k, v, out, lse, g[,
// glse][, mask]).
func attentionBwdImpl(in []*Tensor, p *attnParams) []*Tensor {
	q, k, v, out, lse, g := in[0], in[1], in[2], in[3], in[4], in[5]
	next := 6
	var glse, mask *Tensor
	if p.glse {
		glse = in[next]
		next++
	}
	if p.mask {
		mask = in[next]
	}
	d := attnDimsOf(q, k, v, mask)
	// Each head writes its own columns of dq, dk and dv whole
	// (attnBackwardHead: its first products overwrite them), on the
	// goroutine that computes it, instead of a serial clear here.
	dq := newOutUninit(Float32, q.shape)
	dk := newOutUninit(Float32, k.shape)
	dv := newOutUninit(Float32, v.shape)
	cost := max(1, d.T*min(d.S, 4096)*(d.H+d.V)/16)
	if p.causal {
		cost /= 2
	}
	var gl []float32
	if glse != nil {
		gl = glse.f32()
	}
	ops := attnF32{q: q.f32(), k: k.f32(), v: v.f32(), g: g.f32()}
	parallelFor(d.B*d.N, cost, 1, isLocal(q, k, v, g), func(lo, hi int) {
		bp, s := attnScratch(2*attnBr*attnBc + d.T)
		pr := attnProducts(ops)
		var bf *attnBF16
		if p.bf16 {
			bf = newAttnBF16(&d, ops, true)
			defer bf.release()
			pr = bf
		}
		for u := lo; u < hi; u++ {
			x := bwdBufs{out.f32(), lse.f32(), ops.g, 0, gl, dq.f32(), dk.f32(), dv.f32()}
			if bf != nil {
				// The softmax's D = Σ g·out reads g as the products do.
				bf.load(u / d.N)
				x.g, x.gBatch = bf.gRounded()
			}
			attnBackwardHead(&d, p, pr, x, u/d.N, u%d.N, s)
		}
		attnPool.Put(bp)
	})
	return []*Tensor{dq, dk, dv}
}

// bwdBufs are the operands and results of the backward kernel.
type bwdBufs struct {
	out, lse, g []float32
	gBatch      int // g holds batches from gBatch on
	glse        []float32
	dq, dk, dv  []float32
}

// attnBlock is a block of queries [t0, t0+rows) and keys [s0, s0+cols)
// of head n of batch b.
type attnBlock struct{ b, n, t0, rows, s0, cols int }

// attnProducts are the block products of the attention kernels, on
// operands each implementation holds in its own form (float32, or
// bfloat16 pairs: attention_bf16.go). A block of logits, weights or their
// gradients is rows×cols float32 with row stride cols; the results are
// accumulated into the head's columns of out, dv, dq or dk (beta 0
// overwrites them), which start at the block's first row.
type attnProducts interface {
	scores(d *attnDims, at attnBlock, scale float32, s []float32)                 // s = scale·q kᵀ
	weighted(d *attnDims, at attnBlock, p []float32, beta float32, out []float32) // out = beta·out + p v
	gradV(d *attnDims, at attnBlock, p []float32, beta float32, dv []float32)     // dv = beta·dv + pᵀ g
	gradP(d *attnDims, at attnBlock, dp []float32)                                // dp = g vᵀ
	gradQ(d *attnDims, at attnBlock, scale float32, ds []float32, beta float32, dq []float32)
	gradK(d *attnDims, at attnBlock, scale float32, ds []float32, beta float32, dk []float32)
}

// attnF32 are the float32 products (Sgemm) on float32 q, k, v and the
// output's cotangent g (backward only).
type attnF32 struct{ q, k, v, g []float32 }

func (x attnF32) offsets(d *attnDims, at attnBlock) (qo, oo, ko, vo int) {
	return (at.b*d.T+at.t0)*d.ldq + at.n*d.H, (at.b*d.T+at.t0)*d.ldv + at.n*d.V,
		(at.b*d.S+at.s0)*d.ldq + at.n*d.H, (at.b*d.S+at.s0)*d.ldv + at.n*d.V
}

func (x attnF32) scores(d *attnDims, at attnBlock, scale float32, s []float32) {
	qo, _, ko, _ := x.offsets(d, at)
	gemm.Sgemm(false, true, at.rows, at.cols, d.H, scale, x.q[qo:], d.ldq, x.k[ko:], d.ldq, 0, s, at.cols, 1)
}

func (x attnF32) weighted(d *attnDims, at attnBlock, p []float32, beta float32, out []float32) {
	_, _, _, vo := x.offsets(d, at)
	gemm.Sgemm(false, false, at.rows, d.V, at.cols, 1, p, at.cols, x.v[vo:], d.ldv, beta, out, d.ldv, 1)
}

func (x attnF32) gradV(d *attnDims, at attnBlock, p []float32, beta float32, dv []float32) {
	_, oo, _, _ := x.offsets(d, at)
	gemm.Sgemm(true, false, at.cols, d.V, at.rows, 1, p, at.cols, x.g[oo:], d.ldv, beta, dv, d.ldv, 1)
}

func (x attnF32) gradP(d *attnDims, at attnBlock, dp []float32) {
	_, oo, _, vo := x.offsets(d, at)
	gemm.Sgemm(false, true, at.rows, at.cols, d.V, 1, x.g[oo:], d.ldv, x.v[vo:], d.ldv, 0, dp, at.cols, 1)
}

func (x attnF32) gradQ(d *attnDims, at attnBlock, scale float32, ds []float32, beta float32, dq []float32) {
	_, _, ko, _ := x.offsets(d, at)
	gemm.Sgemm(false, false, at.rows, d.H, at.cols, scale, ds, at.cols, x.k[ko:], d.ldq, beta, dq, d.ldq, 1)
}

func (x attnF32) gradK(d *attnDims, at attnBlock, scale float32, ds []float32, beta float32, dk []float32) {
	qo, _, _, _ := x.offsets(d, at)
	gemm.Sgemm(true, false, at.cols, d.H, at.rows, scale, ds, at.cols, x.q[qo:], d.ldq, beta, dk, d.ldq, 1)
}

// attnBackwardHead accumulates the gradients of head n of batch b, key
// block by key block (FlashAttention-2's order: dk and dv of a block are
// complete when its queries have passed, dq accumulates in place).
func attnBackwardHead(d *attnDims, p *attnParams, pr attnProducts, x bwdBufs, b, n int, s []float32) {
	blk, dp, dd := s[:attnBr*attnBc], s[attnBr*attnBc:2*attnBr*attnBc], s[2*attnBr*attnBc:]
	lo := (b*d.N + n) * d.T
	// The head's columns of dq, dk and dv are written, not accumulated,
	// by the first product that reaches them (beta 0): dq's by the first
	// key block, a key block's dk and dv by its first query block. What
	// no product reaches is cleared.
	if d.S == 0 {
		clearHead(x.dq, d.ldq, d.H, n, b*d.T, (b+1)*d.T)
	}
	// D_t = Σ_v g·out (- the log-sum-exp's cotangent): the softmax's
	// backward subtracts it from every dP of the row.
	for t := range d.T {
		o := (b*d.T+t)*d.ldv + n*d.V
		og := o - x.gBatch*d.T*d.ldv
		dot := vec.DotF64(x.g[og:og+d.V], x.out[o:o+d.V])
		if x.glse != nil {
			dot -= float64(x.glse[lo+t])
		}
		dd[t] = float32(dot)
	}
	for s0 := 0; s0 < d.S; s0 += attnBc {
		cols := min(attnBc, d.S-s0)
		ko := (b*d.S+s0)*d.ldq + n*d.H
		vo := (b*d.S+s0)*d.ldv + n*d.V
		tStart := 0
		if p.causal {
			tStart = s0 // queries before s0 see none of these keys
		}
		if tStart >= d.T {
			clearHead(x.dk, d.ldq, d.H, n, b*d.S+s0, b*d.S+s0+cols)
			clearHead(x.dv, d.ldv, d.V, n, b*d.S+s0, b*d.S+s0+cols)
			continue
		}
		for t0 := tStart; t0 < d.T; t0 += attnBr {
			bq, bkv := float32(1), float32(1)
			if s0 == 0 {
				bq = 0
			}
			if t0 == tStart {
				bkv = 0
			}
			rows := min(attnBr, d.T-t0)
			qo := (b*d.T+t0)*d.ldq + n*d.H
			at := attnBlock{b: b, n: n, t0: t0, rows: rows, s0: s0, cols: cols}
			P, dP := blk[:rows*cols], dp[:rows*cols]
			pr.scores(d, at, p.scale, P)
			d.maskBlock(P, b, n, t0, rows, s0, cols)
			for i := range rows {
				full := P[i*cols : (i+1)*cols]
				row := full[:p.visible(t0+i, s0, cols)]
				vec.ExpShift(row, row, x.lse[lo+t0+i]) // the weights, from the saved log-sum-exp
				clear(full[len(row):])
			}
			// dv += Pᵀ g; dP = g vᵀ; dS = P∘(dP - D); dq += scale·dS k; dk += scale·dSᵀ q.
			pr.gradV(d, at, P, bkv, x.dv[vo:])
			pr.gradP(d, at, dP)
			for i := range rows {
				full := dP[i*cols : (i+1)*cols]
				r := full[:p.visible(t0+i, s0, cols)]
				vec.SubVS(r, r, dd[t0+i])
				vec.MulVV(r, r, P[i*cols:i*cols+len(r)])
				clear(full[len(r):])
			}
			pr.gradQ(d, at, p.scale, dP, bq, x.dq[qo:])
			pr.gradK(d, at, p.scale, dP, bkv, x.dk[ko:])
		}
	}
}

// clearHead clears columns [n·w, (n+1)·w) of rows [r0, r1) of buf, whose
// rows are ld apart.
func clearHead(buf []float32, ld, w, n, r0, r1 int) {
	for r := r0; r < r1; r++ {
		clear(buf[r*ld+n*w : r*ld+(n+1)*w])
	}
}

// attentionVJP is attention's VJP: the backward op on plain, batched and
// placed values, the composition of ops (differentiable again) on values
// that are traced or carry tangents.
func attentionVJP(gs, in, outs []*Tensor, p *attnParams) []*Tensor {
	q, k, v := in[0], in[1], in[2]
	var mask *Tensor
	if p.mask {
		mask = in[3]
	}
	g, glse := gs[0], gs[1]
	if g == nil {
		g = ZerosLike(outs[0])
	}
	if higherOrder(g, glse, q, k, v, outs[0], outs[1]) {
		dq, dk, dv := attentionVJPOps(g, glse, q, k, v, mask, p)
		return cotangents(len(in), dq, dk, dv)
	}
	bp := *p
	ops := []*Tensor{q, k, v, outs[0], outs[1], g}
	if glse != nil {
		bp.glse = true
		ops = append(ops, glse)
	}
	if mask != nil {
		ops = append(ops, mask)
	}
	r := applyNIn(attentionBwdOp, &bp, ops)
	return cotangents(len(in), r...)
}

// cotangents returns the cotangents of q, k and v followed by nil for
// the mask, if there is one: n cotangents in all.
func cotangents(n int, qkv ...*Tensor) []*Tensor {
	return append(qkv[:3:3], make([]*Tensor, n-3)...)
}

// higherOrder reports whether a value is traced by reverse mode or carries
// a forward-mode tangent (at any level): attention's VJP then needs rules
// for its own backward, which the composition of ops has.
func higherOrder(xs ...*Tensor) bool {
	for _, x := range xs {
		for x != nil {
			if x.node != nil || x.xv() != nil && x.xv().tan != nil {
				return true
			}
			if x.xv() == nil {
				break
			}
			x = x.xv().val
		}
	}
	return false
}

// attentionProbs returns the attention weights P [B,N,T,S] and the
// transposed q, k, v ([B,N,·,·]) with ops: the composition the fused op
// equals, used by its forward-mode rule and its higher derivatives.
func attentionProbs(q, k, v, mask *Tensor, p *attnParams) (P, qt, kt, vt *Tensor) {
	qt, kt, vt = Transpose(q, 0, 2, 1, 3), Transpose(k, 0, 2, 1, 3), Transpose(v, 0, 2, 1, 3)
	s := MulScalar(p.matMul(qt, kt, false, true), p.scale)
	T, S := q.shape[1], k.shape[1]
	var vis *Tensor
	if p.causal {
		vis = GreaterEqual(Reshape(Arange(T), T, 1), Reshape(Arange(S), 1, S))
	}
	if mask != nil {
		if vis == nil {
			vis = mask
		} else {
			vis = LogicalAnd(mask, vis)
		}
	}
	if vis != nil {
		s = Where(vis, s, Scalar(float32(math.Inf(-1))))
	}
	return Softmax(s, -1), qt, kt, vt
}

// matMul is MatMulT in the products' dtype: with p.bf16 both operands
// rounded to bfloat16 (straight through for derivatives) and the product
// accumulated in float32.
func (p *attnParams) matMul(a, b *Tensor, transA, transB bool) *Tensor {
	if p.bf16 {
		return MatMulAs(a, b, transA, transB, BFloat16, Float32)
	}
	return MatMulT(a, b, transA, transB)
}

// attentionVJPOps is attention's VJP written with ops.
func attentionVJPOps(g, glse, q, k, v, mask *Tensor, p *attnParams) (dq, dk, dv *Tensor) {
	P, qt, kt, vt := attentionProbs(q, k, v, mask, p)
	gt := Transpose(g, 0, 2, 1, 3)                           // [B,N,T,V]
	dv = Transpose(p.matMul(P, gt, true, false), 0, 2, 1, 3) // Pᵀ g
	dP := p.matMul(gt, vt, false, true)                      // g vᵀ
	dS := Mul(P, Sub(dP, SumKeep(Mul(P, dP), -1)))           // softmax's VJP
	if glse != nil {
		dS = Add(dS, Mul(P, ExpandDims(glse, -1))) // ∂lse/∂s = P
	}
	dS = MulScalar(dS, p.scale)
	dq = Transpose(p.matMul(dS, kt, false, false), 0, 2, 1, 3)
	dk = Transpose(p.matMul(dS, qt, true, false), 0, 2, 1, 3)
	return dq, dk, dv
}

// attentionJVP is the forward-mode rule: with ds = scale·(dq kᵀ + q dkᵀ)
// and dlse = Σ_s P·ds, d out = P·dv + (P∘(ds - dlse))·v.
func attentionJVP(x, t, _ []*Tensor, pp any) []*Tensor {
	p := pp.(*attnParams)
	q, k, v := x[0], x[1], x[2]
	var mask *Tensor
	if p.mask {
		mask = x[3]
	}
	P, qt, kt, vt := attentionProbs(q, k, v, mask, p)
	var ds *Tensor
	if t[0] != nil {
		ds = p.matMul(Transpose(t[0], 0, 2, 1, 3), kt, false, true)
	}
	if t[1] != nil {
		ds = addTangents(ds, p.matMul(qt, Transpose(t[1], 0, 2, 1, 3), false, true))
	}
	var dout, dlse *Tensor
	if ds != nil {
		ds = MulScalar(ds, p.scale)
		pds := Mul(P, ds)
		dlse = Sum(pds, -1) // [B,N,T]
		dout = p.matMul(Sub(pds, Mul(P, ExpandDims(dlse, -1))), vt, false, false)
	}
	if t[2] != nil {
		dout = addTangents(dout, p.matMul(P, Transpose(t[2], 0, 2, 1, 3), false, false))
	}
	if dout != nil {
		dout = Transpose(dout, 0, 2, 1, 3)
	}
	return []*Tensor{dout, dlse}
}

// attentionBatch is the batching rule of attention (nOut results in the
// [B,·,N,·] and [B,N,·] layouts) and of its backward op: the batch of
// examples is merged into the batch dimension B, and a mask that does not
// broadcast over the merged dimension is broadcast first.
func attentionBatch(op **Op, nOut int) func([]*Tensor, []bool, any) []*Tensor {
	return func(in []*Tensor, batched []bool, pp any) []*Tensor {
		p := pp.(*attnParams)
		X := batchSize(in, batched)
		B := exampleShape(in[0], batched[0])[0]
		ops := make([]*Tensor, len(in))
		last := len(in) - 1
		for i, x := range in {
			if p.mask && i == last {
				m := x
				ms := exampleShape(m, batched[i])
				if batched[i] || ms[0] != 1 {
					m = materialize(m, batched[i], X)
					m = BroadcastTo(m, X, B, ms[1], ms[2], ms[3])
					m = Reshape(m, X*B, ms[1], ms[2], ms[3])
				}
				ops[i] = m
				continue
			}
			x = materialize(x, batched[i], X)
			ops[i] = Reshape(x, append([]int{X * x.shape[1]}, x.shape[2:]...)...)
		}
		outs := applyNIn(*op, p, ops)
		for i, o := range outs[:nOut] {
			outs[i] = Reshape(o, append([]int{X, o.shape[0] / X}, o.shape[1:]...)...)
		}
		return outs
	}
}
