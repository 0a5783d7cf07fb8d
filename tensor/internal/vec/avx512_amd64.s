//go:build !noasm

#include "textflag.h"

// AVX-512 forms of kernels of vec_amd64.s (GELU, ExpShift) and row
// reductions: the same operations in the same order on 16 lanes
// (VMULPS then VADDPS, never FMA; VDIVPS, never VRCP14PS; the sign test
// by a compare into a mask register), so they return the bits of the
// AVX2 kernels and of the pure-Go code. The GELU kernels take two
// vectors per iteration and lengths that are multiples of 32 (the Go
// wrappers handle the rest); expShiftAVX512 and maxAVX512 take any
// length, the last partial vector through a lane mask. Constants are
// single floats, broadcast.

DATA z_zero<>+0(SB)/4, $0x00000000
GLOBL z_zero<>(SB), RODATA|NOPTR, $4
DATA z_expLo<>+0(SB)/4, $0xc2d00000
GLOBL z_expLo<>(SB), RODATA|NOPTR, $4
DATA z_expHi<>+0(SB)/4, $0x42b20000
GLOBL z_expHi<>(SB), RODATA|NOPTR, $4
DATA z_log2e<>+0(SB)/4, $0x3fb8aa3b
GLOBL z_log2e<>(SB), RODATA|NOPTR, $4
DATA z_magic<>+0(SB)/4, $0x4b400000
GLOBL z_magic<>(SB), RODATA|NOPTR, $4
DATA z_ln2Hi<>+0(SB)/4, $0x3f318000
GLOBL z_ln2Hi<>(SB), RODATA|NOPTR, $4
DATA z_ln2Lo<>+0(SB)/4, $0xb95e8083
GLOBL z_ln2Lo<>(SB), RODATA|NOPTR, $4
DATA z_p0<>+0(SB)/4, $0x39506967
GLOBL z_p0<>(SB), RODATA|NOPTR, $4
DATA z_p1<>+0(SB)/4, $0x3ab743ce
GLOBL z_p1<>(SB), RODATA|NOPTR, $4
DATA z_p2<>+0(SB)/4, $0x3c088908
GLOBL z_p2<>(SB), RODATA|NOPTR, $4
DATA z_p3<>+0(SB)/4, $0x3d2aa9c1
GLOBL z_p3<>(SB), RODATA|NOPTR, $4
DATA z_p4<>+0(SB)/4, $0x3e2aaaaa
GLOBL z_p4<>(SB), RODATA|NOPTR, $4
DATA z_p5<>+0(SB)/4, $0x3f000000
GLOBL z_p5<>(SB), RODATA|NOPTR, $4
DATA z_one<>+0(SB)/4, $0x3f800000
GLOBL z_one<>(SB), RODATA|NOPTR, $4
DATA z_gK0<>+0(SB)/4, $0x3fcc422a
GLOBL z_gK0<>(SB), RODATA|NOPTR, $4
DATA z_gK1<>+0(SB)/4, $0x3d922279
GLOBL z_gK1<>(SB), RODATA|NOPTR, $4
DATA z_gK3<>+0(SB)/4, $0x3e5b33b6
GLOBL z_gK3<>(SB), RODATA|NOPTR, $4
DATA z_clampLo<>+0(SB)/4, $0xc61c4000
GLOBL z_clampLo<>(SB), RODATA|NOPTR, $4
DATA z_clampHi<>+0(SB)/4, $0x461c4000
GLOBL z_clampHi<>(SB), RODATA|NOPTR, $4
DATA z_magicBits<>+0(SB)/4, $0x4b400000
GLOBL z_magicBits<>(SB), RODATA|NOPTR, $4
DATA z_bias127<>+0(SB)/4, $0x0000007f
GLOBL z_bias127<>(SB), RODATA|NOPTR, $4
DATA z_signMask<>+0(SB)/4, $0x80000000
GLOBL z_signMask<>(SB), RODATA|NOPTR, $4
DATA z_negInf<>+0(SB)/4, $0xff800000
GLOBL z_negInf<>(SB), RODATA|NOPTR, $4

// ZEXP(a, t1, t2, t3): a = e^a (expf). Clobbers t1-t3.
#define ZEXP(a, t1, t2, t3) \
	VBROADCASTSS z_expLo<>(SB), t1 \
	VMAXPS a, t1, a \
	VBROADCASTSS z_expHi<>(SB), t1 \
	VMINPS a, t1, a \
	VMULPS.BCST z_log2e<>(SB), a, t1 \
	VADDPS.BCST z_magic<>(SB), t1, t1 \
	VSUBPS.BCST z_magic<>(SB), t1, t2 \
	VPSUBD.BCST z_magicBits<>(SB), t1, t1 \
	VMULPS.BCST z_ln2Hi<>(SB), t2, t3 \
	VSUBPS t3, a, a \
	VMULPS.BCST z_ln2Lo<>(SB), t2, t3 \
	VSUBPS t3, a, a \
	VMULPS a, a, t2 \
	VMULPS.BCST z_p0<>(SB), a, t3 \
	VADDPS.BCST z_p1<>(SB), t3, t3 \
	VMULPS a, t3, t3 \
	VADDPS.BCST z_p2<>(SB), t3, t3 \
	VMULPS a, t3, t3 \
	VADDPS.BCST z_p3<>(SB), t3, t3 \
	VMULPS a, t3, t3 \
	VADDPS.BCST z_p4<>(SB), t3, t3 \
	VMULPS a, t3, t3 \
	VADDPS.BCST z_p5<>(SB), t3, t3 \
	VMULPS t2, t3, t3 \
	VADDPS a, t3, t3 \
	VADDPS.BCST z_one<>(SB), t3, t3 \
	VPSRAD $1, t1, t2 \
	VPSUBD t2, t1, t1 \
	VPADDD.BCST z_bias127<>(SB), t2, t2 \
	VPSLLD $23, t2, t2 \
	VPADDD.BCST z_bias127<>(SB), t1, t1 \
	VPSLLD $23, t1, t1 \
	VMULPS t2, t3, t3 \
	VMULPS t1, t3, a

// ZSIGM(v, s, e, q, t1, k): s = σ(v), e = e^-|v|, q = 1/(1+e), k = v >= 0;
// v is kept. Clobbers t1 and the temporaries of ZEXP (s, q).
#define ZSIGM(v, s, e, q, t1, k) \
	VCMPPS.BCST $0x1d, z_zero<>(SB), v, k \
	VPORD.BCST z_signMask<>(SB), v, e \
	ZEXP(e, t1, q, s) \
	VADDPS.BCST z_one<>(SB), e, t1 \
	VBROADCASTSS z_one<>(SB), q \
	VDIVPS t1, q, q \
	VMULPS q, e, s \
	VMOVAPS q, k, s

// ZGELUARG(x, v, t1): v = x·(K1·x² + K0).
#define ZGELUARG(x, v, t1) \
	VMULPS x, x, t1 \
	VMULPS.BCST z_gK1<>(SB), t1, t1 \
	VADDPS.BCST z_gK0<>(SB), t1, t1 \
	VMULPS t1, x, v

// ZGELU(x, v, s, e, q, t1, k): x = x·σ(v(x)).
#define ZGELU(x, v, s, e, q, t1, k) \
	ZGELUARG(x, v, t1) \
	ZSIGM(v, s, e, q, t1, k) \
	VMULPS s, x, x

// ZGELUGRAD(x, v, s, e, q, t1, k): x = σ(v) + (x·v'(x))·(e·q·q), x
// clamped to [-1e4, 1e4] first.
#define ZGELUGRAD(x, v, s, e, q, t1, k) \
	VBROADCASTSS z_clampLo<>(SB), t1 \
	VMAXPS x, t1, x \
	VBROADCASTSS z_clampHi<>(SB), t1 \
	VMINPS x, t1, x \
	ZGELUARG(x, v, t1) \
	ZSIGM(v, s, e, q, t1, k) \
	VMULPS x, x, t1 \
	VMULPS.BCST z_gK3<>(SB), t1, t1 \
	VADDPS.BCST z_gK0<>(SB), t1, t1 \
	VMULPS t1, x, t1 \
	VMULPS q, e, e \
	VMULPS q, e, e \
	VMULPS e, t1, t1 \
	VADDPS s, t1, x

// func geluAVX512(dst, src []float32)
TEXT ·geluAVX512(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $5, CX
	JZ gelu512_done
gelu512_loop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z8
	ZGELU(Z0, Z1, Z2, Z3, Z4, Z5, K1)
	ZGELU(Z8, Z9, Z10, Z11, Z12, Z13, K2)
	VMOVUPS Z0, (DI)
	VMOVUPS Z8, 64(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ gelu512_loop
gelu512_done:
	VZEROUPPER
	RET

// func geluGradAVX512(dst, src []float32)
TEXT ·geluGradAVX512(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $5, CX
	JZ geluGrad512_done
geluGrad512_loop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z8
	ZGELUGRAD(Z0, Z1, Z2, Z3, Z4, Z5, K1)
	ZGELUGRAD(Z8, Z9, Z10, Z11, Z12, Z13, K2)
	VMOVUPS Z0, (DI)
	VMOVUPS Z8, 64(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ geluGrad512_loop
geluGrad512_done:
	VZEROUPPER
	RET

// ZGELUPARTS(x, h, v, s, e, q, t1, k): h = Gelu(x), x = GeluGrad(x),
// from one sigmoid: ZGELUGRAD leaves σ in s, and h = x·σ. The sigmoid of
// the clamped x (GeluGrad's) is that of x (Gelu's): beyond ±1e4 both
// arguments saturate EXP's clamp.
#define ZGELUPARTS(x, h, v, s, e, q, t1, k) \
	VMOVAPS x, h \
	ZGELUGRAD(x, v, s, e, q, t1, k) \
	VMULPS s, h, h

// func geluPartsAVX512(h, d, src []float32)
TEXT ·geluPartsAVX512(SB), NOSPLIT, $0-72
	MOVQ h_base+0(FP), DI
	MOVQ d_base+24(FP), DX
	MOVQ src_base+48(FP), SI
	MOVQ src_len+56(FP), CX
	SHRQ $5, CX
	JZ geluParts512_done
geluParts512_loop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z8
	ZGELUPARTS(Z0, Z6, Z1, Z2, Z3, Z4, Z5, K1)
	ZGELUPARTS(Z8, Z14, Z9, Z10, Z11, Z12, Z13, K2)
	VMOVUPS Z6, (DI)
	VMOVUPS Z14, 64(DI)
	VMOVUPS Z0, (DX)
	VMOVUPS Z8, 64(DX)
	ADDQ $128, SI
	ADDQ $128, DI
	ADDQ $128, DX
	DECQ CX
	JNZ geluParts512_loop
geluParts512_done:
	VZEROUPPER
	RET

// ZEXPSHIFT(x, nm, a, t1, t2, t3, t4, k): a = e^(x + nm) with the TwoSum
// error of x + nm carried as e·(1+err), expShiftAVX2's operations
// (expShiftf). Clobbers t1-t4 and k.
#define ZEXPSHIFT(x, nm, a, t1, t2, t3, t4, k) \
	VADDPS nm, x, a \
	VSUBPS x, a, t1 \
	VSUBPS t1, a, t2 \
	VSUBPS t2, x, t2 \
	VSUBPS t1, nm, t3 \
	VADDPS t3, t2, t4 \
	VCMPPS $0, t4, t4, k \
	VMOVAPS.Z t4, k, t4 \
	ZEXP(a, t1, t2, t3) \
	VMULPS t4, a, t1 \
	VADDPS a, t1, a

// ZACC8(a, ay, acc, t, ty): acc (8 float64 lanes) += the low 8 floats
// of a, then += its high 8: lane i mod 8 sums element i, in order, as
// sumBlock does (ay and ty name the low halves of a and t).
#define ZACC8(a, ay, acc, t, ty) \
	VCVTPS2PD ay, t \
	VADDPD t, acc, acc \
	VEXTRACTF32X8 $1, a, ty \
	VCVTPS2PD ty, t \
	VADDPD t, acc, acc

// func expShiftAVX512(dst, src []float32, nm float32, lanes *[8]float64)
// sets dst = e^(src + nm) (expShiftf) and adds dst[i] to lanes[i mod 8]
// in float64, in order: a fused expShift and sumBlock.
TEXT ·expShiftAVX512(SB), NOSPLIT, $0-64
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	VBROADCASTSS nm+48(FP), Z9
	MOVQ lanes+56(FP), DX
	VMOVUPD (DX), Z20
	MOVQ CX, BX
	ANDQ $15, BX
	SHRQ $4, CX
	JZ expShift512_tail
	SHRQ $1, CX
	JZ expShift512_loop1
expShift512_loop2:
	VMOVUPS (SI), Z8
	VMOVUPS 64(SI), Z15
	ZEXPSHIFT(Z8, Z9, Z0, Z1, Z2, Z3, Z4, K2)
	ZEXPSHIFT(Z15, Z9, Z10, Z11, Z12, Z13, Z14, K3)
	VMOVUPS Z0, (DI)
	VMOVUPS Z10, 64(DI)
	ZACC8(Z0, Y0, Z20, Z5, Y5)
	ZACC8(Z10, Y10, Z20, Z5, Y5)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ expShift512_loop2
expShift512_loop1:
	MOVQ src_len+32(FP), CX
	SHRQ $4, CX
	ANDQ $1, CX
	JZ expShift512_tail
expShift512_loop:
	VMOVUPS (SI), Z8
	ZEXPSHIFT(Z8, Z9, Z0, Z1, Z2, Z3, Z4, K2)
	VMOVUPS Z0, (DI)
	ZACC8(Z0, Y0, Z20, Z5, Y5)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ expShift512_loop
expShift512_tail:
	TESTQ BX, BX
	JZ expShift512_done
	MOVL $1, AX
	MOVQ BX, CX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Z8
	ZEXPSHIFT(Z8, Z9, Z0, Z1, Z2, Z3, Z4, K2)
	VMOVUPS Z0, K1, (DI)
	VMOVAPS.Z Z0, K1, Z0
	ZACC8(Z0, Y0, Z20, Z5, Y5)
expShift512_done:
	VMOVUPD Z20, (DX)
	VZEROUPPER
	RET

// func maxAVX512(x []float32) (m float32, nan bool) returns the maximum
// of x (-Inf if empty) or nan = true if x holds a NaN. VMAXPS's choice
// between +0 and -0 is not the scalar loop's: the caller redoes a zero.
TEXT ·maxAVX512(SB), NOSPLIT, $0-29
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	VBROADCASTSS z_negInf<>(SB), Z0
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3
	MOVQ CX, BX
	ANDQ $15, BX
	SHRQ $4, CX
	CMPQ CX, $4
	JB max512_one
max512_four:
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z5
	VMOVUPS 128(SI), Z6
	VMOVUPS 192(SI), Z7
	VCMPPS $3, Z4, Z4, K1
	VCMPPS $3, Z5, Z5, K2
	VCMPPS $3, Z6, Z6, K3
	VCMPPS $3, Z7, Z7, K4
	KORW K1, K2, K1
	KORW K3, K4, K3
	KORTESTW K1, K3
	JNZ max512_nan
	VMAXPS Z4, Z0, Z0
	VMAXPS Z5, Z1, Z1
	VMAXPS Z6, Z2, Z2
	VMAXPS Z7, Z3, Z3
	ADDQ $256, SI
	SUBQ $4, CX
	CMPQ CX, $4
	JAE max512_four
max512_one:
	TESTQ CX, CX
	JZ max512_tail
	VMOVUPS (SI), Z4
	VCMPPS $3, Z4, Z4, K1
	KORTESTW K1, K1
	JNZ max512_nan
	VMAXPS Z4, Z0, Z0
	ADDQ $64, SI
	DECQ CX
	JMP max512_one
max512_tail:
	TESTQ BX, BX
	JZ max512_reduce
	MOVL $1, AX
	MOVQ BX, CX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Z4
	VCMPPS $3, Z4, Z4, K2
	KORTESTW K2, K2
	JNZ max512_nan
	VMAXPS Z4, Z1, K1, Z1
max512_reduce:
	VMAXPS Z1, Z0, Z0
	VMAXPS Z3, Z2, Z2
	VMAXPS Z2, Z0, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	MOVSS X0, m+24(FP)
	MOVB $0, nan+28(FP)
	VZEROUPPER
	RET
max512_nan:
	MOVB $1, nan+28(FP)
	VZEROUPPER
	RET

// func dotAVX512(a, b []float32, lanes *[8]float64) adds a[i]·b[i] (in
// float64, exact) to lanes[i mod 8], in order (dotBlock).
TEXT ·dotAVX512(SB), NOSPLIT, $0-56
	MOVQ a_base+0(FP), SI
	MOVQ a_len+8(FP), CX
	MOVQ b_base+24(FP), DI
	MOVQ lanes+48(FP), DX
	VMOVUPD (DX), Z0
	MOVQ CX, BX
	ANDQ $15, BX
	SHRQ $4, CX
	JZ dot512_tail
dot512_loop:
	VCVTPS2PD (SI), Z1
	VCVTPS2PD (DI), Z2
	VMULPD Z2, Z1, Z1
	VADDPD Z1, Z0, Z0
	VCVTPS2PD 32(SI), Z3
	VCVTPS2PD 32(DI), Z4
	VMULPD Z4, Z3, Z3
	VADDPD Z3, Z0, Z0
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ dot512_loop
dot512_tail:
	TESTQ BX, BX
	JZ dot512_done
	MOVQ BX, CX
	CMPQ CX, $8
	JBE dot512_last
	VCVTPS2PD (SI), Z1
	VCVTPS2PD (DI), Z2
	VMULPD Z2, Z1, Z1
	VADDPD Z1, Z0, Z0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
dot512_last:
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Y1
	VMOVUPS.Z (DI), K1, Y2
	VCVTPS2PD Y1, Z1
	VCVTPS2PD Y2, Z2
	VMULPD Z2, Z1, Z1
	VADDPD Z1, Z0, Z0
dot512_done:
	VMOVUPD Z0, (DX)
	VZEROUPPER
	RET

// func expShiftRowsAVX512(dst, src []float32, c int, ms []float32, sums []float64, norm bool)
// takes len(ms) rows of c ≤ 16 floats (src, dst: rows of c, in a row)
// and for each sets ms[r] = the row's maximum m, dst's row = e^(x - m)
// and sums[r] = their float64 sum, 0 + laneSum of expShiftAVX512's lanes
// (maxAVX512 and the tail of expShiftAVX512, then laneSum's additions),
// a row per iteration without a call per row. With norm, dst's row is
// then float32(float64(e)·(1/sums[r])), softmaxRowEnd's normalisation.
// A row holding a NaN gets the NaN in ms[r] and is left (the caller
// redoes it), as is a row whose maximum is zero (whose sign MaxF32
// chooses).
TEXT ·expShiftRowsAVX512(SB), NOSPLIT, $0-105
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ c+48(FP), CX
	MOVQ ms_base+56(FP), R8
	MOVQ ms_len+64(FP), R9
	MOVQ sums_base+80(FP), DX
	MOVBLZX norm+104(FP), R10
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	SHLQ $2, CX
	VBROADCASTSS z_negInf<>(SB), Z21
	VBROADCASTSS z_signMask<>(SB), Z22
	VXORPS X23, X23, X23
	MOVQ $0x3ff0000000000000, AX
	VMOVQ AX, X24
	TESTQ R9, R9
	JZ expShiftRows512_done
expShiftRows512_loop:
	VMOVUPS.Z (SI), K1, Z8
	VCMPPS $3, Z8, Z8, K1, K3
	KORTESTW K3, K3
	JNZ expShiftRows512_nan
	VMOVAPS Z21, Z7
	VMOVAPS Z8, K1, Z7
	VEXTRACTF64X4 $1, Z7, Y6
	VMAXPS Y6, Y7, Y7
	VEXTRACTF128 $1, Y7, X6
	VMAXPS X6, X7, X7
	VPERMILPS $0x4e, X7, X6
	VMAXPS X6, X7, X7
	VPERMILPS $0xb1, X7, X6
	VMAXPS X6, X7, X7
	VMOVSS X7, (R8)
	VUCOMISS X23, X7
	JEQ expShiftRows512_next
	VBROADCASTSS X7, Z9
	VXORPS Z22, Z9, Z9
	ZEXPSHIFT(Z8, Z9, Z0, Z1, Z2, Z3, Z4, K2)
	VMOVAPS.Z Z0, K1, Z0
	VXORPD Z20, Z20, Z20
	ZACC8(Z0, Y0, Z20, Z5, Y5)
	// laneSum: ((l0+l4) + (l1+l5)) + ((l2+l6) + (l3+l7)), then 0 + it.
	VEXTRACTF64X4 $1, Z20, Y10
	VADDPD Y10, Y20, Y10
	VPERMILPD $5, Y10, Y11
	VADDPD Y11, Y10, Y10
	VEXTRACTF128 $1, Y10, X11
	VADDSD X11, X10, X10
	VXORPD X12, X12, X12
	VADDSD X10, X12, X10
	VMOVSD X10, (DX)
	TESTQ R10, R10
	JZ expShiftRows512_store
	VDIVSD X10, X24, X13
	VBROADCASTSD X13, Z13
	VCVTPS2PD Y0, Z14
	VMULPD Z13, Z14, Z14
	VCVTPD2PS Z14, Y14
	VEXTRACTF32X8 $1, Z0, Y15
	VCVTPS2PD Y15, Z15
	VMULPD Z13, Z15, Z15
	VCVTPD2PS Z15, Y15
	VINSERTF32X8 $1, Y15, Z14, Z0
expShiftRows512_store:
	VMOVUPS Z0, K1, (DI)
expShiftRows512_next:
	ADDQ CX, SI
	ADDQ CX, DI
	ADDQ $4, R8
	ADDQ $8, DX
	DECQ R9
	JNZ expShiftRows512_loop
expShiftRows512_done:
	VZEROUPPER
	RET
expShiftRows512_nan:
	VCOMPRESSPS Z8, K3, Z7
	VMOVSS X7, (R8)
	JMP expShiftRows512_next

// func reluGradMulAVX512(dst, g, y []float32)
// dst = y > 0 ? g : +0 (an ordered compare: NaN gives 0), the bits of
// reluGradMulAVX2, 32 lanes an iteration, then one vector of 16; len(dst)
// is a multiple of 16. dst may be g. g is loaded whole and masked in a
// register: a zero-masked load from memory (VMOVUPS.Z (SI), K1) made the
// ResNet block's two ReLU-gradient sweeps ~3x slower than AVX2's on Zen 5
// (nn BenchmarkConvNetStep/resblock, ~5 ms a step).
TEXT ·reluGradMulAVX512(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ g_base+24(FP), SI
	MOVQ y_base+48(FP), DX
	VXORPS Z15, Z15, Z15
	MOVQ CX, BX
	SHRQ $5, BX
	JZ reluGrad512_one
reluGrad512_loop:
	VMOVUPS (DX), Z0
	VMOVUPS 64(DX), Z2
	VCMPPS $0x1e, Z15, Z0, K1
	VCMPPS $0x1e, Z15, Z2, K2
	VMOVUPS (SI), Z1
	VMOVUPS 64(SI), Z3
	VMOVUPS.Z Z1, K1, Z1
	VMOVUPS.Z Z3, K2, Z3
	VMOVUPS Z1, (DI)
	VMOVUPS Z3, 64(DI)
	ADDQ $128, SI
	ADDQ $128, DX
	ADDQ $128, DI
	DECQ BX
	JNZ reluGrad512_loop
reluGrad512_one:
	TESTQ $16, CX
	JZ reluGrad512_done
	VMOVUPS (DX), Z0
	VCMPPS $0x1e, Z15, Z0, K1
	VMOVUPS (SI), Z1
	VMOVUPS.Z Z1, K1, Z1
	VMOVUPS Z1, (DI)
reluGrad512_done:
	VZEROUPPER
	RET
