package vec

import "math"

// Scalar versions of the kernels. The slice kernels call these for the
// elements the assembly does not handle (and for all of them without
// assembly); the assembly performs the same operations in the same order.
// Every product is wrapped in float32() so that the compiler cannot fuse it
// with the following addition (see the package doc).

const (
	expLo     = -104.0 // e^-104 < 2^-150: rounds to 0
	expHi     = 89.0   // e^89 > MaxFloat32: rounds to +Inf
	log2e     = 1.44269504088896341
	magic     = 12582912.0 // 1.5·2^23: adding it rounds to an integer
	magicBits = 0x4b400000
	ln2Hi     = 0.693359375 // 9 significant bits: k·ln2Hi is exact
	ln2Lo     = -2.12194440e-4

	expP0 = 1.9875691500e-4
	expP1 = 1.3981999507e-3
	expP2 = 8.3334519073e-3
	expP3 = 4.1665795894e-2
	expP4 = 1.6666665459e-1
	expP5 = 5.0000001201e-1

	tanhSmall = 0.625
	tanhP0    = -5.70498872745e-3
	tanhP1    = 2.06390887954e-2
	tanhP2    = -5.37397155531e-2
	tanhP3    = 1.33314422036e-1
	tanhP4    = -3.33332819422e-1

	// GELU (tanh form): x·sigmoid(x·(geluK0 + geluK1·x²)) equals
	// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
	geluK0 = 1.5957691216057308   // 2·√(2/π)
	geluK1 = 0.071354816272817803 // 2·√(2/π)·0.044715
	geluK3 = 0.21406444881845341  // 3·geluK1
	// gradClamp bounds x in derivative kernels so that x·(tiny) never
	// becomes Inf·0: beyond it the derivatives are 0 or 1 in float32.
	gradClamp = 1e4

	signBit = 1 << 31
)

// expf returns e^x (see the package doc for its accuracy).
func expf(x float32) float32 {
	x = min(max(x, expLo), expHi) // NaN stays NaN
	t := float32(x*log2e) + magic
	kf := t - magic
	k := int32(math.Float32bits(t)) - magicBits
	r := x - float32(kf*ln2Hi)
	r -= float32(kf * ln2Lo)
	z := float32(r * r)
	p := float32(expP0*r) + expP1
	p = float32(p*r) + expP2
	p = float32(p*r) + expP3
	p = float32(p*r) + expP4
	p = float32(p*r) + expP5
	y := float32(p*z) + r + 1
	// 2^k as two factors so that k in [-150, 128] needs no special case:
	// the first product is exact, the second rounds once (to a subnormal,
	// 0 or +Inf where the result is one).
	k1 := k >> 1
	k2 := k - k1
	s1 := math.Float32frombits(uint32(k1+127) << 23)
	s2 := math.Float32frombits(uint32(k2+127) << 23)
	return float32(y*s1) * s2
}

func absf(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ signBit) }

// orSign returns r (which is >= 0 or NaN) with the sign of x.
func orSign(r, x float32) float32 {
	return math.Float32frombits(math.Float32bits(r) | math.Float32bits(x)&signBit)
}

func tanhf(x float32) float32 {
	a := absf(x)
	var r float32
	if a < tanhSmall {
		s := float32(a * a)
		p := float32(tanhP0*s) + tanhP1
		p = float32(p*s) + tanhP2
		p = float32(p*s) + tanhP3
		p = float32(p*s) + tanhP4
		r = float32(float32(p*s)*a) + a
	} else {
		e := expf(a + a)
		r = 1 - 2/(e+1)
	}
	return orSign(r, x)
}

// sigm returns σ(v) and the factors e = e^-|v|, q = 1/(1+e), so that
// σ(v)·(1-σ(v)) = e·q² without cancellation.
func sigm(v float32) (s, e, q float32) {
	e = expf(-absf(v))
	q = 1 / (1 + e)
	s = float32(e * q)
	if v >= 0 {
		s = q
	}
	return s, e, q
}

func sigmoidf(x float32) float32 {
	s, _, _ := sigm(x)
	return s
}

func geluArg(x float32) float32 {
	x2 := float32(x * x)
	return float32(x * (float32(geluK1*x2) + geluK0))
}

func geluf(x float32) float32 {
	s, _, _ := sigm(geluArg(x))
	return float32(x * s)
}

// geluGradf returns d/dx x·σ(v(x)) = σ(v) + x·v'(x)·σ(v)(1-σ(v)).
func geluGradf(x float32) float32 {
	x = min(max(x, -gradClamp), gradClamp)
	s, e, q := sigm(geluArg(x))
	x2 := float32(x * x)
	dv := float32(geluK3*x2) + geluK0
	w := float32(x * dv)
	eq := float32(float32(e*q) * q)
	return float32(w*eq) + s
}

func siluf(x float32) float32 {
	s, _, _ := sigm(x)
	return float32(x * s)
}

// siluGradf returns σ(x)·(1 + x·(1-σ(x))) = σ(x) + x·σ(x)(1-σ(x)).
func siluGradf(x float32) float32 {
	x = min(max(x, -gradClamp), gradClamp)
	s, e, q := sigm(x)
	eq := float32(float32(e*q) * q)
	return float32(x*eq) + s
}

const (
	sqrtHalf = 0.70710678118654752440
	logP0    = 7.0376836292e-2
	logP1    = -1.1514610310e-1
	logP2    = 1.1676998740e-1
	logP3    = -1.2420140846e-1
	logP4    = 1.4249322787e-1
	logP5    = -1.6668057665e-1
	logP6    = 2.0000714765e-1
	logP7    = -2.4999993993e-1
	logP8    = 3.3333331174e-1
)

// logf returns the natural logarithm of x.
func logf(x float32) float32 {
	b := math.Float32bits(x)
	if b-0x00800000 >= 0x7f000000 { // not a positive normal number
		return logSpecial(x)
	}
	return logNormal(b)
}

func logNormal(b uint32) float32 {
	e := float32(int32(b>>23) - 126)
	m := math.Float32frombits(b&0x007fffff | 0x3f000000) // [0.5, 1)
	var f float32
	if m < sqrtHalf {
		e--
		f = m + m - 1
	} else {
		f = m - 1
	}
	z := float32(f * f)
	y := float32(logP0*f) + logP1
	y = float32(y*f) + logP2
	y = float32(y*f) + logP3
	y = float32(y*f) + logP4
	y = float32(y*f) + logP5
	y = float32(y*f) + logP6
	y = float32(y*f) + logP7
	y = float32(y*f) + logP8
	y = float32(float32(y*f) * z)
	y += float32(e * ln2Lo)
	y -= float32(0.5 * z)
	return f + y + float32(e*ln2Hi)
}

func logSpecial(x float32) float32 {
	switch {
	case x == 0:
		return float32(math.Inf(-1))
	case x < 0 || x != x:
		return float32(math.NaN())
	case x > math.MaxFloat32:
		return x
	}
	// Subnormal: scale into the normal range, exactly.
	r := logNormal(math.Float32bits(x * (1 << 23)))
	return float32(float64(r) - 23*math.Ln2)
}

// log1pf returns log(1+y) for y >= 0 (Goldberg's trick keeps the relative
// accuracy for small y).
func log1pf(y float32) float32 {
	u := 1 + y
	if u == 1 {
		return y
	}
	return float32(logf(u)*y) / (u - 1)
}

// softplusf returns log(1+e^x) = max(x,0) + log1p(e^-|x|).
func softplusf(x float32) float32 {
	return max(x, 0) + log1pf(expf(-absf(x)))
}

// logSigmoidf returns log σ(x) = min(x,0) - log1p(e^-|x|).
func logSigmoidf(x float32) float32 {
	return min(x, 0) - log1pf(expf(-absf(x)))
}

// exp64 returns e^x in float64 with a relative error below 2e-16 for
// normal results (k·ln2 + r reduction, degree-11 Taylor polynomial).
func exp64(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > 709.78:
		return math.Inf(1)
	case x < -745.2:
		return 0
	}
	const (
		l2e = 1.4426950408889634
		c1  = 6.93147180369123816490e-01
		c2  = 1.90821492927058770002e-10
	)
	t := float64(x*l2e) + 6755399441055744.0 // 1.5·2^52
	k := t - 6755399441055744.0
	r := x - float64(k*c1)
	r -= float64(k * c2)
	p := 1.0 / 39916800
	for _, c := range [...]float64{1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1} {
		p = float64(p*r) + c
	}
	ki := int64(k)
	k1 := ki >> 1
	k2 := ki - k1
	return float64(p*math.Float64frombits(uint64(k1+1023)<<52)) * math.Float64frombits(uint64(k2+1023)<<52)
}

// erfc64 returns erfc(z) for z >= 0 with a relative error below 1.2e-7
// (Numerical Recipes' erfcc, a Chebyshev fit in t = 1/(1+z/2)).
func erfc64(z float64) float64 {
	t := 1 / (1 + 0.5*z)
	p := 0.17087277
	for _, c := range [...]float64{-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223} {
		p = float64(p*t) + c
	}
	return float64(t * exp64(float64(-z*z)+p))
}

const invSqrt2 = 0.70710678118654752440
const invSqrt2Pi = 0.39894228040143267794

// phi64 returns the normal CDF Φ(x) = erfc(-x/√2)/2.
func phi64(x float64) float64 {
	h := 0.5 * erfc64(math.Abs(x)*invSqrt2)
	if x > 0 {
		return 1 - h
	}
	return h
}

func geluExactf(x float32) float32 {
	v := float64(x)
	return float32(v * phi64(v))
}

// geluExactGradf returns Φ(x) + x·φ(x).
func geluExactGradf(x float32) float32 {
	v := min(max(float64(x), -gradClamp), gradClamp)
	pdf := float64(exp64(float64(-0.5*v)*v) * invSqrt2Pi)
	return float32(phi64(v) + float64(v*pdf))
}
