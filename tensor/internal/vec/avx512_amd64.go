//go:build !noasm

package vec

import "github.com/gonox/gonox/internal/kernels"

// useAVX512 selects the AVX-512 forms of the GELU and ExpShift kernels
// and MaxF32 and ReluGradMul (avx512_amd64.s) and of AdamStep (adam_amd64.s), which
// return the AVX2 kernels' (or the pure-Go loops') bits: package
// kernels decides, from the CPU and $GONOX_KERNELS. Tests switch it off.
var useAVX512 = kernels.Has(kernels.AVX512)

//go:noescape
func geluAVX512(dst, src []float32)

//go:noescape
func geluGradAVX512(dst, src []float32)

//go:noescape
func geluPartsAVX512(h, d, src []float32)

//go:noescape
func expShiftAVX512(dst, src []float32, nm float32, lanes *[8]float64)

//go:noescape
func maxAVX512(x []float32) (m float32, nan bool)

//go:noescape
func dotAVX512(a, b []float32, lanes *[8]float64)

//go:noescape
func expShiftRowsAVX512(dst, src []float32, c int, ms []float32, sums []float64, norm bool)

//go:noescape
func reluGradMulAVX512(dst, g, y []float32)
