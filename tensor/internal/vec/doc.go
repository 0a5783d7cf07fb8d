// Package vec holds the float32 slice kernels behind package tensor's
// elementwise ops, reductions, softmax and losses: transcendental functions
// (exp, log, tanh, sigmoid, GELU, SiLU, softplus), arithmetic with a vector
// or scalar operand, and float64-accumulated sums; and the conversions
// between element types: float32 with bfloat16 and float16 (convert.go),
// float32 with float64, and floats with the integer storage types int32,
// int64 and uint8 (convert_int.go). The float64 kernels, with the same
// names, are in package f64 below this one.
//
// # Determinism
//
// Every kernel gives bit-identical results on every platform, with or
// without assembly, whatever GOAMD64 level and however a slice is split
// across goroutines:
//
//   - The pure-Go code rounds every product explicitly (float32(x*y) + z),
//     which the Go specification says prevents the compiler from fusing a
//     multiply and an add into an FMA (it does so on arm64, ppc64, s390x,
//     riscv64, and on amd64 at GOAMD64=v3).
//   - The AVX2 kernels perform exactly the same IEEE-754 operations in the
//     same order (separate VMULPS and VADDPS, VDIVPS for division, no FMA
//     and no approximate reciprocals), so they return the same bits as the
//     pure-Go code (NaN payloads aside). Tests check this on every kernel.
//   - The AVX-512 forms of Gelu and GeluGrad (avx512_amd64.s, used
//     under the avx512 kernel set) do the AVX2 operations on 16 lanes, two
//     vectors an iteration, with the same bits; they run the step's GELUs
//     1.6-2.7x faster than the AVX2 ones on Zen 5 (BenchmarkGelu).
//     ExpShift's AVX-512 form (the softmax's and attention's exponential)
//     takes the last partial vector through a lane mask and sums the
//     exponentials into SumF64's float64 lanes as it stores them, with
//     SumF64's bits (SumExpShift uses it too); MaxF32's is exact (it
//     leaves NaN and zero maxima, whose payload or sign is the first
//     element's, to the loop); DotF64 (float64 dot in SumF64's lanes, the
//     attention backward's g·out) has one as well. On Zen 5 a 128-wide
//     row's ExpShift runs 1.6x the AVX2 kernel, SumExpShift 4.3x, MaxF32
//     ~15-40x the Go loop (BenchmarkSoftmaxRow).
//   - Rounding to an integer uses the 1.5·2²³ trick, exact for the ranges
//     involved, instead of conversions whose behaviour differs by platform.
//   - Sums accumulate in float64 in 8 interleaved lanes combined in a fixed
//     order, and long slices are cut into blocks of a fixed size, so a
//     sum does not depend on the number of goroutines.
//
// # Accuracy
//
// The bounds below are the largest errors measured against float64
// evaluation of the mathematical function at the float32 input, over every
// 257th float32 bit pattern of both signs (16.6 million inputs) plus the
// special values ±0, subnormals, ±Inf, NaN and the overflow and underflow
// thresholds (VEC_STRIDE=257 go test -run Accuracy); TestAccuracy checks
// them, with a little headroom, on a sparser sweep by default. They are
// in units of the float32 ulp of the exact result.
//
//	Exp          0.96 ulp (0 below -103.97, +Inf above 88.7228)
//	Log          0.81 ulp (subnormal inputs included)
//	Tanh         1.25 ulp
//	Sigmoid      2.65 ulp
//	Silu         3.25 ulp for results in the normal range; for x < -80,
//	             where the result is subnormal, absolute error < 2^-143
//	Softplus     2.65 ulp (LogSigmoid the same)
//	Gelu (tanh)  3.26 ulp for x >= -1. Below, the float32 argument
//	             v = x·(a + b·x²) of its sigmoid carries a relative
//	             error of a few 2^-24 that the tail amplifies by |v|:
//	             6.3 ulp on [-2,-1], 20 ulp on [-4,-2], 178 ulp on
//	             [-10,-4] (where |Gelu(x)| < 1e-5), absolute error
//	             < 2^-141 below -10. (The usual float32 evaluation
//	             0.5·x·(1 + tanh u) is far worse there: it cancels.)
//	GeluExact    2.23 ulp (computed in float64)
//	Sqrt         correctly rounded; Rsqrt ≤ 0.5 ulp + float64 rounding
//
// Derivative kernels (GeluGrad 1.65, SiluGrad 1.61, GeluExactGrad 0.60)
// cross zero, where an ulp bound means nothing; their figures are in ulps
// of max(1, |f'(x)|), i.e. absolute errors near the zeros.
package vec
