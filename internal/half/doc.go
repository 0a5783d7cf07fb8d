// Package half converts between float32 and the 16-bit floating-point
// storage formats gonox reads and writes: bfloat16 (1 sign, 8 exponent, 7
// mantissa bits; the upper half of a float32) and IEEE 754 binary16
// ("float16": 1 sign, 5 exponent, 10 mantissa bits).
//
// Narrowing rounds to nearest, ties to even, like PyTorch, JAX and the
// AVX-512 BF16 / F16C instructions. NaN stays NaN (its sign and the top
// payload bits are kept, and a quiet bit is set so a payload that would
// round to zero cannot turn a NaN into an infinity); ±Inf stays ±Inf;
// float16 overflows to ±Inf and underflows through its subnormals to ±0.
// Widening is exact.
//
// The functions here are the reference implementation, written with
// integer bit arithmetic only; faster kernels elsewhere are tested against
// them.
package half
