//go:build !noasm

#include "textflag.h"

// The AMX bfloat16 kernel: ns blocks of 32×32 float32 of C side by side
// (tiles tmm0-3, each 16×16) += A (32 rows × 32·kb bfloat16, row-major,
// row stride lda) times ns strips of B as k-pairs (each 16·kb pair-rows
// of 32 columns, 32-bit elements, row stride ldb, strips bstride elements
// apart). Each k block of 32 loads two A tiles (16 rows × 32 bf16) and two
// B tiles (16 pair-rows × 16 columns) and issues four TDPBF16PS. The tiles
// are configured once for all ns blocks (LDTILECFG costs about as much as
// a k block of 128), used and released within this one call, so no
// goroutine switch sees tile state.
//
// Go's assembler has no AMX mnemonics: each instruction is given as the
// bytes GNU as 2.40 encodes for the one in its comment.

#define LDTILECFG_AX BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00
#define TILERELEASE BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0

// func amxKernel32(kb int, a *uint16, lda int, b *uint32, ldb int, bstride int, c *float32, ldc int, ns int, cfg *byte, acc int)
TEXT ·amxKernel32(SB), NOSPLIT, $0-88
	MOVQ cfg+72(FP), AX
	LDTILECFG_AX
	MOVQ lda+16(FP), R8
	SHLQ $1, R8
	MOVQ ldc+56(FP), R10
	SHLQ $2, R10
	MOVQ ldb+32(FP), R9
	SHLQ $2, R9
	MOVQ b+24(FP), DI
	MOVQ c+48(FP), DX

strip:
	MOVQ kb+0(FP), CX
	MOVQ a+8(FP), SI
	LEAQ 64(DX), AX  // C rows 0-15, columns 16-31
	MOVQ R10, R12
	SHLQ $4, R12
	ADDQ DX, R12     // C rows 16-31
	LEAQ 64(R12), R13
	MOVQ acc+80(FP), BX
	TESTQ BX, BX
	JZ   zero
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x04; BYTE $0x12 // tileloadd tmm0,[rdx+r10*1]
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x0c; BYTE $0x10 // tileloadd tmm1,[rax+r10*1]
	BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x14; BYTE $0x14 // tileloadd tmm2,[r12+r10*1]
	BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x5c; BYTE $0x15; BYTE $0x00 // tileloadd tmm3,[r13+r10*1+0x0]
	JMP  start

zero:
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc0 // tilezero tmm0
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc8 // tilezero tmm1
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd0 // tilezero tmm2
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd8 // tilezero tmm3

start:
	MOVQ R8, BX
	SHLQ $4, BX
	ADDQ SI, BX      // A rows 16-31
	MOVQ DI, b+24(FP) // this strip's B
	LEAQ 64(DI), R11 // B columns 16-31
	MOVQ R9, AX
	SHLQ $4, AX      // 16 pair-rows of B

loop:
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x06 // tileloadd tmm4,[rsi+r8*1]
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x03 // tileloadd tmm5,[rbx+r8*1]
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x0f // tileloadd tmm6,[rdi+r9*1]
	BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x3c; BYTE $0x0b // tileloadd tmm7,[r11+r9*1]
	BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xc4 // tdpbf16ps tmm0,tmm4,tmm6
	BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xcc // tdpbf16ps tmm1,tmm4,tmm7
	BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xd5 // tdpbf16ps tmm2,tmm5,tmm6
	BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xdd // tdpbf16ps tmm3,tmm5,tmm7
	ADDQ $64, SI
	ADDQ $64, BX
	ADDQ AX, DI
	ADDQ AX, R11
	DECQ CX
	JNZ  loop

	LEAQ 64(DX), AX
	MOVQ R10, R12
	SHLQ $4, R12
	ADDQ DX, R12
	LEAQ 64(R12), R13

	BYTE $0xc4; BYTE $0xa2; BYTE $0x7a; BYTE $0x4b; BYTE $0x04; BYTE $0x12 // tilestored [rdx+r10*1],tmm0
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7a; BYTE $0x4b; BYTE $0x0c; BYTE $0x10 // tilestored [rax+r10*1],tmm1
	BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x14; BYTE $0x14 // tilestored [r12+r10*1],tmm2
	BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x5c; BYTE $0x15; BYTE $0x00 // tilestored [r13+r10*1+0x0],tmm3

	// Next strip: B bstride uint32 on, C 32 columns on.
	MOVQ b+24(FP), DI
	MOVQ bstride+40(FP), AX
	SHLQ $2, AX
	ADDQ AX, DI
	ADDQ $128, DX
	DECQ ns+64(FP)
	JNZ  strip

	TILERELEASE
	RET
