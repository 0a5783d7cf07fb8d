package gemm

import (
	"sync"
	"unsafe"

	"github.com/gonox/gonox/internal/half"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// amxReady asks the OS for the AMX tile state the first time it is called
// (not at start-up: a program that never multiplies bfloat16 matrices
// never asks) and reports whether it was granted.
var amxReady = sync.OnceValue(amxPermitted)

// The AMX path of Bgemm and BgemmPairs (Intel Sapphire Rapids and later):
// a blocked loop around amxKernel32, which computes 32×32 blocks of C with
// four 16×16 float32 tiles, for a row panel of 32 rows of op(A) against
// all the 32-column strips of op(B) in one call (one tile configuration:
// LDTILECFG and the release cost about as much as a k block of 128). The
// tiles want A as rows of k values (a row panel: row-major, 32 rows of
// kpad bfloat16) and B as k-pairs (kpad/2 rows of 32-bit elements
// B(2q,j) | B(2q+1,j)<<16, the layout of the AVX-512 kernel, all the
// strips side by side), both zero-padded to whole blocks of 32 k. An
// operand whose k runs along its rows as stored (op(A) = A, op(B) = Bᵀ) is
// copied (or rounded, if float32) into a row panel, one whose k runs down
// its columns is interleaved two rows at a time (rounded on the way, if
// float32) into pairs, and a 32-bit transpose turns either layout into
// the other (the transpose of a block of pairs is the row panel of the
// same values). A is read in place, unpacked, when it is bfloat16 stored
// with k along its rows and the panel is whole (32 rows, k a multiple of
// 32 in the block). TDPBF16PS flushes subnormal inputs and results to
// zero and rounds its sums to nearest even, so the results are those of
// float32 accumulation (within the bounds the tests check), not bit for
// bit Sgemm's; each element sums the same k blocks in the same order
// whatever the split over goroutines.
//
// On the 2-core Sapphire Rapids of 2026-11-28 this took examples/moe's
// bf16 products from 64–675 to 187–1082 GFLOP per CPU-second (the weight
// gradients from 64–121 to 121–490; float32 Sgemm 61–168 at that load),
// see docs/performance.md, "bf16 products on AMX".

const (
	amxMR = 32
	amxNR = 32
	amxKC = 512 // k values per block: a multiple of 32
	amxNC = 1024
)

// amxConfig is the tile configuration (palette 1; tmm0-7 all 16 rows of
// 64 bytes), built once and only read.
var amxConfig = func() *[64]byte {
	var c [64]byte
	c[0] = 1 // palette
	for t := 0; t < 8; t++ {
		c[16+2*t] = 64 // bytes per row
		c[48+t] = 16   // rows
	}
	return &c
}()

// amxWorkspace holds one goroutine's panels.
type amxWorkspace struct {
	a    []uint16  // A's row panel
	wa   []uint32  // a transposed A's rows, paired
	b    []uint32  // B's pairs, all strips side by side
	t    []uint32  // a pair strip or row panel on its way to be transposed
	tile []float32 // C blocks of an edge (32 rows × the strips' columns)
}

var amxPool = sync.Pool{New: func() any { return new(amxWorkspace) }}

// grow returns s resliced to n elements, reallocated if too short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// amxKBlock returns how many k values from pc the block holds: amxKC, or
// all that are left when they are at most a quarter more (k=527 is one
// block of 544 padded values, not 512 and 32 with a second pass over C).
func amxKBlock(k, pc int) int {
	if k-pc <= amxKC+amxKC/4 {
		return k - pc
	}
	return amxKC
}

// amxChunk is how many rows of a transposed A are paired in one pass
// (a multiple of amxMR): the pairs of a k block then take at most
// 256 KiB.
const amxChunk = 256

// runAMX computes rows [i0,i1) and columns [j0,j1) of C with AMX in the
// workspace ws. keepB says ws holds B as packed by ws's previous call for
// the same columns: it is packed again unless it is one block (of k and
// of columns).
func (p *bproblem) runAMX(ws *amxWorkspace, i0, i1, j0, j1 int, keepB bool) {
	direct := p.alpha == 1 && (p.beta == 0 || p.beta == 1)
	keepB = keepB && j1-j0 <= amxNC && amxKBlock(p.k, 0) == p.k
	for jc := j0; jc < j1; jc += amxNC {
		nc := min(amxNC, j1-jc)
		strips := (nc + amxNR - 1) / amxNR
		full := nc / amxNR
		w := strips * amxNR // B's pairs: kpad/2 rows of w
		for pc := 0; pc < p.k; {
			kc := amxKBlock(p.k, pc)
			kpad := (kc + 31) &^ 31
			if !keepB {
				ws.b = grow(ws.b, kpad/2*w)
				p.packB(ws, ws.b, w, pc, kc, kpad, jc, nc)
			}
			pb := ws.b
			acc := 0
			if pc > 0 {
				acc = 1
			}
			kacc := acc
			if p.beta == 1 {
				kacc = 1
			}
			kb := kpad / 32
			for ir0 := i0; ir0 < i1; ir0 += amxChunk {
				ir1 := min(i1, ir0+amxChunk)
				if p.transA && p.pa == nil {
					// Aᵀ's rows paired once for all the chunk's panels.
					wa := (ir1 - ir0 + amxMR - 1) &^ (amxMR - 1)
					ws.wa = grow(ws.wa, kpad/2*wa)
					pairRows(ws.wa, wa, p.a, p.lda, pc, kc, kpad, ir0, ir1-ir0)
				}
				for ir := ir0; ir < ir1; ir += amxMR {
					mr := min(amxMR, ir1-ir)
					pa, lda := p.panelA(ws, pc, kc, kpad, ir, mr, ir-ir0)
					if mr == amxMR && full > 0 && direct {
						amxKernel32(kb, pa, lda, &pb[0], w, amxNR, &p.c[ir*p.ldc+jc], p.ldc, full, &amxConfig[0], kacc)
					}
					if mr == amxMR && full == strips && direct {
						continue
					}
					// The edge (the last strip, or every strip of the last
					// rows), or all of C when scaled: computed into ws.tile
					// and stored from there.
					s0 := full
					if mr < amxMR || !direct {
						s0 = 0
					}
					wt := (strips - s0) * amxNR
					ws.tile = grow(ws.tile, amxMR*wt)
					amxKernel32(kb, pa, lda, &pb[s0*amxNR], w, amxNR, &ws.tile[0], wt, strips-s0, &amxConfig[0], 0)
					p.storeTile(ws.tile, wt, ir, jc+s0*amxNR, mr, nc-s0*amxNR, acc)
				}
			}
			pc += kc
		}
	}
}

// panelA returns the row panel of rows [ir, ir+mr) of op(A), k values
// [pc, pc+kc) zero-padded to kpad, and its row stride: A itself where it
// can be read in place, else packed into ws.a. For a transposed A the
// pairs of its rows are in ws.wa from column off.
func (p *bproblem) panelA(ws *amxWorkspace, pc, kc, kpad, ir, mr, off int) (*uint16, int) {
	if p.pa != nil {
		return p.pairPanelA(ws, pc, kc, kpad, ir, mr)
	}
	if !p.transA && p.a.F32 == nil && mr == amxMR && kc == kpad {
		return &p.a.Bits[ir*p.lda+pc], p.lda
	}
	ws.a = grow(ws.a, amxMR*kpad)
	if !p.transA {
		rowPanel(ws.a, kpad, p.a, p.lda, ir, mr, pc, kc)
		return &ws.a[0], kpad
	}
	// k runs down Aᵀ's columns: its rows paired (ws.wa), transposed.
	wa := len(ws.wa) / (kpad / 2)
	transposePairs(u32of(ws.a), kpad/2, ws.wa[off:], wa, kpad/2, amxMR)
	return &ws.a[0], kpad
}

// packB packs columns [col, col+nc) of op(B), k values [pc, pc+kc),
// as kpad/2 rows of w k-pairs into dst, zero past the edges.
func (p *bproblem) packB(ws *amxWorkspace, dst []uint32, w, pc, kc, kpad, col, nc int) {
	if p.pb != nil {
		p.pairStripB(dst, w, pc, kc, kpad, col, nc)
		return
	}
	if !p.transB {
		pairRows(dst, w, p.b, p.ldb, pc, kc, kpad, col, nc)
		return
	}
	// k runs along Bᵀ's rows: a row panel of 32 columns at a time,
	// transposed.
	ws.t = grow(ws.t, amxNR*kpad/2)
	panel := u16of(ws.t)
	for s := 0; s*amxNR < nc; s++ {
		rowPanel(panel, kpad, p.b, p.ldb, col+s*amxNR, min(amxNR, nc-s*amxNR), pc, kc)
		transposePairs(dst[s*amxNR:], w, ws.t, kpad/2, amxNR, kpad/2)
	}
}

// rowPanel copies (or rounds, if float32) rows [r0, r0+nr) of x (row
// stride ld), values [c0, c0+kc), into dst as 32 rows of kpad values,
// zero past the edges.
func rowPanel(dst []uint16, kpad int, x BF16Operand, ld, r0, nr, c0, kc int) {
	dst = dst[:amxMR*kpad]
	if nr < amxMR {
		clear(dst[nr*kpad:])
	}
	for i := 0; i < nr; i++ {
		d := dst[i*kpad : i*kpad+kpad]
		src := (r0+i)*ld + c0
		if x.F32 != nil {
			vec.BF16FromF32(d[:kc], x.F32[src:src+kc])
		} else {
			copy(d[:kc], x.Bits[src:src+kc])
		}
		clear(d[kc:])
	}
}

// pairRows interleaves rows [r0, r0+kc) of x (row stride ld) two by two,
// columns [c0, c0+nc), into dst (kpad/2 rows of w ≥ nc):
// dst[q*w+j] = x(r0+2q, c0+j) | x(r0+2q+1, c0+j)<<16, rounding float32
// values to bfloat16, zero past k. Columns nc..w-1 are left as they are:
// a column of B (a row of A) reaches only its own column (row) of C, and
// those of the padding are never stored.
func pairRows(dst []uint32, w int, x BF16Operand, ld, r0, kc, kpad, c0, nc int) {
	kp := (kc + 1) / 2
	dst = dst[:kpad/2*w]
	for q := 0; q < kp; q++ {
		lo := (r0+2*q)*ld + c0
		d := dst[q*w : q*w+nc]
		last := 2*q+1 == kc
		switch {
		case x.F32 != nil && last:
			for j, v := range x.F32[lo : lo+nc] {
				d[j] = uint32(half.FromFloat32BF(v))
			}
		case x.F32 != nil:
			vec.BF16PairsFromF32(d, x.F32[lo:lo+nc], x.F32[lo+ld:lo+ld+nc])
		case last:
			for j, v := range x.Bits[lo : lo+nc] {
				d[j] = uint32(v)
			}
		default:
			interleave16(d, x.Bits[lo:lo+nc], x.Bits[lo+ld:lo+ld+nc])
		}
	}
	clear(dst[kp*w:])
}

// u32of and u16of view 16-bit storage as 32-bit elements and back.
func u32of(s []uint16) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(s))), len(s)/2)
}

func u16of(s []uint32) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
}

// pairPanelA is panelA for BgemmPairs' A: pairs along its rows are a row
// panel already (read in place when whole), pairs down its columns a pair
// strip, transposed.
func (p *bproblem) pairPanelA(ws *amxWorkspace, pc, kc, kpad, ir, mr int) (*uint16, int) {
	q0, kq, kpq := pc/2, kc/2, kpad/2 // pairs: the first, how many, padded
	if !p.transA && mr == amxMR && kc == kpad {
		return &u16of(p.pa[ir*p.lda+q0:])[0], 2 * p.lda
	}
	ws.a = grow(ws.a, amxMR*kpad)
	panel := u32of(ws.a)
	if !p.transA {
		for i := range mr {
			d := panel[i*kpq : (i+1)*kpq]
			copy(d, p.pa[(ir+i)*p.lda+q0:(ir+i)*p.lda+q0+kq])
			clear(d[kq:])
		}
		clear(panel[mr*kpq:])
		return &ws.a[0], kpad
	}
	clear(panel)
	transposePairs(panel, kpq, p.pa[q0*p.lda+ir:], p.lda, kq, mr)
	return &ws.a[0], kpad
}

// pairStripB is packB for BgemmPairs' B: pairs down its columns are
// copied row by row, pairs along its rows (Bᵀ as stored) transposed.
func (p *bproblem) pairStripB(dst []uint32, w, pc, kc, kpad, col, nc int) {
	q0, kq, kpq := pc/2, kc/2, kpad/2
	dst = dst[:kpq*w]
	if p.transB {
		clear(dst)
		transposePairs(dst, w, p.pb[col*p.ldb+q0:], p.ldb, nc, kq)
		return
	}
	for q := range kq {
		d := dst[q*w : (q+1)*w]
		copy(d[:nc], p.pb[(q0+q)*p.ldb+col:(q0+q)*p.ldb+col+nc])
		clear(d[nc:])
	}
	clear(dst[kq*w:])
}
