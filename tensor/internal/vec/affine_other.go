//go:build !amd64 || noasm

package vec

func affineRowAVX512(dst, x []float32, s, b float32, r []float32, relu bool) {
	panic("vec: no assembly")
}

func affine2RowAVX512(dst, g, y, x []float32, a, s, b float32) { panic("vec: no assembly") }
