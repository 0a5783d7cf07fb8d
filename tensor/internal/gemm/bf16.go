package gemm

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/gonox/gonox/tensor/internal/workers"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// Bfloat16 matrix products.
//
// Bgemm multiplies bfloat16 matrices (raw bits) into a float32 C, with the
// best of three kernels the machine runs:
//
//   - AMX (Intel Sapphire Rapids and later, Linux): TDPBF16PS on 16×16
//     float32 tiles, see bf16amx.go;
//   - AVX-512 BF16 (AMD Zen 4/5, Intel Cooper Lake): VDPBF16PS multiplies
//     32 pairs of bfloat16 values exactly and adds each pair's two
//     products into one of 16 float32 lanes, twice the multiply-adds of a
//     float32 FMA. A pair of consecutive k values is one 32-bit element, so
//     C = Σ_q A2(i,q)·B2(q,j) over k/2 pairs is Sgemm's problem on 32-bit
//     elements, and Bgemm runs Sgemm's driver (blocking, in-place and
//     packed operands, narrow C computed transposed, threads) with 12×32
//     micro-kernels that issue VDPBF16PS where Sgemm's issue VFMADD231PS
//     (see bf16pairs.go);
//   - elsewhere, A and B are widened to float32 (exactly) for Sgemm.
//
// Rounding: products of bfloat16 values are exact in float32; the sums
// are float32. VDPBF16PS adds the two products of a pair to the
// accumulator in an order and with intermediate rounding that Intel
// documents loosely (and it flushes float32 subnormal results to zero),
// so the bits may differ from Sgemm's on the widened operands by a few
// float32 ulps of the partial sums; tests bound the difference.

// Bgemm computes C = op(A)·op(B) for bfloat16 A and B given as raw bits,
// row-major, overwriting the float32 C (m×n, row stride ldc). The
// arguments are those of Sgemm with alpha = 1 and beta = 0.
func Bgemm(transA, transB bool, m, n, k int, a []uint16, lda int, b []uint16, ldb int, c []float32, ldc int, threads int) {
	BgemmMixed(transA, transB, m, n, k, BF16Operand{Bits: a}, lda, BF16Operand{Bits: b}, ldb, c, ldc, threads)
}

// BF16Operand is an operand of BgemmMixed: bfloat16 values as raw bits,
// or float32 values that the product rounds to bfloat16 (to nearest even,
// as vec.BF16FromF32) as it reads them. Exactly one field is set.
type BF16Operand struct {
	Bits []uint16
	F32  []float32
}

// size returns the operand's length.
func (o BF16Operand) size() int {
	if o.F32 != nil {
		return len(o.F32)
	}
	return len(o.Bits)
}

// BgemmMixed is Bgemm with operands that may be float32, rounded to
// bfloat16 on the way into the kernel: the rounding costs no pass of its
// own where the kernel packs or interleaves that operand anyway (B as
// stored, or Aᵀ; a row copy otherwise), and no rounded copy of the
// operand is kept.
func BgemmMixed(transA, transB bool, m, n, k int, a BF16Operand, lda int, b BF16Operand, ldb int, c []float32, ldc int, threads int) {
	checkArgs16(transA, transB, m, n, k, a.size(), lda, b.size(), ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		scaleC(m, n, 0, c, ldc)
		return
	}
	level := bf16Level
	if level == bfAMX && !amxReady() {
		level = bf16NoAMX
	}
	if level == bfAVX512 {
		bgemmPairs(transA, transB, m, n, k, a, lda, b, ldb, c, ldc, threads)
		return
	}
	if level == bfAMX {
		bgemmAMX(transA, transB, m, n, k, a, lda, b, ldb, c, ldc, threads)
		return
	}
	var ra, rb *[]uint16
	ra, a.Bits = roundOperand(a, stored(transA, m, k, lda))
	rb, b.Bits = roundOperand(b, stored(transB, k, n, ldb))
	defer putRounded(ra)
	defer putRounded(rb)
	bgemmWiden(transA, transB, m, n, k, a.Bits, lda, b.Bits, ldb, c, ldc, threads)
}

// roundedBufs recycles the rounded copies of float32 operands of the
// widening path and interleaveRows' two-row buffers.
var roundedBufs sync.Pool

// roundOperand returns the first n values of o as bfloat16 bits: o.Bits,
// or a pooled rounded copy of o.F32 (also returned first, for
// putRounded).
func roundOperand(o BF16Operand, n int) (buf *[]uint16, bits []uint16) {
	if o.F32 == nil {
		return nil, o.Bits
	}
	buf, _ = roundedBufs.Get().(*[]uint16)
	if buf == nil || cap(*buf) < n {
		b := make([]uint16, n)
		buf = &b
	}
	*buf = (*buf)[:n]
	vec.BF16FromF32(*buf, o.F32[:n])
	return buf, *buf
}

// putRounded returns a buffer of roundOperand (nil: none).
func putRounded(b *[]uint16) {
	if b != nil {
		roundedBufs.Put(b)
	}
}

// bgemmAMX is BgemmMixed on the AMX kernels.
func bgemmAMX(transA, transB bool, m, n, k int, a BF16Operand, lda int, b BF16Operand, ldb int, c []float32, ldc int, threads int) {
	bproblem{transA: transA, transB: transB, m: m, n: n, k: k, a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc, alpha: 1}.run(threads)
}

// run computes p with AMX on up to threads goroutines (0: GOMAXPROCS):
// the caller and pooled workers (package workers), blocks of rows or of
// columns handed out as Sgemm's driver hands them out. A value receiver:
// one goroutine's call allocates nothing.
func (q bproblem) run(threads int) {
	m, n, k := q.m, q.n, q.k
	t := 1
	if threads != 1 && worthSplitting(m, n, k) {
		t = runtime.GOMAXPROCS(0)
		if threads > 0 {
			t = min(t, threads)
		}
	}
	if t <= 1 {
		ws := amxPool.Get().(*amxWorkspace)
		q.runAMX(ws, 0, m, 0, n, false)
		amxPool.Put(ws)
		return
	}
	j := amxJobs.Get().(*amxJob)
	j.p = q
	// Column blocks (each goroutine packs only its own B, all of A) or
	// row blocks (its own A, all of B): whichever packs less twice. A
	// read in place costs nothing to pack; an operand that is transposed
	// on the way (k down the columns of A, along the rows of B) or
	// rounded from float32 costs about twice a copy.
	cost := func(x BF16Operand, kDown bool, elems int) int {
		if kDown || x.F32 != nil {
			return 2 * elems
		}
		return elems
	}
	costA := cost(q.a, q.transA, m*k)
	if !q.transA && q.a.F32 == nil && k%32 == 0 {
		costA = 0
	}
	costB := cost(q.b, q.transB, n*k)
	j.splitN = n >= 2*t*amxNR && (costA < costB || m < 2*t*amxMR)
	// Row blocks: a few a goroutine (a goroutine packs B once for all
	// its blocks when it is one block of k and columns). Column blocks:
	// one a goroutine (each packs all of A).
	dim, unit, ntask := m, amxMR, tasksPerThread*t
	if j.splitN {
		dim, unit, ntask = n, amxNR, t
	}
	units := (dim + unit - 1) / unit
	ntask = min(units, ntask)
	j.chunk = (units + ntask - 1) / ntask * unit
	j.ntask = (dim + j.chunk - 1) / j.chunk
	j.blocks.Reset(j.ntask)
	workers.Run(min(t, j.ntask)-1, j.helper)
	j.p = bproblem{}
	amxJobs.Put(j)
}

// amxJob is one parallel call of the AMX path: C cut into ntask blocks of
// chunk rows (or columns, splitN), handed out through blocks. Jobs are
// pooled so that a call does not allocate.
type amxJob struct {
	p      bproblem
	splitN bool
	chunk  int
	ntask  int
	blocks workers.Chunks
	helper func() // work, bound once
}

var amxJobs = sync.Pool{New: func() any {
	j := new(amxJob)
	j.helper = j.work
	return j
}}

// work computes blocks until none is left.
func (j *amxJob) work() {
	ws := amxPool.Get().(*amxWorkspace)
	defer amxPool.Put(ws)
	front := j.blocks.Front()
	keepB := false
	for {
		t, ok := j.blocks.Next(front)
		if !ok {
			return
		}
		lo := t * j.chunk
		if j.splitN {
			j.p.runAMX(ws, 0, j.p.m, lo, min(lo+j.chunk, j.p.n), false)
			continue
		}
		j.p.runAMX(ws, lo, min(lo+j.chunk, j.p.m), 0, j.p.n, keepB)
		keepB = true
	}
}

// checkArgs16 is checkArgs for operands of BgemmMixed (given by their
// lengths).
func checkArgs16(transA, transB bool, m, n, k int, lenA, lda int, lenB, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	if m == 0 || n == 0 {
		return
	}
	check := func(name string, trans bool, rows, cols, have, ld int) {
		if trans {
			rows, cols = cols, rows
		}
		if ld < max(1, cols) {
			panic(fmt.Sprintf("gemm: ld%s=%d < %d columns of %s", name, ld, cols, name))
		}
		if rows > 0 && cols > 0 && have < (rows-1)*ld+cols {
			panic(fmt.Sprintf("gemm: len(%s)=%d < %d for %d×%d with stride %d", name, have, (rows-1)*ld+cols, rows, cols, ld))
		}
	}
	if k > 0 {
		check("a", transA, m, k, lenA, lda)
		check("b", transB, k, n, lenB, ldb)
	}
	check("c", false, m, n, len(c), ldc)
}

// bproblem is one Bgemm or BgemmPairs call on the AMX path: C =
// alpha·op(A)·op(B) + beta·C with k values. The operands are a and b, or
// for BgemmPairs pa and pb (k/2 pairs along the reduction axis, strides
// in pairs).
type bproblem struct {
	transA, transB bool
	m, n, k        int
	a, b           BF16Operand
	pa, pb         []uint32
	c              []float32
	lda, ldb, ldc  int
	alpha, beta    float32
}

// storeTile writes the top-left mr×nr corner of an edge tile (row stride
// ld) into C at (ir, col): C = alpha·tile + beta·C when acc is 0 (beta 0:
// C not read), C += alpha·tile otherwise. It may scale the tile.
func (p *bproblem) storeTile(tile []float32, ld, ir, col, mr, nr, acc int) {
	alpha, beta := p.alpha, p.beta
	if acc != 0 {
		beta = 1
	}
	for i := 0; i < mr; i++ {
		row := p.c[(ir+i)*p.ldc+col : (ir+i)*p.ldc+col+nr]
		t := tile[i*ld : i*ld+nr]
		switch {
		case alpha == 1 && beta == 0:
			copy(row, t)
		case alpha == 1 && beta == 1:
			vec.AddVV(row, row, t)
		case beta == 0:
			vec.MulVS(row, t, alpha)
		default:
			vec.MulVS(row, row, beta)
			vec.MulVS(t, t, alpha)
			vec.AddVV(row, row, t)
		}
	}
}

// bgemmWiden is Bgemm without BF16 instructions: widen both operands to
// float32 (exact) and run Sgemm.
func bgemmWiden(transA, transB bool, m, n, k int, a []uint16, lda int, b []uint16, ldb int, c []float32, ldc int, threads int) {
	na, nb := stored(transA, m, k, lda), stored(transB, k, n, ldb)
	fa := make([]float32, na)
	fb := make([]float32, nb)
	vec.F32FromBF16(fa, a[:na])
	vec.F32FromBF16(fb, b[:nb])
	Sgemm(transA, transB, m, n, k, 1, fa, lda, fb, ldb, 0, c, ldc, threads)
}

// stored returns how many elements of an operand op(X) (rows×cols, row
// stride ld as stored) the kernels read.
func stored(trans bool, rows, cols, ld int) int {
	if trans {
		rows, cols = cols, rows
	}
	if rows == 0 || cols == 0 {
		return 0
	}
	return (rows-1)*ld + cols
}

// Bgemm kernel levels.
const (
	bfWiden  = 0 // widen to float32, Sgemm
	bfAVX512 = 1 // AVX-512 BF16 VDPBF16PS micro-kernel
	bfAMX    = 2 // AMX TDPBF16PS tiles
)

// BF16Kernel names the kernel Bgemm uses: "amx", "avx512bf16" or "widen".
func BF16Kernel() string {
	return [...]string{"widen", "avx512bf16", "amx"}[bf16Level]
}
