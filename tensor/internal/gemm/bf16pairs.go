package gemm

import (
	"math"
	"sync"
	"unsafe"

	"github.com/gonox/gonox/internal/half"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// The AVX-512 BF16 path of Bgemm. A pair of bfloat16 values of
// consecutive k, the first in the low 16 bits, is one 32-bit element, and
// VDPBF16PS multiplies such elements as an FMA multiplies float32 ones,
// so with kp = ⌈k/2⌉
//
//	C(i,j) = Σ_{q<kp} A2(i,q)·B2(q,j),  A2(i,q) = A(i,2q) | A(i,2q+1)<<16,
//	                                    B2(q,j) = B(2q,j) | B(2q+1,j)<<16
//
// is an Sgemm problem (m×n×kp) on 32-bit elements that Sgemm's driver
// solves with bf16Set, whose kernels issue VDPBF16PS. The driver only
// moves these elements (packing, transposing); only the kernels read them
// as numbers. A2 and B2 are the operands themselves when their pairs are
// adjacent in memory (op(A) = A, op(B) = Bᵀ as stored, even k and
// stride): no copy at all. Otherwise one pass makes them: rows 2q and
// 2q+1 of B (or of Aᵀ as stored) interleaved, or rows padded to an even
// length when k or the stride is odd.

// bgemmPairs is BgemmMixed on the AVX-512 BF16 kernels.
func bgemmPairs(transA, transB bool, m, n, k int, a BF16Operand, lda int, b BF16Operand, ldb int, c []float32, ldc int, threads int) {
	kp := (k + 1) / 2
	var bufA, bufB *[]float32
	a2, lda2, ta2 := pairOperand(a, lda, transA, m, k, &bufA)
	b2, ldb2, tb2 := pairOperand(b, ldb, !transB, n, k, &bufB)
	gemm(bf16Set, ta2, !tb2, m, n, kp, 1, a2, lda2, b2, ldb2, 0, c, ldc, threads)
	putPairs(bufA)
	putPairs(bufB)
}

// pairOperand returns an operand X with rows of k values (op(A) as m×k,
// or op(B)ᵀ as n×k) as rows×kp bfloat16 pairs: the slice, its stride, and
// whether it is stored transposed (kp×rows). trans says X is stored
// transposed (k×rows, stride ld). A buffer it takes is left in *buf.
func pairOperand(x BF16Operand, ld int, trans bool, rows, k int, buf **[]float32) ([]float32, int, bool) {
	kp := (k + 1) / 2
	if trans {
		*buf = getPairs(kp * rows)
		interleaveRows(**buf, rows, x, ld, k, rows)
		return **buf, rows, true
	}
	if p := x.Bits; p != nil && k%2 == 0 && ld%2 == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(p)))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(p))), len(p)/2), ld / 2, false
	}
	*buf = getPairs(rows * kp)
	dst := u16s(**buf)
	if x.F32 != nil && k%2 == 0 && ld == k {
		// Contiguous rows of even length: the pairs are the rounded
		// operand itself, made in one call.
		vec.BF16FromF32(dst[:rows*k], x.F32[:rows*k])
		return **buf, kp, false
	}
	for i := 0; i < rows; i++ {
		row := dst[i*2*kp : i*2*kp+k]
		if x.F32 != nil {
			vec.BF16FromF32(row, x.F32[i*ld:i*ld+k])
		} else {
			copy(row, x.Bits[i*ld:i*ld+k])
		}
		if k%2 == 1 {
			dst[i*2*kp+k] = 0
		}
	}
	return **buf, kp, false
}

// pairsOnePassMax is the longest float32 row that interleaveRows rounds
// and pairs in one pass (vec.BF16PairsFromF32); longer rows are rounded
// into a buffer of two rows that stays in L1, then interleaved. The one
// pass reads a row, then its partner, and updates the stored pairs: faster
// up to 384 values, but from memory 1.3-1.9x slower from 512 on (pairing
// rows of cold float32, AMD EPYC Zen 5, µs for one operand, two-pass
// against one pass: 2048×384 152 / 120, 2048×512 230 / 388, 2048×640 254
// / 487, 256×1024 70 / 91, 1024×1024 305 / 481), which made the MLP
// 784-1024-1024-10's bf16 step 3 % slower.
const pairsOnePassMax = 384

// interleaveRows stores, for each q < ⌈rows/2⌉, dst[q*ldd+j] = X row 2q
// | X row 2q+1 << 16 (as bfloat16 bits) for j < cols; a missing last odd
// row gives zeros. Float32 rows of up to pairsOnePassMax values are
// rounded and paired in one pass (vec.BF16PairsFromF32), longer ones
// through a buffer of two rounded rows.
func interleaveRows(dst []float32, ldd int, x BF16Operand, lds, rows, cols int) {
	d := u32s(dst)
	var tmp *[]uint16
	if x.F32 != nil && cols > pairsOnePassMax {
		tmp, _ = roundedBufs.Get().(*[]uint16)
		if tmp == nil || cap(*tmp) < 2*cols {
			t := make([]uint16, 2*cols)
			tmp = &t
		}
		defer roundedBufs.Put(tmp)
	}
	for q := 0; 2*q < rows; q++ {
		out := d[q*ldd : q*ldd+cols]
		r0, r1 := 2*q*lds, (2*q+1)*lds
		switch {
		case 2*q+1 == rows && x.F32 != nil:
			for j, v := range x.F32[r0 : r0+cols] {
				out[j] = uint32(half.FromFloat32BF(v))
			}
		case 2*q+1 == rows:
			for j, v := range x.Bits[r0 : r0+cols] {
				out[j] = uint32(v)
			}
		case tmp != nil:
			lo, hi := (*tmp)[:cols], (*tmp)[cols:2*cols]
			vec.BF16FromF32(lo, x.F32[r0:r0+cols])
			vec.BF16FromF32(hi, x.F32[r1:r1+cols])
			interleave16(out, lo, hi)
		case x.F32 != nil:
			vec.BF16PairsFromF32(out, x.F32[r0:r0+cols], x.F32[r1:r1+cols])
		default:
			interleave16(out, x.Bits[r0:r0+cols], x.Bits[r1:r1+cols])
		}
	}
}

// Interleave sets d[j] = lo[j] | hi[j]<<16 for j < len(lo): two rows of
// bfloat16 values (as their bits) paired along the axis that crosses
// them, the layout BgemmPairs reads. Rows of up to 128 values are read in
// lockstep (the fastest from cache), longer ones one after the other. It
// panics if d or hi is shorter than lo.
func Interleave(d []uint32, lo, hi []uint16) { interleave16(d, lo, hi) }

// interleave16 sets d[j] = lo[j] | hi[j]<<16. lo and hi are usually two
// rows of a matrix (a cotangent or an activation, paired along the token
// axis), often no longer in cache: rows longer than 256 bytes are read
// one after the other, which the prefetchers follow better than two
// streams in lockstep (pairing 2048 rows of 256 / 384 values from memory:
// 63 / 82 µs against 94 / 142 µs; at 128 values, and from cache, lockstep
// is about 10 % faster: AMD EPYC Zen 5).
func interleave16(d []uint32, lo, hi []uint16) {
	hi = hi[:len(lo)]
	d = d[:len(lo)]
	j := 0
	if n := len(lo) &^ 15; n > 0 && bf16Level != bfWiden {
		if n > 128 {
			interleaveSeqAVX512(&d[0], &lo[0], &hi[0], n)
		} else {
			interleaveAVX512(&d[0], &lo[0], &hi[0], n)
		}
		j = n
	}
	for ; j < len(lo); j++ {
		d[j] = uint32(lo[j]) | uint32(hi[j])<<16
	}
}

// u32s and u16s view float32 storage as its bits and as 16-bit halves.
func u32s(f []float32) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(f))), len(f))
}

func u16s(f []float32) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(f))), 2*len(f))
}

// pairBufs recycles the operands bgemmPairs makes.
var pairBufs sync.Pool

// getPairs returns a buffer of n elements (contents undefined).
func getPairs(n int) *[]float32 {
	if p, ok := pairBufs.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := alignedFloats[float32](n)
	return &b
}

// putPairs returns a buffer of getPairs (nil: none).
func putPairs(p *[]float32) {
	if p != nil {
		pairBufs.Put(p)
	}
}

// BgemmPairs computes C = alpha·op(A)·op(B) + beta·C, as Sgemm, for
// bfloat16 operands given as pairs along the reduction axis: each 32-bit
// element holds two consecutive k values, the first in the low 16 bits
// (the layout VDPBF16PS reads, see bf16pairs.go), so op(A) is m×kp pairs
// (m×2kp values) and op(B) kp×n pairs. As stored, A is m×kp (kp×m if
// transA) and B kp×n (n×kp if transB), with row strides lda and ldb in
// pairs. An odd k is a last pair whose high half is zero in both
// operands. beta 0 overwrites C without reading it.
//
// It is for callers that keep their operands paired across many
// products (fused attention pairs each block of keys and values once for
// all of them): on the AVX-512 BF16 kernels nothing is rounded or
// interleaved per call. With AMX (chosen over them where the CPU has
// both: VDPBF16PS ran at half Sgemm's rate on Sapphire Rapids) the pairs
// are copied or transposed, 32 bits at a time, into the tiles' layouts
// (see bf16amx.go). Without either (GONOX_KERNELS=go or avx2, other CPUs)
// the pairs are widened to float32 (exactly) for Sgemm, a pass over both
// operands each call; the sums may then differ in order.
func BgemmPairs(transA, transB bool, m, n, kp int, alpha float32, a []uint32, lda int, b []uint32, ldb int, beta float32, c []float32, ldc int, threads int) {
	fa := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(a))), len(a))
	fb := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
	level := bf16Level
	if level == bfAMX && !amxReady() {
		level = bf16NoAMX
	}
	if level == bfAVX512 {
		gemm(bf16Set, transA, transB, m, n, kp, alpha, fa, lda, fb, ldb, beta, c, ldc, threads)
		return
	}
	checkArgs(transA, transB, m, n, kp, fa, lda, fb, ldb, c, ldc)
	if m == 0 || n == 0 || kp == 0 || alpha == 0 {
		gemm(active, transA, transB, m, n, 0, alpha, fa, lda, fb, ldb, beta, c, ldc, threads)
		return
	}
	if level == bfAMX {
		bproblem{transA: transA, transB: transB, m: m, n: n, k: 2 * kp, pa: a, pb: b, c: c, lda: lda, ldb: ldb, ldc: ldc, alpha: alpha, beta: beta}.run(threads)
		return
	}
	// A as stored is m×kp pairs along its rows, or kp×m pairs down its
	// columns; B the other way round.
	var wa, wb *[]float32
	a32, lda32 := widenPairs(a, lda, m, kp, transA, &wa)
	b32, ldb32 := widenPairs(b, ldb, n, kp, !transB, &wb)
	Sgemm(transA, transB, m, n, 2*kp, alpha, a32, lda32, b32, ldb32, beta, c, ldc, threads)
	putPairs(wa)
	putPairs(wb)
}

// widenPairs widens an operand of BgemmPairs with rows rows of kp pairs
// (stored kp×rows if down, with its pairs down the columns: element (q, i)
// holds values 2q and 2q+1 of column i) to float32 rows×2kp (2kp×rows if
// down) in a pooled buffer left in *buf, and returns it and its stride.
func widenPairs(p []uint32, ld, rows, kp int, down bool, buf **[]float32) ([]float32, int) {
	*buf = getPairs(2 * kp * rows)
	w := **buf
	if !down {
		for i := range rows {
			vec.F32FromBF16(w[i*2*kp:(i+1)*2*kp], u16s(unsafe.Slice((*float32)(unsafe.Pointer(&p[i*ld])), kp)))
		}
		return w, 2 * kp
	}
	for q := range kp {
		lo, hi := w[2*q*rows:(2*q+1)*rows], w[(2*q+1)*rows:(2*q+2)*rows]
		for i, e := range p[q*ld : q*ld+rows] {
			lo[i] = math.Float32frombits(e << 16)
			hi[i] = math.Float32frombits(e &^ 0xffff)
		}
	}
	return w, rows
}
