//go:build !noasm

#include "textflag.h"

// AVX2 kernels of package vec. Each performs exactly the operations of
// the pure-Go scalar function of the same name in math.go, in the same
// order (VMULPS then VADDPS, never FMA; VDIVPS, never VRCPPS), so both
// paths return the same bits. Lengths are multiples of 8 (the Go wrappers
// handle the rest).
DATA c_expLo<>+0(SB)/4, $0xc2d00000
DATA c_expLo<>+4(SB)/4, $0xc2d00000
DATA c_expLo<>+8(SB)/4, $0xc2d00000
DATA c_expLo<>+12(SB)/4, $0xc2d00000
DATA c_expLo<>+16(SB)/4, $0xc2d00000
DATA c_expLo<>+20(SB)/4, $0xc2d00000
DATA c_expLo<>+24(SB)/4, $0xc2d00000
DATA c_expLo<>+28(SB)/4, $0xc2d00000
GLOBL c_expLo<>(SB), RODATA|NOPTR, $32
DATA c_expHi<>+0(SB)/4, $0x42b20000
DATA c_expHi<>+4(SB)/4, $0x42b20000
DATA c_expHi<>+8(SB)/4, $0x42b20000
DATA c_expHi<>+12(SB)/4, $0x42b20000
DATA c_expHi<>+16(SB)/4, $0x42b20000
DATA c_expHi<>+20(SB)/4, $0x42b20000
DATA c_expHi<>+24(SB)/4, $0x42b20000
DATA c_expHi<>+28(SB)/4, $0x42b20000
GLOBL c_expHi<>(SB), RODATA|NOPTR, $32
DATA c_log2e<>+0(SB)/4, $0x3fb8aa3b
DATA c_log2e<>+4(SB)/4, $0x3fb8aa3b
DATA c_log2e<>+8(SB)/4, $0x3fb8aa3b
DATA c_log2e<>+12(SB)/4, $0x3fb8aa3b
DATA c_log2e<>+16(SB)/4, $0x3fb8aa3b
DATA c_log2e<>+20(SB)/4, $0x3fb8aa3b
DATA c_log2e<>+24(SB)/4, $0x3fb8aa3b
DATA c_log2e<>+28(SB)/4, $0x3fb8aa3b
GLOBL c_log2e<>(SB), RODATA|NOPTR, $32
DATA c_magic<>+0(SB)/4, $0x4b400000
DATA c_magic<>+4(SB)/4, $0x4b400000
DATA c_magic<>+8(SB)/4, $0x4b400000
DATA c_magic<>+12(SB)/4, $0x4b400000
DATA c_magic<>+16(SB)/4, $0x4b400000
DATA c_magic<>+20(SB)/4, $0x4b400000
DATA c_magic<>+24(SB)/4, $0x4b400000
DATA c_magic<>+28(SB)/4, $0x4b400000
GLOBL c_magic<>(SB), RODATA|NOPTR, $32
DATA c_ln2Hi<>+0(SB)/4, $0x3f318000
DATA c_ln2Hi<>+4(SB)/4, $0x3f318000
DATA c_ln2Hi<>+8(SB)/4, $0x3f318000
DATA c_ln2Hi<>+12(SB)/4, $0x3f318000
DATA c_ln2Hi<>+16(SB)/4, $0x3f318000
DATA c_ln2Hi<>+20(SB)/4, $0x3f318000
DATA c_ln2Hi<>+24(SB)/4, $0x3f318000
DATA c_ln2Hi<>+28(SB)/4, $0x3f318000
GLOBL c_ln2Hi<>(SB), RODATA|NOPTR, $32
DATA c_ln2Lo<>+0(SB)/4, $0xb95e8083
DATA c_ln2Lo<>+4(SB)/4, $0xb95e8083
DATA c_ln2Lo<>+8(SB)/4, $0xb95e8083
DATA c_ln2Lo<>+12(SB)/4, $0xb95e8083
DATA c_ln2Lo<>+16(SB)/4, $0xb95e8083
DATA c_ln2Lo<>+20(SB)/4, $0xb95e8083
DATA c_ln2Lo<>+24(SB)/4, $0xb95e8083
DATA c_ln2Lo<>+28(SB)/4, $0xb95e8083
GLOBL c_ln2Lo<>(SB), RODATA|NOPTR, $32
DATA c_p0<>+0(SB)/4, $0x39506967
DATA c_p0<>+4(SB)/4, $0x39506967
DATA c_p0<>+8(SB)/4, $0x39506967
DATA c_p0<>+12(SB)/4, $0x39506967
DATA c_p0<>+16(SB)/4, $0x39506967
DATA c_p0<>+20(SB)/4, $0x39506967
DATA c_p0<>+24(SB)/4, $0x39506967
DATA c_p0<>+28(SB)/4, $0x39506967
GLOBL c_p0<>(SB), RODATA|NOPTR, $32
DATA c_p1<>+0(SB)/4, $0x3ab743ce
DATA c_p1<>+4(SB)/4, $0x3ab743ce
DATA c_p1<>+8(SB)/4, $0x3ab743ce
DATA c_p1<>+12(SB)/4, $0x3ab743ce
DATA c_p1<>+16(SB)/4, $0x3ab743ce
DATA c_p1<>+20(SB)/4, $0x3ab743ce
DATA c_p1<>+24(SB)/4, $0x3ab743ce
DATA c_p1<>+28(SB)/4, $0x3ab743ce
GLOBL c_p1<>(SB), RODATA|NOPTR, $32
DATA c_p2<>+0(SB)/4, $0x3c088908
DATA c_p2<>+4(SB)/4, $0x3c088908
DATA c_p2<>+8(SB)/4, $0x3c088908
DATA c_p2<>+12(SB)/4, $0x3c088908
DATA c_p2<>+16(SB)/4, $0x3c088908
DATA c_p2<>+20(SB)/4, $0x3c088908
DATA c_p2<>+24(SB)/4, $0x3c088908
DATA c_p2<>+28(SB)/4, $0x3c088908
GLOBL c_p2<>(SB), RODATA|NOPTR, $32
DATA c_p3<>+0(SB)/4, $0x3d2aa9c1
DATA c_p3<>+4(SB)/4, $0x3d2aa9c1
DATA c_p3<>+8(SB)/4, $0x3d2aa9c1
DATA c_p3<>+12(SB)/4, $0x3d2aa9c1
DATA c_p3<>+16(SB)/4, $0x3d2aa9c1
DATA c_p3<>+20(SB)/4, $0x3d2aa9c1
DATA c_p3<>+24(SB)/4, $0x3d2aa9c1
DATA c_p3<>+28(SB)/4, $0x3d2aa9c1
GLOBL c_p3<>(SB), RODATA|NOPTR, $32
DATA c_p4<>+0(SB)/4, $0x3e2aaaaa
DATA c_p4<>+4(SB)/4, $0x3e2aaaaa
DATA c_p4<>+8(SB)/4, $0x3e2aaaaa
DATA c_p4<>+12(SB)/4, $0x3e2aaaaa
DATA c_p4<>+16(SB)/4, $0x3e2aaaaa
DATA c_p4<>+20(SB)/4, $0x3e2aaaaa
DATA c_p4<>+24(SB)/4, $0x3e2aaaaa
DATA c_p4<>+28(SB)/4, $0x3e2aaaaa
GLOBL c_p4<>(SB), RODATA|NOPTR, $32
DATA c_p5<>+0(SB)/4, $0x3f000000
DATA c_p5<>+4(SB)/4, $0x3f000000
DATA c_p5<>+8(SB)/4, $0x3f000000
DATA c_p5<>+12(SB)/4, $0x3f000000
DATA c_p5<>+16(SB)/4, $0x3f000000
DATA c_p5<>+20(SB)/4, $0x3f000000
DATA c_p5<>+24(SB)/4, $0x3f000000
DATA c_p5<>+28(SB)/4, $0x3f000000
GLOBL c_p5<>(SB), RODATA|NOPTR, $32
DATA c_one<>+0(SB)/4, $0x3f800000
DATA c_one<>+4(SB)/4, $0x3f800000
DATA c_one<>+8(SB)/4, $0x3f800000
DATA c_one<>+12(SB)/4, $0x3f800000
DATA c_one<>+16(SB)/4, $0x3f800000
DATA c_one<>+20(SB)/4, $0x3f800000
DATA c_one<>+24(SB)/4, $0x3f800000
DATA c_one<>+28(SB)/4, $0x3f800000
GLOBL c_one<>(SB), RODATA|NOPTR, $32
DATA c_two<>+0(SB)/4, $0x40000000
DATA c_two<>+4(SB)/4, $0x40000000
DATA c_two<>+8(SB)/4, $0x40000000
DATA c_two<>+12(SB)/4, $0x40000000
DATA c_two<>+16(SB)/4, $0x40000000
DATA c_two<>+20(SB)/4, $0x40000000
DATA c_two<>+24(SB)/4, $0x40000000
DATA c_two<>+28(SB)/4, $0x40000000
GLOBL c_two<>(SB), RODATA|NOPTR, $32
DATA c_tSmall<>+0(SB)/4, $0x3f200000
DATA c_tSmall<>+4(SB)/4, $0x3f200000
DATA c_tSmall<>+8(SB)/4, $0x3f200000
DATA c_tSmall<>+12(SB)/4, $0x3f200000
DATA c_tSmall<>+16(SB)/4, $0x3f200000
DATA c_tSmall<>+20(SB)/4, $0x3f200000
DATA c_tSmall<>+24(SB)/4, $0x3f200000
DATA c_tSmall<>+28(SB)/4, $0x3f200000
GLOBL c_tSmall<>(SB), RODATA|NOPTR, $32
DATA c_t0<>+0(SB)/4, $0xbbbaf0ea
DATA c_t0<>+4(SB)/4, $0xbbbaf0ea
DATA c_t0<>+8(SB)/4, $0xbbbaf0ea
DATA c_t0<>+12(SB)/4, $0xbbbaf0ea
DATA c_t0<>+16(SB)/4, $0xbbbaf0ea
DATA c_t0<>+20(SB)/4, $0xbbbaf0ea
DATA c_t0<>+24(SB)/4, $0xbbbaf0ea
DATA c_t0<>+28(SB)/4, $0xbbbaf0ea
GLOBL c_t0<>(SB), RODATA|NOPTR, $32
DATA c_t1<>+0(SB)/4, $0x3ca9134e
DATA c_t1<>+4(SB)/4, $0x3ca9134e
DATA c_t1<>+8(SB)/4, $0x3ca9134e
DATA c_t1<>+12(SB)/4, $0x3ca9134e
DATA c_t1<>+16(SB)/4, $0x3ca9134e
DATA c_t1<>+20(SB)/4, $0x3ca9134e
DATA c_t1<>+24(SB)/4, $0x3ca9134e
DATA c_t1<>+28(SB)/4, $0x3ca9134e
GLOBL c_t1<>(SB), RODATA|NOPTR, $32
DATA c_t2<>+0(SB)/4, $0xbd5c1e2d
DATA c_t2<>+4(SB)/4, $0xbd5c1e2d
DATA c_t2<>+8(SB)/4, $0xbd5c1e2d
DATA c_t2<>+12(SB)/4, $0xbd5c1e2d
DATA c_t2<>+16(SB)/4, $0xbd5c1e2d
DATA c_t2<>+20(SB)/4, $0xbd5c1e2d
DATA c_t2<>+24(SB)/4, $0xbd5c1e2d
DATA c_t2<>+28(SB)/4, $0xbd5c1e2d
GLOBL c_t2<>(SB), RODATA|NOPTR, $32
DATA c_t3<>+0(SB)/4, $0x3e088393
DATA c_t3<>+4(SB)/4, $0x3e088393
DATA c_t3<>+8(SB)/4, $0x3e088393
DATA c_t3<>+12(SB)/4, $0x3e088393
DATA c_t3<>+16(SB)/4, $0x3e088393
DATA c_t3<>+20(SB)/4, $0x3e088393
DATA c_t3<>+24(SB)/4, $0x3e088393
DATA c_t3<>+28(SB)/4, $0x3e088393
GLOBL c_t3<>(SB), RODATA|NOPTR, $32
DATA c_t4<>+0(SB)/4, $0xbeaaaa99
DATA c_t4<>+4(SB)/4, $0xbeaaaa99
DATA c_t4<>+8(SB)/4, $0xbeaaaa99
DATA c_t4<>+12(SB)/4, $0xbeaaaa99
DATA c_t4<>+16(SB)/4, $0xbeaaaa99
DATA c_t4<>+20(SB)/4, $0xbeaaaa99
DATA c_t4<>+24(SB)/4, $0xbeaaaa99
DATA c_t4<>+28(SB)/4, $0xbeaaaa99
GLOBL c_t4<>(SB), RODATA|NOPTR, $32
DATA c_gK0<>+0(SB)/4, $0x3fcc422a
DATA c_gK0<>+4(SB)/4, $0x3fcc422a
DATA c_gK0<>+8(SB)/4, $0x3fcc422a
DATA c_gK0<>+12(SB)/4, $0x3fcc422a
DATA c_gK0<>+16(SB)/4, $0x3fcc422a
DATA c_gK0<>+20(SB)/4, $0x3fcc422a
DATA c_gK0<>+24(SB)/4, $0x3fcc422a
DATA c_gK0<>+28(SB)/4, $0x3fcc422a
GLOBL c_gK0<>(SB), RODATA|NOPTR, $32
DATA c_gK1<>+0(SB)/4, $0x3d922279
DATA c_gK1<>+4(SB)/4, $0x3d922279
DATA c_gK1<>+8(SB)/4, $0x3d922279
DATA c_gK1<>+12(SB)/4, $0x3d922279
DATA c_gK1<>+16(SB)/4, $0x3d922279
DATA c_gK1<>+20(SB)/4, $0x3d922279
DATA c_gK1<>+24(SB)/4, $0x3d922279
DATA c_gK1<>+28(SB)/4, $0x3d922279
GLOBL c_gK1<>(SB), RODATA|NOPTR, $32
DATA c_gK3<>+0(SB)/4, $0x3e5b33b6
DATA c_gK3<>+4(SB)/4, $0x3e5b33b6
DATA c_gK3<>+8(SB)/4, $0x3e5b33b6
DATA c_gK3<>+12(SB)/4, $0x3e5b33b6
DATA c_gK3<>+16(SB)/4, $0x3e5b33b6
DATA c_gK3<>+20(SB)/4, $0x3e5b33b6
DATA c_gK3<>+24(SB)/4, $0x3e5b33b6
DATA c_gK3<>+28(SB)/4, $0x3e5b33b6
GLOBL c_gK3<>(SB), RODATA|NOPTR, $32
DATA c_clampLo<>+0(SB)/4, $0xc61c4000
DATA c_clampLo<>+4(SB)/4, $0xc61c4000
DATA c_clampLo<>+8(SB)/4, $0xc61c4000
DATA c_clampLo<>+12(SB)/4, $0xc61c4000
DATA c_clampLo<>+16(SB)/4, $0xc61c4000
DATA c_clampLo<>+20(SB)/4, $0xc61c4000
DATA c_clampLo<>+24(SB)/4, $0xc61c4000
DATA c_clampLo<>+28(SB)/4, $0xc61c4000
GLOBL c_clampLo<>(SB), RODATA|NOPTR, $32
DATA c_clampHi<>+0(SB)/4, $0x461c4000
DATA c_clampHi<>+4(SB)/4, $0x461c4000
DATA c_clampHi<>+8(SB)/4, $0x461c4000
DATA c_clampHi<>+12(SB)/4, $0x461c4000
DATA c_clampHi<>+16(SB)/4, $0x461c4000
DATA c_clampHi<>+20(SB)/4, $0x461c4000
DATA c_clampHi<>+24(SB)/4, $0x461c4000
DATA c_clampHi<>+28(SB)/4, $0x461c4000
GLOBL c_clampHi<>(SB), RODATA|NOPTR, $32
DATA c_magicBits<>+0(SB)/4, $0x4b400000
DATA c_magicBits<>+4(SB)/4, $0x4b400000
DATA c_magicBits<>+8(SB)/4, $0x4b400000
DATA c_magicBits<>+12(SB)/4, $0x4b400000
DATA c_magicBits<>+16(SB)/4, $0x4b400000
DATA c_magicBits<>+20(SB)/4, $0x4b400000
DATA c_magicBits<>+24(SB)/4, $0x4b400000
DATA c_magicBits<>+28(SB)/4, $0x4b400000
GLOBL c_magicBits<>(SB), RODATA|NOPTR, $32
DATA c_bias127<>+0(SB)/4, $0x0000007f
DATA c_bias127<>+4(SB)/4, $0x0000007f
DATA c_bias127<>+8(SB)/4, $0x0000007f
DATA c_bias127<>+12(SB)/4, $0x0000007f
DATA c_bias127<>+16(SB)/4, $0x0000007f
DATA c_bias127<>+20(SB)/4, $0x0000007f
DATA c_bias127<>+24(SB)/4, $0x0000007f
DATA c_bias127<>+28(SB)/4, $0x0000007f
GLOBL c_bias127<>(SB), RODATA|NOPTR, $32
DATA c_signMask<>+0(SB)/4, $0x80000000
DATA c_signMask<>+4(SB)/4, $0x80000000
DATA c_signMask<>+8(SB)/4, $0x80000000
DATA c_signMask<>+12(SB)/4, $0x80000000
DATA c_signMask<>+16(SB)/4, $0x80000000
DATA c_signMask<>+20(SB)/4, $0x80000000
DATA c_signMask<>+24(SB)/4, $0x80000000
DATA c_signMask<>+28(SB)/4, $0x80000000
GLOBL c_signMask<>(SB), RODATA|NOPTR, $32
DATA c_absMask<>+0(SB)/4, $0x7fffffff
DATA c_absMask<>+4(SB)/4, $0x7fffffff
DATA c_absMask<>+8(SB)/4, $0x7fffffff
DATA c_absMask<>+12(SB)/4, $0x7fffffff
DATA c_absMask<>+16(SB)/4, $0x7fffffff
DATA c_absMask<>+20(SB)/4, $0x7fffffff
DATA c_absMask<>+24(SB)/4, $0x7fffffff
DATA c_absMask<>+28(SB)/4, $0x7fffffff
GLOBL c_absMask<>(SB), RODATA|NOPTR, $32

// EXP: Y0 = e^Y0 (expf). Clobbers Y1-Y4.
#define EXP \
	VMOVUPS c_expLo<>(SB), Y1 \
	VMAXPS Y0, Y1, Y0 \
	VMOVUPS c_expHi<>(SB), Y1 \
	VMINPS Y0, Y1, Y0 \
	VMULPS c_log2e<>(SB), Y0, Y1 \
	VADDPS c_magic<>(SB), Y1, Y1 \
	VSUBPS c_magic<>(SB), Y1, Y2 \
	VPSUBD c_magicBits<>(SB), Y1, Y1 \
	VMULPS c_ln2Hi<>(SB), Y2, Y3 \
	VSUBPS Y3, Y0, Y0 \
	VMULPS c_ln2Lo<>(SB), Y2, Y3 \
	VSUBPS Y3, Y0, Y0 \
	VMULPS Y0, Y0, Y2 \
	VMULPS c_p0<>(SB), Y0, Y3 \
	VADDPS c_p1<>(SB), Y3, Y3 \
	VMULPS Y0, Y3, Y3 \
	VADDPS c_p2<>(SB), Y3, Y3 \
	VMULPS Y0, Y3, Y3 \
	VADDPS c_p3<>(SB), Y3, Y3 \
	VMULPS Y0, Y3, Y3 \
	VADDPS c_p4<>(SB), Y3, Y3 \
	VMULPS Y0, Y3, Y3 \
	VADDPS c_p5<>(SB), Y3, Y3 \
	VMULPS Y2, Y3, Y3 \
	VADDPS Y0, Y3, Y3 \
	VADDPS c_one<>(SB), Y3, Y3 \
	VPSRAD $1, Y1, Y2 \
	VPSUBD Y2, Y1, Y1 \
	VPADDD c_bias127<>(SB), Y2, Y2 \
	VPSLLD $23, Y2, Y2 \
	VPADDD c_bias127<>(SB), Y1, Y1 \
	VPSLLD $23, Y1, Y1 \
	VMULPS Y2, Y3, Y3 \
	VMULPS Y1, Y3, Y0

// SIGM: sigm(Y0): Y3 = σ(v), Y0 = e = e^-|v|, Y2 = q = 1/(1+e); Y6 = v.
// Clobbers Y1-Y6.
#define SIGM \
	VMOVUPS Y0, Y6 \
	VORPS c_signMask<>(SB), Y0, Y0 \
	EXP \
	VADDPS c_one<>(SB), Y0, Y1 \
	VMOVUPS c_one<>(SB), Y2 \
	VDIVPS Y1, Y2, Y2 \
	VMULPS Y2, Y0, Y3 \
	VXORPS Y5, Y5, Y5 \
	VCMPPS $0x1d, Y5, Y6, Y4 \
	VBLENDVPS Y4, Y2, Y3, Y3

// CLAMP: Y0 = min(max(Y0, -1e4), 1e4), NaN kept. Clobbers Y1.
#define CLAMP \
	VMOVUPS c_clampLo<>(SB), Y1 \
	VMAXPS Y0, Y1, Y0 \
	VMOVUPS c_clampHi<>(SB), Y1 \
	VMINPS Y0, Y1, Y0

// GELUARG: Y0 = x·(K1·x² + K0) for x in Y7. Clobbers Y1.
#define GELUARG \
	VMULPS Y7, Y7, Y1 \
	VMULPS c_gK1<>(SB), Y1, Y1 \
	VADDPS c_gK0<>(SB), Y1, Y1 \
	VMULPS Y1, Y7, Y0

// EQ: Y0 = (e·q)·q from SIGM's outputs.
#define EQ \
	VMULPS Y2, Y0, Y0 \
	VMULPS Y2, Y0, Y0

// func expAVX2(dst, src []float32)
TEXT ·expAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $3, CX
	JZ exp_done
exp_loop:
	VMOVUPS (SI), Y0
	EXP
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ exp_loop
exp_done:
	VZEROUPPER
	RET

// func tanhAVX2(dst, src []float32)
TEXT ·tanhAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $3, CX
	JZ tanh_done
tanh_loop:
	VMOVUPS (SI), Y0
	VANDPS c_absMask<>(SB), Y0, Y6
	VANDPS c_signMask<>(SB), Y0, Y7
	VMULPS Y6, Y6, Y8
	VMULPS c_t0<>(SB), Y8, Y9
	VADDPS c_t1<>(SB), Y9, Y9
	VMULPS Y8, Y9, Y9
	VADDPS c_t2<>(SB), Y9, Y9
	VMULPS Y8, Y9, Y9
	VADDPS c_t3<>(SB), Y9, Y9
	VMULPS Y8, Y9, Y9
	VADDPS c_t4<>(SB), Y9, Y9
	VMULPS Y8, Y9, Y9
	VMULPS Y6, Y9, Y9
	VADDPS Y6, Y9, Y9
	VADDPS Y6, Y6, Y0
	EXP
	VADDPS c_one<>(SB), Y0, Y0
	VMOVUPS c_two<>(SB), Y1
	VDIVPS Y0, Y1, Y1
	VMOVUPS c_one<>(SB), Y2
	VSUBPS Y1, Y2, Y2
	VCMPPS $0x11, c_tSmall<>(SB), Y6, Y5
	VBLENDVPS Y5, Y9, Y2, Y0
	VORPS Y7, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ tanh_loop
tanh_done:
	VZEROUPPER
	RET

// func sigmoidAVX2(dst, src []float32)
TEXT ·sigmoidAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $3, CX
	JZ sigmoid_done
sigmoid_loop:
	VMOVUPS (SI), Y0
	SIGM
	VMOVUPS Y3, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ sigmoid_loop
sigmoid_done:
	VZEROUPPER
	RET

// func geluAVX2(dst, src []float32)
TEXT ·geluAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $3, CX
	JZ gelu_done
gelu_loop:
	VMOVUPS (SI), Y0
	VMOVUPS Y0, Y7
	GELUARG
	SIGM
	VMULPS Y3, Y7, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ gelu_loop
gelu_done:
	VZEROUPPER
	RET

// func geluGradAVX2(dst, src []float32)
TEXT ·geluGradAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $3, CX
	JZ geluGrad_done
geluGrad_loop:
	VMOVUPS (SI), Y0
	CLAMP
	VMOVUPS Y0, Y7
	GELUARG
	SIGM
	VMULPS Y7, Y7, Y1
	VMULPS c_gK3<>(SB), Y1, Y1
	VADDPS c_gK0<>(SB), Y1, Y1
	VMULPS Y1, Y7, Y1
	EQ
	VMULPS Y0, Y1, Y1
	VADDPS Y3, Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ geluGrad_loop
geluGrad_done:
	VZEROUPPER
	RET

// func siluAVX2(dst, src []float32)
TEXT ·siluAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $3, CX
	JZ silu_done
silu_loop:
	VMOVUPS (SI), Y0
	VMOVUPS Y0, Y7
	SIGM
	VMULPS Y3, Y7, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ silu_loop
silu_done:
	VZEROUPPER
	RET

// func siluGradAVX2(dst, src []float32)
TEXT ·siluGradAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $3, CX
	JZ siluGrad_done
siluGrad_loop:
	VMOVUPS (SI), Y0
	CLAMP
	VMOVUPS Y0, Y7
	SIGM
	EQ
	VMULPS Y0, Y7, Y0
	VADDPS Y3, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ siluGrad_loop
siluGrad_done:
	VZEROUPPER
	RET

// func addVVAVX2(dst, a, b []float32)
TEXT ·addVVAVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	SHRQ $3, CX
	JZ addVV_done
addVV_loop:
	VMOVUPS (SI), Y0
	VADDPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ addVV_loop
addVV_done:
	VZEROUPPER
	RET

// func subVVAVX2(dst, a, b []float32)
TEXT ·subVVAVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	SHRQ $3, CX
	JZ subVV_done
subVV_loop:
	VMOVUPS (SI), Y0
	VSUBPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ subVV_loop
subVV_done:
	VZEROUPPER
	RET

// func mulVVAVX2(dst, a, b []float32)
TEXT ·mulVVAVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	SHRQ $3, CX
	JZ mulVV_done
mulVV_loop:
	VMOVUPS (SI), Y0
	VMULPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ mulVV_loop
mulVV_done:
	VZEROUPPER
	RET

// func divVVAVX2(dst, a, b []float32)
TEXT ·divVVAVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	SHRQ $3, CX
	JZ divVV_done
divVV_loop:
	VMOVUPS (SI), Y0
	VDIVPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ divVV_loop
divVV_done:
	VZEROUPPER
	RET

// func addVSAVX2(dst, a []float32, s float32)
TEXT ·addVSAVX2(SB), NOSPLIT, $0-52
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	VBROADCASTSS s+48(FP), Y1
	SHRQ $3, CX
	JZ addVS_done
addVS_loop:
	VMOVUPS (SI), Y0
	VADDPS Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ addVS_loop
addVS_done:
	VZEROUPPER
	RET

// func subVSAVX2(dst, a []float32, s float32)
TEXT ·subVSAVX2(SB), NOSPLIT, $0-52
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	VBROADCASTSS s+48(FP), Y1
	SHRQ $3, CX
	JZ subVS_done
subVS_loop:
	VMOVUPS (SI), Y0
	VSUBPS Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ subVS_loop
subVS_done:
	VZEROUPPER
	RET

// func mulVSAVX2(dst, a []float32, s float32)
TEXT ·mulVSAVX2(SB), NOSPLIT, $0-52
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	VBROADCASTSS s+48(FP), Y1
	SHRQ $3, CX
	JZ mulVS_done
mulVS_loop:
	VMOVUPS (SI), Y0
	VMULPS Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ mulVS_loop
mulVS_done:
	VZEROUPPER
	RET

// func divVSAVX2(dst, a []float32, s float32)
TEXT ·divVSAVX2(SB), NOSPLIT, $0-52
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	VBROADCASTSS s+48(FP), Y1
	SHRQ $3, CX
	JZ divVS_done
divVS_loop:
	VMOVUPS (SI), Y0
	VDIVPS Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ divVS_loop
divVS_done:
	VZEROUPPER
	RET

// func subSVAVX2(dst []float32, s float32, b []float32)
TEXT ·subSVAVX2(SB), NOSPLIT, $0-56
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	VBROADCASTSS s+24(FP), Y1
	MOVQ b_base+32(FP), SI
	SHRQ $3, CX
	JZ subSV_done
subSV_loop:
	VMOVUPS (SI), Y0
	VSUBPS Y0, Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ subSV_loop
subSV_done:
	VZEROUPPER
	RET

// func divSVAVX2(dst []float32, s float32, b []float32)
TEXT ·divSVAVX2(SB), NOSPLIT, $0-56
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	VBROADCASTSS s+24(FP), Y1
	MOVQ b_base+32(FP), SI
	SHRQ $3, CX
	JZ divSV_done
divSV_loop:
	VMOVUPS (SI), Y0
	VDIVPS Y0, Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ divSV_loop
divSV_done:
	VZEROUPPER
	RET

// func sum8AVX2(x []float32, lanes *[8]float64)
TEXT ·sum8AVX2(SB), NOSPLIT, $0-32
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	MOVQ lanes+24(FP), DI
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	SHRQ $3, CX
	JZ sum8_done
sum8_loop:
	VCVTPS2PD (SI), Y2
	VCVTPS2PD 16(SI), Y3
	VADDPD Y2, Y0, Y0
	VADDPD Y3, Y1, Y1
	ADDQ $32, SI
	DECQ CX
	JNZ sum8_loop
sum8_done:
	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VZEROUPPER
	RET

// func accF64AVX2(acc []float64, x []float32)
TEXT ·accF64AVX2(SB), NOSPLIT, $0-48
	MOVQ acc_base+0(FP), DI
	MOVQ acc_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	SHRQ $3, CX
	JZ acc_done
acc_loop:
	VCVTPS2PD (SI), Y2
	VCVTPS2PD 16(SI), Y3
	VADDPD (DI), Y2, Y2
	VADDPD 32(DI), Y3, Y3
	VMOVUPD Y2, (DI)
	VMOVUPD Y3, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ acc_loop
acc_done:
	VZEROUPPER
	RET

// func expShiftAVX2(dst, src []float32, nm float32): dst = e^(src + nm)
// with the TwoSum error of src + nm carried as e·(1+err) (expShiftf).
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-52
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	VBROADCASTSS nm+48(FP), Y9
	SHRQ $3, CX
	JZ expShift_done
expShift_loop:
	VMOVUPS (SI), Y8
	VADDPS Y9, Y8, Y0
	VSUBPS Y8, Y0, Y10
	VSUBPS Y10, Y0, Y11
	VSUBPS Y11, Y8, Y11
	VSUBPS Y10, Y9, Y12
	VADDPS Y12, Y11, Y11
	VCMPPS $0, Y11, Y11, Y12
	VANDPS Y12, Y11, Y11
	EXP
	VMULPS Y11, Y0, Y1
	VADDPS Y0, Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ expShift_loop
expShift_done:
	VZEROUPPER
	RET

// func reluAVX2(dst, src []float32)
// dst = max(0, x) + 0: vmaxps returns its second source when either is
// NaN, so NaN propagates; adding +0 turns the -0 it keeps for x = -0 into
// +0, as Go's max does.
TEXT ·reluAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	VXORPS Y15, Y15, Y15
	SHRQ $3, CX
	JZ relu_done
relu_loop:
	VMOVUPS (SI), Y0
	VMAXPS Y0, Y15, Y1
	VADDPS Y15, Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ relu_loop
relu_done:
	VZEROUPPER
	RET

// func reluGradMulAVX2(dst, g, y []float32)
// dst = y > 0 ? g : 0 (an ordered compare: NaN gives 0).
TEXT ·reluGradMulAVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ g_base+24(FP), SI
	MOVQ y_base+48(FP), DX
	VXORPS Y15, Y15, Y15
	SHRQ $3, CX
	JZ reluGrad_done
reluGrad_loop:
	VMOVUPS (DX), Y0
	VCMPPS $0x1e, Y15, Y0, Y1
	VANDPS (SI), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ reluGrad_loop
reluGrad_done:
	VZEROUPPER
	RET

// Adam step, 8 lanes at a time: see Adam in adam.go for the formulas and
// why the order of the operations matters. Y8..Y15, Y5..Y7 hold B1, B2,
// G1, G2, A, B, C2, Eps, EpsRoot, WD and Post. A nil p means no weight
// decay.

// func adamAVX2(u, m2, v2, g, m, v, p []float32, c *AdamCoeffs)
TEXT ·adamAVX2(SB), NOSPLIT, $0-176
	MOVQ c+168(FP), AX
	VBROADCASTSS 0(AX), Y8
	VBROADCASTSS 4(AX), Y9
	VBROADCASTSS 8(AX), Y10
	VBROADCASTSS 12(AX), Y11
	VBROADCASTSS 16(AX), Y12
	VBROADCASTSS 20(AX), Y13
	VBROADCASTSS 24(AX), Y14
	VBROADCASTSS 28(AX), Y15
	VBROADCASTSS 32(AX), Y7
	VBROADCASTSS 36(AX), Y6
	VBROADCASTSS 40(AX), Y5
	MOVQ u_base+0(FP), DI
	MOVQ u_len+8(FP), CX
	MOVQ m2_base+24(FP), R8
	MOVQ v2_base+48(FP), R9
	MOVQ g_base+72(FP), SI
	MOVQ m_base+96(FP), R10
	MOVQ v_base+120(FP), R11
	MOVQ p_base+144(FP), R12
	SHRQ $3, CX
	JZ adam_done
adam_loop:
	VMOVUPS (SI), Y0
	VMULPS (R10), Y8, Y3
	VMULPS Y0, Y10, Y4
	VADDPS Y4, Y3, Y3
	VMOVUPS Y3, (R8)
	VMULPS Y0, Y0, Y4
	VMULPS Y4, Y11, Y4
	VMULPS (R11), Y9, Y1
	VADDPS Y4, Y1, Y1
	VMOVUPS Y1, (R9)
	VMULPS Y1, Y14, Y2
	VADDPS Y7, Y2, Y2
	VSQRTPS Y2, Y2
	VADDPS Y15, Y2, Y2
	VMULPS Y3, Y12, Y3
	VMULPS Y0, Y13, Y4
	VADDPS Y4, Y3, Y3
	VDIVPS Y2, Y3, Y3
	TESTQ R12, R12
	JZ adam_nowd
	VMULPS (R12), Y6, Y4
	VADDPS Y4, Y3, Y3
	ADDQ $32, R12
adam_nowd:
	VMULPS Y3, Y5, Y3
	VMOVUPS Y3, (DI)
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, SI
	ADDQ $32, R10
	ADDQ $32, R11
	DECQ CX
	JNZ adam_loop
adam_done:
	VZEROUPPER
	RET
