package vec

// ExpShiftRows is the first half of a softmax over rows of c elements:
// for each row r of src (len(ms) rows of c, one after another) it sets
// ms[r] = MaxF32(row) and sums[r] = ExpShift(dst's row, row, ms[r]), with
// their bits. On AVX-512, rows of up to 16 elements take one kernel call
// for up to expShiftRowsBlock rows instead of two calls a row (a softmax
// cross-entropy over 10 classes spent most of its time in those calls).
func ExpShiftRows(dst, src []float32, c int, ms []float32, sums []float64) {
	rows := len(ms)
	dst, src, sums = dst[:rows*c], src[:rows*c], sums[:rows]
	if !useAVX512 || c < 1 || c > 16 {
		for r := range rows {
			ms[r] = MaxF32(src[r*c : (r+1)*c])
			sums[r] = ExpShift(dst[r*c:(r+1)*c], src[r*c:(r+1)*c], ms[r])
		}
		return
	}
	var lanes [expShiftRowsBlock * 8]float64
	for b := 0; b < rows; b += expShiftRowsBlock {
		e := min(b+expShiftRowsBlock, rows)
		expShiftRowsAVX512(dst[b*c:e*c], src[b*c:e*c], c, ms[b:e], lanes[:])
		for r := b; r < e; r++ {
			if m := ms[r]; m != m || m == 0 {
				// A NaN, or a zero whose sign MaxF32 chooses: the
				// row's own calls (the kernel left it).
				ms[r] = MaxF32(src[r*c : (r+1)*c])
				sums[r] = ExpShift(dst[r*c:(r+1)*c], src[r*c:(r+1)*c], ms[r])
				continue
			}
			// expShiftSum512's sum of one block: 0 + the lanes' sum.
			s := 0.0
			s += laneSum((*[8]float64)(lanes[(r-b)*8 : (r-b+1)*8]))
			sums[r] = s
		}
	}
}

// expShiftRowsBlock is how many rows ExpShiftRows gives its kernel at a
// time (their lanes on the stack).
const expShiftRowsBlock = 32

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
