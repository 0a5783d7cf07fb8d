package vec

// SumBlock is the block length of float64 sums: a slice longer than this is
// summed block by block (each in 8 lanes) and the block sums are added in
// order, so that a caller may sum blocks on different goroutines and get
// the same bits.
const SumBlock = 1 << 16

// SumF64 returns Σ x[i] accumulated in float64: element i goes to lane
// i mod 8 of its block of SumBlock elements; the lanes are combined as
// ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7)) and the block sums in order.
func SumF64(x []float32) float64 {
	s := 0.0
	for len(x) > SumBlock {
		s += sumBlock(x[:SumBlock])
		x = x[SumBlock:]
	}
	return s + sumBlock(x)
}

// SumBlocks returns the float64 sum of one block; SumF64 of a long slice
// equals the in-order sum of SumBlocks of its SumBlock-long pieces.
func SumBlocks(x []float32) float64 { return sumBlock(x) }

func sumBlock(x []float32) float64 {
	var l [8]float64
	n := 0
	if useAVX2 {
		n = len(x) &^ 7
		if n > 0 {
			sum8AVX2(x[:n], &l)
		}
	} else {
		n = len(x) &^ 7
		l0, l1, l2, l3, l4, l5, l6, l7 := 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
		for i := 0; i < n; i += 8 {
			v := x[i : i+8 : i+8]
			l0 += float64(v[0])
			l1 += float64(v[1])
			l2 += float64(v[2])
			l3 += float64(v[3])
			l4 += float64(v[4])
			l5 += float64(v[5])
			l6 += float64(v[6])
			l7 += float64(v[7])
		}
		l = [8]float64{l0, l1, l2, l3, l4, l5, l6, l7}
	}
	for i := n; i < len(x); i++ {
		l[i-n] += float64(x[i])
	}
	return laneSum(&l)
}

// DotF64 returns Σ a[i]·b[i] accumulated in float64 (each product is
// exact): product i goes to lane i mod 8 of its block of SumBlock
// elements, combined as SumF64 combines them. b must be at least as long
// as a.
func DotF64(a, b []float32) float64 {
	b = b[:len(a)]
	s := 0.0
	for len(a) > SumBlock {
		s += dotBlock(a[:SumBlock], b[:SumBlock])
		a, b = a[SumBlock:], b[SumBlock:]
	}
	return s + dotBlock(a, b)
}

func dotBlock(a, b []float32) float64 {
	var l [8]float64
	if useAVX512 {
		dotAVX512(a, b, &l)
		return laneSum(&l)
	}
	n := len(a) &^ 7
	for i := 0; i < n; i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		for j := range l {
			l[j] += float64(x[j]) * float64(y[j])
		}
	}
	for i := n; i < len(a); i++ {
		l[i-n] += float64(a[i]) * float64(b[i])
	}
	return laneSum(&l)
}

// laneSum combines the 8 lanes of a block sum.
func laneSum(l *[8]float64) float64 {
	return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]))
}

// AccF64 adds x[i] to acc[i] in float64.
func AccF64(acc []float64, x []float32) {
	x = x[:len(acc)]
	n := 0
	if useAVX2 {
		n = len(acc) &^ 7
		accF64AVX2(acc[:n], x[:n])
	}
	for i := n; i < len(acc); i++ {
		acc[i] += float64(x[i])
	}
}

// RoundF64 sets dst[i] = float32(src[i]).
func RoundF64(dst []float32, src []float64) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = float32(v)
	}
}

// SumSqDiffF64 returns Σ (a[i]-b[i])² with each difference and square
// rounded to float32 (as Square(Sub(a, b)) computes them) and the squares
// summed exactly as SumF64 sums a slice.
func SumSqDiffF64(a, b []float32) float64 {
	return sumMapped(len(a), &mapping{a: a, b: b[:len(a)], sqDiff: true})
}

// SumExpShift returns Σ e^(src[i] - m) as ExpShift computes and sums it,
// without storing the exponentials.
func SumExpShift(src []float32, m float32) float64 {
	if useAVX512 {
		return expShiftSum512(nil, src, m)
	}
	return sumMapped(len(src), &mapping{a: src, m: m})
}

// A mapping is the function of its operands that sumMapped sums: (a-b)²
// rounded as Square(Sub(a, b)) when sqDiff, else e^(a-m) as ExpShift
// computes it. (A method, not a callback: a callback's argument escapes,
// and sumMapped's stage buffer with it, 1 KB a call.)
type mapping struct {
	a, b   []float32
	m      float32
	sqDiff bool
}

// fill writes the mapping of operand elements [lo, hi) to d.
func (p *mapping) fill(d []float32, lo, hi int) {
	if p.sqDiff {
		SubVV(d, p.a[lo:hi], p.b[lo:hi])
		MulVV(d, d, d)
		return
	}
	expShift(d, p.a[lo:hi], p.m)
}

// sumMapped returns the SumF64 of the n values that p maps, chunk by
// chunk, into a scratch buffer.
func sumMapped(n int, p *mapping) float64 {
	var buf [256]float32
	s := 0.0
	for start := 0; start < n; start += SumBlock {
		end := min(start+SumBlock, n)
		var l [8]float64
		for i := start; i < end; i += len(buf) {
			j := min(i+len(buf), end)
			d := buf[:j-i]
			p.fill(d, i, j)
			for k, v := range d {
				l[(i-start+k)&7] += float64(v)
			}
		}
		s += laneSum(&l)
	}
	return s
}

// MaxF32 returns the maximum of x (NaN if any element is NaN, -Inf for an
// empty slice).
func MaxF32(x []float32) float32 {
	if useAVX512 {
		// The kernel leaves to the loop a NaN (whose payload is the
		// first one's) and a zero (whose sign is the first maximal one's).
		if m, nan := maxAVX512(x); !nan && m != 0 {
			return m
		}
	}
	m := float32(negInf)
	for _, v := range x {
		if v > m || v != v {
			m = v
			if v != v {
				return v
			}
		}
	}
	return m
}

// MinF32 returns the minimum of x (NaN if any element is NaN, +Inf for an
// empty slice).
func MinF32(x []float32) float32 {
	m := float32(posInf)
	for _, v := range x {
		if v < m || v != v {
			m = v
			if v != v {
				return v
			}
		}
	}
	return m
}

// MaxAcc sets acc[i] = max(acc[i], x[i]) with NaN winning.
func MaxAcc(acc, x []float32) {
	x = x[:len(acc)]
	for i, v := range x {
		if v > acc[i] || v != v {
			acc[i] = v
		}
	}
}

// MinAcc sets acc[i] = min(acc[i], x[i]) with NaN winning.
func MinAcc(acc, x []float32) {
	x = x[:len(acc)]
	for i, v := range x {
		if v < acc[i] || v != v {
			acc[i] = v
		}
	}
}
