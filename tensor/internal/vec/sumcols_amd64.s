//go:build !noasm

#include "textflag.h"

// func sumColsAVX512(out, src []float32, m, n int) sets out[j] to the
// float64 sum, in row order, of src[i*n+j] for i < m, rounded to float32
// (VCVTPD2PS, round to nearest even, as Go's conversion), for the
// len(out) columns; m ≥ 1. 32 columns at a time in four accumulators,
// then 8, then the last 1-7 under a mask (masked-off elements are
// neither read nor written).
TEXT ·sumColsAVX512(SB), NOSPLIT, $0-64
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	MOVQ m+48(FP), R8
	MOVQ n+56(FP), R9
	SHLQ $2, R9 // row stride in bytes

sumcols_32:
	CMPQ CX, $32
	JB   sumcols_8
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3
	MOVQ SI, R10
	MOVQ R8, R11

sumcols_rows32:
	VCVTPS2PD (R10), Z4
	VCVTPS2PD 32(R10), Z5
	VCVTPS2PD 64(R10), Z6
	VCVTPS2PD 96(R10), Z7
	VADDPD Z4, Z0, Z0
	VADDPD Z5, Z1, Z1
	VADDPD Z6, Z2, Z2
	VADDPD Z7, Z3, Z3
	ADDQ R9, R10
	DECQ R11
	JNZ  sumcols_rows32
	VCVTPD2PS Z0, Y0
	VCVTPD2PS Z1, Y1
	VCVTPD2PS Z2, Y2
	VCVTPD2PS Z3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, SI
	SUBQ $32, CX
	JMP  sumcols_32

sumcols_8:
	CMPQ CX, $8
	JB   sumcols_tail
	VXORPD Z0, Z0, Z0
	MOVQ SI, R10
	MOVQ R8, R11

sumcols_rows8:
	VCVTPS2PD (R10), Z4
	VADDPD Z4, Z0, Z0
	ADDQ R9, R10
	DECQ R11
	JNZ  sumcols_rows8
	VCVTPD2PS Z0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, CX
	JMP  sumcols_8

sumcols_tail:
	TESTQ CX, CX
	JZ    sumcols_done
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1 // the last 1-7 columns
	VXORPD Z0, Z0, Z0
	MOVQ SI, R10
	MOVQ R8, R11

sumcols_rowsTail:
	VCVTPS2PD.Z (R10), K1, Z4
	VADDPD Z4, Z0, Z0
	ADDQ R9, R10
	DECQ R11
	JNZ  sumcols_rowsTail
	VCVTPD2PS Z0, Y0
	VMOVUPS Y0, K1, (DI)

sumcols_done:
	VZEROUPPER
	RET
