package vec

import "fmt"

// SumCols sets out[j] = float32(Σ_i src[i*n+j]) for the columns j of out
// over m rows of stride n, each column summed in float64 in row order (the
// bits of AccF64 row after row, then RoundF64), with the partial sums in
// registers, not in memory: a bias's gradient over 16 rows of 128 is one
// pass instead of 16 calls. It returns how many leading columns it
// summed: all of them on the AVX-512 kernel set, none otherwise (the
// caller sums them). m must be at least 1.
func SumCols(out, src []float32, m, n int) int {
	w := len(out)
	if w == 0 || m < 1 {
		return 0
	}
	if need := (m-1)*n + w; len(src) < need || n < w {
		panic(fmt.Sprintf("vec.SumCols: %d rows of stride %d and %d columns need %d elements of src, have %d", m, n, w, need, len(src)))
	}
	if !useAVX512 {
		return 0
	}
	sumColsAVX512(out, src, m, n)
	return w
}
