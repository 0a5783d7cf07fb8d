//go:build !amd64 || noasm

package vec

func addBiasRowsAVX512(dst, x, b []float32, rows, n, relu int) { panic("vec: no assembly") }
