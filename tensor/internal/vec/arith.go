package vec

import "math"

// Binary kernels. In each, dst must be as long as the vector operands and
// may be one of them. "VV" takes two vectors, "VS" a vector and a scalar
// second operand, "SV" a scalar first operand.

// AddVV sets dst[i] = a[i] + b[i].
func AddVV(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	n := 0
	if useAVX2 {
		n = len(dst) &^ 7
		addVVAVX2(dst[:n], a[:n], b[:n])
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] + b[i]
	}
}

// SubVV sets dst[i] = a[i] - b[i].
func SubVV(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	n := 0
	if useAVX2 {
		n = len(dst) &^ 7
		subVVAVX2(dst[:n], a[:n], b[:n])
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] - b[i]
	}
}

// MulVV sets dst[i] = a[i] * b[i].
func MulVV(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	n := 0
	if useAVX2 {
		n = len(dst) &^ 7
		mulVVAVX2(dst[:n], a[:n], b[:n])
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] * b[i]
	}
}

// DivVV sets dst[i] = a[i] / b[i].
func DivVV(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	n := 0
	if useAVX2 {
		n = len(dst) &^ 7
		divVVAVX2(dst[:n], a[:n], b[:n])
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] / b[i]
	}
}

// AddVS sets dst[i] = a[i] + s.
func AddVS(dst, a []float32, s float32) {
	a = a[:len(dst)]
	n := 0
	if useAVX2 {
		n = len(dst) &^ 7
		addVSAVX2(dst[:n], a[:n], s)
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] + s
	}
}

// SubVS sets dst[i] = a[i] - s.
func SubVS(dst, a []float32, s float32) {
	a = a[:len(dst)]
	n := 0
	if useAVX2 {
		n = len(dst) &^ 7
		subVSAVX2(dst[:n], a[:n], s)
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] - s
	}
}

// SubSV sets dst[i] = s - b[i].
func SubSV(dst []float32, s float32, b []float32) {
	b = b[:len(dst)]
	n := 0
	if useAVX2 {
		n = len(dst) &^ 7
		subSVAVX2(dst[:n], s, b[:n])
	}
	for i := n; i < len(dst); i++ {
		dst[i] = s - b[i]
	}
}

// MulVS sets dst[i] = a[i] * s.
func MulVS(dst, a []float32, s float32) {
	a = a[:len(dst)]
	n := 0
	if useAVX2 {
		n = len(dst) &^ 7
		mulVSAVX2(dst[:n], a[:n], s)
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] * s
	}
}

// DivVS sets dst[i] = a[i] / s.
func DivVS(dst, a []float32, s float32) {
	a = a[:len(dst)]
	n := 0
	if useAVX2 {
		n = len(dst) &^ 7
		divVSAVX2(dst[:n], a[:n], s)
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] / s
	}
}

// DivSV sets dst[i] = s / b[i].
func DivSV(dst []float32, s float32, b []float32) {
	b = b[:len(dst)]
	n := 0
	if useAVX2 {
		n = len(dst) &^ 7
		divSVAVX2(dst[:n], s, b[:n])
	}
	for i := n; i < len(dst); i++ {
		dst[i] = s / b[i]
	}
}

// Fill sets every element of dst to v.
func Fill(dst []float32, v float32) {
	for i := range dst {
		dst[i] = v
	}
}

// MaxVV sets dst[i] = max(a[i], b[i]), NaN if either is NaN (jnp.maximum).
func MaxVV(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		x, y := a[i], b[i]
		if x != x || x > y {
			dst[i] = x
		} else {
			dst[i] = y
		}
	}
}

// MinVV sets dst[i] = min(a[i], b[i]), NaN if either is NaN.
func MinVV(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		x, y := a[i], b[i]
		if x != x || x < y {
			dst[i] = x
		} else {
			dst[i] = y
		}
	}
}

// Relu sets dst[i] = max(src[i], 0): NaN stays NaN, -0 becomes +0.
func Relu(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if useAVX2 {
		n = len(src) &^ 7
		reluAVX2(dst[:n], src[:n])
	}
	for i := n; i < len(src); i++ {
		dst[i] = max(src[i], 0)
	}
}

// ReluGradMul sets dst[i] = g[i] where y[i] > 0 and 0 elsewhere.
func ReluGradMul(dst, g, y []float32) {
	g, y = g[:len(dst)], y[:len(dst)]
	n := 0
	switch {
	case useAVX512:
		n = len(dst) &^ 15
		reluGradMulAVX512(dst[:n], g[:n], y[:n])
	case useAVX2:
		n = len(dst) &^ 7
		reluGradMulAVX2(dst[:n], g[:n], y[:n])
	}
	for i := n; i < len(dst); i++ {
		if y[i] > 0 {
			dst[i] = g[i]
		} else {
			dst[i] = 0
		}
	}
}

// TanhGradMul sets dst[i] = g[i]·(1 - y[i]²), the tanh VJP from the output.
func TanhGradMul(dst, g, y []float32) {
	g, y = g[:len(dst)], y[:len(dst)]
	for i := range dst {
		v := y[i]
		dst[i] = float32(g[i] * (1 - float32(v*v)))
	}
}

// SigmoidGradMul sets dst[i] = g[i]·y[i]·(1 - y[i]), the sigmoid VJP from
// the output.
func SigmoidGradMul(dst, g, y []float32) {
	g, y = g[:len(dst)], y[:len(dst)]
	for i := range dst {
		v := y[i]
		dst[i] = float32(g[i] * float32(v*(1-v)))
	}
}

// Square sets dst[i] = src[i]².
func Square(dst, src []float32) {
	MulVV(dst, src, src)
}

// Sqrt sets dst[i] to the correctly rounded square root of src[i].
func Sqrt(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float32(math.Sqrt(float64(v)))
	}
}

// Rsqrt sets dst[i] = 1/√src[i], computed in float64 and rounded once.
func Rsqrt(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float32(1 / math.Sqrt(float64(v)))
	}
}

// ExpShift sets dst[i] = e^(src[i] - m) and returns Σ dst[i] accumulated
// in float64 like SumF64. The subtraction is compensated (its rounding
// error e is carried as e^d·(1+e)), so results stay within a few ulp even
// far below the maximum, where src[i] - m is not exact in float32.
// src[i] = -Inf gives 0. It is meant for m ≥ src[i] (a softmax's row
// maximum): where e^(src[i] - m) overflows float32 (src[i] - m above
// ~88.7) the result is +Inf or NaN, on every kernel set.
func ExpShift(dst, src []float32, m float32) float64 {
	dst = dst[:len(src)]
	if useAVX512 {
		return expShiftSum512(dst, src, m)
	}
	expShift(dst, src, m)
	return SumF64(dst)
}

// expShiftSum512 is ExpShift on the AVX-512 kernel, which sums the
// exponentials as it stores them, into SumF64's lanes and blocks in the
// same order. With a nil dst the exponentials go to a scratch buffer
// (SumExpShift), which only that case clears: a softmax over 10 classes
// spent as long clearing 1 KiB a row as computing its exponentials.
func expShiftSum512(dst, src []float32, m float32) float64 {
	s := 0.0
	for start := 0; start < len(src); start += SumBlock {
		end := min(start+SumBlock, len(src))
		var l [8]float64
		if dst != nil {
			expShiftAVX512(dst[start:end], src[start:end], -m, &l)
		} else {
			expShiftScratch512(src[start:end], -m, &l)
		}
		s += laneSum(&l)
	}
	return s
}

// expShiftScratch512 adds e^(src + nm) to the lanes as expShiftAVX512
// does, storing the exponentials in a scratch buffer, 256 at a time (a
// multiple of 8: each chunk's lanes are the block's).
func expShiftScratch512(src []float32, nm float32, l *[8]float64) {
	if len(src) <= 16 {
		// A short row (LogSumExp of the MoE router's 8 logits): the
		// 1 KB buffer below, zeroed at every call, cost more than the
		// row's exponentials.
		var short [16]float32
		expShiftAVX512(short[:len(src)], src, nm, l)
		return
	}
	var buf [256]float32
	for i := 0; i < len(src); i += len(buf) {
		j := min(i+len(buf), len(src))
		expShiftAVX512(buf[:j-i], src[i:j], nm, l)
	}
}

func expShift(dst, src []float32, m float32) {
	dst = dst[:len(src)]
	if useAVX512 {
		var l [8]float64
		expShiftAVX512(dst, src, -m, &l)
		return
	}
	n := 0
	if useAVX2 {
		n = len(src) &^ 7
		expShiftAVX2(dst[:n], src[:n], -m)
		if n < len(src) {
			// The last few through the vector kernel too, padded with m
			// (the same bits as expShiftf, at a quarter of its cost: a
			// softmax over 10 classes spent most of its time in the
			// scalar tail).
			var in, out [8]float32
			for i := copy(in[:], src[n:]); i < len(in); i++ {
				in[i] = m
			}
			expShiftAVX2(out[:], in[:], -m)
			copy(dst[n:], out[:])
			return
		}
	}
	for i := n; i < len(src); i++ {
		dst[i] = expShiftf(src[i], m)
	}
}

func expShiftf(x, m float32) float32 {
	// TwoSum: s + err = x - m exactly.
	nm := -m
	s := x + nm
	bb := s - x
	err := (x - (s - bb)) + (nm - bb)
	if err != err {
		err = 0 // x or m infinite: s is exact (or NaN)
	}
	e := expf(s)
	return float32(e*err) + e
}
