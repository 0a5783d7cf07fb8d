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
// q, k, v and g are rounded and paired in every layout their products
// need (three forward, seven backward: each half the size of the float32
// operand, so memory stays linear in the lengths) one batch at a time, by
// the goroutine that computes its heads, just before them: the pairs are
// then read from cache, not written out and read back (at context 64 the
// whole-call passes cost 11 % of the pass against 24 % for the products);
// each block of weights or of their gradients is rounded once a product,
// in L1. Block starts
// are even (attnBr and attnBc are), so a block's pairs are the
// sequence's; an odd length ends with a pair whose high half is zero in
// both operands.

// attnBF16 are the bfloat16 products of one goroutine of a call: the
// paired operands of one batch at a time (load), made when its first
// unit reaches that batch and read from cache by the batch's heads, and
// scratch for a block's pairs.
type attnBF16 struct {
	d   *attnDims
	x   attnF32
	bwd bool
	b   int       // the batch loaded, -1 none
	q2  []uint32  // pairs along the features: [T, N, ⌈H/2⌉]
	k2  []uint32  // [S, N, ⌈H/2⌉]
	v2  []uint32  // [S, N, ⌈V/2⌉] (backward)
	g2  []uint32  // [T, N, ⌈V/2⌉] (backward)
	qs  []uint32  // pairs along the sequence: [⌈T/2⌉, N, H] (backward)
	ks  []uint32  // [⌈S/2⌉, N, H] (backward)
	vs  []uint32  // [⌈S/2⌉, N, V] (forward)
	gs  []uint32  // [⌈T/2⌉, N, V] (backward)
	hp  int       // ⌈H/2⌉
	vp  int       // ⌈V/2⌉
	gr  []float32 // g rounded, as float32 [T, N, V] (backward)
	buf *[]uint32 // the operands, from attnPairPool
	blk *[]uint32 // a block's pairs, from attnBlockPool
}

// attnPairPool recycles the paired operands (and g rounded), attnBlockPool
// the block pairs: apart, so that neither takes the other's size.
var (
	attnPairPool  = sync.Pool{New: func() any { return new([]uint32) }}
	attnBlockPool = sync.Pool{New: func() any { return new([]uint32) }}
)

// newAttnBF16 returns the products of one goroutine, forward or (bwd)
// backward, on x's operands (x.g set backward); release it after use.
// Its buffers hold one batch: with the gradient g rounded once too
// (gRounded), since the softmax's backward subtracts D = Σ g·out from
// each dP = g·vᵀ and near one-hot weights cancel the two, so both must
// read the same g.
func newAttnBF16(d *attnDims, x attnF32, bwd bool) *attnBF16 {
	a := &attnBF16{d: d, x: x, bwd: bwd, b: -1, hp: (d.H + 1) / 2, vp: (d.V + 1) / 2}
	tp, sp := (d.T+1)/2, (d.S+1)/2
	sizes := []int{d.T * d.N * a.hp, d.S * d.N * a.hp, sp * d.ldv}
	if bwd {
		sizes = []int{d.T * d.N * a.hp, d.S * d.N * a.hp, 0, d.S * d.N * a.vp, d.T * d.N * a.vp, tp * d.ldq, sp * d.ldq, tp * d.ldv, d.T * d.ldv}
	}
	total := 0
	for _, n := range sizes {
		total += n
	}
	a.buf, a.blk = attnPairPool.Get().(*[]uint32), attnBlockPool.Get().(*[]uint32)
	if cap(*a.buf) < total {
		*a.buf = make([]uint32, total)
	}
	if n := attnBr * attnBc; cap(*a.blk) < n {
		*a.blk = make([]uint32, n)
	}
	all := (*a.buf)[:total]
	parts := make([][]uint32, len(sizes))
	for i, n := range sizes {
		parts[i], all = all[:n:n], all[n:]
	}
	a.q2, a.k2, a.vs = parts[0], parts[1], parts[2]
	if bwd {
		a.v2, a.g2, a.qs, a.ks, a.gs = parts[3], parts[4], parts[5], parts[6], parts[7]
		a.gr = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(parts[8]))), len(parts[8]))
	}
	return a
}

// release returns a's buffers to their pools.
func (a *attnBF16) release() {
	attnPairPool.Put(a.buf)
	attnBlockPool.Put(a.blk)
}

// load rounds and pairs batch b of the operands, unless loaded.
func (a *attnBF16) load(b int) {
	if a.b == b {
		return
	}
	a.b = b
	d, x := a.d, a.x
	q, k, v := x.q[b*d.T*d.ldq:(b+1)*d.T*d.ldq], x.k[b*d.S*d.ldq:(b+1)*d.S*d.ldq], x.v[b*d.S*d.ldv:(b+1)*d.S*d.ldv]
	if !a.bwd {
		pairsAlongFeatures(a.q2, q, d.T*d.N, d.H)
		pairsAlongFeatures(a.k2, k, d.S*d.N, d.H)
		pairsAlongSeq(a.vs, v, 1, d.S, d.ldv)
		return
	}
	pairsAlongFeatures(a.v2, v, d.S*d.N, d.V)
	pairsBoth(a.qs, a.q2, nil, q, 1, d.T, d.N, d.H)
	pairsBoth(a.ks, a.k2, nil, k, 1, d.S, d.N, d.H)
	pairsBoth(a.gs, a.g2, a.gr, x.g[b*d.T*d.ldv:(b+1)*d.T*d.ldv], 1, d.T, d.N, d.V)
}

// gRounded returns g's values rounded to bfloat16 (as float32) for the
// loaded batch, and the batch.
func (a *attnBF16) gRounded() ([]float32, int) { return a.gr, a.b }

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
// one pass: each row is read from memory once. With h even a row's pairs
// along the features are its rounded values in order, so the pairs along
// the sequence interleave two such rows from L1 instead of rounding the
// float32 rows again; with h odd the rows are rounded for each layout.
// widen, if not nil, receives the rounded values as float32.
func pairsBoth(seq, feat []uint32, widen, src []float32, B, T, N, h int) {
	w, hp, tp := N*h, (h+1)/2, (T+1)/2
	row := func(t int) {
		if feat == nil {
			return
		}
		f := feat[t*N*hp : (t+1)*N*hp]
		pairsAlongFeatures(f, src[t*w:(t+1)*w], N, h)
		switch {
		case widen == nil:
		case h%2 == 0: // the heads' pairs are the row's values in order
			vec.F32FromBF16(widen[t*w:(t+1)*w], halves(f))
		default:
			for n := range N {
				vec.F32FromBF16(widen[t*w+n*h:t*w+(n+1)*h], halves(f[n*hp : (n+1)*hp])[:h])
			}
		}
	}
	for b := range B {
		for q := range tp {
			out := seq[(b*tp+q)*w : (b*tp+q+1)*w]
			t := b*T + 2*q
			switch {
			case 2*q+1 < T && feat != nil && h%2 == 0:
				row(t)
				row(t + 1)
				gemm.Interleave(out, halves(feat[t*N*hp:(t+1)*N*hp]), halves(feat[(t+1)*N*hp:(t+2)*N*hp]))
			case 2*q+1 < T:
				vec.BF16PairsFromF32(out, src[t*w:(t+1)*w], src[(t+1)*w:(t+2)*w])
				row(t)
				row(t + 1)
			default:
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

// alongKeys rounds the block p (rows×cols) into pairs along the keys:
// rows×⌈cols/2⌉, the last pair's high half zero when cols is odd.
func (c *attnBF16) alongKeys(at attnBlock, p []float32) []uint32 {
	return pairsAlongFeatures((*c.blk)[:at.rows*((at.cols+1)/2)], p, at.rows, at.cols)
}

// alongQueries rounds the block p (rows×cols) into pairs along the
// queries: ⌈rows/2⌉×cols.
func (c *attnBF16) alongQueries(at attnBlock, p []float32) []uint32 {
	return pairsAlongSeq((*c.blk)[:(at.rows+1)/2*at.cols], p, 1, at.rows, at.cols)
}

// The products read the loaded batch (at.b): offsets within it.

func (c *attnBF16) scores(d *attnDims, at attnBlock, scale float32, s []float32) {
	qo := (at.t0*d.N + at.n) * c.hp
	ko := (at.s0*d.N + at.n) * c.hp
	gemm.BgemmPairs(false, true, at.rows, at.cols, c.hp, scale, c.q2[qo:], d.N*c.hp, c.k2[ko:], d.N*c.hp, 0, s, at.cols, 1)
}

func (c *attnBF16) weighted(d *attnDims, at attnBlock, p []float32, beta float32, out []float32) {
	vo := at.s0/2*d.ldv + at.n*d.V
	cp := (at.cols + 1) / 2
	gemm.BgemmPairs(false, false, at.rows, d.V, cp, 1, c.alongKeys(at, p), cp, c.vs[vo:], d.ldv, beta, out, d.ldv, 1)
}

func (c *attnBF16) gradV(d *attnDims, at attnBlock, p []float32, beta float32, dv []float32) {
	gOff := at.t0/2*d.ldv + at.n*d.V
	gemm.BgemmPairs(true, false, at.cols, d.V, (at.rows+1)/2, 1, c.alongQueries(at, p), at.cols, c.gs[gOff:], d.ldv, beta, dv, d.ldv, 1)
}

func (c *attnBF16) gradP(d *attnDims, at attnBlock, dp []float32) {
	gOff := (at.t0*d.N + at.n) * c.vp
	vo := (at.s0*d.N + at.n) * c.vp
	gemm.BgemmPairs(false, true, at.rows, at.cols, c.vp, 1, c.g2[gOff:], d.N*c.vp, c.v2[vo:], d.N*c.vp, 0, dp, at.cols, 1)
}

func (c *attnBF16) gradQ(d *attnDims, at attnBlock, scale float32, ds []float32, beta float32, dq []float32) {
	ko := at.s0/2*d.ldq + at.n*d.H
	cp := (at.cols + 1) / 2
	gemm.BgemmPairs(false, false, at.rows, d.H, cp, scale, c.alongKeys(at, ds), cp, c.ks[ko:], d.ldq, beta, dq, d.ldq, 1)
}

func (c *attnBF16) gradK(d *attnDims, at attnBlock, scale float32, ds []float32, beta float32, dk []float32) {
	qo := at.t0/2*d.ldq + at.n*d.H
	gemm.BgemmPairs(true, false, at.cols, d.H, (at.rows+1)/2, scale, c.alongQueries(at, ds), at.cols, c.qs[qo:], d.ldq, beta, dk, d.ldq, 1)
}
