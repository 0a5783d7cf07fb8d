//go:build !noasm

#include "textflag.h"

// Conversion kernels between float32 and bfloat16/float16 (see convert.go).
// n is a multiple of 16 (AVX-512) or 8 (AVX2, F16C) and at least that.

// VCVTNEPS2BF16 Z0, Y1 (EVEX.512.F3.0F38.W0 72 /r; Go's assembler has no
// mnemonic for it; bytes as GNU as 2.40 encodes "vcvtneps2bf16 ymm1,zmm0").
#define VCVTNEPS2BF16_Z0_Y1 BYTE $0x62; BYTE $0xf2; BYTE $0x7e; BYTE $0x48; BYTE $0x72; BYTE $0xc8

// BF16_SUBNORMALS rounds the lanes K1 selects of Z0 (float32 subnormals)
// to bfloat16 with integer arithmetic into Y1 (Z4 = 0x7fff, Z5 = 1
// broadcast; Z6 is scratch): (x + 0x7fff + (x>>16 & 1)) >> 16.
#define BF16_SUBNORMALS \
	VPSRLD  $16, Z0, Z6; \
	VPANDD  Z5, Z6, Z6;  \
	VPADDD  Z4, Z6, Z6;  \
	VPADDD  Z0, Z6, Z6;  \
	VPSRLD  $16, Z6, Z6; \
	VPMOVDW Z6, K1, Y1

// func bf16FromF32AVX512(dst *uint16, src *float32, n int)
TEXT ·bf16FromF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z2
	MOVL $0x007fffff, AX
	VPBROADCASTD AX, Z3
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z4
	MOVL $1, AX
	VPBROADCASTD AX, Z5

bloop:
	VMOVUPS (SI), Z0
	VCVTNEPS2BF16_Z0_Y1
	// VCVTNEPS2BF16 flushes subnormal inputs to zero: redo those lanes
	// with integer rounding (bfloat16 has float32's exponent range, so
	// they have subnormal results).
	VPTESTMD  Z3, Z0, K2     // mantissa != 0
	VPTESTNMD Z2, Z0, K2, K1 // and exponent == 0
	KORTESTW  K1, K1
	JNZ       bfix

bstore:
	VMOVDQU Y1, (DI)
	ADDQ    $64, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     bloop
	VZEROUPPER
	RET

bfix:
	BF16_SUBNORMALS
	JMP     bstore

// func bf16PairsFromF32AVX512(dst *uint32, lo, hi *float32, n int)
// dst[j] = bf16(lo[j]) | bf16(hi[j])<<16, rounded as bf16FromF32AVX512.
// It reads lo whole, storing its halves, then hi, adding its halves: two
// rows of a matrix are then read in order, one stream. Cold rows read in
// lockstep (64 bytes of each in turn), or in runs of 1 KiB, ran at up to
// half the speed.
TEXT ·bf16PairsFromF32AVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ lo+8(FP), SI
	MOVQ hi+16(FP), BX
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z2
	MOVL $0x007fffff, AX
	VPBROADCASTD AX, Z3
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z4
	MOVL $1, AX
	VPBROADCASTD AX, Z5

	MOVQ DI, R8
	MOVQ CX, DX

ploloop:
	// The low halves: lo rounded (subnormal lanes fixed as in
	// bf16FromF32AVX512), zero-extended to 32 bits.
	VMOVUPS (SI), Z0
	VCVTNEPS2BF16_Z0_Y1
	VPTESTMD  Z3, Z0, K2
	VPTESTNMD Z2, Z0, K2, K1
	KORTESTW  K1, K1
	JNZ       pfixlo

plo:
	VPMOVZXWD Y1, Z8
	VMOVDQU32 Z8, (DI)
	ADDQ      $64, SI
	ADDQ      $64, DI
	DECQ      DX
	JNZ       ploloop
	MOVQ      R8, DI

philoop:
	// The high halves: hi rounded, shifted up, added to the low ones.
	VMOVUPS (BX), Z0
	VCVTNEPS2BF16_Z0_Y1
	VPTESTMD  Z3, Z0, K2
	VPTESTNMD Z2, Z0, K2, K1
	KORTESTW  K1, K1
	JNZ       pfixhi

phi:
	VPMOVZXWD Y1, Z7
	VPSLLD    $16, Z7, Z7
	VPORD     (DI), Z7, Z7
	VMOVDQU32 Z7, (DI)
	ADDQ      $64, BX
	ADDQ      $64, DI
	DECQ      CX
	JNZ       philoop
	VZEROUPPER
	RET

pfixlo:
	BF16_SUBNORMALS
	JMP     plo

pfixhi:
	BF16_SUBNORMALS
	JMP     phi

// func bf16FromF32AVX2(dst *uint16, src *float32, n int)
TEXT ·bf16FromF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	MOVL $0x7fff, AX
	MOVQ AX, X4
	VPBROADCASTD X4, Y4
	MOVL $1, AX
	MOVQ AX, X5
	VPBROADCASTD X5, Y5
	MOVL $0x40, AX
	MOVQ AX, X8
	VPBROADCASTD X8, Y8

aloop:
	VMOVUPS   (SI), Y0
	VPSRLD    $16, Y0, Y7     // high half
	VPAND     Y5, Y7, Y6      // its lsb
	VPADDD    Y4, Y6, Y6      // + 0x7fff
	VPADDD    Y0, Y6, Y6
	VPSRLD    $16, Y6, Y6     // rounded to nearest even
	VPOR      Y8, Y7, Y7      // quiet NaN with the top payload
	VCMPPS    $3, Y0, Y0, Y9  // unordered: NaN lanes
	VBLENDVPS Y9, Y7, Y6, Y6
	VPACKUSDW Y6, Y6, Y6
	VPERMQ    $0x08, Y6, Y6
	VMOVDQU   X6, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       aloop
	VZEROUPPER
	RET

// func f32FromBF16AVX512(dst *float32, src *uint16, n int)
TEXT ·f32FromBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX

wloop:
	VPMOVZXWD (SI), Z0
	VPSLLD    $16, Z0, Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       wloop
	VZEROUPPER
	RET

// func f32FromBF16AVX2(dst *float32, src *uint16, n int)
TEXT ·f32FromBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX

w2loop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       w2loop
	VZEROUPPER
	RET

// func f16FromF32AVX512(dst *uint16, src *float32, n int)
TEXT ·f16FromF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX

hloop:
	VMOVUPS   (SI), Z0
	VCVTPS2PH $0, Z0, Y1 // imm 0: round to nearest even
	VMOVDQU   Y1, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       hloop
	VZEROUPPER
	RET

// func f16FromF32F16C(dst *uint16, src *float32, n int)
TEXT ·f16FromF32F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX

h2loop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X1
	VMOVDQU   X1, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       h2loop
	VZEROUPPER
	RET

// func f32FromF16AVX512(dst *float32, src *uint16, n int)
TEXT ·f32FromF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX

gloop:
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       gloop
	VZEROUPPER
	RET

// func f32FromF16F16C(dst *float32, src *uint16, n int)
TEXT ·f32FromF16F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX

g2loop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       g2loop
	VZEROUPPER
	RET
