//go:build !noasm

package vec

//go:noescape
func xentGradRowsAVX512(dst, sm []float32, c int, g []float32, labels []int32) (ok bool)
