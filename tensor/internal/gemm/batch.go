package gemm

import "fmt"

// SgemmBatch computes a batch of products of one shape on the calling
// goroutine: for each t < len(offC),
//
//	C_t = alpha*op(A_t)*op(B_t) + beta*C_t
//
// where A_t, B_t and C_t are the matrices starting at a[offA[t]],
// b[offB[t]] and c[offC[t]], with the shapes, strides and transpositions
// of Sgemm. Offsets may repeat (an operand shared by the batch: offset 0
// for every t). Each C_t gets the bits Sgemm computes for that product
// alone on slices that end with the matrix; the batch only saves the
// per-call work (checks, a workspace, the call itself), which is most of
// the cost of the small products of a model ensemble or of attention
// heads. The offsets do not escape, so a caller may keep them on its
// stack (SgemmBatch is not inlined: inlined, its call to the generic
// driver would make them escape).
//
//go:noinline
func SgemmBatch(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, offA []int, b []float32, ldb int, offB []int, beta float32, c []float32, ldc int, offC []int) {
	gemmBatch(active, transA, transB, m, n, k, alpha, a, lda, offA, b, ldb, offB, beta, c, ldc, offC)
}

// DgemmBatch is SgemmBatch in double precision.
//
//go:noinline
func DgemmBatch(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, offA []int, b []float64, ldb int, offB []int, beta float64, c []float64, ldc int, offC []int) {
	gemmBatch(active64, transA, transB, m, n, k, alpha, a, lda, offA, b, ldb, offB, beta, c, ldc, offC)
}

// gemmBatch is SgemmBatch and DgemmBatch on the kernel set ks.
func gemmBatch[T elem](ks *kernelSet[T], transA, transB bool, m, n, k int, alpha T, a []T, lda int, offA []int, b []T, ldb int, offB []int, beta T, c []T, ldc int, offC []int) {
	nb := len(offC)
	if len(offA) != nb || len(offB) != nb {
		panic(fmt.Sprintf("gemm: batch offsets of lengths %d, %d and %d for a, b and c", len(offA), len(offB), nb))
	}
	if m == 0 || n == 0 || nb == 0 {
		return
	}
	// The extent of each operand: a member's slice ends with its matrix,
	// as a lone product's would, since how far the kernels may read B in
	// place depends on where its slice ends.
	ra, ca := m, k
	if transA {
		ra, ca = k, m
	}
	rb, cb := k, n
	if transB {
		rb, cb = n, k
	}
	extA, extB, extC := (ra-1)*lda+ca, (rb-1)*ldb+cb, (m-1)*ldc+n
	p := problem[T]{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta, lda: lda, ldb: ldb, ldc: ldc}
	var ws *workspace[T]
	for t := range nb {
		at, bt, ct := member(a, offA[t], extA, k), member(b, offB[t], extB, k), c[offC[t]:min(len(c), offC[t]+extC)]
		checkArgs(transA, transB, m, n, k, at, lda, bt, ldb, ct, ldc)
		if k == 0 || alpha == 0 {
			scaleC(m, n, beta, ct, ldc)
			continue
		}
		if ws == nil {
			ws = ks.pools.getWorkspace()
		}
		p.a, p.b, p.c = at, bt, ct
		ks.run(&p, 0, m, 0, n, ws)
	}
	if ws != nil {
		ks.pools.putWorkspace(ws)
	}
}

// member returns the operand of one product of a batch: x from off to the
// end of its matrix (ext elements), or nothing when k == 0 (the operand
// is not read).
func member[T elem](x []T, off, ext, k int) []T {
	if k == 0 {
		return nil
	}
	return x[off:min(len(x), off+ext)]
}
