// Package vec holds the float32 slice kernels behind package tensor's
// elementwise ops, reductions, softmax and losses: transcendental functions
// (exp, log, tanh, sigmoid, GELU, SiLU, softplus), arithmetic with a vector
// or scalar operand, and float64-accumulated sums.
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
//   - Rounding to an integer uses the 1.5·2²³ trick, exact for the ranges
//     involved, instead of conversions whose behaviour differs by platform.
//   - Sums accumulate in float64 in 8 interleaved lanes combined in a fixed
//     order, and long slices are cut into blocks of a fixed size, so a
//     sum does not depend on the number of goroutines.
//
// # Accuracy
//
// The bounds below are measured against float64 evaluation of the
// mathematical function at the float32 input (see the tests, which sweep
// dense grids of float32 values and the special values ±0, subnormals,
// ±Inf, NaN and the overflow and underflow thresholds). They are in units
// of the float32 ulp of the exact result.
//
//	Exp          ≤ 1 ulp (0 below e^-103.97, +Inf above 88.7228)
//	Log          ≤ 1 ulp
//	Tanh         ≤ 2 ulp
//	Sigmoid      ≤ 2 ulp
//	Silu         ≤ 3 ulp
//	Softplus     ≤ 2 ulp
//	Gelu (tanh)  ≤ 3 ulp for x ≥ -3; below, where the result is under
//	             0.004·|x|, the float32 argument 2u = x·(a+b·x²) carries
//	             a relative error of a few 2⁻²⁴, and the result a relative
//	             error of about |2u|·2⁻²² (e.g. 30 ulp at x = -6)
//	GeluExact    ≤ 3 ulp (computed in float64)
//	Sqrt         correctly rounded; Rsqrt ≤ 1 ulp
//
// Derivative kernels (GeluGrad, SiluGrad, ...) cross zero, where an ulp
// bound means nothing; their absolute error is below 2⁻²² times the
// largest magnitude of the derivative.
package vec
