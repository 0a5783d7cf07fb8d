//go:build !noasm

#include "textflag.h"

// func interleaveAVX512(d *uint32, lo, hi *uint16, n int)
// d[j] = lo[j] | hi[j]<<16, reading lo and hi in lockstep.
TEXT ·interleaveAVX512(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ lo+8(FP), SI
	MOVQ hi+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $4, CX

loop:
	VPMOVZXWD (SI), Z0
	VPMOVZXWD (DX), Z1
	VPSLLD    $16, Z1, Z1
	VPORD     Z1, Z0, Z0
	VMOVDQU32 Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DX
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
	RET

// func interleaveSeqAVX512(d *uint32, lo, hi *uint16, n int)
// interleaveAVX512 reading lo whole, then hi (see interleave16).
TEXT ·interleaveSeqAVX512(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ lo+8(FP), SI
	MOVQ hi+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	MOVQ DI, R8
	MOVQ CX, R9

loopl:
	VPMOVZXWD (SI), Z0
	VMOVDQU32 Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      R9
	JNZ       loopl
	MOVQ      R8, DI

looph:
	VPMOVZXWD (DX), Z1
	VPSLLD    $16, Z1, Z1
	VPORD     (DI), Z1, Z1
	VMOVDQU32 Z1, (DI)
	ADDQ      $32, DX
	ADDQ      $64, DI
	DECQ      CX
	JNZ       looph
	VZEROUPPER
	RET
