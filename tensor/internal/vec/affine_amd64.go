//go:build !noasm

package vec

//go:noescape
func affineRowAVX512(dst, x []float32, s, b float32, r []float32, relu bool)

//go:noescape
func affine2RowAVX512(dst, g, y, x []float32, a, s, b float32)
