//go:build !noasm

#include "textflag.h"

// func affineRowAVX512(dst, x []float32, s, b float32, r []float32, relu bool)
// dst = x·s + b (+ r) (then max(0, ·) + 0 with relu), 16 lanes a step;
// len(dst) is a multiple of 16. The operations and their order are
// mulVSAVX2's, addVSAVX2's, addVVAVX2's and reluAVX2's.
TEXT ·affineRowAVX512(SB), NOSPLIT, $0-81
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	VBROADCASTSS s+48(FP), Z1
	VBROADCASTSS b+52(FP), Z2
	MOVQ r_base+56(FP), DX
	MOVBQZX relu+80(FP), AX
	VXORPS Z15, Z15, Z15
	SHRQ $4, CX
	JZ affine_done
	TESTQ DX, DX
	JZ affine_nores
	TESTQ AX, AX
	JZ affine_res
affine_res_relu:
	VMOVUPS (SI), Z0
	VMULPS Z1, Z0, Z0
	VADDPS Z2, Z0, Z0
	VADDPS (DX), Z0, Z0
	VMAXPS Z0, Z15, Z0
	VADDPS Z15, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ affine_res_relu
	JMP affine_done
affine_res:
	VMOVUPS (SI), Z0
	VMULPS Z1, Z0, Z0
	VADDPS Z2, Z0, Z0
	VADDPS (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ affine_res
	JMP affine_done
affine_nores:
	TESTQ AX, AX
	JZ affine_plain
affine_relu:
	VMOVUPS (SI), Z0
	VMULPS Z1, Z0, Z0
	VADDPS Z2, Z0, Z0
	VMAXPS Z0, Z15, Z0
	VADDPS Z15, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ affine_relu
	JMP affine_done
affine_plain:
	VMOVUPS (SI), Z0
	VMULPS Z1, Z0, Z0
	VADDPS Z2, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ affine_plain
affine_done:
	VZEROUPPER
	RET

// func affine2RowAVX512(dst, g, y, x []float32, a, s, b float32)
// dst = (gz·a + x·s) + b, gz = g where y > 0 (an ordered compare: NaN
// gives 0) or g if y is nil, 16 lanes a step; len(dst) is a multiple of
// 16. g is loaded whole and masked in a register (see reluGradMulAVX512).
TEXT ·affine2RowAVX512(SB), NOSPLIT, $0-108
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ g_base+24(FP), SI
	MOVQ y_base+48(FP), DX
	MOVQ x_base+72(FP), R8
	VBROADCASTSS a+96(FP), Z1
	VBROADCASTSS s+100(FP), Z2
	VBROADCASTSS b+104(FP), Z3
	VXORPS Z15, Z15, Z15
	SHRQ $4, CX
	JZ affine2_done
	TESTQ DX, DX
	JZ affine2_plain
affine2_mask:
	VMOVUPS (DX), Z4
	VCMPPS $0x1e, Z15, Z4, K1
	VMOVUPS (SI), Z0
	VMOVUPS.Z Z0, K1, Z0
	VMULPS Z1, Z0, Z0
	VMOVUPS (R8), Z5
	VMULPS Z2, Z5, Z5
	VADDPS Z5, Z0, Z0
	VADDPS Z3, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, R8
	ADDQ $64, DI
	DECQ CX
	JNZ affine2_mask
	JMP affine2_done
affine2_plain:
	VMOVUPS (SI), Z0
	VMULPS Z1, Z0, Z0
	VMOVUPS (R8), Z5
	VMULPS Z2, Z5, Z5
	VADDPS Z5, Z0, Z0
	VADDPS Z3, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $64, DI
	DECQ CX
	JNZ affine2_plain
affine2_done:
	VZEROUPPER
	RET
