package vec

import "github.com/gonox/gonox/internal/half"

// Conversions between float32 and the 16-bit storage types bfloat16 and
// float16, both held as raw bits in []uint16. Narrowing rounds to nearest,
// ties to even; NaN stays NaN (sign and top payload bits kept, made
// quiet), ±Inf stays ±Inf, float16 overflow becomes ±Inf, subnormals of
// both types are kept. The results are those of package internal/half,
// bit for bit, with one documented exception: widening a float16
// signalling NaN with F16C or AVX-512 sets its quiet bit, as every IEEE
// conversion does (internal/half keeps the payload exactly).
//
// Kernels: AVX-512 BF16 (VCVTNEPS2BF16, plus an integer fix-up for float32
// subnormal inputs, which that instruction flushes to zero) or AVX2 integer
// rounding for bfloat16; AVX-512F or F16C (VCVTPS2PH, VCVTPH2PS) for
// float16. Without assembly (noasm, other architectures) the loops of
// internal/half run.

// BF16FromF32 rounds each element of src to bfloat16 into dst.
// It panics if the lengths differ.
func BF16FromF32(dst []uint16, src []float32) {
	if len(dst) != len(src) {
		panic("vec.BF16FromF32: length mismatch")
	}
	i := 0
	switch {
	case convBF16 == convAVX512 && len(src) >= 16:
		i = len(src) &^ 15
		bf16FromF32AVX512(&dst[0], &src[0], i)
	case convBF16 == convAVX2 && len(src) >= 8:
		i = len(src) &^ 7
		bf16FromF32AVX2(&dst[0], &src[0], i)
	}
	for ; i < len(src); i++ {
		dst[i] = uint16(half.FromFloat32BF(src[i]))
	}
}

// BF16PairsFromF32 rounds lo and hi to bfloat16 (as BF16FromF32) and
// stores each pair in one 32-bit element, lo in the low half:
// dst[j] = bf16(lo[j]) | bf16(hi[j])<<16 — the operand layout of the
// AVX-512 BF16 dot-product instruction (two consecutive k values a lane),
// made from two float32 rows in one pass. It panics if the lengths
// differ.
func BF16PairsFromF32(dst []uint32, lo, hi []float32) {
	if len(dst) != len(lo) || len(dst) != len(hi) {
		panic("vec.BF16PairsFromF32: length mismatch")
	}
	i := 0
	if convBF16 == convAVX512 && len(dst) >= 16 {
		i = len(dst) &^ 15
		bf16PairsFromF32AVX512(&dst[0], &lo[0], &hi[0], i)
	}
	for ; i < len(dst); i++ {
		dst[i] = uint32(half.FromFloat32BF(lo[i])) | uint32(half.FromFloat32BF(hi[i]))<<16
	}
}

// F32FromBF16 widens each bfloat16 of src into dst (exact).
// It panics if the lengths differ.
func F32FromBF16(dst []float32, src []uint16) {
	if len(dst) != len(src) {
		panic("vec.F32FromBF16: length mismatch")
	}
	i := 0
	switch {
	case convWiden == convAVX512 && len(src) >= 16:
		i = len(src) &^ 15
		f32FromBF16AVX512(&dst[0], &src[0], i)
	case convWiden == convAVX2 && len(src) >= 8:
		i = len(src) &^ 7
		f32FromBF16AVX2(&dst[0], &src[0], i)
	}
	for ; i < len(src); i++ {
		dst[i] = half.BFloat16(src[i]).Float32()
	}
}

// F16FromF32 rounds each element of src to float16 into dst.
// It panics if the lengths differ.
func F16FromF32(dst []uint16, src []float32) {
	if len(dst) != len(src) {
		panic("vec.F16FromF32: length mismatch")
	}
	i := 0
	switch {
	case convF16 == convAVX512 && len(src) >= 16:
		i = len(src) &^ 15
		f16FromF32AVX512(&dst[0], &src[0], i)
	case convF16 == convAVX2 && len(src) >= 8:
		i = len(src) &^ 7
		f16FromF32F16C(&dst[0], &src[0], i)
	}
	for ; i < len(src); i++ {
		dst[i] = uint16(half.FromFloat32(src[i]))
	}
}

// F32FromF16 widens each float16 of src into dst (exact, but see the
// package note on signalling NaNs). It panics if the lengths differ.
func F32FromF16(dst []float32, src []uint16) {
	if len(dst) != len(src) {
		panic("vec.F32FromF16: length mismatch")
	}
	i := 0
	switch {
	case convF16 == convAVX512 && len(src) >= 16:
		i = len(src) &^ 15
		f32FromF16AVX512(&dst[0], &src[0], i)
	case convF16 == convAVX2 && len(src) >= 8:
		i = len(src) &^ 7
		f32FromF16F16C(&dst[0], &src[0], i)
	}
	for ; i < len(src); i++ {
		dst[i] = half.Float16(src[i]).Float32()
	}
}

// Conversion kernel levels.
const (
	convGo     = 0
	convAVX2   = 1 // AVX2 integer code (bfloat16) or F16C (float16)
	convAVX512 = 2 // AVX-512 BF16 (bfloat16 narrowing), AVX-512BW (widening), AVX-512F (float16)
)

// ConversionKernels names the conversion kernels in use, for benchmark
// reports: bfloat16 narrowing, bfloat16 widening, float16.
func ConversionKernels() string {
	n := [...]string{"go", "avx2", "avx512"}
	return "bf16:" + n[convBF16] + " bf16-widen:" + n[convWiden] + " f16:" + n[convF16]
}
