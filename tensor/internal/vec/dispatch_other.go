//go:build !amd64 || noasm

package vec

// Without assembly every kernel runs its pure-Go loop.
var useAVX2 = false

func expAVX2(dst, src []float32)                      { panic("vec: no assembly") }
func tanhAVX2(dst, src []float32)                     { panic("vec: no assembly") }
func sigmoidAVX2(dst, src []float32)                  { panic("vec: no assembly") }
func geluAVX2(dst, src []float32)                     { panic("vec: no assembly") }
func geluGradAVX2(dst, src []float32)                 { panic("vec: no assembly") }
func siluAVX2(dst, src []float32)                     { panic("vec: no assembly") }
func siluGradAVX2(dst, src []float32)                 { panic("vec: no assembly") }
func reluAVX2(dst, src []float32)                     { panic("vec: no assembly") }
func reluGradMulAVX2(dst, g, y []float32)             { panic("vec: no assembly") }
func addVVAVX2(dst, a, b []float32)                   { panic("vec: no assembly") }
func subVVAVX2(dst, a, b []float32)                   { panic("vec: no assembly") }
func mulVVAVX2(dst, a, b []float32)                   { panic("vec: no assembly") }
func divVVAVX2(dst, a, b []float32)                   { panic("vec: no assembly") }
func addVSAVX2(dst, a []float32, s float32)           { panic("vec: no assembly") }
func subVSAVX2(dst, a []float32, s float32)           { panic("vec: no assembly") }
func mulVSAVX2(dst, a []float32, s float32)           { panic("vec: no assembly") }
func divVSAVX2(dst, a []float32, s float32)           { panic("vec: no assembly") }
func subSVAVX2(dst []float32, s float32, b []float32) { panic("vec: no assembly") }
func divSVAVX2(dst []float32, s float32, b []float32) { panic("vec: no assembly") }
func sum8AVX2(x []float32, lanes *[8]float64)         { panic("vec: no assembly") }
func accF64AVX2(acc []float64, x []float32)           { panic("vec: no assembly") }
func expShiftAVX2(dst, src []float32, nm float32)     { panic("vec: no assembly") }

func adamAVX2(u, m2, v2, g, m, v, p []float32, c *AdamCoeffs) { panic("vec: no assembly") }
