package f64

import "math"

// Scalar versions of the kernels. Every product is wrapped in float64()
// so that the compiler cannot fuse it with the following addition (see the
// package doc): the results are the same bits on every platform.

const (
	log2e = 1.44269504088896340736
	// ln2Hi has 32 trailing zero bits, so k·ln2Hi is exact for |k| < 2^20;
	// ln2Hi + ln2Lo is ln 2 to about 2^-85.
	ln2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
	ln2Lo = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
	magic = 6755399441055744.0         // 1.5·2^52: adding it rounds to an integer

	sqrt2     = 1.41421356237309504880
	expLo     = -746.0 // e^-746 < 2^-1075: rounds to 0
	expHi     = 710.0  // e^710 > MaxFloat64: rounds to +Inf
	signBit   = 1 << 63
	gradClamp = 1e8 // beyond it the derivatives are 0 or 1 in float64

	// GELU (tanh form): x·σ(x·(geluK0 + geluK1·x²)) equals
	// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). The constants are
	// double-double (hi + lo) pairs: see geluArg.
	geluK0, geluK0Lo = 1.5957691216057308, -9.96930880911092e-17   // 2·√(2/π)
	geluK1, geluK1Lo = 0.07135481627260025, -6.175149918155315e-19 // 2·√(2/π)·0.044715
	geluK3           = 0.21406444881780073                         // 3·geluK1
	geluDD           = 64                                          // |x| below which geluArg is double-double
)

// Coefficients 1/n! of e^r = 1 + r + r²·q(r), q(r) = Σ_{i<12} r^i/(i+2)!,
// whose truncation after r^13/13! is below 2^-57 relative for |r| ≤
// ln2/2.
const (
	e2, e3, e4, e5, e6, e7 = 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040
	e8, e9, e10, e11, e12  = 1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600
	e13                    = 1.0 / 6227020800
)

// exp returns e^x with an error below 1 ulp (see the package doc): x =
// k·ln2 + r with |r| ≤ ln2/2 (Cody and Waite's two-part ln2, r carried
// with its rounding error), e^r from its Taylor polynomial, and 2^k
// applied as two factors so that the result rounds once into the
// subnormal range or to +Inf.
func exp(x float64) float64 {
	x = min(max(x, expLo), expHi) // NaN stays NaN
	t := float64(x*log2e) + magic
	kf := t - magic
	k := int64(math.Float64bits(t)) - int64(math.Float64bits(magic))
	hi := x - float64(kf*ln2Hi) // exact
	lo := float64(kf * ln2Lo)
	r := hi - lo
	rErr := (hi - r) - lo // r + rErr = hi - lo to about 2^-100
	// q by Estrin's scheme: its dependency chains are a third as long as
	// Horner's, so consecutive elements overlap in the CPU.
	r2 := float64(r * r)
	r4 := float64(r2 * r2)
	r8 := float64(r4 * r4)
	q01 := e2 + float64(e3*r)
	q23 := e4 + float64(e5*r)
	q45 := e6 + float64(e7*r)
	q67 := e8 + float64(e9*r)
	q89 := e10 + float64(e11*r)
	qab := e12 + float64(e13*r)
	q03 := q01 + float64(q23*r2)
	q47 := q45 + float64(q67*r2)
	q8b := q89 + float64(qab*r2)
	q := (q03 + float64(q47*r4)) + float64(q8b*r8)
	y := 1 + (r + (rErr + float64(r2*q)))
	k1 := k >> 1
	k2 := k - k1
	s1 := math.Float64frombits(uint64(k1+1023) << 52)
	s2 := math.Float64frombits(uint64(k2+1023) << 52)
	return float64(y*s1) * s2
}

// logR holds 2/(2n+1) for n = 11 down to 1: log((1+s)/(1-s)) = 2s +
// s·R(s²) with R(z) = Σ 2z^n/(2n+1), truncated below 2^-60 relative for
// |s| ≤ 0.1716 (f in [√2/2-1, √2-1]).
var logR = [...]float64{
	2.0 / 23, 2.0 / 21, 2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13, 2.0 / 11,
	2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3,
}

// log returns the natural logarithm of x with an error below 1 ulp: x =
// 2^e·(1+f) with 1+f in [√2/2, √2), log(1+f) = f - (f²/2 - s·(f²/2 +
// R)) with s = f/(2+f), and e·ln2 added in two parts.
func log(x float64) float64 {
	b := math.Float64bits(x)
	if b-(1<<52) >= 0x7fe<<52 { // not a positive normal number
		return logSpecial(x)
	}
	return logNormal(b, 0)
}

// logNormal returns log(2^adj · x) for the positive normal x with bits b.
func logNormal(b uint64, adj int64) float64 {
	e := int64(b>>52) - 1023 + adj
	m := math.Float64frombits(b&(1<<52-1) | 1023<<52) // [1, 2)
	if m > sqrt2 {
		m *= 0.5
		e++
	}
	f := m - 1 // exact
	hfsq := float64(0.5 * float64(f*f))
	s := f / (2 + f)
	z := float64(s * s)
	r := logR[0]
	for _, c := range logR[1:] {
		r = float64(r*z) + c
	}
	r = float64(r * z)
	ef := float64(e)
	return float64(ef*ln2Hi) + (f - (hfsq - (float64(s*(hfsq+r)) + float64(ef*ln2Lo))))
}

func logSpecial(x float64) float64 {
	switch {
	case x == 0:
		return math.Inf(-1)
	case x < 0 || x != x:
		return math.NaN()
	case x > math.MaxFloat64:
		return x
	}
	// Subnormal: scale into the normal range, exactly.
	return logNormal(math.Float64bits(x*(1<<54)), -54)
}

// log1p returns log(1+y) for y ≥ 0: log(u) for u = 1+y rounded, plus the
// first-order correction (y - (u-1))/u for the rounding of u.
func log1p(y float64) float64 {
	u := 1 + y
	if u == 1 {
		return y
	}
	var c float64
	if y < 1 {
		c = (y - (u - 1)) / u
	} else {
		c = (1 - (u - y)) / u
	}
	return log(u) + c
}

func absf(x float64) float64 { return math.Float64frombits(math.Float64bits(x) &^ signBit) }

// orSign returns r (which is >= 0 or NaN) with the sign of x.
func orSign(r, x float64) float64 {
	return math.Float64frombits(math.Float64bits(r) | math.Float64bits(x)&signBit)
}

// tanhSmall is where tanh switches from its Taylor series to exp.
const tanhSmall = 0.625

func tanh(x float64) float64 {
	a := absf(x)
	var r float64
	if a < 0x1p-27 {
		return x // tanh x = x·(1 - x²/3 + ...), and x²/3 < 2^-55
	}
	if a < tanhSmall {
		z := float64(a * a)
		p := tanhTaylor[0]
		for _, c := range tanhTaylor[1:] {
			p = float64(p*z) + c
		}
		r = a + float64(float64(a*z)*p)
	} else {
		r = 1 - 2/(exp(a+a)+1)
	}
	return orSign(r, x)
}

// sigm returns σ(v) and the factors e = e^-|v|, q = 1/(1+e), so that
// σ(v)·(1-σ(v)) = e·q² without cancellation.
func sigm(v float64) (s, e, q float64) {
	e = exp(-absf(v))
	d := 1 + e
	q = 1 / d
	s = e / d
	if v >= 0 {
		s = q
	}
	return s, e, q
}

func sigmoid(x float64) float64 {
	s, _, _ := sigm(x)
	return s
}

// geluArg returns v = x·(k0 + k1·x²) as vh + vl, to about twice float64's
// precision for |x| < geluDD (FMA splits the products exactly; math.FMA
// is correctly rounded everywhere): σ(v) for v far below 0 is about e^v,
// whose relative error is |v| times v's, so a plainly rounded v would cost
// hundreds of ulps in the tail (v = -470 at x = -18). Beyond geluDD, σ(v)
// is 0 or 1 and vl is 0.
func geluArg(x float64) (vh, vl float64) {
	if !(absf(x) < geluDD) {
		x2 := float64(x * x)
		return float64(x * (float64(geluK1*x2) + geluK0)), 0
	}
	x2h := float64(x * x)
	x2l := math.FMA(x, x, -x2h)
	ph := float64(geluK1 * x2h)
	pl := math.FMA(geluK1, x2h, -ph) + (float64(geluK1*x2l) + float64(geluK1Lo*x2h))
	sh := geluK0 + ph // TwoSum
	bb := sh - geluK0
	sl := ((geluK0 - (sh - bb)) + (ph - bb)) + (pl + geluK0Lo)
	vh = float64(x * sh)
	vl = math.FMA(x, sh, -vh) + float64(x*sl)
	return vh, vl
}

// sigm2 is sigm of v = vh + vl with |vl| ≪ 1 ulp of |vh|... (first order
// in vl: e^-|v| = e^-|vh|·(1 - sign(vh)·vl)).
func sigm2(vh, vl float64) (s, e, q float64) {
	e = exp(-absf(vh))
	if vh >= 0 {
		e -= float64(e * vl)
	} else {
		e += float64(e * vl)
	}
	d := 1 + e
	q = 1 / d
	s = e / d
	if vh >= 0 {
		s = q
	}
	return s, e, q
}

func gelu(x float64) float64 {
	s, _, _ := sigm2(geluArg(x))
	return float64(x * s)
}

// geluGrad returns d/dx x·σ(v(x)) = σ(v) + x·v'(x)·σ(v)(1-σ(v)).
func geluGrad(x float64) float64 {
	x = min(max(x, -gradClamp), gradClamp)
	s, e, q := sigm2(geluArg(x))
	x2 := float64(x * x)
	dv := float64(geluK3*x2) + geluK0
	w := float64(x * dv)
	eq := float64(float64(e*q) * q)
	return float64(w*eq) + s
}

func silu(x float64) float64 {
	s, _, _ := sigm(x)
	return float64(x * s)
}

// siluGrad returns σ(x)·(1 + x·(1-σ(x))) = σ(x) + x·σ(x)(1-σ(x)).
func siluGrad(x float64) float64 {
	x = min(max(x, -gradClamp), gradClamp)
	s, e, q := sigm(x)
	eq := float64(float64(e*q) * q)
	return float64(x*eq) + s
}

// softplus returns log(1+e^x) = max(x,0) + log1p(e^-|x|).
func softplus(x float64) float64 {
	return max(x, 0) + log1p(exp(-absf(x)))
}

// logSigmoid returns log σ(x) = min(x,0) - log1p(e^-|x|).
func logSigmoid(x float64) float64 {
	return min(x, 0) - log1p(exp(-absf(x)))
}

// expShift returns e^(x-m), the rounding error err of s = x-m carried as
// e^s·(1+err).
func expShift(x, m float64) float64 {
	// TwoSum: s + err = x - m exactly.
	nm := -m
	s := x + nm
	bb := s - x
	err := (x - (s - bb)) + (nm - bb)
	if err != err {
		err = 0 // x or m infinite: s is exact (or NaN)
	}
	e := exp(s)
	return float64(e*err) + e
}

// φ(0) = 1/√(2π) as a double-double.
const invSqrt2Pi, invSqrt2PiLo = 0.3989422804014327, -2.49232720227773e-17

// phiSmall holds (-1)^n/(n!·(2n+1)) for n = 14 down to 1: for |x| < 0.75,
// Φ(x) = 1/2 + φ(0)·x·(1 + w·P(w)), w = x²/2, with P(w) = Σ
// (-1)^n w^(n-1)/(n!·(2n+1)), truncated below 2^-60.
var phiSmall = [...]float64{
	1.0 / (87178291200 * 29), -1.0 / (6227020800 * 27),
	1.0 / (479001600 * 25), -1.0 / (39916800 * 23), 1.0 / (3628800 * 21),
	-1.0 / (362880 * 19), 1.0 / (40320 * 17), -1.0 / (5040 * 15),
	1.0 / (720 * 13), -1.0 / (120 * 11), 1.0 / (24 * 9), -1.0 / (6 * 7),
	1.0 / (2 * 5), -1.0 / (1 * 3),
}

// mills returns the Mills ratio Φ(-a)/φ(a) for a ≥ 0.75 from the
// Chebyshev expansions of phi_table.go (Clenshaw's recurrence); a is
// clamped to the last interval, beyond which e^(-a²/2) is 0 anyway.
func mills(a float64) float64 {
	a = min(a, 47.99)
	lo, j := millsLo, 0
	for a >= 2*lo && j < len(millsCheb)-1 {
		lo *= 2
		j++
	}
	t := (a+a)/lo - 3
	c := millsCheb[j]
	t2 := t + t
	var b1, b2 float64
	for k := len(c) - 1; k >= 1; k-- {
		b1, b2 = float64(t2*b1)-b2+c[k], b1
	}
	return float64(t*b1) - b2 + c[0]
}

// expHalfSq returns e^(-x²/2), with x² split exactly into hi + lo (FMA is
// correctly rounded everywhere, so this is deterministic too).
func expHalfSq(x float64) float64 {
	hi := float64(x * x)
	if hi > 1600 {
		return 0 // e^-800 (and ±Inf)
	}
	lo := math.FMA(x, x, -hi)
	e := exp(-0.5 * hi)
	return e - float64(e*(0.5*lo))
}

// phi returns Φ(x), the standard normal CDF: a series near 0, else
// φ(x)·R(|x|) with the Mills ratio R, whose argument need not be scaled
// (erfc(|x|/√2) would amplify the rounding of |x|/√2 by x² in the tail).
func phi(x float64) float64 {
	a := absf(x)
	if a < millsLo {
		// 1/2 + h·(1+q) with h = φ(0)·x as a double-double (hh + hl):
		// 1/2 + hh is exact when it cancels (Sterbenz), and q (|q| <
		// 0.1) needs only float64 accuracy.
		w := 0.5 * float64(x*x)
		p := phiSmall[0]
		for _, c := range phiSmall[1:] {
			p = float64(p*w) + c
		}
		q := float64(p * w)
		hh := float64(invSqrt2Pi * x)
		hl := math.FMA(invSqrt2Pi, x, -hh) + float64(invSqrt2PiLo*x)
		return (0.5 + hh) + (hl + float64(hh*q))
	}
	tail := float64(float64(invSqrt2Pi*expHalfSq(a)) * mills(a)) // Φ(-|x|)
	if x < 0 {
		return tail
	}
	return 1 - tail
}

// geluExact returns x·Φ(x); for x ≤ -0.75 as (x·R(-x))·φ(x), so that no
// intermediate is subnormal where the result is not (Φ(x) is, from x ≈
// -37.5, while x·Φ(x) is still normal).
func geluExact(x float64) float64 {
	if x > -millsLo || x != x {
		return float64(x * phi(x))
	}
	return float64(float64(x*mills(-x)) * float64(invSqrt2Pi*expHalfSq(x)))
}

// geluExactGrad returns Φ(x) + x·φ(x).
func geluExactGrad(x float64) float64 {
	x = min(max(x, -gradClamp), gradClamp)
	pdf := float64(invSqrt2Pi * expHalfSq(x))
	return phi(x) + float64(x*pdf)
}
