//go:build amd64 && !noasm

#include "textflag.h"

// The AVX-512 transforms of the Winograd F(2×2, 3×3) convolution
// (winograd.go), 16 tiles a vector: the tiles of one tile row side by
// side, their columns split into even and odd lanes (VPERMT2PS with
// pairIdx), so every transform is adds and subtracts of whole vectors.

// func k512WinoIn(p *float32, pd2, ntr, ngrp int, v *float32, vstr int)
// For tile rows tr < ntr and groups gi < ngrp of 16 tiles, reads the 4×4
// inputs d of the tiles (rows 2tr..2tr+3 of the plane at p, row stride
// pd2 floats; columns 32gi..32gi+33) and writes V = Bᵀ·d·B, element
// ξ = 4i+j at v + ξ·vstr bytes, the 16 tiles of (tr, gi) at the
// (tr·ngrp + gi)-th 64 bytes.
TEXT ·k512WinoIn(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), SI
	MOVQ pd2+8(FP), DX
	SHLQ $2, DX // row stride in bytes
	MOVQ ntr+16(FP), R8
	MOVQ v+32(FP), DI
	MOVQ vstr+40(FP), R10
	VMOVUPS ·pairIdx+0(SB), Z30
	VMOVUPS ·pairIdx+64(SB), Z31
	TESTQ R8, R8
	JZ winoIn_done
winoIn_row:
	MOVQ ngrp+24(FP), CX
	MOVQ SI, BX
winoIn_grp:
	// Rows a = 0..3: u[a][j] into Z(8+4a+j).
	MOVQ BX, AX
#define WINO_IN_ROW(u0, u1, u2, u3) \
	VMOVUPS (AX), Z0; \
	VMOVUPS 64(AX), Z1; \
	VMOVUPS 8(AX), Z2; \
	VMOVUPS 72(AX), Z3; \
	VMOVAPS Z0, Z4; \
	VPERMT2PS Z1, Z30, Z4; \
	VMOVAPS Z0, Z5; \
	VPERMT2PS Z1, Z31, Z5; \
	VMOVAPS Z2, Z6; \
	VPERMT2PS Z3, Z30, Z6; \
	VMOVAPS Z2, Z7; \
	VPERMT2PS Z3, Z31, Z7; \
	VSUBPS Z6, Z4, u0; \
	VADDPS Z6, Z5, u1; \
	VSUBPS Z5, Z6, u2; \
	VSUBPS Z7, Z5, u3; \
	ADDQ DX, AX
	WINO_IN_ROW(Z8, Z9, Z10, Z11)
	WINO_IN_ROW(Z12, Z13, Z14, Z15)
	WINO_IN_ROW(Z16, Z17, Z18, Z19)
	WINO_IN_ROW(Z20, Z21, Z22, Z23)
#undef WINO_IN_ROW
	// v[0][j] = u0j - u2j, v[1][j] = u1j + u2j, v[2][j] = u2j - u1j,
	// v[3][j] = u1j - u3j.
	MOVQ DI, R9
#define WINO_IN_OUT(op, b, a) \
	op b, a, Z0; \
	VMOVUPS Z0, (R9); \
	ADDQ R10, R9
	WINO_IN_OUT(VSUBPS, Z16, Z8)
	WINO_IN_OUT(VSUBPS, Z17, Z9)
	WINO_IN_OUT(VSUBPS, Z18, Z10)
	WINO_IN_OUT(VSUBPS, Z19, Z11)
	WINO_IN_OUT(VADDPS, Z16, Z12)
	WINO_IN_OUT(VADDPS, Z17, Z13)
	WINO_IN_OUT(VADDPS, Z18, Z14)
	WINO_IN_OUT(VADDPS, Z19, Z15)
	WINO_IN_OUT(VSUBPS, Z12, Z16)
	WINO_IN_OUT(VSUBPS, Z13, Z17)
	WINO_IN_OUT(VSUBPS, Z14, Z18)
	WINO_IN_OUT(VSUBPS, Z15, Z19)
	WINO_IN_OUT(VSUBPS, Z20, Z12)
	WINO_IN_OUT(VSUBPS, Z21, Z13)
	WINO_IN_OUT(VSUBPS, Z22, Z14)
	WINO_IN_OUT(VSUBPS, Z23, Z15)
#undef WINO_IN_OUT
	ADDQ $64, DI
	ADDQ $128, BX
	DECQ CX
	JNZ winoIn_grp
	LEAQ (SI)(DX*2), SI // two rows down
	DECQ R8
	JNZ winoIn_row
winoIn_done:
	VZEROUPPER
	RET

// func k512WinoOut(m *float32, mstr, ntr, ngrp int, y *float32, ldy int)
// The inverse: for tile rows tr < ntr and groups gi < ngrp of 16 tiles,
// reads the 16 elements ξ = 4i+j of the tiles' products at m + ξ·mstr
// bytes (the 16 tiles of (tr, gi) at the (tr·ngrp + gi)-th 64 bytes) and
// writes Y = Aᵀ·M·A, rows 2tr and 2tr+1 of the plane at y (row stride ldy
// floats), columns 32gi..32gi+31, the even and odd columns interleaved
// back (pairInv).
TEXT ·k512WinoOut(SB), NOSPLIT, $0-48
	MOVQ m+0(FP), SI
	MOVQ mstr+8(FP), R10
	MOVQ ntr+16(FP), R8
	MOVQ y+32(FP), DI
	MOVQ ldy+40(FP), DX
	SHLQ $2, DX
	VMOVUPS ·pairInv+0(SB), Z30
	VMOVUPS ·pairInv+64(SB), Z31
	TESTQ R8, R8
	JZ winoOut_done
winoOut_row:
	MOVQ ngrp+24(FP), CX
	MOVQ DI, BX
winoOut_grp:
	MOVQ SI, R9
	// Load m_ξ into Z(ξ).
#define WINO_LOAD(z) \
	VMOVUPS (R9), z; \
	ADDQ R10, R9
	WINO_LOAD(Z0)
	WINO_LOAD(Z1)
	WINO_LOAD(Z2)
	WINO_LOAD(Z3)
	WINO_LOAD(Z4)
	WINO_LOAD(Z5)
	WINO_LOAD(Z6)
	WINO_LOAD(Z7)
	WINO_LOAD(Z8)
	WINO_LOAD(Z9)
	WINO_LOAD(Z10)
	WINO_LOAD(Z11)
	WINO_LOAD(Z12)
	WINO_LOAD(Z13)
	WINO_LOAD(Z14)
	WINO_LOAD(Z15)
#undef WINO_LOAD
	// s0[j] = (m0j + m1j) + m2j into Z(16+j); s1[j] = (m1j - m2j) - m3j
	// into Z(20+j).
#define WINO_COL(m0, m1, m2, m3, s0, s1) \
	VADDPS m1, m0, s0; \
	VADDPS m2, s0, s0; \
	VSUBPS m2, m1, s1; \
	VSUBPS m3, s1, s1
	WINO_COL(Z0, Z4, Z8, Z12, Z16, Z20)
	WINO_COL(Z1, Z5, Z9, Z13, Z17, Z21)
	WINO_COL(Z2, Z6, Z10, Z14, Z18, Z22)
	WINO_COL(Z3, Z7, Z11, Z15, Z19, Z23)
#undef WINO_COL
	// Row a: even columns (s0 + s1) + s2, odd (s1 - s2) - s3, interleaved.
	MOVQ BX, AX
#define WINO_ROW(s0, s1, s2, s3) \
	VADDPS s1, s0, Z24; \
	VADDPS s2, Z24, Z24; \
	VSUBPS s2, s1, Z25; \
	VSUBPS s3, Z25, Z25; \
	VMOVAPS Z24, Z26; \
	VPERMT2PS Z25, Z30, Z26; \
	VPERMT2PS Z25, Z31, Z24; \
	VMOVUPS Z26, (AX); \
	VMOVUPS Z24, 64(AX); \
	ADDQ DX, AX
	WINO_ROW(Z16, Z17, Z18, Z19)
	WINO_ROW(Z20, Z21, Z22, Z23)
#undef WINO_ROW
	ADDQ $64, SI
	ADDQ $128, BX
	DECQ CX
	JNZ winoOut_grp
	LEAQ (DI)(DX*2), DI
	DECQ R8
	JNZ winoOut_row
winoOut_done:
	VZEROUPPER
	RET

// func k512WinoGrad(dy *float32, ldy, ntr, ngrp int, m *float32, mstr int)
// The transpose of k512WinoOut (the kernel gradient's transform of dy):
// for tile rows tr < ntr and groups gi < ngrp of 16 tiles, reads rows 2tr
// and 2tr+1 of the plane at dy (row stride ldy floats), columns
// 32gi..32gi+31, and writes M = A·dY·Aᵀ, A = [1 0; 1 1; 1 -1; 0 -1],
// element ξ = 4i+j at m + ξ·mstr bytes, the 16 tiles of (tr, gi) at the
// (tr·ngrp + gi)-th 64 bytes.
TEXT ·k512WinoGrad(SB), NOSPLIT, $0-48
	MOVQ dy+0(FP), SI
	MOVQ ldy+8(FP), DX
	SHLQ $2, DX
	MOVQ ntr+16(FP), R8
	MOVQ m+32(FP), DI
	MOVQ mstr+40(FP), R10
	VMOVUPS ·pairIdx+0(SB), Z30
	VMOVUPS ·pairIdx+64(SB), Z31
	VXORPS Z29, Z29, Z29
	TESTQ R8, R8
	JZ winoGrad_done
winoGrad_row:
	MOVQ ngrp+24(FP), CX
	MOVQ SI, BX
winoGrad_grp:
	VMOVUPS (BX), Z0
	VMOVUPS 64(BX), Z1
	VMOVUPS (BX)(DX*1), Z2
	VMOVUPS 64(BX)(DX*1), Z3
	VMOVAPS Z0, Z4
	VPERMT2PS Z1, Z30, Z4 // dY[0][0]
	VMOVAPS Z0, Z5
	VPERMT2PS Z1, Z31, Z5 // dY[0][1]
	VMOVAPS Z2, Z6
	VPERMT2PS Z3, Z30, Z6 // dY[1][0]
	VMOVAPS Z2, Z7
	VPERMT2PS Z3, Z31, Z7 // dY[1][1]
	// r[i][b] = (A·dY)[i][b] into Z(8+2i+b).
	VMOVAPS Z4, Z8
	VMOVAPS Z5, Z9
	VADDPS Z6, Z4, Z10
	VADDPS Z7, Z5, Z11
	VSUBPS Z6, Z4, Z12
	VSUBPS Z7, Z5, Z13
	VSUBPS Z6, Z29, Z14
	VSUBPS Z7, Z29, Z15
	// M[i][j]: j=0 r0, j=1 r0 + r1, j=2 r0 - r1, j=3 0 - r1.
	MOVQ DI, R9
#define WINO_GRAD_ROW(r0, r1) \
	VMOVUPS r0, (R9); \
	ADDQ R10, R9; \
	VADDPS r1, r0, Z16; \
	VMOVUPS Z16, (R9); \
	ADDQ R10, R9; \
	VSUBPS r1, r0, Z16; \
	VMOVUPS Z16, (R9); \
	ADDQ R10, R9; \
	VSUBPS r1, Z29, Z16; \
	VMOVUPS Z16, (R9); \
	ADDQ R10, R9
	WINO_GRAD_ROW(Z8, Z9)
	WINO_GRAD_ROW(Z10, Z11)
	WINO_GRAD_ROW(Z12, Z13)
	WINO_GRAD_ROW(Z14, Z15)
#undef WINO_GRAD_ROW
	ADDQ $64, DI
	ADDQ $128, BX
	DECQ CX
	JNZ winoGrad_grp
	LEAQ (SI)(DX*2), SI
	DECQ R8
	JNZ winoGrad_row
winoGrad_done:
	VZEROUPPER
	RET

// func k512WinoInRows(r0, r1, r2, r3 *float32, ngrp int, v *float32, vstr int)
// k512WinoIn for one tile row read from the unpadded source: r0..r3 are
// the source rows of the tile row's 4 input rows (a row of zeros for
// padding rows), 32·ngrp floats each, padded by one zero column on each
// side: the first group's first vector is loaded from r-1 with lane 0
// masked off, the last group's last from r+17 with lane 15 masked off, so
// nothing outside the rows is read.
TEXT ·k512WinoInRows(SB), NOSPLIT, $0-56
	MOVQ r0+0(FP), R11
	MOVQ r1+8(FP), R12
	MOVQ r2+16(FP), R13
	MOVQ r3+24(FP), R14
	MOVQ ngrp+32(FP), CX
	MOVQ v+40(FP), DI
	MOVQ vstr+48(FP), R10
	VMOVUPS ·pairIdx+0(SB), Z30
	VMOVUPS ·pairIdx+64(SB), Z31
	MOVL $0xfffe, AX
	KMOVW AX, K1 // the first vector of the first group
	MOVL $0xffff, AX
	KMOVW AX, K2 // the last vector of the last group
	XORQ BX, BX  // byte offset of the group in the rows
	CMPQ CX, $1
	JNE winoInRows_grp
	MOVL $0x7fff, AX
	KMOVW AX, K2
winoInRows_grp:
#define WINO_IN_SRC(R, u0, u1, u2, u3) \
	VMOVUPS.Z -4(R)(BX*1), K1, Z0; \
	VMOVUPS 60(R)(BX*1), Z1; \
	VMOVUPS 4(R)(BX*1), Z2; \
	VMOVUPS.Z 68(R)(BX*1), K2, Z3; \
	VMOVAPS Z0, Z4; \
	VPERMT2PS Z1, Z30, Z4; \
	VMOVAPS Z0, Z5; \
	VPERMT2PS Z1, Z31, Z5; \
	VMOVAPS Z2, Z6; \
	VPERMT2PS Z3, Z30, Z6; \
	VMOVAPS Z2, Z7; \
	VPERMT2PS Z3, Z31, Z7; \
	VSUBPS Z6, Z4, u0; \
	VADDPS Z6, Z5, u1; \
	VSUBPS Z5, Z6, u2; \
	VSUBPS Z7, Z5, u3
	WINO_IN_SRC(R11, Z8, Z9, Z10, Z11)
	WINO_IN_SRC(R12, Z12, Z13, Z14, Z15)
	WINO_IN_SRC(R13, Z16, Z17, Z18, Z19)
	WINO_IN_SRC(R14, Z20, Z21, Z22, Z23)
#undef WINO_IN_SRC
	MOVQ DI, R9
#define WINO_IN_OUT(op, b, a) \
	op b, a, Z0; \
	VMOVUPS Z0, (R9); \
	ADDQ R10, R9
	WINO_IN_OUT(VSUBPS, Z16, Z8)
	WINO_IN_OUT(VSUBPS, Z17, Z9)
	WINO_IN_OUT(VSUBPS, Z18, Z10)
	WINO_IN_OUT(VSUBPS, Z19, Z11)
	WINO_IN_OUT(VADDPS, Z16, Z12)
	WINO_IN_OUT(VADDPS, Z17, Z13)
	WINO_IN_OUT(VADDPS, Z18, Z14)
	WINO_IN_OUT(VADDPS, Z19, Z15)
	WINO_IN_OUT(VSUBPS, Z12, Z16)
	WINO_IN_OUT(VSUBPS, Z13, Z17)
	WINO_IN_OUT(VSUBPS, Z14, Z18)
	WINO_IN_OUT(VSUBPS, Z15, Z19)
	WINO_IN_OUT(VSUBPS, Z20, Z12)
	WINO_IN_OUT(VSUBPS, Z21, Z13)
	WINO_IN_OUT(VSUBPS, Z22, Z14)
	WINO_IN_OUT(VSUBPS, Z23, Z15)
#undef WINO_IN_OUT
	ADDQ $64, DI
	ADDQ $128, BX
	MOVL $0xffff, AX
	KMOVW AX, K1
	DECQ CX
	JZ winoInRows_done
	CMPQ CX, $1
	JNE winoInRows_grp
	MOVL $0x7fff, AX
	KMOVW AX, K2
	JMP winoInRows_grp
winoInRows_done:
	VZEROUPPER
	RET
