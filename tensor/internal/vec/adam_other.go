//go:build !amd64 || noasm

package vec

func adamStepAVX512(p2, m2, v2, p, g, m, v []float32, c *AdamCoeffs, wd int) {
	panic("vec: no assembly")
}
