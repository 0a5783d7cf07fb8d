//go:build !noasm

#include "textflag.h"

// func xentGradRowsAVX512(dst, sm []float32, c int, g []float32, labels []int32) (ok bool)
// sets each of the len(g) rows of c ≤ 16 floats of dst to g[r]·sm's row,
// then its element labels[r] to g[r]·(sm[labels[r]] - 1): float32
// products and difference, as the Go loop rounds them. It stops and
// returns false at a label outside [0, c), before writing its row.
TEXT ·xentGradRowsAVX512(SB), NOSPLIT, $0-105
	MOVQ dst_base+0(FP), DI
	MOVQ sm_base+24(FP), SI
	MOVQ c+48(FP), CX
	MOVQ g_base+56(FP), R8
	MOVQ g_len+64(FP), R9
	MOVQ labels_base+80(FP), R10
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	MOVL $0x3f800000, AX
	VMOVD AX, X4
	TESTQ R9, R9
	JZ xentGrad512_ok
xentGrad512_loop:
	MOVLQSX (R10), AX
	CMPQ AX, CX
	JAE xentGrad512_bad
	VMOVUPS.Z (SI), K1, Z0
	VBROADCASTSS (R8), Z1
	VMULPS Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
	VMOVSS (SI)(AX*4), X3
	VSUBSS X4, X3, X3
	VMULSS X1, X3, X3
	VMOVSS X3, (DI)(AX*4)
	LEAQ (SI)(CX*4), SI
	LEAQ (DI)(CX*4), DI
	ADDQ $4, R8
	ADDQ $4, R10
	DECQ R9
	JNZ xentGrad512_loop
xentGrad512_ok:
	MOVB $1, ok+104(FP)
	VZEROUPPER
	RET
xentGrad512_bad:
	MOVB $0, ok+104(FP)
	VZEROUPPER
	RET
