//go:build ignore

// gen_kernels writes the amd64 convolution micro-kernels: kernels_amd64.s
// and the Go declarations and shape tables in kernels_amd64_gen.go. Run it
// with `go generate` in this directory after editing it; the output is
// committed.
//
// Two families, each for AVX-512 (zmm, 16 floats) and AVX2+FMA (ymm, 8):
//
// The shift kernel (igemm) computes an MR×(NV·W) tile of an output whose
// rows of B are given by byte offsets from a base: the implicit im2col of
// a stride-1 convolution, whose row (c, k) is the padded input shifted by
// the tap's offset.
//
//	func name(k int, a *float32, b *float32, offs *int, c *float32, ldc int, acc int)
//	C[i][j] = Σ_{p<k} a[p*MR+i] · b[offs[p]/4 + j]  (+ C[i][j] if acc != 0)
//
// for i < MR, j < NV·W: A is a packed panel of MR floats per step, C has
// row stride ldc (elements). Tiles are always full: callers pad A with
// zero rows and compute extra columns they drop.
//
// The dot kernel computes an MR×NR tile of dot products along rows of A
// and rows of B (the kernel gradient: A rows are output channels of dy, B
// rows the taps of the padded input):
//
//	func name(nsamp, rows, nvec, tail int, a *float32, lda, arow, asamp int, b *float32, offs *int, brow, bsamp int, c *float32, ldc int, acc int)
//	C[i][j] = Σ_{s<nsamp} Σ_{r<rows} Σ_{l<nvec·W+tail} A_s,r[i*lda + l] · B_s,r[offs[j]/4 + l]  (+ C[i][j] if acc != 0)
//
// where row r of sample s of A starts at a, moved on by
// arow bytes from the end of each row's full vectors (nvec·W floats on) to
// the next row's start and by asamp bytes from there after a sample's
// last row to the next sample's first row; B likewise with brow and bsamp.
// Only the first tail lanes of the last vector of each row are read
// (masked loads), so nothing past a row is touched.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
)

type gen struct{ b bytes.Buffer }

func (g *gen) p(format string, args ...any)   { fmt.Fprintf(&g.b, "\t"+format+"\n", args...) }
func (g *gen) label(l string)                 { fmt.Fprintf(&g.b, "%s:\n", l) }
func (g *gen) raw(format string, args ...any) { fmt.Fprintf(&g.b, format+"\n", args...) }

// isa describes a vector instruction set.
type isa struct {
	name  string // name prefix
	reg   string // "Z" or "Y"
	lanes int    // floats per vector
	nregs int
}

var (
	avx512 = isa{"k512", "Z", 16, 32}
	avx2   = isa{"k256", "Y", 8, 16}
)

func (s isa) bytes() int { return 4 * s.lanes }

// Shapes: igemm MR×NV and dot MR×NR, per set.
var (
	igemm512 = [][2]int{{8, 3}, {6, 4}, {4, 6}, {12, 2}, {2, 8}, {1, 12}, {8, 2}}
	igemm256 = [][2]int{{6, 2}, {4, 3}, {12, 1}, {2, 5}, {1, 6}}
	dot512   = [][2]int{{4, 6}, {3, 8}, {2, 12}, {1, 16}}
	dot256   = [][2]int{{3, 3}, {2, 6}, {1, 8}}
)

func igemmName(s isa, mr, nv int) string { return fmt.Sprintf("%sIg%dx%d", s.name, mr, nv) }
func dotName(s isa, mr, nr int) string   { return fmt.Sprintf("%sDot%dx%d", s.name, mr, nr) }

// igemm emits one shift kernel. Registers: AX the A panel, BX the base of
// B, R8 the offsets, R9 the current offset, CX the steps left, DI and SI
// C and its stride. Vector registers: accumulators from 0, then NV for
// the B vectors, then temporaries for the broadcasts.
func (g *gen) igemm(s isa, mr, nv int) {
	nm := igemmName(s, mr, nv)
	R := s.reg
	nacc := mr * nv
	acc := func(i, v int) string { return fmt.Sprintf("%s%d", R, i*nv+v) }
	bv := func(v int) string { return fmt.Sprintf("%s%d", R, nacc+v) }
	ntmp := s.nregs - nacc - nv
	if ntmp < 1 {
		panic(nm + ": no register left for broadcasts")
	}
	tmp := func(i int) string { return fmt.Sprintf("%s%d", R, nacc+nv+i%ntmp) }
	g.raw("// func %s(k int, a *float32, b *float32, offs *int, c *float32, ldc int, acc int)", nm)
	g.raw("TEXT ·%s(SB), NOSPLIT, $0-56", nm)
	g.p("MOVQ k+0(FP), CX")
	g.p("MOVQ a+8(FP), AX")
	g.p("MOVQ b+16(FP), BX")
	g.p("MOVQ offs+24(FP), R8")
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			g.zero(s, acc(i, v))
		}
	}
	g.p("TESTQ CX, CX")
	g.p("JZ store")
	g.label("loop")
	g.p("MOVQ (R8), R9")
	for v := 0; v < nv; v++ {
		g.p("VMOVUPS %d(BX)(R9*1), %s", v*s.bytes(), bv(v))
	}
	for i := 0; i < mr; i++ {
		if nv == 1 && s.lanes == 16 {
			g.p("VFMADD231PS.BCST %d(AX), %s, %s", 4*i, bv(0), acc(i, 0))
			continue
		}
		t := tmp(i)
		g.p("VBROADCASTSS %d(AX), %s", 4*i, t)
		for v := 0; v < nv; v++ {
			g.p("VFMADD231PS %s, %s, %s", bv(v), t, acc(i, v))
		}
	}
	g.p("ADDQ $8, R8")
	g.p("ADDQ $%d, AX", 4*mr)
	g.p("DECQ CX")
	g.p("JNZ loop")
	g.label("store")
	g.p("MOVQ c+32(FP), DI")
	g.p("MOVQ ldc+40(FP), SI")
	g.p("SHLQ $2, SI")
	g.p("MOVQ acc+48(FP), R9")
	g.p("TESTQ R9, R9")
	g.p("JZ overwrite")
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			g.p("VADDPS %d(DI), %s, %s", v*s.bytes(), acc(i, v), acc(i, v))
			g.p("VMOVUPS %s, %d(DI)", acc(i, v), v*s.bytes())
		}
		if i < mr-1 {
			g.p("ADDQ SI, DI")
		}
	}
	g.p("VZEROUPPER")
	g.p("RET")
	g.label("overwrite")
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			g.p("VMOVUPS %s, %d(DI)", acc(i, v), v*s.bytes())
		}
		if i < mr-1 {
			g.p("ADDQ SI, DI")
		}
	}
	g.p("VZEROUPPER")
	g.p("RET")
	g.raw("")
}

func (g *gen) zero(s isa, r string) {
	if s.lanes == 16 {
		g.p("VPXORD %s, %s, %s", r, r, r)
	} else {
		g.p("VXORPS %s, %s, %s", r, r, r)
	}
}

// aRow returns the address of row i (< 4) of A: AX + i·lda, with DX =
// lda and SI = 3·lda in bytes.
func aRow(i int) string {
	return [...]string{"(AX)", "(AX)(DX*1)", "(AX)(DX*2)", "(AX)(SI*1)"}[i]
}

// dot emits one dot kernel. Registers: AX row 0 of A, DX and SI lda and
// 3·lda (bytes), BX the base of B, R8 the offsets, R9 an offset, CX the
// vectors left in a row, DI the rows left, R10 and R11 arow and brow, R12
// the samples left, R13 tail.
// Vector registers: accumulators from 0, then MR for the A vectors, then
// B temporaries (and on AVX2 the last register holds the tail mask).
func (g *gen) dot(s isa, mr, nr int) {
	nm := dotName(s, mr, nr)
	R := s.reg
	nacc := mr * nr
	acc := func(i, j int) string { return fmt.Sprintf("%s%d", R, i*nr+j) }
	av := func(i int) string { return fmt.Sprintf("%s%d", R, nacc+i) }
	last := s.nregs - 1 // AVX2: the mask
	ntmp := s.nregs - nacc - mr
	if s.lanes == 8 {
		ntmp--
	}
	if ntmp < 1 {
		panic(nm + ": no register left for B")
	}
	tmp := func(j int) string { return fmt.Sprintf("%s%d", R, nacc+mr+j%ntmp) }
	g.raw("// func %s(nsamp, rows, nvec, tail int, a *float32, lda, arow, asamp int, b *float32, offs *int, brow, bsamp int, c *float32, ldc int, acc int)", nm)
	g.raw("TEXT ·%s(SB), NOSPLIT, $0-120", nm)
	g.p("MOVQ nsamp+0(FP), R12")
	g.p("MOVQ a+32(FP), AX")
	g.p("MOVQ lda+40(FP), DX")
	g.p("SHLQ $2, DX")
	g.p("LEAQ (DX)(DX*2), SI")
	g.p("MOVQ arow+48(FP), R10")
	g.p("MOVQ b+64(FP), BX")
	g.p("MOVQ offs+72(FP), R8")
	g.p("MOVQ brow+80(FP), R11")
	g.p("MOVQ tail+24(FP), R13")
	// Tail mask.
	if s.lanes == 16 {
		g.p("MOVQ $1, R9")
		g.p("SHLXQ R13, R9, R9")
		g.p("DECQ R9")
		g.p("KMOVW R9, K1")
	} else {
		g.p("LEAQ ·maskTab(SB), R9")
		g.p("MOVQ $8, CX")
		g.p("SUBQ R13, CX")
		g.p("VMOVUPS (R9)(CX*4), %s%d", R, last)
	}
	for i := 0; i < mr; i++ {
		for j := 0; j < nr; j++ {
			g.zero(s, acc(i, j))
		}
	}
	step := func(masked bool) {
		for i := 0; i < mr; i++ {
			switch {
			case !masked:
				g.p("VMOVUPS %s, %s", aRow(i), av(i))
			case s.lanes == 16:
				g.p("VMOVUPS.Z %s, K1, %s", aRow(i), av(i))
			default:
				g.p("VMASKMOVPS %s, %s%d, %s", aRow(i), R, last, av(i))
			}
		}
		for j := 0; j < nr; j++ {
			t := tmp(j)
			g.p("MOVQ %d(R8), R9", 8*j)
			switch {
			case !masked:
				g.p("VMOVUPS (BX)(R9*1), %s", t)
			case s.lanes == 16:
				g.p("VMOVUPS.Z (BX)(R9*1), K1, %s", t)
			default:
				g.p("VMASKMOVPS (BX)(R9*1), %s%d, %s", R, last, t)
			}
			for i := 0; i < mr; i++ {
				g.p("VFMADD231PS %s, %s, %s", t, av(i), acc(i, j))
			}
		}
	}
	g.p("TESTQ R12, R12")
	g.p("JZ reduce")
	g.label("sample")
	g.p("MOVQ rows+8(FP), DI")
	g.p("TESTQ DI, DI")
	g.p("JZ sampleend")
	g.label("row")
	g.p("MOVQ nvec+16(FP), CX")
	g.p("TESTQ CX, CX")
	g.p("JZ tail")
	g.label("vec")
	step(false)
	g.p("ADDQ $%d, AX", s.bytes())
	g.p("ADDQ $%d, BX", s.bytes())
	g.p("DECQ CX")
	g.p("JNZ vec")
	g.label("tail")
	g.p("TESTQ R13, R13")
	g.p("JZ rowend")
	step(true)
	g.label("rowend")
	g.p("ADDQ R10, AX")
	g.p("ADDQ R11, BX")
	g.p("DECQ DI")
	g.p("JNZ row")
	g.label("sampleend")
	g.p("ADDQ asamp+56(FP), AX")
	g.p("ADDQ bsamp+88(FP), BX")
	g.p("DECQ R12")
	g.p("JNZ sample")
	g.label("reduce")
	g.p("MOVQ c+96(FP), DI")
	g.p("MOVQ ldc+104(FP), SI")
	g.p("SHLQ $2, SI")
	g.p("MOVQ acc+112(FP), R9")
	g.p("TESTQ R9, R9")
	g.p("JZ overwrite")
	g.dotStore(s, mr, nr, true)
	g.label("overwrite")
	g.dotStore(s, mr, nr, false)
	g.raw("")
}

// dotStore reduces the dot kernel's accumulators (lanes summed) into the
// tile at DI (row stride SI bytes), added to it with add, and returns.
// On AVX-512 a row's accumulators are reduced four (then two) at a time
// by a tree of shuffles (dotTree); the rest one at a time.
func (g *gen) dotStore(s isa, mr, nr int, add bool) {
	nacc := mr * nr
	t, u := nacc+mr, nacc+mr+1 // free registers for the reduction
	if s.lanes == 16 {
		g.p("MOVL $0x1111, R9")
		g.p("KMOVW R9, K2")
		g.p("MOVL $0x0011, R9")
		g.p("KMOVW R9, K3")
	}
	for i := 0; i < mr; i++ {
		j0 := 0
		if s.lanes == 16 {
			for ; j0+2 <= nr; j0 += min(4, nr-j0) &^ 1 {
				g.dotTree(nacc, i*nr+j0, min(4, nr-j0)&^1, 4*j0, add)
			}
		}
		for j := j0; j < nr; j++ {
			a := i*nr + j
			if s.lanes == 16 {
				// EVEX forms only: accumulators may be Z16-Z31.
				g.p("VEXTRACTF64X4 $1, Z%d, Y%d", a, t)
				g.p("VADDPS Y%d, Y%d, Y%d", a, t, t)
				g.p("VEXTRACTF32X4 $1, Y%d, X%d", t, u)
			} else {
				g.p("VEXTRACTF128 $1, Y%d, X%d", a, u)
				g.p("VMOVAPS X%d, X%d", a, t)
			}
			g.p("VADDPS X%d, X%d, X%d", u, t, t)
			g.p("VPERMILPS $0x4e, X%d, X%d", t, u)
			g.p("VADDPS X%d, X%d, X%d", u, t, t)
			g.p("VPERMILPS $0xb1, X%d, X%d", t, u)
			g.p("VADDPS X%d, X%d, X%d", u, t, t)
			if add {
				g.p("VADDSS %d(DI), X%d, X%d", 4*j, t, t)
			}
			g.p("VMOVSS X%d, %d(DI)", t, 4*j)
		}
		if i < mr-1 {
			g.p("ADDQ SI, DI")
		}
	}
	g.p("VZEROUPPER")
	g.p("RET")
}

// dotTree reduces the n (4 or 2) zmm accumulators from acc0 on, each to
// the sum of its lanes, into n consecutive floats at off(DI) (added to
// them with add), with registers Z(free) to Z(free+3) as temporaries, K2
// = 0x1111 and K3 = 0x0011. Pairs of accumulators are folded 512 → 256
// bits each into one register (VSHUFF32X4, then an add), two such into
// one register holding four partial sums of each accumulator in a
// 128-bit lane, then each lane is summed in place and the lanes' first
// elements compressed to the front.
func (g *gen) dotTree(free, acc0, n, off int, add bool) {
	t := func(i int) string { return fmt.Sprintf("Z%d", free+i) }
	pair := func(a, b int, dst, tmp string) {
		g.p("VSHUFF32X4 $0x44, Z%d, Z%d, %s", b, a, dst)
		g.p("VSHUFF32X4 $0xee, Z%d, Z%d, %s", b, a, tmp)
		g.p("VADDPS %s, %s, %s", tmp, dst, dst)
	}
	pair(acc0, acc0+1, t(0), t(1))
	hi := t(0) // n == 2: fold the pair with itself
	if n == 4 {
		pair(acc0+2, acc0+3, t(2), t(3))
		hi = t(2)
	}
	g.p("VSHUFF32X4 $0x88, %s, %s, %s", hi, t(0), t(1))
	g.p("VSHUFF32X4 $0xdd, %s, %s, %s", hi, t(0), t(3))
	g.p("VADDPS %s, %s, %s", t(3), t(1), t(1))
	g.p("VPERMILPS $0x4e, %s, %s", t(1), t(3))
	g.p("VADDPS %s, %s, %s", t(3), t(1), t(1))
	g.p("VPERMILPS $0xb1, %s, %s", t(1), t(3))
	g.p("VADDPS %s, %s, %s", t(3), t(1), t(1))
	k := "K2"
	if n == 2 {
		k = "K3"
	}
	g.p("VCOMPRESSPS %s, %s, %s", t(1), k, t(3))
	x := fmt.Sprintf("X%d", free+3)
	if n == 4 {
		if add {
			g.p("VADDPS %d(DI), %s, %s", off, x, x)
		}
		g.p("VMOVUPS %s, %d(DI)", x, off)
		return
	}
	if add {
		g.p("VMOVSD %d(DI), X%d", off, free+2)
		g.p("VADDPS X%d, %s, %s", free+2, x, x)
	}
	g.p("VMOVSD %s, %d(DI)", x, off)
}

// maxStride emits the max-pooling step: for t < n, v = x[t·stride];
// where v > y[t] or v is NaN, y[t] = v and a[t] = pos0 + t·dpos:
//
//	func name(n int, y *float32, a *int32, x *float32, stride int, pos0, dpos int32)
//
// The elements of x are gathered (VGATHERDPS) at the stride; only the
// first n lanes of the last vector are read or written (masks).
func (g *gen) maxStride(s isa) {
	nm := s.name + "MaxStride"
	g.raw("// func %s(n int, y *float32, a *int32, x *float32, stride int, pos0, dpos int32)", nm)
	g.raw("TEXT ·%s(SB), NOSPLIT, $0-48", nm)
	g.p("MOVQ n+0(FP), CX")
	g.p("MOVQ y+8(FP), DI")
	g.p("MOVQ a+16(FP), SI")
	g.p("MOVQ x+24(FP), BX")
	g.p("MOVQ stride+32(FP), DX")
	R := s.reg
	w := s.lanes
	// Index vector (iota·stride), positions (pos0 + iota·dpos), and the
	// advances per vector (positions: w·dpos; x: w·stride floats).
	g.p("MOVQ DX, R10")
	g.p("SHLQ $%d, R10", map[int]int{16: 6, 8: 5}[w])
	g.p("MOVL pos0+40(FP), R8")
	g.p("MOVL dpos+44(FP), R9")
	if w == 16 {
		g.p("VPBROADCASTD DX, Z2")
		g.p("VMOVDQU32 ·iota16(SB), Z1")
		g.p("VPMULLD Z2, Z1, Z1")
		g.p("VPBROADCASTD R9, Z4")
		g.p("VMOVDQU32 ·iota16(SB), Z5")
		g.p("VPMULLD Z4, Z5, Z5")
		g.p("VPBROADCASTD R8, Z3")
		g.p("VPADDD Z5, Z3, Z3")
		g.p("SHLL $4, R9")
		g.p("VPBROADCASTD R9, Z6")
	} else {
		g.p("MOVQ DX, X2")
		g.p("VPBROADCASTD X2, Y2")
		g.p("VMOVDQU ·iota16(SB), Y1")
		g.p("VPMULLD Y2, Y1, Y1")
		g.p("MOVQ R9, X4")
		g.p("VPBROADCASTD X4, Y4")
		g.p("VMOVDQU ·iota16(SB), Y5")
		g.p("VPMULLD Y4, Y5, Y5")
		g.p("MOVQ R8, X3")
		g.p("VPBROADCASTD X3, Y3")
		g.p("VPADDD Y5, Y3, Y3")
		g.p("SHLL $3, R9")
		g.p("MOVQ R9, X6")
		g.p("VPBROADCASTD X6, Y6")
	}
	body := func(tail bool) {
		if w == 16 {
			g.p("KMOVW K1, K2")
			g.p("VPXORD Z7, Z7, Z7")
			g.p("VGATHERDPS (BX)(Z1*4), K2, Z7")
			g.p("VMOVUPS.Z (DI), K1, Z8")
			g.p("VCMPPS $0x1e, Z8, Z7, K1, K3") // v > c
			g.p("VCMPPS $3, Z7, Z7, K1, K4")    // v is NaN
			g.p("KORW K4, K3, K3")
			g.p("VMOVUPS Z7, K3, Z8")
			g.p("VMOVUPS Z8, K1, (DI)")
			g.p("VMOVDQU32.Z (SI), K1, Z9")
			g.p("VMOVDQU32 Z3, K3, Z9")
			g.p("VMOVDQU32 Z9, K1, (SI)")
			return
		}
		// AVX2: Y10 is the lane mask (all ones but in the tail).
		g.p("VMOVAPS Y10, Y13")
		g.p("VXORPS Y7, Y7, Y7")
		g.p("VGATHERDPS Y13, (BX)(Y1*4), Y7")
		if tail {
			g.p("VMASKMOVPS (DI), Y10, Y8")
			g.p("VPMASKMOVD (SI), Y10, Y9")
		} else {
			g.p("VMOVUPS (DI), Y8")
			g.p("VMOVDQU (SI), Y9")
		}
		g.p("VCMPPS $0x1e, Y8, Y7, Y11")
		g.p("VCMPPS $3, Y7, Y7, Y12")
		g.p("VORPS Y12, Y11, Y11")
		g.p("VBLENDVPS Y11, Y7, Y8, Y8")
		g.p("VBLENDVPS Y11, Y3, Y9, Y9")
		if tail {
			g.p("VMASKMOVPS Y8, Y10, (DI)")
			g.p("VPMASKMOVD Y9, Y10, (SI)")
		} else {
			g.p("VMOVUPS Y8, (DI)")
			g.p("VMOVDQU Y9, (SI)")
		}
	}
	g.label("loop")
	g.p("CMPQ CX, $%d", w)
	g.p("JL tail")
	if w == 16 {
		g.p("MOVL $0xffff, R11")
		g.p("KMOVW R11, K1")
	} else {
		g.p("VPCMPEQD Y10, Y10, Y10")
	}
	body(false)
	g.p("ADDQ R10, BX")
	g.p("ADDQ $%d, DI", 4*w)
	g.p("ADDQ $%d, SI", 4*w)
	g.p("VPADDD %s6, %s3, %s3", R, R, R)
	g.p("SUBQ $%d, CX", w)
	g.p("JMP loop")
	g.label("tail")
	g.p("TESTQ CX, CX")
	g.p("JZ done")
	if w == 16 {
		g.p("MOVQ $1, R11")
		g.p("SHLXQ CX, R11, R11")
		g.p("DECQ R11")
		g.p("KMOVW R11, K1")
	} else {
		g.p("LEAQ ·maskTab(SB), R11")
		g.p("MOVQ $8, R12")
		g.p("SUBQ CX, R12")
		g.p("VMOVUPS (R11)(R12*4), Y10")
	}
	body(true)
	g.label("done")
	g.p("VZEROUPPER")
	g.p("RET")
	g.raw("")
}

// dense emits the windowed max or sum over windows without padding: for
// t < n, the taps x[orig[t] + kofs[k]], k < nk, reduced in order; max
// keeps the first maximum (or the last NaN) in y[t] and its position in
// a[t], sum their sum in y[t] (a unused):
//
//	func name(n int, y *float32, a *int32, x *float32, orig *int32, kofs *int32, nk int)
//
// One gather per tap reads 16 (8) windows' elements at once.
func (g *gen) dense(s isa, sum bool) {
	op := "MaxDense"
	if sum {
		op = "SumDense"
	}
	nm := s.name + op
	w := s.lanes
	g.raw("// func %s(n int, y *float32, a *int32, x *float32, orig *int32, kofs *int32, nk int)", nm)
	g.raw("TEXT ·%s(SB), NOSPLIT, $0-56", nm)
	g.p("MOVQ n+0(FP), CX")
	g.p("MOVQ y+8(FP), DI")
	g.p("MOVQ a+16(FP), SI")
	g.p("MOVQ x+24(FP), BX")
	g.p("MOVQ orig+32(FP), R8")
	g.p("MOVQ kofs+40(FP), R9")
	g.p("MOVQ nk+48(FP), R10")
	body := func(tail bool) {
		if w == 16 {
			g.p("VMOVDQU32.Z (R8), K1, Z0")
			g.p("VPBROADCASTD (R9), Z1")
			g.p("VPADDD Z1, Z0, Z2")
			g.p("KMOVW K1, K2")
			g.p("VPXORD Z3, Z3, Z3")
			g.p("VGATHERDPS (BX)(Z2*4), K2, Z3")
			if !sum {
				g.p("VMOVDQA32 Z2, Z4")
			}
			g.p("MOVQ $1, R12")
			g.label(fmt.Sprintf("k%v", tail))
			g.p("CMPQ R12, R10")
			g.p("JGE kdone%v", tail)
			g.p("VPBROADCASTD (R9)(R12*4), Z1")
			g.p("VPADDD Z1, Z0, Z2")
			g.p("KMOVW K1, K2")
			g.p("VPXORD Z5, Z5, Z5")
			g.p("VGATHERDPS (BX)(Z2*4), K2, Z5")
			if sum {
				g.p("VADDPS Z5, Z3, Z3")
			} else {
				g.p("VCMPPS $0x1e, Z3, Z5, K1, K3")
				g.p("VCMPPS $3, Z5, Z5, K1, K4")
				g.p("KORW K4, K3, K3")
				g.p("VMOVUPS Z5, K3, Z3")
				g.p("VMOVDQA32 Z2, K3, Z4")
			}
			g.p("INCQ R12")
			g.p("JMP k%v", tail)
			g.label(fmt.Sprintf("kdone%v", tail))
			g.p("VMOVUPS Z3, K1, (DI)")
			if !sum {
				g.p("VMOVDQU32 Z4, K1, (SI)")
			}
			return
		}
		// AVX2: Y10 is the lane mask.
		if tail {
			g.p("VPMASKMOVD (R8), Y10, Y0")
		} else {
			g.p("VMOVDQU (R8), Y0")
		}
		g.p("VPBROADCASTD (R9), Y1")
		g.p("VPADDD Y1, Y0, Y2")
		g.p("VMOVAPS Y10, Y13")
		g.p("VXORPS Y3, Y3, Y3")
		g.p("VGATHERDPS Y13, (BX)(Y2*4), Y3")
		if !sum {
			g.p("VMOVDQA Y2, Y4")
		}
		g.p("MOVQ $1, R12")
		g.label(fmt.Sprintf("k%v", tail))
		g.p("CMPQ R12, R10")
		g.p("JGE kdone%v", tail)
		g.p("VPBROADCASTD (R9)(R12*4), Y1")
		g.p("VPADDD Y1, Y0, Y2")
		g.p("VMOVAPS Y10, Y13")
		g.p("VXORPS Y5, Y5, Y5")
		g.p("VGATHERDPS Y13, (BX)(Y2*4), Y5")
		if sum {
			g.p("VADDPS Y5, Y3, Y3")
		} else {
			g.p("VCMPPS $0x1e, Y3, Y5, Y11")
			g.p("VCMPPS $3, Y5, Y5, Y12")
			g.p("VORPS Y12, Y11, Y11")
			g.p("VBLENDVPS Y11, Y5, Y3, Y3")
			g.p("VBLENDVPS Y11, Y2, Y4, Y4")
		}
		g.p("INCQ R12")
		g.p("JMP k%v", tail)
		g.label(fmt.Sprintf("kdone%v", tail))
		if tail {
			g.p("VMASKMOVPS Y3, Y10, (DI)")
			if !sum {
				g.p("VPMASKMOVD Y4, Y10, (SI)")
			}
		} else {
			g.p("VMOVUPS Y3, (DI)")
			if !sum {
				g.p("VMOVDQU Y4, (SI)")
			}
		}
	}
	g.label("loop")
	g.p("CMPQ CX, $%d", w)
	g.p("JL tail")
	if w == 16 {
		g.p("MOVL $0xffff, R11")
		g.p("KMOVW R11, K1")
	} else {
		g.p("VPCMPEQD Y10, Y10, Y10")
	}
	body(false)
	g.p("ADDQ $%d, DI", 4*w)
	g.p("ADDQ $%d, SI", 4*w)
	g.p("ADDQ $%d, R8", 4*w)
	g.p("SUBQ $%d, CX", w)
	g.p("JMP loop")
	g.label("tail")
	g.p("TESTQ CX, CX")
	g.p("JZ done")
	if w == 16 {
		g.p("MOVQ $1, R11")
		g.p("SHLXQ CX, R11, R11")
		g.p("DECQ R11")
		g.p("KMOVW R11, K1")
	} else {
		g.p("LEAQ ·maskTab(SB), R11")
		g.p("MOVQ $8, R12")
		g.p("SUBQ CX, R12")
		g.p("VMOVUPS (R11)(R12*4), Y10")
	}
	body(true)
	g.label("done")
	g.p("VZEROUPPER")
	g.p("RET")
	g.raw("")
}

// maxPool2 emits the AVX-512 max pool of 2×2 windows at stride 2 over
// one plane (no padding):
//
//	func name(rows, n int, y *float32, a *int32, x *float32, inW int)
//
// output row r < rows, column j < n: the maximum of x[2r·inW + 2j],
// x[2r·inW + 2j+1], x[(2r+1)·inW + 2j], x[(2r+1)·inW + 2j+1], in that
// order, the first maximum kept and a NaN taking over (the last NaN), into
// y[r·n + j], and its position in x into a[r·n + j]. Each row is read as
// vectors of 32 floats split into even and odd lanes (VPERMT2PS), 16
// outputs at a time, the last ones masked: no gathers, nothing read past
// a row's 2n floats.
func (g *gen) maxPool2() {
	nm := "k512MaxPool2"
	g.raw("// func %s(rows, n int, y *float32, a *int32, x *float32, inW int)", nm)
	g.raw("TEXT ·%s(SB), NOSPLIT, $0-48", nm)
	g.p("MOVQ y+16(FP), DI")
	g.p("MOVQ a+24(FP), SI")
	g.p("MOVQ x+32(FP), BX")
	g.pool2Setup("pairIdx")
	g.label("row")
	g.p("MOVQ BX, R12")
	g.p("LEAQ (BX)(R10*4), R13")
	g.p("MOVQ n+8(FP), CX")
	g.p("VPBROADCASTD R11, Z25")
	g.p("VPADDD Z29, Z25, Z25") // positions of the first tap
	g.p("TESTQ CX, CX")
	g.p("JZ rowend")
	g.pool2Masks()
	g.pool2Prefetch()
	g.p("VMOVUPS.Z (R12), K1, Z0")
	g.p("VMOVUPS.Z 64(R12), K2, Z1")
	g.p("VMOVUPS.Z (R13), K1, Z4")
	g.p("VMOVUPS.Z 64(R13), K2, Z5")
	g.p("VMOVAPS Z0, Z2")
	g.p("VPERMT2PS Z1, Z30, Z2")
	g.p("VMOVAPS Z0, Z3")
	g.p("VPERMT2PS Z1, Z31, Z3")
	g.p("VMOVAPS Z4, Z6")
	g.p("VPERMT2PS Z5, Z30, Z6")
	g.p("VMOVAPS Z4, Z7")
	g.p("VPERMT2PS Z5, Z31, Z7")
	// c = Z2, its position Z9; taps 1 to 3 in order.
	g.p("VMOVDQA32 Z25, Z9")
	for _, tap := range []struct{ v, from, step string }{{"Z3", "Z25", "Z27"}, {"Z6", "Z25", "Z26"}, {"Z7", "Z10", "Z27"}} {
		g.p("VPADDD %s, %s, Z10", tap.step, tap.from) // the tap's positions
		g.p("VCMPPS $0x1e, Z2, %s, K4", tap.v)        // v > c
		g.p("VCMPPS $3, %s, %s, K5", tap.v, tap.v)    // v is NaN
		g.p("KORW K5, K4, K4")
		g.p("VMOVUPS %s, K4, Z2", tap.v)
		g.p("VMOVDQA32 Z10, K4, Z9")
	}
	g.p("VMOVUPS Z2, K3, (DI)")
	g.p("VMOVDQU32 Z9, K3, (SI)")
	g.p("ADDQ $128, R12")
	g.p("ADDQ $128, R13")
	g.p("LEAQ (DI)(AX*4), DI")
	g.p("LEAQ (SI)(AX*4), SI")
	g.p("VPADDD Z28, Z25, Z25")
	g.p("SUBQ AX, CX")
	g.p("JNZ chunk")
	g.label("rowend")
	g.p("LEAQ (BX)(R10*8), BX")
	g.p("LEAQ (R11)(R10*2), R11")
	g.p("DECQ R8")
	g.p("JNZ row")
	g.label("done")
	g.p("VZEROUPPER")
	g.p("RET")
	g.raw("")
}

// pool2Prefetch emits software prefetches of the two input rows' stream
// (R12, R13) 1 KB ahead: the 2×2 pool kernels read x only through masked
// loads, which the hardware prefetcher does not follow on Zen 5
// (docs/performance.md, masked loads).
func (g *gen) pool2Prefetch() {
	for _, r := range []string{"R12", "R13"} {
		g.p("PREFETCHT0 1024(%s)", r)
		g.p("PREFETCHT0 1088(%s)", r)
	}
}

// pool2Masks emits, at label chunk, m = min(CX, 16) into AX and the masks
// of a chunk of m outputs of a 2×2 pool: K1 and K2 the lanes of the two
// vectors of a row's 2m inputs, K3 the m outputs (DX and R9 scratch).
func (g *gen) pool2Masks() {
	g.label("chunk")
	g.p("MOVQ CX, AX")
	g.p("CMPQ AX, $16")
	g.p("JLE mset")
	g.p("MOVQ $16, AX")
	g.label("mset")
	g.p("LEAQ (AX)(AX*1), DX")
	g.p("MOVQ $1, R9")
	g.p("CMPQ DX, $16")
	g.p("JLE lo")
	g.p("SUBQ $16, DX")
	g.p("SHLXQ DX, R9, R9")
	g.p("DECQ R9")
	g.p("KMOVW R9, K2")
	g.p("MOVL $0xffff, R9")
	g.p("KMOVW R9, K1")
	g.p("JMP masks")
	g.label("lo")
	g.p("SHLXQ DX, R9, R9")
	g.p("DECQ R9")
	g.p("KMOVW R9, K1")
	g.p("KXORW K2, K2, K2")
	g.label("masks")
	g.p("MOVQ $1, R9")
	g.p("SHLXQ AX, R9, R9")
	g.p("DECQ R9")
	g.p("KMOVW R9, K3")
}

// pool2Setup emits the prologue shared by the 2×2 pool kernels: R8 rows,
// R10 inW, R11 the position of the current row pair (0), Z29 2j, Z27
// ones, Z28 32s, Z26 inW, and the permutation indices from table at
// Z30 and Z31.
func (g *gen) pool2Setup(table string) {
	g.p("MOVQ rows+0(FP), R8")
	g.p("MOVQ inW+40(FP), R10")
	g.p("VMOVDQU32 ·%s(SB), Z30", table)
	g.p("VMOVDQU32 ·%s+64(SB), Z31", table)
	g.p("VMOVDQU32 ·iota16(SB), Z29")
	g.p("VPADDD Z29, Z29, Z29") // 2j
	g.p("MOVL $1, R9")
	g.p("VPBROADCASTD R9, Z27")
	g.p("MOVL $32, R9")
	g.p("VPBROADCASTD R9, Z28")
	g.p("VPBROADCASTD R10, Z26")
	g.p("XORQ R11, R11")
	g.p("TESTQ R8, R8")
	g.p("JZ done")
}

// maxPool2Grad emits the transpose of maxPool2 given its positions:
//
//	func k512MaxPool2Grad(rows, n int, dx *float32, a *int32, dy *float32, inW int)
//
// writes every element of x's rows 2r and 2r+1 (r < rows) that a window
// covers: dy[r·n + j] at the position a[r·n + j] names, zero at the
// window's other three (positions outside the windows are not written):
// 16 windows at a time, the four taps' values interleaved back into rows
// with VPERMT2PS.
func (g *gen) maxPool2Grad() {
	nm := "k512MaxPool2Grad"
	g.raw("// func %s(rows, n int, dx *float32, a *int32, dy *float32, inW int)", nm)
	g.raw("TEXT ·%s(SB), NOSPLIT, $0-48", nm)
	g.p("MOVQ dx+16(FP), DI")
	g.p("MOVQ a+24(FP), SI")
	g.p("MOVQ dy+32(FP), BX")
	g.pool2Setup("pairInv")
	g.label("row")
	g.p("MOVQ DI, R12")
	g.p("LEAQ (DI)(R10*4), R13")
	g.p("MOVQ n+8(FP), CX")
	g.p("VPBROADCASTD R11, Z25")
	g.p("VPADDD Z29, Z25, Z25") // positions of the first tap
	g.p("TESTQ CX, CX")
	g.p("JZ rowend")
	g.pool2Masks()
	g.p("VMOVUPS.Z (BX), K3, Z0")
	g.p("VMOVDQU32.Z (SI), K3, Z1")
	g.p("VPCMPEQD Z25, Z1, K4")
	g.p("VPADDD Z27, Z25, Z10")
	g.p("VPCMPEQD Z10, Z1, K5")
	g.p("VPADDD Z26, Z25, Z10")
	g.p("VPCMPEQD Z10, Z1, K6")
	g.p("VPADDD Z27, Z10, Z10")
	g.p("VPCMPEQD Z10, Z1, K7")
	for i, k := range []string{"K4", "K5", "K6", "K7"} {
		g.p("VMOVUPS.Z Z0, %s, Z%d", k, 2+i)
	}
	for row, reg := range []string{"R12", "R13"} {
		e, o := 2+2*row, 3+2*row
		g.p("VMOVAPS Z%d, Z6", e)
		g.p("VPERMT2PS Z%d, Z30, Z6", o)
		g.p("VMOVAPS Z%d, Z7", e)
		g.p("VPERMT2PS Z%d, Z31, Z7", o)
		g.p("VMOVUPS Z6, K1, (%s)", reg)
		g.p("VMOVUPS Z7, K2, 64(%s)", reg)
	}
	g.p("ADDQ $128, R12")
	g.p("ADDQ $128, R13")
	g.p("LEAQ (BX)(AX*4), BX")
	g.p("LEAQ (SI)(AX*4), SI")
	g.p("VPADDD Z28, Z25, Z25")
	g.p("SUBQ AX, CX")
	g.p("JNZ chunk")
	g.label("rowend")
	g.p("LEAQ (DI)(R10*8), DI")
	g.p("LEAQ (R11)(R10*2), R11")
	g.p("DECQ R8")
	g.p("JNZ row")
	g.label("done")
	g.p("VZEROUPPER")
	g.p("RET")
	g.raw("")
}

// selectScatter2 emits max pooling's select-and-scatter for 2×2 windows
// at stride 2, maxPool2 and maxPool2Grad in one pass without positions:
//
//	func k512SelectScatter2(rows, n int, dx *float32, x *float32, dy *float32, inW int)
//
// for each window, the tap maxPool2 would pick (the first maximum, the
// last NaN) gets dy[r·n + j] and the three others zero, in x's layout
// (positions outside the windows are not written).
func (g *gen) selectScatter2() {
	nm := "k512SelectScatter2"
	g.raw("// func %s(rows, n int, dx *float32, x *float32, dy *float32, inW int)", nm)
	g.raw("TEXT ·%s(SB), NOSPLIT, $0-48", nm)
	g.p("MOVQ dx+16(FP), DI")
	g.p("MOVQ x+24(FP), BX")
	g.p("MOVQ dy+32(FP), SI")
	g.pool2Setup("pairIdx")
	g.p("VMOVDQU32 ·pairInv(SB), Z20")
	g.p("VMOVDQU32 ·pairInv+64(SB), Z21")
	g.p("VPADDD Z27, Z27, Z24") // 2s
	g.p("VPADDD Z27, Z24, Z23") // 3s
	g.label("row")
	g.p("MOVQ BX, R12")
	g.p("LEAQ (BX)(R10*4), R13")
	g.p("MOVQ DI, R11") // the first output row; the second is computed per chunk (R9)
	g.p("MOVQ n+8(FP), CX")
	g.p("TESTQ CX, CX")
	g.p("JZ rowend")
	g.pool2Masks()
	g.pool2Prefetch()
	g.p("VMOVUPS.Z (R12), K1, Z0")
	g.p("VMOVUPS.Z 64(R12), K2, Z1")
	g.p("VMOVUPS.Z (R13), K1, Z4")
	g.p("VMOVUPS.Z 64(R13), K2, Z5")
	g.p("VMOVAPS Z0, Z2")
	g.p("VPERMT2PS Z1, Z30, Z2")
	g.p("VMOVAPS Z0, Z3")
	g.p("VPERMT2PS Z1, Z31, Z3")
	g.p("VMOVAPS Z4, Z6")
	g.p("VPERMT2PS Z5, Z30, Z6")
	g.p("VMOVAPS Z4, Z7")
	g.p("VPERMT2PS Z5, Z31, Z7")
	// c = Z2, the winning tap Z9 (0 to 3).
	g.p("VPXORD Z9, Z9, Z9")
	for _, tap := range []struct{ v, id string }{{"Z3", "Z27"}, {"Z6", "Z24"}, {"Z7", "Z23"}} {
		g.p("VCMPPS $0x1e, Z2, %s, K4", tap.v)     // v > c
		g.p("VCMPPS $3, %s, %s, K5", tap.v, tap.v) // v is NaN
		g.p("KORW K5, K4, K4")
		g.p("VMOVUPS %s, K4, Z2", tap.v)
		g.p("VMOVDQA32 %s, K4, Z9", tap.id)
	}
	// dy and dx's two rows are also reached only by masked accesses.
	g.p("PREFETCHT0 512(SI)")
	g.p("PREFETCHT0 1024(R11)")
	g.p("PREFETCHT0 1024(R11)(R10*4)")
	g.p("VMOVUPS.Z (SI), K3, Z0") // g
	g.p("VPTESTNMD Z9, Z9, K4")   // tap 0
	g.p("VPCMPEQD Z27, Z9, K5")
	g.p("VPCMPEQD Z24, Z9, K6")
	g.p("VPCMPEQD Z23, Z9, K7")
	for i, k := range []string{"K4", "K5", "K6", "K7"} {
		g.p("VMOVUPS.Z Z0, %s, Z%d", k, 2+i)
	}
	g.p("LEAQ (R11)(R10*4), R9") // the second output row
	for row, reg := range []string{"R11", "R9"} {
		e, o := 2+2*row, 3+2*row
		g.p("VMOVAPS Z%d, Z6", e)
		g.p("VPERMT2PS Z%d, Z20, Z6", o)
		g.p("VMOVAPS Z%d, Z7", e)
		g.p("VPERMT2PS Z%d, Z21, Z7", o)
		g.p("VMOVUPS Z6, K1, (%s)", reg)
		g.p("VMOVUPS Z7, K2, 64(%s)", reg)
	}
	g.p("ADDQ $128, R12")
	g.p("ADDQ $128, R13")
	g.p("ADDQ $128, R11")
	g.p("LEAQ (SI)(AX*4), SI")
	g.p("SUBQ AX, CX")
	g.p("JNZ chunk")
	g.label("rowend")
	g.p("LEAQ (BX)(R10*8), BX")
	g.p("LEAQ (DI)(R10*8), DI")
	g.p("DECQ R8")
	g.p("JNZ row")
	g.label("done")
	g.p("VZEROUPPER")
	g.p("RET")
	g.raw("")
}

func main() {
	var g gen
	g.raw("// Code generated by gen_kernels.go; DO NOT EDIT.")
	g.raw("")
	g.raw("//go:build amd64 && !noasm")
	g.raw("")
	g.raw("#include \"textflag.h\"")
	g.raw("")
	g.raw("// maskTab[8-n : 16-n] is the VMASKMOVPS mask for the first n of 8 lanes.")
	g.raw("DATA ·maskTab+0(SB)/4, $-1")
	for i := 1; i < 16; i++ {
		v := "$0"
		if i < 8 {
			v = "$-1"
		}
		g.raw("DATA ·maskTab+%d(SB)/4, %s", 4*i, v)
	}
	g.raw("GLOBL ·maskTab(SB), RODATA|NOPTR, $64")
	g.raw("")
	g.raw("// iota16 is 0, 1, ..., 15 (int32).")
	for i := 0; i < 16; i++ {
		g.raw("DATA ·iota16+%d(SB)/4, $%d", 4*i, i)
	}
	g.raw("GLOBL ·iota16(SB), RODATA|NOPTR, $64")
	g.raw("")
	g.raw("// pairIdx is 0, 2, ..., 30 then 1, 3, ..., 31 (int32): the even and odd")
	g.raw("// lanes of 32 floats, VPERMT2PS indices.")
	for i := 0; i < 32; i++ {
		g.raw("DATA ·pairIdx+%d(SB)/4, $%d", 4*i, (2*i)%32+i/16)
	}
	g.raw("GLOBL ·pairIdx(SB), RODATA|NOPTR, $128")
	g.raw("")
	g.raw("// pairInv interleaves two vectors' lanes (a0, b0, a1, b1, ...): the")
	g.raw("// first 16 VPERMT2PS indices give lanes 0-7 of each, the next 16 lanes 8-15.")
	for i := 0; i < 32; i++ {
		g.raw("DATA ·pairInv+%d(SB)/4, $%d", 4*i, (i%16)/2+16*(i%2)+8*(i/16))
	}
	g.raw("GLOBL ·pairInv(SB), RODATA|NOPTR, $128")
	g.raw("")
	type sets struct {
		s          isa
		ig, dt     [][2]int
		igVar, dtV string
	}
	all := []sets{
		{avx512, igemm512, dot512, "igemmAVX512", "dotAVX512"},
		{avx2, igemm256, dot256, "igemmAVX2", "dotAVX2"},
	}
	var decl bytes.Buffer
	fmt.Fprintf(&decl, "// Code generated by gen_kernels.go; DO NOT EDIT.\n\n//go:build amd64 && !noasm\n\npackage conv\n\n")
	for _, st := range all {
		for _, sh := range st.ig {
			g.igemm(st.s, sh[0], sh[1])
			fmt.Fprintf(&decl, "//go:noescape\nfunc %s(k int, a *float32, b *float32, offs *int, c *float32, ldc int, acc int)\n\n", igemmName(st.s, sh[0], sh[1]))
		}
		for _, sh := range st.dt {
			g.dot(st.s, sh[0], sh[1])
			fmt.Fprintf(&decl, "//go:noescape\nfunc %s(nsamp, rows, nvec, tail int, a *float32, lda, arow, asamp int, b *float32, offs *int, brow, bsamp int, c *float32, ldc int, acc int)\n\n", dotName(st.s, sh[0], sh[1]))
		}
		fmt.Fprintf(&decl, "var %s = []igemmKernel{\n", st.igVar)
		for _, sh := range st.ig {
			fmt.Fprintf(&decl, "\t{mr: %d, nv: %d, w: %d, fn: %s},\n", sh[0], sh[1], st.s.lanes, igemmName(st.s, sh[0], sh[1]))
		}
		fmt.Fprintf(&decl, "}\n\nvar %s = []dotKernel{\n", st.dtV)
		for _, sh := range st.dt {
			fmt.Fprintf(&decl, "\t{mr: %d, nr: %d, w: %d, fn: %s},\n", sh[0], sh[1], st.s.lanes, dotName(st.s, sh[0], sh[1]))
		}
		fmt.Fprintf(&decl, "}\n\n")
		g.maxStride(st.s)
		fmt.Fprintf(&decl, "//go:noescape\nfunc %sMaxStride(n int, y *float32, a *int32, x *float32, stride int, pos0, dpos int32)\n\n", st.s.name)
		for _, sum := range []bool{false, true} {
			g.dense(st.s, sum)
			op := "MaxDense"
			if sum {
				op = "SumDense"
			}
			fmt.Fprintf(&decl, "//go:noescape\nfunc %s%s(n int, y *float32, a *int32, x *float32, orig *int32, kofs *int32, nk int)\n\n", st.s.name, op)
		}
	}
	g.maxPool2()
	fmt.Fprintf(&decl, "//go:noescape\nfunc k512MaxPool2(rows, n int, y *float32, a *int32, x *float32, inW int)\n\n")
	g.maxPool2Grad()
	fmt.Fprintf(&decl, "//go:noescape\nfunc k512MaxPool2Grad(rows, n int, dx *float32, a *int32, dy *float32, inW int)\n\n")
	g.selectScatter2()
	fmt.Fprintf(&decl, "//go:noescape\nfunc k512SelectScatter2(rows, n int, dx *float32, x *float32, dy *float32, inW int)\n\n")
	if err := os.WriteFile("kernels_amd64.s", g.b.Bytes(), 0o644); err != nil {
		panic(err)
	}
	src, err := format.Source(decl.Bytes())
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile("kernels_amd64_gen.go", src, 0o644); err != nil {
		panic(err)
	}
}
