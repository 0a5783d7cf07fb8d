//go:build !amd64 || noasm

package vec

func xentGradRowsAVX512(dst, sm []float32, c int, g []float32, labels []int32) (ok bool) {
	panic("vec: no assembly")
}
