//go:build !noasm

package vec

import "github.com/gonox/gonox/internal/kernels"

// useAVX512 selects the AVX-512 forms of the GELU kernels
// (gelu_avx512_amd64.s) and of AdamStep (adam_amd64.s), which return the
// AVX2 kernels' bits: package
// kernels decides, from the CPU and $GONOX_KERNELS. Tests switch it off.
var useAVX512 = kernels.Has(kernels.AVX512)

//go:noescape
func geluAVX512(dst, src []float32)

//go:noescape
func geluGradAVX512(dst, src []float32)

//go:noescape
func geluPartsAVX512(h, d, src []float32)
