//go:build !noasm

#include "textflag.h"

// func addBiasRowsAVX512(dst, x, b []float32, rows, n, relu int) sets
// each of the rows of dst (rows of n) to x's row plus b (VADDPS, as
// addVVAVX2), then, if relu != 0, to max(0, ·) + 0 (reluAVX2's VMAXPS
// with 0 first, so a NaN passes, and the add that turns -0 into +0). 16
// columns at a time, the last 1-15 under a mask (masked-off elements are
// neither read nor written).
TEXT ·addBiasRowsAVX512(SB), NOSPLIT, $0-96
	MOVQ dst_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	MOVQ rows+72(FP), R10
	MOVQ n+80(FP), R8
	MOVQ relu+88(FP), R11
	VXORPS Z15, Z15, Z15
	MOVQ R8, CX
	ANDQ $15, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1 // the last columns of a row
	MOVQ R8, R9
	SHRQ $4, R9 // full vectors a row
	TESTQ R10, R10
	JZ   biasrows_done

biasrows_row:
	MOVQ R9, R12
	XORQ R13, R13

biasrows_vec:
	TESTQ R12, R12
	JZ    biasrows_tail
	VMOVUPS (SI)(R13*1), Z0
	VADDPS  (DX)(R13*1), Z0, Z0
	TESTQ   R11, R11
	JZ      biasrows_store
	VMAXPS  Z0, Z15, Z1
	VADDPS  Z15, Z1, Z0

biasrows_store:
	VMOVUPS Z0, (DI)(R13*1)
	ADDQ $64, R13
	DECQ R12
	JMP  biasrows_vec

biasrows_tail:
	KORTESTW K1, K1
	JZ       biasrows_next
	VMOVUPS.Z (SI)(R13*1), K1, Z0
	VMOVUPS.Z (DX)(R13*1), K1, Z2
	VADDPS    Z2, Z0, Z0
	TESTQ     R11, R11
	JZ        biasrows_tailstore
	VMAXPS    Z0, Z15, Z1
	VADDPS    Z15, Z1, Z0

biasrows_tailstore:
	VMOVUPS Z0, K1, (DI)(R13*1)

biasrows_next:
	LEAQ (SI)(R8*4), SI
	LEAQ (DI)(R8*4), DI
	DECQ R10
	JNZ  biasrows_row

biasrows_done:
	VZEROUPPER
	RET
