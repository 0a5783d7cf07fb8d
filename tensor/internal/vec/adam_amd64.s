//go:build !noasm

#include "textflag.h"

// func adamStepAVX512(p2, m2, v2, p, g, m, v []float32, c *AdamCoeffs, wd int)
//
// AdamStep over len(p2) elements (a multiple of 16), the update added to
// the parameter in the same pass: the operations of adamAVX2 and addVVAVX2
// in their order, each rounded on its own (no fused multiply-add), so the
// bits are those of the AVX2 and Go paths. p2, m2 and v2 may be p, m, v.
TEXT ·adamStepAVX512(SB), NOSPLIT, $0-184
	MOVQ c+168(FP), AX
	VBROADCASTSS 0(AX), Z8   // B1
	VBROADCASTSS 4(AX), Z9   // B2
	VBROADCASTSS 8(AX), Z10  // G1
	VBROADCASTSS 12(AX), Z11 // G2
	VBROADCASTSS 16(AX), Z12 // A
	VBROADCASTSS 20(AX), Z13 // B
	VBROADCASTSS 24(AX), Z14 // C2
	VBROADCASTSS 28(AX), Z15 // Eps
	VBROADCASTSS 32(AX), Z7  // EpsRoot
	VBROADCASTSS 36(AX), Z6  // WD
	VBROADCASTSS 40(AX), Z5  // Post
	MOVQ p2_base+0(FP), DI
	MOVQ p2_len+8(FP), CX
	MOVQ m2_base+24(FP), R8
	MOVQ v2_base+48(FP), R9
	MOVQ p_base+72(FP), R12
	MOVQ g_base+96(FP), SI
	MOVQ m_base+120(FP), R10
	MOVQ v_base+144(FP), R11
	MOVQ wd+176(FP), DX
	SHRQ $4, CX
	JZ   adam512_done

adam512_loop:
	VMOVUPS (SI), Z0
	VMULPS  (R10), Z8, Z3
	VMULPS  Z0, Z10, Z4
	VADDPS  Z4, Z3, Z3       // m' = B1·m + G1·g
	VMULPS  Z0, Z0, Z4
	VMULPS  Z4, Z11, Z4
	VMULPS  (R11), Z9, Z1
	VADDPS  Z4, Z1, Z1       // v' = B2·v + G2·g²
	VMOVUPS (R12), Z16       // p (read before m', v', p' are stored: in place)
	VMOVUPS Z3, (R8)
	VMOVUPS Z1, (R9)
	VMULPS  Z1, Z14, Z2
	VADDPS  Z7, Z2, Z2
	VSQRTPS Z2, Z2
	VADDPS  Z15, Z2, Z2      // sqrt(C2·v' + EpsRoot) + Eps
	VMULPS  Z3, Z12, Z3
	VMULPS  Z0, Z13, Z4
	VADDPS  Z4, Z3, Z3
	VDIVPS  Z2, Z3, Z3       // (A·m' + B·g) / den
	TESTQ   DX, DX
	JZ      adam512_nowd
	VMULPS  Z16, Z6, Z4
	VADDPS  Z4, Z3, Z3       // + WD·p

adam512_nowd:
	VMULPS  Z3, Z5, Z3       // u = Post·(...)
	VADDPS  Z3, Z16, Z3      // p' = p + u
	VMOVUPS Z3, (DI)
	ADDQ    $64, DI
	ADDQ    $64, R8
	ADDQ    $64, R9
	ADDQ    $64, R12
	ADDQ    $64, SI
	ADDQ    $64, R10
	ADDQ    $64, R11
	DECQ    CX
	JNZ     adam512_loop

adam512_done:
	VZEROUPPER
	RET
