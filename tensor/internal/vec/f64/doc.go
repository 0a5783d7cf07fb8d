// Package f64 holds the float64 slice kernels behind package tensor's
// float64 ops: arithmetic with a vector or scalar operand, the
// transcendental functions (exp, log, tanh, sigmoid, GELU in both forms,
// SiLU, softplus, log-sigmoid and their derivatives), compensated sums,
// max and min, and the optimizer steps. Its functions have the names and
// contracts of package vec's float32 kernels (f64.Exp is vec.Exp for
// float64); conversions between float64 and the other element types are
// vec's (vec.F64FromF32, vec.IntFromFloat, ...).
//
// # Determinism
//
// Every kernel gives bit-identical results on every platform and
// GOAMD64 level (NaN payloads aside), as vec's do: the code is pure Go, every product is
// rounded explicitly (float64(x*y) + z, which the Go specification says
// the compiler must not fuse into an FMA), and the transcendental
// functions are this package's own rather than package math's (whose
// amd64 assembly uses FMA when the CPU has it, and whose Go code may be
// fused on other platforms). The few FMAs used on purpose (to split a
// product exactly, for GELU's argument and the normal CDF) are math.FMA,
// which is correctly rounded everywhere. Sums use 4 lanes and blocks of
// SumBlock elements in a fixed order, so that a sum does not depend on how
// a caller splits a long slice across goroutines.
//
// # Accuracy
//
// The bounds below are the largest errors measured against exact values
// (testdata/ref.txt.gz, computed with mpmath by testdata/gen_ref.py:
// random points over each function's range and its thresholds), in ulps
// of the exact result; TestAccuracy checks them with a little headroom,
// and TestDense checks exp, log, log1p and tanh on 100,000 more random
// points each against big.Float (GONOX_TEST_LONG=1):
//
//	Exp            0.87 ulp
//	Log            0.74 ulp
//	Tanh           1.24 ulp
//	Sigmoid        1.69 ulp
//	Silu           1.60 ulp
//	Softplus       1.45 ulp (LogSigmoid 1.20)
//	Gelu (tanh)    1.59 ulp (its argument is computed in double-double:
//	               plainly rounded it cost 450 ulp in the tail)
//	GeluExact      2.24 ulp
//	ExpShift       0.70 ulp
//	Sqrt           correctly rounded; Rsqrt below 1 ulp
//
// Derivative kernels (GeluGrad 0.84, SiluGrad 1.16, GeluExactGrad 0.68)
// cross zero, where an ulp bound means nothing; their figures are in ulps
// of max(1, |f'(x)|), i.e. absolute errors near the zeros. Where a result
// is subnormal (below 2^-1022) the error is absolute, at most 32·2^-1074
// (Silu, for x < -708, measured 23).
//
// Sums (Sum, SumPartial, AccSum, SumSqDiff, ExpShift's) are compensated
// (Neumaier's variant of Kahan's summation): the result is the correctly
// rounded sum unless the terms cancel by a factor near 2^50, where plain
// float64 summation would have no correct digit left.
//
// # Speed
//
// The kernels are pure Go. Against package math in the same run (go test
// -run '^$' -bench Kernels ./tensor/internal/vec/f64/, AMD EPYC Zen 5, a
// busy shared machine), Exp and Log take about 1.2 times as long as
// math.Exp (which has amd64 assembly), Tanh and Sigmoid about 2.7 times,
// GeluExact about 6.5 times; the arithmetic kernels run at about an
// element per cycle, and Sum at a quarter of that.
package f64
