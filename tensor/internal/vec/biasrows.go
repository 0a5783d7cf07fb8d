package vec

import "fmt"

// AddBiasRows sets each row of dst (rows of len(b)) to the row of x plus
// b, then, if relu is set, to max(·, 0): the bits of AddVV then Relu row
// by row, in one pass over every row instead of two calls a row (the
// rows of an MLP's layers at batch 16 hold 10 to 128 floats). It reports
// false, doing nothing, where the kernel set has no AVX-512 form (the
// caller loops over the rows). len(x) must be a multiple of len(b) and
// dst at least as long as x; dst may be x.
func AddBiasRows(dst, x, b []float32, relu bool) bool {
	n := len(b)
	if n == 0 || len(x)%n != 0 || len(dst) < len(x) {
		panic(fmt.Sprintf("vec.AddBiasRows: %d elements of x, %d of dst, rows of %d", len(x), len(dst), n))
	}
	if !useAVX512 {
		return false
	}
	r := 0
	if relu {
		r = 1
	}
	addBiasRowsAVX512(dst, x, b, len(x)/n, n, r)
	return true
}
