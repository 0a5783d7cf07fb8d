//go:build ignore

// gen_kernels writes the amd64 micro-kernels: kernels_amd64.s and the Go
// declarations and dispatch tables in kernels_amd64_gen.go (float32, for
// Sgemm), dkernels_amd64.s and dkernels_amd64_gen.go (float64, for Dgemm).
// Run it with `go generate` in this directory after editing it; the output
// is committed.
//
// Every kernel has the Go signature of kernFn[T], T float32 or float64:
//
//	func(k int, a *T, as int, b *T, bs int, c *T, ldc int, alpha, beta T, nr int)
//
// and computes, for an mr×nr tile (mr fixed per function, nr ≤ its width),
//
//	C[i][j] = alpha * Σ_p A(i,p)·B(p,j) + beta*C[i][j]   (beta == 0: C is not read)
//
// where B(p,j) = b[p*bs + j] (the kernel reads its full width of B, zero
// padding included) and A(i,p) is a[i + p*as] for the "c" (column-contiguous)
// flavour and a[i*as + p] for the "r" (row-contiguous) flavour. Strides are in
// elements.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"strings"
)

type gen struct {
	b bytes.Buffer
	t prec // the element type of the kernels being written
}

// prec describes an element type: the float32 kernels (Sgemm) or the
// float64 ones (Dgemm).
type prec struct {
	goType   string // "float32" or "float64"
	prefix   string // of kernel names: "s" or "d"
	size     int    // bytes per element
	shift    int    // log2(size)
	sfx      string // of vector instructions: "PS" or "PD"
	bcast    string // broadcast of one element from memory
	frame    string
	alphaOff int // argument offsets
	betaOff  int
	nrOff    int
	maskTab  string // the VMASKMOV mask table of this type
	// pairs: the elements are pairs of bfloat16 (their 32 bits as a
	// float32), multiplied pair by pair with VDPBF16PS instead of
	// VFMADD231PS (the AVX-512 kernels only; Bgemm).
	pairs bool
}

var (
	f32 = prec{"float32", "s", 4, 2, "PS", "VBROADCASTSS", "$0-72", 56, 60, 64, "maskTab", false}
	f64 = prec{"float64", "d", 8, 3, "PD", "VBROADCASTSD", "$0-80", 56, 64, 72, "maskTab64", false}
	b16 = prec{"float32", "b", 4, 2, "PS", "VBROADCASTSS", "$0-72", 56, 60, 64, "maskTab", true}
)

// vdpbf16ps returns VDPBF16PS Zdst, Zsrc1, Zsrc2 (Zdst += the dot products
// of the bfloat16 pairs of Zsrc1 and Zsrc2, lane by lane) as the bytes of
// its encoding, EVEX.512.F3.0F38.W0 52 /r with register operands: Go's
// assembler has no AVX-512 BF16 mnemonics. The 68 register combinations
// the kernels use were checked byte for byte against GNU as 2.40
// (objdump -d of "vdpbf16ps zmmD, zmmS1, zmmS2" in Intel syntax).
func vdpbf16ps(dst, src1, src2 int) string {
	inv := func(bit bool) byte {
		if bit {
			return 0
		}
		return 1
	}
	p1 := inv(dst&8 != 0)<<7 | inv(src2&16 != 0)<<6 | inv(src2&8 != 0)<<5 | inv(dst&16 != 0)<<4 | 0x2
	p2 := byte(^src1&15)<<3 | 0x4 | 0x2
	p3 := byte(0x40) | inv(src1&16 != 0)<<3
	modrm := byte(0xc0) | byte(dst&7)<<3 | byte(src2&7)
	return fmt.Sprintf("BYTE $0x62; BYTE $0x%02x; BYTE $0x%02x; BYTE $0x%02x; BYTE $0x52; BYTE $0x%02x // vdpbf16ps zmm%d, zmm%d, zmm%d",
		p1, p2, p3, modrm, dst, src1, src2)
}

// fma emits acc += b·a for vector registers Z<b>, Z<a> and the
// accumulator Z<acc>: VFMADD231 of the element type, or VDPBF16PS for
// bfloat16 pairs.
func (g *gen) fma(b, a, acc int) {
	if g.t.pairs {
		g.p("%s", vdpbf16ps(acc, b, a))
		return
	}
	g.p("%s Z%d, Z%d, Z%d", g.t.op("VFMADD231"), b, a, acc)
}

// test is the TEST instruction for the bits of beta in a register.
func (t prec) test() string {
	if t.size == 4 {
		return "TESTL"
	}
	return "TESTQ"
}

// sig is the Go signature of a kernel (kernFn).
func (t prec) sig() string {
	return strings.ReplaceAll("(k int, a *T, as int, b *T, bs int, c *T, ldc int, alpha, beta T, nr int)", "T", t.goType)
}

// zl and yl are the elements in a zmm and a ymm register.
func (t prec) zl() int { return 64 / t.size }
func (t prec) yl() int { return 32 / t.size }

// op returns a vector instruction for this type: op("VFMADD231") is
// VFMADD231PS or VFMADD231PD.
func (t prec) op(base string) string { return base + t.sfx }

// betaZero emits a jump to label when beta is ±0, using reg.
func (g *gen) betaZero(reg, label string) {
	if g.t.size == 4 {
		g.p("MOVL beta+%d(FP), %s", g.t.betaOff, reg)
		g.p("ANDL $0x7fffffff, %s", reg)
	} else {
		g.p("MOVQ beta+%d(FP), %s", g.t.betaOff, reg)
		g.p("SHLQ $1, %s", reg)
	}
	g.p("JZ %s", label)
}

func (g *gen) p(format string, args ...any)   { fmt.Fprintf(&g.b, "\t"+format+"\n", args...) }
func (g *gen) label(l string)                 { fmt.Fprintf(&g.b, "%s:\n", l) }
func (g *gen) raw(format string, args ...any) { fmt.Fprintf(&g.b, format+"\n", args...) }

// aAddr returns the address of A(r, p) where p is the current k index plus u.
// Flavour "c": AX points at A(0,p) and advances by as each k step.
// Flavour "r": AX, R10, R11, R12 point at rows 0, 3, 6, 9 (column p of the
// current unrolled group) and R9 holds the row stride in bytes; rows 12
// to 15 (the 16-row transposed-store kernels) are reached through R13,
// three row strides: AX+12, R12+4, R11+8 and R10+12 rows.
func (g *gen) aAddr(fl string, r, u int) string {
	s := g.t.size
	if fl == "c" {
		return fmt.Sprintf("%d(AX)", s*r)
	}
	if r >= 12 {
		return fmt.Sprintf("%d%s", s*u, []string{"(AX)(R13*4)", "(R12)(R9*4)", "(R11)(R9*8)", "(R10)(R13*4)"}[r-12])
	}
	base := []string{"AX", "R10", "R11", "R12"}[r/3]
	switch r % 3 {
	case 0:
		return fmt.Sprintf("%d(%s)", s*u, base)
	case 1:
		return fmt.Sprintf("%d(%s)(R9*1)", s*u, base)
	default:
		return fmt.Sprintf("%d(%s)(R9*2)", s*u, base)
	}
}

func name(isa, fl string, mr, width int) string {
	return fmt.Sprintf("%s%s_%dx%d", isa, fl, mr, width)
}

// prologue loads the arguments and sets up the A row bases.
func (g *gen) prologue(fl string, mr int) {
	g.p("MOVQ k+0(FP), CX")
	g.p("MOVQ a+8(FP), AX")
	g.p("MOVQ as+16(FP), R9")
	g.p("SHLQ $%d, R9", g.t.shift)
	g.p("MOVQ b+24(FP), BX")
	g.p("MOVQ bs+32(FP), R8")
	g.p("SHLQ $%d, R8", g.t.shift)
	g.p("MOVQ c+40(FP), DI")
	g.p("MOVQ ldc+48(FP), SI")
	g.p("SHLQ $%d, SI", g.t.shift)
	if fl == "r" {
		prev := "AX"
		for i, reg := range []string{"R10", "R11", "R12"} {
			if mr <= 3*(i+1) {
				break
			}
			g.p("LEAQ (%s)(R9*2), %s", prev, reg)
			g.p("ADDQ R9, %s", reg)
			prev = reg
		}
	}
}

// advanceA moves the A pointers past u k steps (flavour "r" only; flavour
// "c" advances AX inside each step).
func (g *gen) advanceA(fl string, mr, u int) {
	if fl != "r" {
		return
	}
	for i, reg := range []string{"AX", "R10", "R11", "R12"} {
		if mr <= 3*i {
			break
		}
		g.p("ADDQ $%d, %s", g.t.size*u, reg)
	}
}

// loops emits the k loop, unrolled by 4, around step.
func (g *gen) loops(fl string, mr int, step func(u int)) {
	g.p("MOVQ CX, DX")
	g.p("SHRQ $2, CX")
	g.p("ANDQ $3, DX")
	g.p("TESTQ CX, CX")
	g.p("JZ tail")
	g.label("loop4")
	for u := 0; u < 4; u++ {
		step(u)
	}
	g.advanceA(fl, mr, 4)
	g.p("DECQ CX")
	g.p("JNZ loop4")
	g.label("tail")
	g.p("TESTQ DX, DX")
	g.p("JZ epilogue")
	g.label("loop1")
	step(0)
	g.advanceA(fl, mr, 1)
	g.p("DECQ DX")
	g.p("JNZ loop1")
	g.label("epilogue")
}

func (g *gen) prefetchC(mr, lines int) {
	g.p("MOVQ DI, R13")
	for r := 0; r < mr; r++ {
		for l := 0; l < lines; l++ {
			g.p("PREFETCHT0 %d(R13)", 64*l)
		}
		if r < mr-1 {
			g.p("ADDQ SI, R13")
		}
	}
}

// avx512 emits an mr × Lw kernel (L elements per zmm): accumulators
// Z0..Z23, B rows in Z24..Z27, broadcasts of A in Z28..Z31. With tr
// (float32 only) it is the transposed-store kernel of storeT instead.
func (g *gen) avx512(fl string, mr, w int, tr bool) {
	t := g.t
	L := t.zl()
	nm := name(t.prefix+"512", fl, mr, L*w)
	if tr {
		nm = name(t.prefix+"512t", fl, mr, L*w)
	}
	g.raw("// func %s%s", nm, t.sig())
	g.raw("TEXT ·%s(SB), NOSPLIT, %s", nm, t.frame)
	g.prologue(fl, mr)
	if tr {
		g.prefetchC(L*w, 1)
		if fl == "r" && mr > 12 {
			g.p("LEAQ (R9)(R9*2), R13") // rows 12 to 15 (aAddr)
		}
		g.avx512Loop(fl, mr, w)
		g.storeT(mr, w)
		return
	}
	// Column mask from nr: bits [0, nr) set; K1 covers columns 0 to L-1,
	// K2 L to 2L-1 (the float64 kernels use the low 8 bits of each). It
	// masks the loads and stores of C. (Masking the loads of B too, to
	// read B in place up to its last column, measured slower on Zen 5 than
	// packing the edge strip: masked loads that cross a cache line are
	// slow.)
	g.p("MOVQ nr+%d(FP), R13", t.nrOff)
	g.p("MOVQ $1, DX")
	g.p("SHLXQ R13, DX, DX")
	g.p("DECQ DX")
	g.p("KMOVW DX, K1")
	if w == 2 {
		g.p("SHRQ $%d, DX", L)
		g.p("KMOVW DX, K2")
	}
	g.prefetchC(mr, w)
	acc := func(r, h int) string { return fmt.Sprintf("Z%d", r*w+h) }
	g.avx512Loop(fl, mr, w)
	g.p("%s alpha+%d(FP), Z24", t.bcast, t.alphaOff)
	g.betaZero("AX", "nobeta")
	g.p("%s beta+%d(FP), Z25", t.bcast, t.betaOff)
	for r := 0; r < mr; r++ {
		for h := 0; h < w; h++ {
			g.p("%s.Z %d(DI), K%d, Z26", t.op("VMOVU"), 64*h, h+1)
			g.p("%s Z24, %s, %s", t.op("VMUL"), acc(r, h), acc(r, h))
			g.p("%s Z25, Z26, %s", t.op("VFMADD231"), acc(r, h))
			g.p("%s %s, K%d, %d(DI)", t.op("VMOVU"), acc(r, h), h+1, 64*h)
		}
		if r < mr-1 {
			g.p("ADDQ SI, DI")
		}
	}
	g.p("VZEROUPPER")
	g.p("RET")
	g.label("nobeta")
	for r := 0; r < mr; r++ {
		for h := 0; h < w; h++ {
			g.p("%s Z24, %s, %s", t.op("VMUL"), acc(r, h), acc(r, h))
			g.p("%s %s, K%d, %d(DI)", t.op("VMOVU"), acc(r, h), h+1, 64*h)
		}
		if r < mr-1 {
			g.p("ADDQ SI, DI")
		}
	}
	g.p("VZEROUPPER")
	g.p("RET")
	g.raw("")
}

// storeT ends the transposed-store kernel s512t{c,r}_<mr>x<16w>: its
// accumulators are rows of a tile of Cᵀ (lane l of the h-th vector of row
// r is C[16h+l][r]), so for each half h it transposes them as a 16×16
// block in registers (rows mr to 15 zero) and stores rows 16h..16h+15 of
// C, masked to mr columns, for rows below nr:
//
//	C[l*ldc + r] = alpha·acc_r[l] + beta·C[l*ldc + r]
//
// (C not read when beta == 0), each product and the sum rounded as the
// tile buffer's Go code rounds them, so both give the same bits.
// runTransposed calls it instead of going through a tile buffer and a
// blocked transpose. The transposes work in
// place, two vectors at a time through the spare registers (one is
// enough), so the 2·mr accumulators of a 32-wide tile leave room for them
// (mr ≤ 12: 24 accumulators, 4 zero rows, a spare, alpha, beta and a row
// of C), and the mr accumulators of a 16-wide one, mr ≤ maxMRT.
func (g *gen) storeT(mr, w int) {
	t := g.t
	var free []int // registers the accumulators do not use
	for z := mr * w; z < 32; z++ {
		free = append(free, z)
	}
	alpha, beta, row := free[len(free)-1], free[len(free)-2], free[len(free)-3]
	g.p("MOVQ $%d, DX", 1<<mr-1)
	g.p("KMOVW DX, K1")
	g.p("MOVQ nr+%d(FP), R13", t.nrOff)
	g.p("%s alpha+%d(FP), Z%d", t.bcast, t.alphaOff, alpha)
	g.p("%s beta+%d(FP), Z%d", t.bcast, t.betaOff, beta)
	g.p("MOVL beta+%d(FP), CX", t.betaOff)
	g.p("ANDL $0x7fffffff, CX") // CX == 0: beta is ±0, C is not read
	for h := 0; h < w; h++ {
		// v[i]: the register holding vector i of the block.
		var v [16]int
		for r := 0; r < 16; r++ {
			if r < mr {
				v[r] = r*w + h
			} else {
				v[r] = free[r-mr]
				g.p("VPXORD Z%d, Z%d, Z%d", v[r], v[r], v[r])
			}
		}
		tr := inPlace{g: g, v: v, spare: free[16-mr : len(free)-3]}
		// Rows 2i and 2i+1 interleaved within 128-bit lanes.
		var p [][4]int
		for i := 0; i < 8; i++ {
			p = append(p, [4]int{2 * i, 2*i + 1, 2 * i, 2*i + 1})
		}
		tr.step(p, "VUNPCKLPS", "VUNPCKHPS")
		// Vector 4j+c: in 128-bit lane q, column 4q+c of rows 4j..4j+3.
		p = p[:0]
		for j := 0; j < 4; j++ {
			p = append(p, [4]int{4 * j, 4*j + 2, 4 * j, 4*j + 1}, [4]int{4*j + 1, 4*j + 3, 4*j + 2, 4*j + 3})
		}
		tr.step(p, "VSHUFPS $0x44,", "VSHUFPS $0xEE,")
		// The 4×4 transpose of 128-bit lanes, for each c: vector l is
		// row l of C.
		p = p[:0]
		for c := 0; c < 4; c++ {
			p = append(p, [4]int{c, 4 + c, c, 4 + c}, [4]int{8 + c, 12 + c, 8 + c, 12 + c})
		}
		tr.step(p, "VSHUFF32X4 $0x44,", "VSHUFF32X4 $0xEE,")
		p = p[:0]
		for c := 0; c < 4; c++ {
			p = append(p, [4]int{c, 8 + c, c, 4 + c}, [4]int{4 + c, 12 + c, 8 + c, 12 + c})
		}
		tr.step(p, "VSHUFF32X4 $0x88,", "VSHUFF32X4 $0xDD,")
		// Rows 16h.. of C: one copy of the loop reads C, the other not.
		g.p("TESTL CX, CX")
		g.p("JZ nobeta%d", h)
		for _, withBeta := range []bool{true, false} {
			if !withBeta {
				g.label(fmt.Sprintf("nobeta%d", h))
			}
			for i := 0; i < 16; i++ {
				l := 16*h + i
				if l > 0 {
					g.p("CMPQ R13, $%d", l)
					g.p("JLE stored")
					g.p("ADDQ SI, DI")
				}
				z := tr.v[i]
				g.p("%s Z%d, Z%d, Z%d", t.op("VMUL"), alpha, z, z)
				if withBeta {
					g.p("%s.Z (DI), K1, Z%d", t.op("VMOVU"), row)
					g.p("%s Z%d, Z%d, Z%d", t.op("VMUL"), beta, row, row)
					g.p("%s Z%d, Z%d, Z%d", t.op("VADD"), row, z, z)
				}
				g.p("%s Z%d, K1, (DI)", t.op("VMOVU"), z)
			}
			if withBeta {
				g.p("JMP half%d", h)
			}
		}
		g.label(fmt.Sprintf("half%d", h))
	}
	g.label("stored")
	g.p("VZEROUPPER")
	g.p("RET")
	g.raw("")
}

// inPlace emits a register transpose in place: v maps the block's 16
// vectors to registers, spare lists the other free registers (at least
// one), used in turn.
type inPlace struct {
	g     *gen
	v     [16]int
	spare []int
}

// step replaces vectors by pairs: for each {x, y, lo, hi}, vector lo
// becomes op1(x, y) and vector hi op2(x, y) (Intel operand order: x is
// the first source), op1 written to the oldest spare register, op2 over
// y's, and x's register joins the spares.
func (tr *inPlace) step(pairs [][4]int, op1, op2 string) {
	var out [16]int
	for _, q := range pairs {
		x, y, z := tr.v[q[0]], tr.v[q[1]], tr.spare[0]
		tr.g.p("%s Z%d, Z%d, Z%d", op1, y, x, z)
		tr.g.p("%s Z%d, Z%d, Z%d", op2, y, x, y)
		out[q[2]], out[q[3]] = z, y
		tr.spare = append(tr.spare[1:], x)
	}
	tr.v = out
}

// avx512Loop zeroes the accumulators of an mr × Lw AVX-512 kernel and
// emits its k loop.
func (g *gen) avx512Loop(fl string, mr, w int) {
	t := g.t
	acc := func(r, h int) string { return fmt.Sprintf("Z%d", r*w+h) }
	for r := 0; r < mr; r++ {
		for h := 0; h < w; h++ {
			g.p("VPXORD %s, %s, %s", acc(r, h), acc(r, h), acc(r, h))
		}
	}
	g.loops(fl, mr, func(u int) {
		b0 := 24 + 2*(u%2)
		if w == 2 {
			g.p("%s (BX), Z%d", t.op("VMOVU"), b0)
			g.p("%s 64(BX), Z%d", t.op("VMOVU"), b0+1)
			for r := 0; r < mr; r++ {
				a := 28 + r%4
				g.p("%s %s, Z%d", t.bcast, g.aAddr(fl, r, u), a)
				g.fma(b0, a, r*w)
				g.fma(b0+1, a, r*w+1)
			}
		} else {
			g.p("%s (BX), Z%d", t.op("VMOVU"), b0)
			for r := 0; r < mr; r++ {
				if t.pairs { // VDPBF16PS written as bytes: register operands only
					a := 28 + r%4
					g.p("%s %s, Z%d", t.bcast, g.aAddr(fl, r, u), a)
					g.fma(b0, a, r)
					continue
				}
				g.p("%s.BCST %s, Z%d, %s", t.op("VFMADD231"), g.aAddr(fl, r, u), b0, acc(r, 0))
			}
		}
		g.p("ADDQ R8, BX")
		if fl == "c" {
			g.p("ADDQ R9, AX")
		}
	})
}

// avx2 emits an mr × Lw kernel (L elements per ymm): accumulators
// Y0..Y11, B rows in Y12, Y13, broadcasts of A in Y13..Y15.
func (g *gen) avx2(fl string, mr, w int) {
	t := g.t
	nm := name(t.prefix+"256", fl, mr, t.yl()*w)
	g.raw("// func %s%s", nm, t.sig())
	g.raw("TEXT ·%s(SB), NOSPLIT, %s", nm, t.frame)
	g.prologue(fl, mr)
	g.prefetchC(mr, 1)
	acc := func(r, h int) string { return fmt.Sprintf("Y%d", r*w+h) }
	for r := 0; r < mr; r++ {
		for h := 0; h < w; h++ {
			g.p("VXORPS %s, %s, %s", acc(r, h), acc(r, h), acc(r, h))
		}
	}
	g.loops(fl, mr, func(u int) {
		if w == 2 {
			g.p("%s (BX), Y12", t.op("VMOVU"))
			g.p("%s 32(BX), Y13", t.op("VMOVU"))
			for r := 0; r < mr; r++ {
				a := fmt.Sprintf("Y%d", 14+r%2)
				g.p("%s %s, %s", t.bcast, g.aAddr(fl, r, u), a)
				g.p("%s Y12, %s, %s", t.op("VFMADD231"), a, acc(r, 0))
				g.p("%s Y13, %s, %s", t.op("VFMADD231"), a, acc(r, 1))
			}
		} else {
			g.p("%s (BX), Y12", t.op("VMOVU"))
			for r := 0; r < mr; r++ {
				a := fmt.Sprintf("Y%d", 13+r%3)
				g.p("%s %s, %s", t.bcast, g.aAddr(fl, r, u), a)
				g.p("%s Y12, %s, %s", t.op("VFMADD231"), a, acc(r, 0))
			}
		}
		g.p("ADDQ R8, BX")
		if fl == "c" {
			g.p("ADDQ R9, AX")
		}
	})
	g.storeAVX2(mr, w, acc)
	g.raw("")
}

// pOpts are the prefetch choices of a packed-operand AVX2 kernel.
type pOpts struct {
	suffix string // appended to the name (experiments)
	pfA    int    // prefetch A this many bytes ahead (0: none)
	pfB    int    // prefetch B this many bytes ahead (0: none)
	lateC  int    // prefetch C again this many unrolled iterations before the end (0: no)
	cT1    bool   // the early C prefetch is PREFETCHT1
}

// avx2p emits an mr × 8w kernel for packed operands: A is a panel of mr
// floats per k step (A(i,p) = a[i + p*mr]; the as argument is ignored)
// and B a strip of 8w floats per k step (B(p,j) = b[p*bs+j] with bs =
// 8w), so both advance by constants and can be prefetched ahead.
func (g *gen) avx2p(mr, w int, o pOpts) {
	t := g.t
	nm := name(t.prefix+"256p"+o.suffix, "", mr, t.yl()*w)
	g.raw("// func %s%s", nm, t.sig())
	g.raw("TEXT ·%s(SB), NOSPLIT, %s", nm, t.frame)
	g.p("MOVQ k+0(FP), CX")
	g.p("MOVQ a+8(FP), AX")
	g.p("MOVQ b+24(FP), BX")
	g.p("MOVQ c+40(FP), DI")
	g.p("MOVQ ldc+48(FP), SI")
	g.p("SHLQ $%d, SI", t.shift)
	pfC := func(ins string) {
		g.p("MOVQ DI, R13")
		for r := 0; r < mr; r++ {
			g.p("%s (R13)", ins)
			g.p("%s %d(R13)", ins, 32*w-t.size)
			if r < mr-1 {
				g.p("ADDQ SI, R13")
			}
		}
	}
	if o.cT1 {
		pfC("PREFETCHT1")
	} else {
		pfC("PREFETCHT0")
	}
	acc := func(r, h int) string { return fmt.Sprintf("Y%d", r*w+h) }
	for r := 0; r < mr; r++ {
		for h := 0; h < w; h++ {
			g.p("VXORPS %s, %s, %s", acc(r, h), acc(r, h), acc(r, h))
		}
	}
	bstep := 32 * w      // bytes of B per k step
	astep := t.size * mr // bytes of A per k step
	step := func(u int, pf bool) {
		if w == 2 {
			g.p("%s %d(BX), Y12", t.op("VMOVU"), bstep*u)
			g.p("%s %d(BX), Y13", t.op("VMOVU"), bstep*u+32)
			for r := 0; r < mr; r++ {
				a := fmt.Sprintf("Y%d", 14+r%2)
				g.p("%s %d(AX), %s", t.bcast, astep*u+t.size*r, a)
				g.p("%s Y12, %s, %s", t.op("VFMADD231"), a, acc(r, 0))
				g.p("%s Y13, %s, %s", t.op("VFMADD231"), a, acc(r, 1))
			}
		} else {
			g.p("%s %d(BX), Y12", t.op("VMOVU"), bstep*u)
			for r := 0; r < mr; r++ {
				a := fmt.Sprintf("Y%d", 13+r%3)
				g.p("%s %d(AX), %s", t.bcast, astep*u+t.size*r, a)
				g.p("%s Y12, %s, %s", t.op("VFMADD231"), a, acc(r, 0))
			}
		}
		if !pf {
			return
		}
		// Prefetches, spread over the unrolled steps: B's lines of this
		// step, and A's lines of the iteration (one per 64 bytes).
		if o.pfB > 0 && (bstep*u)%64 == 0 {
			g.p("PREFETCHT0 %d(BX)", o.pfB+bstep*u)
		}
		if o.pfA > 0 && 64*u < 4*astep {
			g.p("PREFETCHT0 %d(AX)", o.pfA+64*u)
		}
	}
	adv := func(u int) {
		g.p("ADDQ $%d, BX", bstep*u)
		g.p("ADDQ $%d, AX", astep*u)
	}
	g.p("MOVQ CX, DX")
	g.p("SHRQ $2, CX")
	g.p("ANDQ $3, DX")
	if o.lateC > 0 {
		g.p("MOVQ CX, R14")
		g.p("SUBQ $%d, R14", o.lateC)
		g.p("JLE late")
		g.p("MOVQ $%d, CX", o.lateC)
		g.label("loopa")
		for u := 0; u < 4; u++ {
			step(u, true)
		}
		adv(4)
		g.p("DECQ R14")
		g.p("JNZ loopa")
		g.label("late")
		pfC("PREFETCHT0")
	}
	g.p("TESTQ CX, CX")
	g.p("JZ tail")
	g.label("loop4")
	for u := 0; u < 4; u++ {
		step(u, true)
	}
	adv(4)
	g.p("DECQ CX")
	g.p("JNZ loop4")
	g.label("tail")
	g.p("TESTQ DX, DX")
	g.p("JZ epilogue")
	g.label("loop1")
	step(0, false)
	adv(1)
	g.p("DECQ DX")
	g.p("JNZ loop1")
	g.label("epilogue")
	g.storeAVX2(mr, w, acc)
	g.raw("")
}

// storeAVX2 scales the accumulators by alpha, adds beta·C (C is not read
// when beta == 0) and stores the mr × Lw tile, the last vector masked to
// nr columns, then returns.
func (g *gen) storeAVX2(mr, w int, acc func(r, h int) string) {
	t := g.t
	g.p("%s alpha+%d(FP), Y12", t.bcast, t.alphaOff)
	g.p("%s beta+%d(FP), Y13", t.bcast, t.betaOff)
	if t.size == 4 {
		g.p("MOVL beta+%d(FP), R13", t.betaOff)
		g.p("ANDL $0x7fffffff, R13")
	} else {
		g.p("MOVQ beta+%d(FP), R13", t.betaOff)
		g.p("SHLQ $1, R13")
	}
	g.p("MOVQ nr+%d(FP), CX", t.nrOff)
	g.p("CMPQ CX, $%d", t.yl()*w)
	g.p("JNE partial")
	// Full tile: plain loads and stores.
	store := func(masked bool, withBeta bool) {
		for r := 0; r < mr; r++ {
			for h := 0; h < w; h++ {
				a := acc(r, h)
				g.p("%s Y12, %s, %s", t.op("VMUL"), a, a)
				if masked && h == w-1 {
					if withBeta {
						g.p("%s %d(DI), Y15, Y14", t.op("VMASKMOV"), 32*h)
						g.p("%s Y13, Y14, %s", t.op("VFMADD231"), a)
					}
					g.p("%s %s, Y15, %d(DI)", t.op("VMASKMOV"), a, 32*h)
				} else {
					if withBeta {
						g.p("%s %d(DI), Y14", t.op("VMOVU"), 32*h)
						g.p("%s Y13, Y14, %s", t.op("VFMADD231"), a)
					}
					g.p("%s %s, %d(DI)", t.op("VMOVU"), a, 32*h)
				}
			}
			if r < mr-1 {
				g.p("ADDQ SI, DI")
			}
		}
		g.p("VZEROUPPER")
		g.p("RET")
	}
	g.p("%s R13, R13", t.test())
	g.p("JZ fullnobeta")
	store(false, true)
	g.label("fullnobeta")
	store(false, false)
	g.label("partial")
	// Lanes [0, rem) of the last vector are stored, rem = nr - L(w-1): the
	// mask is the L entries of the mask table from L-rem on.
	if w == 2 {
		g.p("SUBQ $%d, CX", t.yl())
	}
	g.p("SHLQ $%d, CX", t.shift)
	g.p("LEAQ %s<>+32(SB), AX", t.maskTab)
	g.p("SUBQ CX, AX")
	g.p("VMOVDQU (AX), Y15")
	g.p("%s R13, R13", t.test())
	g.p("JZ partnobeta")
	store(true, true)
	g.label("partnobeta")
	store(true, false)
}

// packB emits a packer of ns strips of 32·ymms bytes (ymms = 2: 16
// float32 or 8 float64 columns; 4: 32 float32 columns, the AVX-512 set's
// strips, still moved in AVX registers) of B as stored (kernelSet.packBn),
// walking B row by row and prefetching pf rows ahead (every 64-byte line
// of the strip).
func (g *gen) packB(name string, t prec, ymms int) {
	shift := 5
	for 1<<shift < 32*ymms {
		shift++
	}
	disp := func(off int) string {
		if off == 0 {
			return ""
		}
		return fmt.Sprint(off)
	}
	var loads, stores, pf strings.Builder
	for i := range ymms {
		fmt.Fprintf(&loads, "\t%s %s(R11), Y%d\n", t.op("VMOVU"), disp(32*i), i)
		fmt.Fprintf(&stores, "\t%s Y%d, %s(R12)\n", t.op("VMOVU"), i, disp(32*i))
	}
	for off := 0; off < 32*ymms; off += 64 {
		fmt.Fprintf(&pf, "\tPREFETCHT0 %s(R11)(R10*1)\n", disp(off))
	}
	fmt.Fprintf(&g.b, `TEXT ·%[1]s(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ldb+16(FP), R8
	SHLQ $%[2]d, R8
	MOVQ kc+24(FP), CX
	MOVQ ns+32(FP), DX
	MOVQ CX, R9
	SHLQ $%[6]d, R9
	MOVQ pf+40(FP), R10
	IMULQ R8, R10
	TESTQ CX, CX
	JZ pbdone
	TESTQ DX, DX
	JZ pbdone
pbrow:
	MOVQ SI, R11
	MOVQ DI, R12
	MOVQ DX, R13
pbstrip:
%[3]s%[5]s%[4]s	ADDQ $%[7]d, R11
	ADDQ R9, R12
	DECQ R13
	JNZ pbstrip
	ADDQ R8, SI
	ADDQ $%[7]d, DI
	DECQ CX
	JNZ pbrow
	VZEROUPPER
pbdone:
	RET

`, name, t.shift, loads.String(), stores.String(), pf.String(), shift, 32*ymms)
}

// packAT emits packAT<rows> (rows 6 or 12), whose doc comment the caller
// writes: ns strips of rows floats of op(A) = Aᵀ as stored, each k step a
// contiguous run of a row of A, copied as one 16- or 32-byte move and
// one 8- or 16-byte move.
func (g *gen) packAT(rows int) {
	label, head, tail, vz := "pat", "X0", "VMOVSD", ""
	off := 16
	if rows == 12 {
		label, head, tail, vz = "pat12", "Y0", "VMOVUPS", "\n\tVZEROUPPER"
		off = 32
	}
	g.raw(`TEXT ·packAT%[1]d(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lda+16(FP), R8
	SHLQ $2, R8
	MOVQ kc+24(FP), CX
	MOVQ ns+32(FP), DX
	MOVQ CX, R9
	IMULQ $%[2]d, R9
	TESTQ CX, CX
	JZ %[3]sdone
	TESTQ DX, DX
	JZ %[3]sdone
%[3]srow:
	MOVQ SI, R11
	MOVQ DI, R12
	MOVQ DX, R13
%[3]sstrip:
	VMOVUPS (R11), %[4]s
	%[5]s %[6]d(R11), %[7]s
	VMOVUPS %[4]s, (R12)
	%[5]s %[7]s, %[6]d(R12)
	ADDQ $%[2]d, R11
	ADDQ R9, R12
	DECQ R13
	JNZ %[3]sstrip
	ADDQ R8, SI
	ADDQ $%[2]d, DI
	DECQ CX
	JNZ %[3]srow%[8]s
%[3]sdone:
	RET`, rows, 4*rows, label, head, tail, off, "X1", vz)
}

// packers emits the AVX packing routines of the AVX2 set.
func (g *gen) packers() {
	g.raw(`// func packB16(dst *float32, src *float32, ldb int, kc int, ns int, pf int)
//
// Packs ns strips of 16 columns: dst[s*kc*16 + q*16 + j] = src[q*ldb + 16s + j]
// for q < kc, j < 16, walking src row by row (each row of the block is
// contiguous). While copying row q it prefetches row q+pf. Strides in
// elements.`)
	g.packB("packB16", f32, 2)
	g.raw(`// func packB32(dst *float32, src *float32, ldb int, kc int, ns int, pf int)
//
// packB16 for strips of 32 columns (the AVX-512 set's): dst[s*kc*32 +
// q*32 + j] = src[q*ldb + 32s + j] for q < kc, j < 32.`)
	g.packB("packB32", f32, 4)
	g.raw(`// func packAT6(dst *float32, src *float32, lda int, kc int, ns int)
//
// Packs ns strips of 6 rows of op(A) = Aᵀ as stored: dst[s*kc*6 + q*6 + i]
// = src[q*lda + 6s + i] for q < kc, i < 6, walking src row by row. Strides
// in elements.`)
	g.packAT(6)
	g.raw(`
// func packAT12(dst *float32, src *float32, lda int, kc int, ns int)
//
// packAT6 for strips of 12 rows (the AVX-512 set's): dst[s*kc*12 + q*12 +
// i] = src[q*lda + 12s + i] for q < kc, i < 12, walking src row by row.
// Strides in elements.`)
	g.packAT(12)
	g.raw(`
// func packA6(dst *float32, src *float32, lda int, kc4 int)
//
// Packs a strip of 6 rows: dst[q*6 + i] = src[i*lda + q] for i < 6 and
// q < 4*kc4, four k steps at a time (a 4×4 transpose of rows 0-3 and an
// interleave of rows 4-5). While reading rows 0-5 it prefetches rows 6-11
// at the same columns (the next strip). Strides in elements.
TEXT ·packA6(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lda+16(FP), R8
	SHLQ $2, R8
	MOVQ kc4+24(FP), CX
	TESTQ CX, CX
	JZ padone
	LEAQ (SI)(R8*2), R10
	ADDQ R8, R10
	LEAQ (R10)(R8*2), R11
	ADDQ R8, R11
	LEAQ (R11)(R8*2), R12
	ADDQ R8, R12
	XORQ AX, AX
paloop:
	VMOVUPS (SI)(AX*1), X0
	MOVQ SI, R13
	ADDQ R8, R13
	VMOVUPS (R13)(AX*1), X1
	ADDQ R8, R13
	VMOVUPS (R13)(AX*1), X2
	VMOVUPS (R10)(AX*1), X3
	MOVQ R10, R13
	ADDQ R8, R13
	VMOVUPS (R13)(AX*1), X4
	ADDQ R8, R13
	VMOVUPS (R13)(AX*1), X5
	TESTQ $48, AX
	JNZ panopf
	PREFETCHT0 (R11)(AX*1)
	LEAQ (R11)(R8*1), R13
	PREFETCHT0 (R13)(AX*1)
	ADDQ R8, R13
	PREFETCHT0 (R13)(AX*1)
	PREFETCHT0 (R12)(AX*1)
	LEAQ (R12)(R8*1), R13
	PREFETCHT0 (R13)(AX*1)
	ADDQ R8, R13
	PREFETCHT0 (R13)(AX*1)
panopf:
	VUNPCKLPS X1, X0, X6
	VUNPCKHPS X1, X0, X7
	VUNPCKLPS X3, X2, X8
	VUNPCKHPS X3, X2, X9
	VUNPCKLPS X5, X4, X10
	VUNPCKHPS X5, X4, X11
	VMOVLHPS X8, X6, X0
	VMOVHLPS X6, X8, X1
	VMOVLHPS X9, X7, X2
	VMOVHLPS X7, X9, X3
	VMOVUPS X0, (DI)
	VMOVLPS X10, 16(DI)
	VMOVUPS X1, 24(DI)
	VMOVHPS X10, 40(DI)
	VMOVUPS X2, 48(DI)
	VMOVLPS X11, 64(DI)
	VMOVUPS X3, 72(DI)
	VMOVHPS X11, 88(DI)
	ADDQ $16, AX
	ADDQ $96, DI
	DECQ CX
	JNZ paloop
padone:
	RET
`)
}

func (g *gen) transpose() {
	g.raw(`// func transpose8(dst *float32, ldd int, src *float32, lds int, nb int)
//
// For each of nb blocks, transposes the 8×8 block src[r*lds + 8b + j]
// (r, j < 8) into dst[(8b+j)*ldd + r]. Strides are in elements.
TEXT ·transpose8(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R9
	SHLQ $2, R9
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R8
	SHLQ $2, R8
	MOVQ nb+32(FP), CX
	TESTQ CX, CX
	JZ done
loop:
	LEAQ (SI)(R8*2), R10
	ADDQ R8, R10
	LEAQ (R10)(R8*2), R11
	ADDQ R8, R11
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(R8*1), Y1
	VMOVUPS (SI)(R8*2), Y2
	VMOVUPS (R10), Y3
	VMOVUPS (R10)(R8*1), Y4
	VMOVUPS (R10)(R8*2), Y5
	VMOVUPS (R11), Y6
	VMOVUPS (R11)(R8*1), Y7
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	LEAQ (DI)(R9*2), R10
	ADDQ R9, R10
	LEAQ (R10)(R9*2), R11
	ADDQ R9, R11
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (DI)(R9*1)
	VMOVUPS Y10, (DI)(R9*2)
	VMOVUPS Y11, (R10)
	VMOVUPS Y12, (R10)(R9*1)
	VMOVUPS Y13, (R10)(R9*2)
	VMOVUPS Y14, (R11)
	VMOVUPS Y15, (R11)(R9*1)
	LEAQ (R11)(R9*2), DI
	ADDQ $32, SI
	DECQ CX
	JNZ loop
	VZEROUPPER
done:
	RET

// func transpose4(dst *float32, ldd int, src *float32, lds int, nb int)
//
// transpose8 with 4×4 blocks, in 128-bit registers: for each of nb
// blocks, src[r*lds + 4b + j] (r, j < 4) goes to dst[(4b+j)*ldd + r].
TEXT ·transpose4(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R9
	SHLQ $2, R9
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R8
	SHLQ $2, R8
	MOVQ nb+32(FP), CX
	TESTQ CX, CX
	JZ done4
	LEAQ (R8)(R8*2), R10
	LEAQ (R9)(R9*2), R11
loop4:
	VMOVUPS (SI), X0
	VMOVUPS (SI)(R8*1), X1
	VMOVUPS (SI)(R8*2), X2
	VMOVUPS (SI)(R10*1), X3
	VUNPCKLPS X1, X0, X4
	VUNPCKHPS X1, X0, X5
	VUNPCKLPS X3, X2, X6
	VUNPCKHPS X3, X2, X7
	VMOVLHPS X6, X4, X0
	VMOVHLPS X4, X6, X1
	VMOVLHPS X7, X5, X2
	VMOVHLPS X5, X7, X3
	VMOVUPS X0, (DI)
	VMOVUPS X1, (DI)(R9*1)
	VMOVUPS X2, (DI)(R9*2)
	VMOVUPS X3, (DI)(R11*1)
	LEAQ (DI)(R9*4), DI
	ADDQ $16, SI
	DECQ CX
	JNZ loop4
done4:
	RET
`)
}

// packers64 emits the float64 packers and transposer of the AVX2 set
// (every AVX-512 machine runs them too).
func (g *gen) packers64() {
	g.raw(`// func packB8d(dst *float64, src *float64, ldb int, kc int, ns int, pf int)
//
// packB16 for float64: packs ns strips of 8 columns, dst[s*kc*8 + q*8 + j]
// = src[q*ldb + 8s + j] for q < kc, j < 8, walking src row by row,
// prefetching row q+pf. Strides in elements.`)
	g.packB("packB8d", f64, 2)
	g.raw(packAT6dAsm)
	g.raw(packA6dAsm)
	g.raw(transpose4dAsm)
}

// packAT6dAsm is the assembly of the float64 transposed-A packer (see packers64).
const packAT6dAsm = `// func packAT6d(dst *float64, src *float64, lda int, kc int, ns int)
//
// packAT6 for float64: packs ns strips of 6 rows of op(A) = Aᵀ as stored,
// dst[s*kc*6 + q*6 + i] = src[q*lda + 6s + i] for q < kc, i < 6, walking
// src row by row. Strides in elements.
TEXT ·packAT6d(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lda+16(FP), R8
	SHLQ $3, R8
	MOVQ kc+24(FP), CX
	MOVQ ns+32(FP), DX
	MOVQ CX, R9
	IMULQ $48, R9
	TESTQ CX, CX
	JZ patdone
	TESTQ DX, DX
	JZ patdone
patrow:
	MOVQ SI, R11
	MOVQ DI, R12
	MOVQ DX, R13
patstrip:
	VMOVUPD (R11), Y0
	VMOVUPD 32(R11), X1
	VMOVUPD Y0, (R12)
	VMOVUPD X1, 32(R12)
	ADDQ $48, R11
	ADDQ R9, R12
	DECQ R13
	JNZ patstrip
	ADDQ R8, SI
	ADDQ $48, DI
	DECQ CX
	JNZ patrow
	VZEROUPPER
patdone:
	RET
`

// packA6dAsm is the assembly of the float64 A packer (see packers64).
const packA6dAsm = `// func packA6d(dst *float64, src *float64, lda int, kc4 int)
//
// packA6 for float64: packs a strip of 6 rows, dst[q*6 + i] = src[i*lda +
// q] for i < 6 and q < 4*kc4, four k steps at a time (a 4×4 transpose of
// rows 0-3, pairs of rows 4-5). While reading rows 0-5 it prefetches rows
// 6-11 at the same columns (the next strip). Strides in elements.
TEXT ·packA6d(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lda+16(FP), R8
	SHLQ $3, R8
	MOVQ kc4+24(FP), CX
	TESTQ CX, CX
	JZ padone
	LEAQ (SI)(R8*2), R10
	ADDQ R8, R10
	LEAQ (R10)(R8*2), R11
	ADDQ R8, R11
	LEAQ (R11)(R8*2), R12
	ADDQ R8, R12
	XORQ AX, AX
paloop:
	VMOVUPD (SI)(AX*1), Y0
	MOVQ SI, R13
	ADDQ R8, R13
	VMOVUPD (R13)(AX*1), Y1
	ADDQ R8, R13
	VMOVUPD (R13)(AX*1), Y2
	VMOVUPD (R10)(AX*1), Y3
	MOVQ R10, R13
	ADDQ R8, R13
	VMOVUPD (R13)(AX*1), Y4
	ADDQ R8, R13
	VMOVUPD (R13)(AX*1), Y5
	TESTQ $32, AX
	JNZ panopf
	PREFETCHT0 (R11)(AX*1)
	LEAQ (R11)(R8*1), R13
	PREFETCHT0 (R13)(AX*1)
	ADDQ R8, R13
	PREFETCHT0 (R13)(AX*1)
	PREFETCHT0 (R12)(AX*1)
	LEAQ (R12)(R8*1), R13
	PREFETCHT0 (R13)(AX*1)
	ADDQ R8, R13
	PREFETCHT0 (R13)(AX*1)
panopf:
	VUNPCKLPD Y1, Y0, Y6
	VUNPCKHPD Y1, Y0, Y7
	VUNPCKLPD Y3, Y2, Y8
	VUNPCKHPD Y3, Y2, Y9
	VUNPCKLPD Y5, Y4, Y10
	VUNPCKHPD Y5, Y4, Y11
	VPERM2F128 $0x20, Y8, Y6, Y0
	VPERM2F128 $0x20, Y9, Y7, Y1
	VPERM2F128 $0x31, Y8, Y6, Y2
	VPERM2F128 $0x31, Y9, Y7, Y3
	VEXTRACTF128 $1, Y10, X12
	VEXTRACTF128 $1, Y11, X13
	VMOVUPD Y0, (DI)
	VMOVUPD X10, 32(DI)
	VMOVUPD Y1, 48(DI)
	VMOVUPD X11, 80(DI)
	VMOVUPD Y2, 96(DI)
	VMOVUPD X12, 128(DI)
	VMOVUPD Y3, 144(DI)
	VMOVUPD X13, 176(DI)
	ADDQ $32, AX
	ADDQ $192, DI
	DECQ CX
	JNZ paloop
	VZEROUPPER
padone:
	RET
`

// transpose4dAsm is the assembly of the float64 4×4 block transpose (see packers64).
const transpose4dAsm = `// func transpose4d(dst *float64, ldd int, src *float64, lds int, nb int)
//
// For each of nb blocks, transposes the 4×4 block src[r*lds + 4b + j]
// (r, j < 4) into dst[(4b+j)*ldd + r]. Strides are in elements.
TEXT ·transpose4d(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R9
	SHLQ $3, R9
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R8
	SHLQ $3, R8
	MOVQ nb+32(FP), CX
	TESTQ CX, CX
	JZ tdone
	LEAQ (SI)(R8*2), R10
	LEAQ (DI)(R9*2), R11
tloop:
	VMOVUPD (SI), Y0
	VMOVUPD (SI)(R8*1), Y1
	VMOVUPD (R10), Y2
	VMOVUPD (R10)(R8*1), Y3
	VUNPCKLPD Y1, Y0, Y4
	VUNPCKHPD Y1, Y0, Y5
	VUNPCKLPD Y3, Y2, Y6
	VUNPCKHPD Y3, Y2, Y7
	VPERM2F128 $0x20, Y6, Y4, Y0
	VPERM2F128 $0x20, Y7, Y5, Y1
	VPERM2F128 $0x31, Y6, Y4, Y2
	VPERM2F128 $0x31, Y7, Y5, Y3
	VMOVUPD Y0, (DI)
	VMOVUPD Y1, (DI)(R9*1)
	VMOVUPD Y2, (R11)
	VMOVUPD Y3, (R11)(R9*1)
	LEAQ (R11)(R9*2), DI
	LEAQ (DI)(R9*2), R11
	ADDQ $32, SI
	ADDQ $32, R10
	DECQ CX
	JNZ tloop
	VZEROUPPER
tdone:
	RET
`

// packers64Decl declares the routines of packers64.
const packers64Decl = `//go:noescape
func packB8d(dst *float64, src *float64, ldb int, kc int, ns int, pf int)

//go:noescape
func packAT6d(dst *float64, src *float64, lda int, kc int, ns int)

//go:noescape
func packA6d(dst *float64, src *float64, lda int, kc4 int)

//go:noescape
func transpose4d(dst *float64, ldd int, src *float64, lds int, nb int)

`

var avx2POpts = pOpts{pfA: 384}

// experiments are extra 6×16 packed kernels (avx2PExperiments, by
// suffix) for measuring prefetch choices; empty in committed code.
var experiments = []pOpts{}

// header starts an assembly file or its Go declarations.
const (
	asmHeader = "// Code generated by gen_kernels.go; DO NOT EDIT.\n\n//go:build amd64 && !noasm\n\n#include \"textflag.h\"\n\n"
	goHeader  = "// Code generated by gen_kernels.go; DO NOT EDIT.\n\n//go:build amd64 && !noasm\n\npackage gemm\n\n"
)

// table returns the Go expression of a [flavour][w-1][mr] kernel table.
func (t prec) table(isa string, maxMR, width int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[2][2][]kernFn[%s]{\n", t.goType)
	for _, fl := range []string{"c", "r"} {
		b.WriteString("{\n")
		for w := 1; w <= 2; w++ {
			b.WriteString("{nil")
			for mr := 1; mr <= maxMR; mr++ {
				fmt.Fprintf(&b, ", %s", name(t.prefix+isa, fl, mr, width*w))
			}
			b.WriteString("},\n")
		}
		b.WriteString("},\n")
	}
	b.WriteString("}")
	return b.String()
}

// maxMRT is the tallest tile of Cᵀ of the narrow (16-wide) AVX-512
// transposed-store kernels: 16 accumulators, each transpose of 16 rows
// storing a whole 16×16 block (the 12-row kernels leave 4 zero rows).
const maxMRT = 16

// tableT is table for the transposed-store kernels: narrow ones up to
// maxMRT rows, wide ones up to 12.
func (t prec) tableT() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[2][2][]kernFn[%s]{\n", t.goType)
	for _, fl := range []string{"c", "r"} {
		b.WriteString("{\n")
		for w, maxMR := range []int{maxMRT, 12} {
			b.WriteString("{nil")
			for mr := 1; mr <= maxMR; mr++ {
				fmt.Fprintf(&b, ", %s", name(t.prefix+"512t", fl, mr, 16*(w+1)))
			}
			b.WriteString("},\n")
		}
		b.WriteString("},\n")
	}
	b.WriteString("}")
	return b.String()
}

// family writes the AVX-512 (mr ≤ 12), AVX2 (mr ≤ 6) and packed AVX2
// kernels of g.t to g.b and their declarations to decl.
func (g *gen) family(decl *strings.Builder) {
	t := g.t
	for _, fl := range []string{"c", "r"} {
		for mr := 1; mr <= 12; mr++ {
			for w := 1; w <= 2; w++ {
				g.avx512(fl, mr, w, false)
				fmt.Fprintf(decl, "//go:noescape\nfunc %s%s\n\n", name(t.prefix+"512", fl, mr, t.zl()*w), t.sig())
			}
		}
	}
	if t.pairs {
		return
	}
	if t.size == 4 {
		for _, fl := range []string{"c", "r"} {
			for mr := 1; mr <= maxMRT; mr++ {
				for w := 1; w <= 2; w++ {
					if w*mr > 24 {
						continue // the accumulators of a wide tile: mr ≤ 12
					}
					g.avx512(fl, mr, w, true)
					fmt.Fprintf(decl, "//go:noescape\nfunc %s%s\n\n", name(t.prefix+"512t", fl, mr, t.zl()*w), t.sig())
				}
			}
		}
	}
	for _, fl := range []string{"c", "r"} {
		for mr := 1; mr <= 6; mr++ {
			for w := 1; w <= 2; w++ {
				g.avx2(fl, mr, w)
				fmt.Fprintf(decl, "//go:noescape\nfunc %s%s\n\n", name(t.prefix+"256", fl, mr, t.yl()*w), t.sig())
			}
		}
	}
	for mr := 1; mr <= 6; mr++ {
		for w := 1; w <= 2; w++ {
			g.avx2p(mr, w, avx2POpts)
			fmt.Fprintf(decl, "//go:noescape\nfunc %s%s\n\n", name(t.prefix+"256p", "", mr, t.yl()*w), t.sig())
		}
	}
}

// pTable returns the Go expression of a [w-1][mr] table of packed AVX2
// kernels.
func (t prec) pTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[2][]kernFn[%s]{\n", t.goType)
	for w := 1; w <= 2; w++ {
		b.WriteString("{nil")
		for mr := 1; mr <= 6; mr++ {
			fmt.Fprintf(&b, ", %s", name(t.prefix+"256p", "", mr, t.yl()*w))
		}
		b.WriteString("},\n")
	}
	b.WriteString("}")
	return b.String()
}

// write formats the Go declarations and writes both files.
func write(goFile, asmFile string, decl string, asm []byte) {
	src, err := format.Source([]byte(decl))
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile(goFile, src, 0o644); err != nil {
		panic(err)
	}
	if err := os.WriteFile(asmFile, asm, 0o644); err != nil {
		panic(err)
	}
}

func main() {
	// float32: kernels_amd64.s and kernels_amd64_gen.go.
	g := gen{t: f32}
	g.b.WriteString(asmHeader)
	g.raw("// maskTab[8-n : 16-n] is the VMASKMOVPS mask for the first n of 8 lanes.")
	for i := 0; i < 16; i++ {
		v := "$0xffffffff"
		if i >= 8 {
			v = "$0"
		}
		g.raw("DATA maskTab<>+%d(SB)/4, %s", 4*i, v)
	}
	g.raw("GLOBL maskTab<>(SB), RODATA|NOPTR, $64")
	g.raw("")
	var decl strings.Builder
	decl.WriteString(goHeader)
	g.family(&decl)
	var exp strings.Builder
	if len(experiments) > 0 {
		exp.WriteString("var avx2PExperiments = map[string]kernFn[float32]{\n")
	}
	for _, o := range experiments {
		g.avx2p(6, 2, o)
		fmt.Fprintf(&decl, "//go:noescape\nfunc %s%s\n\n", name("s256p"+o.suffix, "", 6, 16), f32.sig())
		fmt.Fprintf(&exp, "%q: %s,\n", o.suffix, name("s256p"+o.suffix, "", 6, 16))
	}
	if len(experiments) > 0 {
		exp.WriteString("}\n")
	}
	g.transpose()
	g.packers()
	decl.WriteString("//go:noescape\nfunc packB16(dst *float32, src *float32, ldb int, kc int, ns int, pf int)\n\n")
	decl.WriteString("//go:noescape\nfunc packB32(dst *float32, src *float32, ldb int, kc int, ns int, pf int)\n\n")
	decl.WriteString("//go:noescape\nfunc packAT6(dst *float32, src *float32, lda int, kc int, ns int)\n\n")
	decl.WriteString("//go:noescape\nfunc packAT12(dst *float32, src *float32, lda int, kc int, ns int)\n\n")
	decl.WriteString("//go:noescape\nfunc packA6(dst *float32, src *float32, lda int, kc4 int)\n\n")
	decl.WriteString("//go:noescape\nfunc transpose8(dst *float32, ldd int, src *float32, lds int, nb int)\n\n")
	decl.WriteString("//go:noescape\nfunc transpose4(dst *float32, ldd int, src *float32, lds int, nb int)\n\n")
	fmt.Fprintf(&decl, "// avx512Kernels[flavour][w-1][mr] is the mr×16w AVX-512 kernel.\nvar avx512Kernels = %s\n\n", f32.table("512", 12, 16))
	fmt.Fprintf(&decl, "// avx512TKernels[flavour][w-1][mr] is the mr×16w AVX-512 kernel that\n// stores its tile of Cᵀ transposed into C (runTransposed), mr ≤ 16 for\n// w = 1, ≤ 12 for w = 2.\nvar avx512TKernels = %s\n\n", f32.tableT())
	fmt.Fprintf(&decl, "// avx2Kernels[flavour][w-1][mr] is the mr×8w AVX2 kernel.\nvar avx2Kernels = %s\n", f32.table("256", 6, 8))
	fmt.Fprintf(&decl, "\n// avx2PKernels[w-1][mr] is the mr×8w AVX2 kernel for packed A and B.\nvar avx2PKernels = %s\n\n", f32.pTable())
	decl.WriteString(exp.String())
	write("kernels_amd64_gen.go", "kernels_amd64.s", decl.String(), g.b.Bytes())

	// float64: dkernels_amd64.s and dkernels_amd64_gen.go.
	g = gen{t: f64}
	g.b.WriteString(asmHeader)
	g.raw("// maskTab64[4-n : 8-n] is the VMASKMOVPD mask for the first n of 4 lanes.")
	for i := 0; i < 8; i++ {
		v := "$0xffffffffffffffff"
		if i >= 4 {
			v = "$0"
		}
		g.raw("DATA maskTab64<>+%d(SB)/8, %s", 8*i, v)
	}
	g.raw("GLOBL maskTab64<>(SB), RODATA|NOPTR, $64")
	g.raw("")
	decl.Reset()
	decl.WriteString(goHeader)
	g.family(&decl)
	g.packers64()
	decl.WriteString(packers64Decl)
	fmt.Fprintf(&decl, "// avx512Kernels64[flavour][w-1][mr] is the mr×8w float64 AVX-512 kernel.\nvar avx512Kernels64 = %s\n\n", f64.table("512", 12, 8))
	fmt.Fprintf(&decl, "// avx2Kernels64[flavour][w-1][mr] is the mr×4w float64 AVX2 kernel.\nvar avx2Kernels64 = %s\n", f64.table("256", 6, 4))
	fmt.Fprintf(&decl, "\n// avx2PKernels64[w-1][mr] is the mr×4w float64 AVX2 kernel for packed A and B.\nvar avx2PKernels64 = %s\n", f64.pTable())
	write("dkernels_amd64_gen.go", "dkernels_amd64.s", decl.String(), g.b.Bytes())

	// bfloat16 pairs: bkernels_amd64.s and bkernels_amd64_gen.go.
	g = gen{t: b16}
	g.b.WriteString(asmHeader)
	decl.Reset()
	decl.WriteString(goHeader)
	g.family(&decl)
	fmt.Fprintf(&decl, "// bf16Kernels[flavour][w-1][mr] is the mr×16w AVX-512 BF16 kernel on\n// bfloat16 pairs.\nvar bf16Kernels = %s\n", b16.table("512", 12, 16))
	write("bkernels_amd64_gen.go", "bkernels_amd64.s", decl.String(), g.b.Bytes())
}
