//go:build amd64 && !noasm

#include "textflag.h"

// func sum8AVX2(d *float32, s *[8]*float32, n int, first bool)
//
// For i < 8n: d[i] = ((s0+s1)+(s2+s3)) + ((s4+s5)+(s6+s7)), plus d[i]
// itself (added last) when !first: the order of sum8 in Go.
TEXT ·sum8AVX2(SB), NOSPLIT, $0-25
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	MOVBLZX first+24(FP), DX
	MOVQ 0(SI), AX
	MOVQ 8(SI), BX
	MOVQ 16(SI), R8
	MOVQ 24(SI), R9
	MOVQ 32(SI), R10
	MOVQ 40(SI), R11
	MOVQ 48(SI), R12
	MOVQ 56(SI), R13
	XORQ SI, SI
	TESTQ CX, CX
	JZ done

loop:
	VMOVUPS (AX)(SI*1), Y0
	VADDPS  (BX)(SI*1), Y0, Y0
	VMOVUPS (R8)(SI*1), Y1
	VADDPS  (R9)(SI*1), Y1, Y1
	VMOVUPS (R10)(SI*1), Y2
	VADDPS  (R11)(SI*1), Y2, Y2
	VMOVUPS (R12)(SI*1), Y3
	VADDPS  (R13)(SI*1), Y3, Y3
	VADDPS  Y1, Y0, Y0
	VADDPS  Y3, Y2, Y2
	VADDPS  Y2, Y0, Y0
	TESTQ   DX, DX
	JNZ     store
	VADDPS  (DI)(SI*1), Y0, Y0

store:
	VMOVUPS Y0, (DI)(SI*1)
	ADDQ    $32, SI
	DECQ    CX
	JNZ     loop

done:
	VZEROUPPER
	RET

// func sum4AVX2(d *float32, s *[4]*float32, n int, first bool)
//
// For i < 8n: d[i] = (s0+s1)+(s2+s3), plus d[i] itself (added last) when
// !first: the order of sum4 in Go.
TEXT ·sum4AVX2(SB), NOSPLIT, $0-25
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	MOVBLZX first+24(FP), DX
	MOVQ 0(SI), AX
	MOVQ 8(SI), BX
	MOVQ 16(SI), R8
	MOVQ 24(SI), R9
	XORQ SI, SI
	TESTQ CX, CX
	JZ done4

loop4:
	VMOVUPS (AX)(SI*1), Y0
	VADDPS  (BX)(SI*1), Y0, Y0
	VMOVUPS (R8)(SI*1), Y1
	VADDPS  (R9)(SI*1), Y1, Y1
	VADDPS  Y1, Y0, Y0
	TESTQ   DX, DX
	JNZ     store4
	VADDPS  (DI)(SI*1), Y0, Y0

store4:
	VMOVUPS Y0, (DI)(SI*1)
	ADDQ    $32, SI
	DECQ    CX
	JNZ     loop4

done4:
	VZEROUPPER
	RET

// func sum2AVX2(d *float32, s *[2]*float32, n int, first bool)
//
// For i < 8n: d[i] = s0+s1, plus d[i] itself (added last) when !first:
// the order of sum2 in Go. Four vectors a turn: a sum of two streams
// costs less than the loop.
TEXT ·sum2AVX2(SB), NOSPLIT, $0-25
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	MOVBLZX first+24(FP), DX
	MOVQ 0(SI), AX
	MOVQ 8(SI), BX
	XORQ SI, SI

wide2:
	CMPQ    CX, $4
	JLT     tail2
	VMOVUPS (AX)(SI*1), Y0
	VADDPS  (BX)(SI*1), Y0, Y0
	VMOVUPS 32(AX)(SI*1), Y1
	VADDPS  32(BX)(SI*1), Y1, Y1
	VMOVUPS 64(AX)(SI*1), Y2
	VADDPS  64(BX)(SI*1), Y2, Y2
	VMOVUPS 96(AX)(SI*1), Y3
	VADDPS  96(BX)(SI*1), Y3, Y3
	TESTQ   DX, DX
	JNZ     wstore2
	VADDPS  (DI)(SI*1), Y0, Y0
	VADDPS  32(DI)(SI*1), Y1, Y1
	VADDPS  64(DI)(SI*1), Y2, Y2
	VADDPS  96(DI)(SI*1), Y3, Y3

wstore2:
	VMOVUPS Y0, (DI)(SI*1)
	VMOVUPS Y1, 32(DI)(SI*1)
	VMOVUPS Y2, 64(DI)(SI*1)
	VMOVUPS Y3, 96(DI)(SI*1)
	ADDQ    $128, SI
	SUBQ    $4, CX
	JMP     wide2

tail2:
	TESTQ CX, CX
	JZ    done2
	VMOVUPS (AX)(SI*1), Y0
	VADDPS  (BX)(SI*1), Y0, Y0
	TESTQ   DX, DX
	JNZ     tstore2
	VADDPS  (DI)(SI*1), Y0, Y0

tstore2:
	VMOVUPS Y0, (DI)(SI*1)
	ADDQ    $32, SI
	DECQ    CX
	JMP     tail2

done2:
	VZEROUPPER
	RET
