//go:build !noasm

package vec

import "github.com/gonox/gonox/internal/kernels"

// useAVX2 selects the AVX2 kernels (also used by the avx512 set: only GELU
// and AdamStep have wider ones, see useAVX512): package kernels decides, from the
// CPU and $GONOX_KERNELS. Tests switch it off to compare the two paths; nothing else writes it.
var useAVX2 = kernels.Has(kernels.AVX2)

//go:noescape
func expAVX2(dst, src []float32)

//go:noescape
func tanhAVX2(dst, src []float32)

//go:noescape
func sigmoidAVX2(dst, src []float32)

//go:noescape
func geluAVX2(dst, src []float32)

//go:noescape
func geluGradAVX2(dst, src []float32)

//go:noescape
func siluAVX2(dst, src []float32)

//go:noescape
func siluGradAVX2(dst, src []float32)

//go:noescape
func reluAVX2(dst, src []float32)

//go:noescape
func reluGradMulAVX2(dst, g, y []float32)

//go:noescape
func addVVAVX2(dst, a, b []float32)

//go:noescape
func subVVAVX2(dst, a, b []float32)

//go:noescape
func mulVVAVX2(dst, a, b []float32)

//go:noescape
func divVVAVX2(dst, a, b []float32)

//go:noescape
func addVSAVX2(dst, a []float32, s float32)

//go:noescape
func subVSAVX2(dst, a []float32, s float32)

//go:noescape
func mulVSAVX2(dst, a []float32, s float32)

//go:noescape
func divVSAVX2(dst, a []float32, s float32)

//go:noescape
func subSVAVX2(dst []float32, s float32, b []float32)

//go:noescape
func divSVAVX2(dst []float32, s float32, b []float32)

//go:noescape
func sum8AVX2(x []float32, lanes *[8]float64)

//go:noescape
func accF64AVX2(acc []float64, x []float32)

//go:noescape
func expShiftAVX2(dst, src []float32, nm float32)

//go:noescape
func adamAVX2(u, m2, v2, g, m, v, p []float32, c *AdamCoeffs)
