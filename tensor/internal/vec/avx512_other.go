//go:build !amd64 || noasm

package vec

var useAVX512 = false

func geluAVX512(dst, src []float32)         { panic("vec: no assembly") }
func geluGradAVX512(dst, src []float32)     { panic("vec: no assembly") }
func geluPartsAVX512(h, d, src []float32)   { panic("vec: no assembly") }
func reluGradMulAVX512(dst, g, y []float32) { panic("vec: no assembly") }

func expShiftAVX512(dst, src []float32, nm float32, lanes *[8]float64) { panic("vec: no assembly") }
func maxAVX512(x []float32) (m float32, nan bool)                      { panic("vec: no assembly") }
func dotAVX512(a, b []float32, lanes *[8]float64)                      { panic("vec: no assembly") }

func expShiftRowsAVX512(dst, src []float32, c int, ms []float32, sums []float64, norm bool) {
	panic("vec: no assembly")
}
