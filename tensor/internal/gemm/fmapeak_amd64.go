//go:build amd64 && !noasm

package gemm

// fmaLoop512 runs n iterations of 24 independent AVX-512 float32 FMAs on
// registers only (768 FLOP an iteration): the core's float32 FMA peak,
// which bounds every kernel (BenchmarkFMAPeak). The caller checks that the
// CPU has AVX-512.
func fmaLoop512(n int)

// fmaLoop256 is fmaLoop512 with 12 FMAs on 8-lane ymm registers (192 FLOP
// an iteration): the AVX2+FMA peak. The caller checks that the CPU has
// AVX2 and FMA.
func fmaLoop256(n int)
