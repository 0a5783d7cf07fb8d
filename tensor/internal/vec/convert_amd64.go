//go:build !noasm

package vec

import (
	"golang.org/x/sys/cpu"

	"github.com/gonox/gonox/internal/kernels"
)

// The conversion kernels are chosen here, in one place, from the kernel set
// in force (GONOX_KERNELS, see package kernels) and the extra CPU features
// each kernel needs.
var (
	avx512 = kernels.Has(kernels.AVX512)
	avx2   = kernels.Has(kernels.AVX2)

	convBF16  = pick(avx512 && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512BF16, avx2)
	convWiden = pick(avx512 && cpu.X86.HasAVX512BW, avx2)
	convF16   = pick(avx512, avx2 && cpu.X86.HasF16C)
)

func pick(avx512, avx2 bool) int {
	switch {
	case avx512:
		return convAVX512
	case avx2:
		return convAVX2
	}
	return convGo
}

// The kernels convert n elements, n a multiple of 16 (AVX512) or 8.

//go:noescape
func bf16FromF32AVX512(dst *uint16, src *float32, n int)

//go:noescape
func bf16PairsFromF32AVX512(dst *uint32, lo, hi *float32, n int)

//go:noescape
func bf16FromF32AVX2(dst *uint16, src *float32, n int)

//go:noescape
func f32FromBF16AVX512(dst *float32, src *uint16, n int)

//go:noescape
func f32FromBF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func f16FromF32AVX512(dst *uint16, src *float32, n int)

//go:noescape
func f16FromF32F16C(dst *uint16, src *float32, n int)

//go:noescape
func f32FromF16AVX512(dst *float32, src *uint16, n int)

//go:noescape
func f32FromF16F16C(dst *float32, src *uint16, n int)
