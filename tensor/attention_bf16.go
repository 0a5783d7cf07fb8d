package tensor

import (
	"sync"
	"unsafe"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/tensor/internal/gemm"
	"github.com/gonox/gonox/tensor/internal/vec"
)

// Attention's products in bfloat16 (DotProductAttentionAs): the six
// block products take bfloat16 operands and accumulate in float32
// (gemm.BgemmPairs), while the logits, the online softmax, its statistics
// and the outputs stay float32. The AVX-512 BF16 kernel multiplies pairs
// of consecutive values of the reduction axis, so every operand is kept
// paired along the axis each product reduces over:
//
//	product          reduces over   operands, as pairs along it
//	s  = q kᵀ        features H     q, k along H
//	o += p v         keys           p along keys, v along keys
//	dv += pᵀ g       queries        p along queries, g along queries
//	dp = g vᵀ        features V     g, v along V
//	dq += ds k       keys           ds along keys, k along keys
//	dk += dsᵀ q      queries        ds along queries, q along queries
//
// q, k, v and g are rounded and paired once a call, in every layout their
// products need (three forward, seven backward: each half the size of the
// float32 operand, so memory stays linear in the lengths), and each block
// of weights or of their gradients once a product, in L1. Block starts
// are even (attnBr and attnBc are), so a block's pairs are the
// sequence's; an odd length ends with a pair whose high half is zero in
// both operands.

// attnBF16 holds the paired operands of one call.
type attnBF16 struct {
	q2, k2, v2, g2 []uint32  // pairs along the features: [B, T or S, N, ⌈H/2⌉ or ⌈V/2⌉]
	qs, ks, vs, gs []uint32  // pairs along the sequence: [B, ⌈T/2⌉ or ⌈S/2⌉, N, H or V]
	hp, vp, tp, sp int       // ⌈H/2⌉, ⌈V/2⌉, ⌈T/2⌉, ⌈S/2⌉
	buf            *[]uint32 // all of the above, from attnPairPool
	// gRounded is g's values rounded to bfloat16, as float32 (backward):
	// the softmax's backward subtracts D = Σ g·out from each dP = g·vᵀ,
	// and near one-hot weights cancel the two, so both read the same g.
	gRounded []float32
}

// attnPairPool recycles the paired operands (and g rounded), attnBlockPool
// the chunks' block pairs: apart, so that neither takes the other's size.
var (
	attnPairPool  = sync.Pool{New: func() any { return new([]uint32) }}
	attnBlockPool = sync.Pool{New: func() any { return new([]uint32) }}
)

// release returns a's buffer to the pool.
func (a *attnBF16) release() {
	attnPairPool.Put(a.buf)
	a.buf = nil
}

// newAttnBF16 rounds and pairs x's operands: those of the forward
// products, or with bwd those of the backward's (x.g set), split over
// goroutines by batch unless local.
func newAttnBF16(d *attnDims, x attnF32, bwd, local bool) *attnBF16 {
	a := &attnBF16{hp: (d.H + 1) / 2, vp: (d.V + 1) / 2, tp: (d.T + 1) / 2, sp: (d.S + 1) / 2}
	nq2, nk2, nvs := d.B*d.T*d.N*a.hp, d.B*d.S*d.N*a.hp, d.B*a.sp*d.ldv
	nv2, nqs, nks, ngs, ng2 := d.B*d.S*d.N*a.vp, d.B*a.tp*d.ldq, d.B*a.sp*d.ldq, d.B*a.tp*d.ldv, d.B*d.T*d.N*a.vp
	total := nq2 + nk2 + nvs
	if bwd {
		total = nq2 + nk2 + nv2 + nqs + nks + ngs + ng2 + len(x.g)
	}
	// One buffer a call: the pool then always holds the size a model's
	// attention asks for.
	a.buf = attnPairPool.Get().(*[]uint32)
	if cap(*a.buf) < total {
		*a.buf = make([]uint32, total)
	}
	all := (*a.buf)[:total]
	take := func(n int) []uint32 {
		p := all[:n:n]
		all = all[n:]
		return p
	}
	a.q2, a.k2 = take(nq2), take(nk2)
	if !bwd {
		a.vs = take(nvs)
	} else {
		a.v2, a.qs, a.ks, a.gs, a.g2 = take(nv2), take(nqs), take(nks), take(ngs), take(ng2)
		gr := take(len(x.g))
		a.gRounded = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(gr))), len(gr))
	}
	// A pass reads each float32 once and writes half its bytes per layout.
	cost := max(1, (d.T+d.S)*(d.ldq+d.ldv)/32)
	parallelFor(d.B, cost, 1, local, func(lo, hi int) {
		nb := hi - lo
		// The rows of batches [lo, hi) of a [B, L, ·] array, w elements a row.
		rows := func(p []uint32, L, w int) []uint32 { return p[lo*L*w : hi*L*w] }
		q, k, v := x.q[lo*d.T*d.ldq:hi*d.T*d.ldq], x.k[lo*d.S*d.ldq:hi*d.S*d.ldq], x.v[lo*d.S*d.ldv:hi*d.S*d.ldv]
		if !bwd {
			pairsAlongFeatures(rows(a.q2, d.T, d.N*a.hp), q, nb*d.T*d.N, d.H)
			pairsAlongFeatures(rows(a.k2, d.S, d.N*a.hp), k, nb*d.S*d.N, d.H)
			pairsAlongSeq(rows(a.vs, a.sp, d.ldv), v, nb, d.S, d.ldv)
			return
		}
		g := x.g[lo*d.T*d.ldv : hi*d.T*d.ldv]
		pairsAlongFeatures(rows(a.v2, d.S, d.N*a.vp), v, nb*d.S*d.N, d.V)
		pairsBoth(rows(a.qs, a.tp, d.ldq), rows(a.q2, d.T, d.N*a.hp), nil, q, nb, d.T, d.N, d.H)
		pairsBoth(rows(a.ks, a.sp, d.ldq), rows(a.k2, d.S, d.N*a.hp), nil, k, nb, d.S, d.N, d.H)
		pairsBoth(rows(a.gs, a.tp, d.ldv), rows(a.g2, d.T, d.N*a.vp), a.gRounded[lo*d.T*d.ldv:hi*d.T*d.ldv], g, nb, d.T, d.N, d.V)
	})
	return a
}

// halves views pairs as their bfloat16 halves.
func halves(p []uint32) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(p))), 2*len(p))
}

// pairsAlongFeatures rounds rows rows of h float32 values (contiguous) into
// dst, each row as ⌈h/2⌉ pairs of consecutive values, and returns dst.
func pairsAlongFeatures(dst []uint32, src []float32, rows, h int) []uint32 {
	hp := (h + 1) / 2
	if h%2 == 0 {
		vec.BF16FromF32(halves(dst[:rows*hp]), src[:rows*h])
		return dst
	}
	for i := range rows {
		vec.BF16FromF32(halves(dst[i*hp : (i+1)*hp])[:h], src[i*h:(i+1)*h])
		dst[(i+1)*hp-1] &= 0xffff
	}
	return dst
}

// pairsAlongSeq rounds src [B, T, w] into dst [B, ⌈T/2⌉, w], element (b,
// q, j) pairing rows 2q and 2q+1 of batch b (zero for a row past T), and
// returns dst.
func pairsAlongSeq(dst []uint32, src []float32, B, T, w int) []uint32 {
	pairsBoth(dst, nil, nil, src, B, T, 1, w)
	return dst
}

// pairsBoth is pairsAlongSeq into seq and, if feat is not nil,
// pairsAlongFeatures into feat (heads of h values) of src [B, T, N·h] in
// one pass: each row is read from memory once, for its pairs along the
// sequence, and rounded again from L1. widen, if not nil, receives the
// rounded values as float32.
func pairsBoth(seq, feat []uint32, widen, src []float32, B, T, N, h int) {
	w, hp, tp := N*h, (h+1)/2, (T+1)/2
	row := func(t int) {
		if feat == nil {
			return
		}
		f := feat[t*N*hp : (t+1)*N*hp]
		pairsAlongFeatures(f, src[t*w:(t+1)*w], N, h)
		if widen == nil {
			return
		}
		for n := range N {
			vec.F32FromBF16(widen[t*w+n*h:t*w+(n+1)*h], halves(f[n*hp : (n+1)*hp])[:h])
		}
	}
	for b := range B {
		for q := range tp {
			out := seq[(b*tp+q)*w : (b*tp+q+1)*w]
			t := b*T + 2*q
			if 2*q+1 < T {
				vec.BF16PairsFromF32(out, src[t*w:(t+1)*w], src[(t+1)*w:(t+2)*w])
				row(t)
				row(t + 1)
			} else {
				pairRowWithZero(out, src[t*w:(t+1)*w])
				row(t)
			}
		}
	}
}

// pairRowWithZero stores bf16(lo[j]) with a zero high half in out[j].
func pairRowWithZero(out []uint32, lo []float32) {
	for j, v := range lo {
		out[j] = uint32(half.FromFloat32BF(v))
	}
}

// chunk returns the products of one goroutine of the call: a with
// scratch for a block's pairs (release it after use).
func (a *attnBF16) chunk() *attnBF16Chunk {
	c := &attnBF16Chunk{attnBF16: a, buf: attnBlockPool.Get().(*[]uint32)}
	if n := attnBr*attnBc/2 + attnBc; cap(*c.buf) < n {
		*c.buf = make([]uint32, n)
	}
	return c
}

// attnBF16Chunk is attnBF16 with one goroutine's scratch: a block of
// weights or of their gradients paired along the keys or along the
// queries (at most ⌈attnBr/2⌉·attnBc pairs, or attnBr·⌈attnBc/2⌉).
type attnBF16Chunk struct {
	*attnBF16
	buf *[]uint32
}

func (c *attnBF16Chunk) release() { attnBlockPool.Put(c.buf) }

// alongKeys rounds the block p (rows×cols) into pairs along the keys:
// rows×⌈cols/2⌉, the last pair's high half zero when cols is odd.
func (c *attnBF16Chunk) alongKeys(at attnBlock, p []float32) []uint32 {
	return pairsAlongFeatures((*c.buf)[:at.rows*((at.cols+1)/2)], p, at.rows, at.cols)
}

// alongQueries rounds the block p (rows×cols) into pairs along the
// queries: ⌈rows/2⌉×cols.
func (c *attnBF16Chunk) alongQueries(at attnBlock, p []float32) []uint32 {
	return pairsAlongSeq((*c.buf)[:(at.rows+1)/2*at.cols], p, 1, at.rows, at.cols)
}

func (c *attnBF16Chunk) scores(d *attnDims, at attnBlock, scale float32, s []float32) {
	qo := ((at.b*d.T+at.t0)*d.N + at.n) * c.hp
	ko := ((at.b*d.S+at.s0)*d.N + at.n) * c.hp
	gemm.BgemmPairs(false, true, at.rows, at.cols, c.hp, scale, c.q2[qo:], d.N*c.hp, c.k2[ko:], d.N*c.hp, 0, s, at.cols, 1)
}

func (c *attnBF16Chunk) weighted(d *attnDims, at attnBlock, p []float32, beta float32, out []float32) {
	vo := (at.b*c.sp+at.s0/2)*d.ldv + at.n*d.V
	cp := (at.cols + 1) / 2
	gemm.BgemmPairs(false, false, at.rows, d.V, cp, 1, c.alongKeys(at, p), cp, c.vs[vo:], d.ldv, beta, out, d.ldv, 1)
}

func (c *attnBF16Chunk) gradV(d *attnDims, at attnBlock, p []float32, beta float32, dv []float32) {
	gOff := (at.b*c.tp+at.t0/2)*d.ldv + at.n*d.V
	gemm.BgemmPairs(true, false, at.cols, d.V, (at.rows+1)/2, 1, c.alongQueries(at, p), at.cols, c.gs[gOff:], d.ldv, beta, dv, d.ldv, 1)
}

func (c *attnBF16Chunk) gradP(d *attnDims, at attnBlock, dp []float32) {
	gOff := ((at.b*d.T+at.t0)*d.N + at.n) * c.vp
	vo := ((at.b*d.S+at.s0)*d.N + at.n) * c.vp
	gemm.BgemmPairs(false, true, at.rows, at.cols, c.vp, 1, c.g2[gOff:], d.N*c.vp, c.v2[vo:], d.N*c.vp, 0, dp, at.cols, 1)
}

func (c *attnBF16Chunk) gradQ(d *attnDims, at attnBlock, scale float32, ds []float32, beta float32, dq []float32) {
	ko := (at.b*c.sp+at.s0/2)*d.ldq + at.n*d.H
	cp := (at.cols + 1) / 2
	gemm.BgemmPairs(false, false, at.rows, d.H, cp, scale, c.alongKeys(at, ds), cp, c.ks[ko:], d.ldq, beta, dq, d.ldq, 1)
}

func (c *attnBF16Chunk) gradK(d *attnDims, at attnBlock, scale float32, ds []float32, beta float32, dk []float32) {
	qo := (at.b*c.tp+at.t0/2)*d.ldq + at.n*d.H
	gemm.BgemmPairs(true, false, at.cols, d.H, (at.rows+1)/2, scale, c.alongQueries(at, ds), at.cols, c.qs[qo:], d.ldq, beta, dk, d.ldq, 1)
}
