//go:build !noasm

package vec

//go:noescape
func sumColsAVX512(out, src []float32, m, n int)
