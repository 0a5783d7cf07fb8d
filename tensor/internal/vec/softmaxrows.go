package vec

// ExpShiftRows is the first half of a softmax over rows of c elements:
// for each row r of src (len(ms) rows of c, one after another) it sets
// ms[r] = MaxF32(row) and sums[r] = ExpShift(dst's row, row, ms[r]), with
// their bits. On AVX-512, rows of up to 16 elements take one kernel call
// for all of them instead of two calls a row (a softmax cross-entropy
// over 10 classes spent most of its time in those calls).
func ExpShiftRows(dst, src []float32, c int, ms []float32, sums []float64) {
	expShiftRows(dst, src, c, ms, sums, false)
}

// SoftmaxRows is ExpShiftRows followed by the normalisation of each row
// of dst: float32(float64(e)·(1/sums[r])), the product in float64
// rounded once, as a softmax over a row finishes. On AVX-512, rows of up
// to 16 elements are normalised by the same kernel call.
func SoftmaxRows(dst, src []float32, c int, ms []float32, sums []float64) {
	expShiftRows(dst, src, c, ms, sums, true)
}

// expShiftRows is ExpShiftRows, and SoftmaxRows with norm.
func expShiftRows(dst, src []float32, c int, ms []float32, sums []float64, norm bool) {
	rows := len(ms)
	dst, src, sums = dst[:rows*c], src[:rows*c], sums[:rows]
	fast := useAVX512 && c >= 1 && c <= 16
	if fast {
		expShiftRowsAVX512(dst, src, c, ms, sums, norm)
	}
	for r := range rows {
		if m := ms[r]; fast && m == m && m != 0 {
			continue
		}
		// No kernel, or a row it left: a NaN, or a zero maximum whose
		// sign MaxF32 chooses. The row's own calls.
		row, d := src[r*c:(r+1)*c], dst[r*c:(r+1)*c]
		ms[r] = MaxF32(row)
		sums[r] = ExpShift(d, row, ms[r])
		if norm {
			inv := 1 / sums[r]
			for j, v := range d {
				d[j] = float32(float64(v) * inv)
			}
		}
	}
}

// XentGradRows is a softmax cross-entropy's gradient with respect to
// its logits over len(g) rows of c classes: each row of dst is g[r]
// times sm's row (the softmax), less g[r] at the label, computed as
// g[r]·(sm[label] - 1) (float32 operations, the Go loop's bits). It
// reports false, having written the rows before it, at a label outside
// [0, c). On AVX-512, rows of up to 16 classes take one kernel call.
func XentGradRows(dst, sm []float32, c int, g []float32, labels []int32) bool {
	rows := len(g)
	dst, sm, labels = dst[:rows*c], sm[:rows*c], labels[:rows]
	if useAVX512 && c >= 1 && c <= 16 {
		return xentGradRowsAVX512(dst, sm, c, g, labels)
	}
	for r, gr := range g {
		l := labels[r]
		if l < 0 || int(l) >= c {
			return false
		}
		src, out := sm[r*c:(r+1)*c], dst[r*c:(r+1)*c]
		for j, v := range src {
			out[j] = gr * v
		}
		out[l] = gr * (src[l] - 1)
	}
	return true
}
