//go:build !noasm

package vec

//go:noescape
func addBiasRowsAVX512(dst, x, b []float32, rows, n, relu int)
