//go:build !amd64 || noasm

package vec

func sumColsAVX512(out, src []float32, m, n int) { panic("vec: no assembly") }
