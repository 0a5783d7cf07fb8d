//go:build !amd64 || noasm

package vec

var useAVX512 = false

func geluAVX512(dst, src []float32)       { panic("vec: no assembly") }
func geluGradAVX512(dst, src []float32)   { panic("vec: no assembly") }
func geluPartsAVX512(h, d, src []float32) { panic("vec: no assembly") }
