//go:build !amd64 || noasm

package vec

// Without assembly the conversions run the loops of internal/half.
var convBF16, convWiden, convF16 = convGo, convGo, convGo

func bf16FromF32AVX512(dst *uint16, src *float32, n int) { panic("vec: no assembly") }
func bf16FromF32AVX2(dst *uint16, src *float32, n int)   { panic("vec: no assembly") }
func bf16PairsFromF32AVX512(dst *uint32, lo, hi *float32, n int) {
	panic("vec: no assembly")
}
func f32FromBF16AVX512(dst *float32, src *uint16, n int) { panic("vec: no assembly") }
func f32FromBF16AVX2(dst *float32, src *uint16, n int)   { panic("vec: no assembly") }
func f16FromF32AVX512(dst *uint16, src *float32, n int)  { panic("vec: no assembly") }
func f16FromF32F16C(dst *uint16, src *float32, n int)    { panic("vec: no assembly") }
func f32FromF16AVX512(dst *float32, src *uint16, n int)  { panic("vec: no assembly") }
func f32FromF16F16C(dst *float32, src *uint16, n int)    { panic("vec: no assembly") }
