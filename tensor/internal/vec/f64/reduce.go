package f64

import "math"

// SumBlock is the block length of sums: a slice longer than this is summed
// block by block and the block sums are added in order (compensated), so
// that a caller may sum blocks on different goroutines and get the same
// bits. It is package vec's SumBlock.
const SumBlock = 1 << 16

// Partial is a compensated partial sum: its value is Hi + Lo, where Lo
// carries the rounding errors of the additions into Hi (Neumaier's
// improvement of Kahan's summation, with Knuth's branch-free TwoSum). The
// zero value is an empty sum. Summing n values this way errs by at most
// about 2u·|Σx| + n²u²·Σ|x| (u = 2^-53): the result is the correctly
// rounded sum unless the terms cancel by a factor near 2^50.
type Partial struct{ Hi, Lo float64 }

// Add adds x to p.
func (p *Partial) Add(x float64) {
	t := p.Hi + x
	bb := t - p.Hi
	p.Lo += (p.Hi - (t - bb)) + (x - bb)
	p.Hi = t
}

// AddPartial adds the partial sum q to p.
func (p *Partial) AddPartial(q Partial) {
	p.Add(q.Hi)
	p.Lo += q.Lo
}

// Value returns the sum: Hi + Lo, or Hi itself when Hi is not finite (an
// infinite term or overflow makes Lo NaN; the plain sum then has the IEEE
// result: ±Inf, or NaN for Inf - Inf).
func (p Partial) Value() float64 {
	if math.IsInf(p.Hi, 0) || p.Hi != p.Hi {
		return p.Hi
	}
	return p.Hi + p.Lo
}

// Sum returns Σ x[i], compensated: element i goes to lane i mod 4 of its
// block of SumBlock elements (each lane a Partial), the lanes are combined
// as (l0+l1)+(l2+l3) and the block sums in order.
func Sum(x []float64) float64 {
	var s Partial
	for len(x) > SumBlock {
		s.AddPartial(SumPartial(x[:SumBlock]))
		x = x[SumBlock:]
	}
	s.AddPartial(SumPartial(x))
	return s.Value()
}

// SumPartial returns the compensated sum of one block (at most SumBlock
// elements); Sum of a long slice equals the Value of the in-order
// AddPartial of SumPartial of its SumBlock-long pieces.
func SumPartial(x []float64) Partial {
	var l0, l1, l2, l3 Partial
	n := len(x) &^ 3
	for i := 0; i < n; i += 4 {
		v := x[i : i+4 : i+4]
		l0.Add(v[0])
		l1.Add(v[1])
		l2.Add(v[2])
		l3.Add(v[3])
	}
	rest := [3]*Partial{&l0, &l1, &l2}
	for i := n; i < len(x); i++ {
		rest[i-n].Add(x[i])
	}
	l0.AddPartial(l1)
	l2.AddPartial(l3)
	l0.AddPartial(l2)
	return l0
}

// AccSum adds x[i] to the partial sum acc[i] (compensated), for sums
// along a strided axis; acc[i].Value() is the result.
func AccSum(acc []Partial, x []float64) {
	x = x[:len(acc)]
	for i, v := range x {
		acc[i].Add(v)
	}
}

// SumSqDiff returns Σ (a[i]-b[i])² with each difference and square rounded
// (as Square(Sub(a, b)) computes them) and the squares summed as Sum sums
// a slice.
func SumSqDiff(a, b []float64) float64 {
	b = b[:len(a)]
	return sumMapped(len(a), func(d []float64, lo, hi int) {
		SubVV(d, a[lo:hi], b[lo:hi])
		MulVV(d, d, d)
	})
}

// SumExpShift returns Σ e^(src[i] - m) as ExpShift computes and sums it,
// without storing the exponentials.
func SumExpShift(src []float64, m float64) float64 {
	return sumMapped(len(src), func(d []float64, lo, hi int) {
		for i, v := range src[lo:hi] {
			d[i] = expShift(v, m)
		}
	})
}

// sumMapped returns the Sum of the n values that fill writes, chunk by
// chunk, into a scratch buffer: the same lanes and blocks as Sum.
func sumMapped(n int, fill func(d []float64, lo, hi int)) float64 {
	var buf [256]float64
	var s Partial
	for start := 0; start < n; start += SumBlock {
		end := min(start+SumBlock, n)
		var l [4]Partial
		for i := start; i < end; i += len(buf) {
			j := min(i+len(buf), end)
			d := buf[:j-i]
			fill(d, i, j)
			for k, v := range d {
				l[(i-start+k)&3].Add(v)
			}
		}
		l[0].AddPartial(l[1])
		l[2].AddPartial(l[3])
		l[0].AddPartial(l[2])
		s.AddPartial(l[0])
	}
	return s.Value()
}

// Max returns the maximum of x (NaN if any element is NaN, -Inf for an
// empty slice).
func Max(x []float64) float64 {
	m := math.Inf(-1)
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

// Min returns the minimum of x (NaN if any element is NaN, +Inf for an
// empty slice).
func Min(x []float64) float64 {
	m := math.Inf(1)
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
func MaxAcc(acc, x []float64) {
	x = x[:len(acc)]
	for i, v := range x {
		if v > acc[i] || v != v {
			acc[i] = v
		}
	}
}

// MinAcc sets acc[i] = min(acc[i], x[i]) with NaN winning.
func MinAcc(acc, x []float64) {
	x = x[:len(acc)]
	for i, v := range x {
		if v < acc[i] || v != v {
			acc[i] = v
		}
	}
}
