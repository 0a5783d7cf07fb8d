package tensor

import "math"

// The special functions behind Digamma and Polygamma, in float64 (their
// float32 results are rounded from these).

// bernoulli2k holds the Bernoulli numbers B_2, B_4, ..., B_16 of the
// asymptotic series of the polygamma functions.
var bernoulli2k = [...]float64{1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6, -3617.0 / 510}

// digamma returns ψ(x) = d/dx ln Γ(x), NaN at the poles (0, -1, -2, ...)
// as XLA's digamma.
func digamma(x float64) float64 {
	switch {
	case math.IsNaN(x) || math.IsInf(x, -1):
		return math.NaN()
	case math.IsInf(x, 1):
		return x
	case x <= 0 && x == math.Floor(x):
		return math.NaN()
	case x < 0:
		// Reflection: ψ(x) = ψ(1-x) - π·cot(πx).
		return digamma(1-x) - math.Pi*cotPi(x)
	}
	acc := 0.0
	for x < 10 {
		acc -= 1 / x // ψ(x) = ψ(x+1) - 1/x
		x++
	}
	// ψ(x) ~ ln x - 1/(2x) - Σ B_2k/(2k·x^2k).
	inv2 := 1 / (x * x)
	p, s := inv2, 0.0
	for k, b := range bernoulli2k[:7] {
		s += b / float64(2*(k+1)) * p
		p *= inv2
	}
	return acc + math.Log(x) - 0.5/x - s
}

// cotPi returns cot(πx) for a non-integer x, reducing x to its fraction
// first (exactly) so that large arguments keep their precision.
func cotPi(x float64) float64 {
	f := x - math.Floor(x) // in (0, 1)
	return math.Cos(math.Pi*f) / math.Sin(math.Pi*f)
}

// polygamma returns ψ^(n)(x), the n-th derivative of digamma (n >= 0):
// +Inf at the poles for odd n (the limit from both sides), NaN for even
// n.
func polygamma(n int, x float64) float64 {
	if n == 0 {
		return digamma(x)
	}
	switch {
	case math.IsNaN(x) || math.IsInf(x, -1):
		return math.NaN()
	case math.IsInf(x, 1):
		return 0
	case x <= 0 && x == math.Floor(x):
		if n%2 == 1 {
			return math.Inf(1)
		}
		return math.NaN()
	case x < 0:
		// Reflection: ψ⁽ⁿ⁾(x) = (-1)ⁿ ψ⁽ⁿ⁾(1-x) - π^(n+1)·P_n(cot πx), where
		// P_0(u) = u and P_(k+1)(u) = -(1+u²)·P_k'(u) give the n-th
		// derivative of cot(πx) as π^n·P_n(cot πx).
		u := cotPi(x)
		r := -math.Pow(math.Pi, float64(n+1)) * cotDerivPoly(n, u)
		if n%2 == 0 {
			return r + polygamma(n, 1-x)
		}
		return r - polygamma(n, 1-x)
	}
	fact := 1.0 // n!
	for k := 2; k <= n; k++ {
		fact *= float64(k)
	}
	sign := 1.0 // (-1)^(n+1)
	if n%2 == 0 {
		sign = -1
	}
	acc := 0.0
	lim := float64(20 + n)
	for x < lim {
		acc += sign * fact / math.Pow(x, float64(n+1)) // ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁾(x+1) + (-1)^(n+1)·n!/x^(n+1)
		x++
	}
	// ψ⁽ⁿ⁾(x) ~ (-1)^(n+1)·[(n-1)!/xⁿ + n!/(2x^(n+1)) + Σ B_2k·(2k+n-1)!/((2k)!·x^(2k+n))].
	s := fact/float64(n)/math.Pow(x, float64(n)) + fact/(2*math.Pow(x, float64(n+1)))
	coef := fact / float64(n) // (2k+n-1)!/(2k)! for k = 0: (n-1)!
	for k, b := range bernoulli2k {
		kk := 2 * (k + 1)
		coef *= float64(kk+n-2) * float64(kk+n-1) / (float64(kk-1) * float64(kk))
		s += b * coef / math.Pow(x, float64(kk+n))
	}
	return acc + sign*s
}

// cotDerivPoly evaluates P_n(u), the polynomial with d^n/dx^n cot(πx) =
// π^n·P_n(cot πx).
func cotDerivPoly(n int, u float64) float64 {
	p := []float64{0, 1} // coefficients, lowest first: P_0(u) = u
	for range n {
		// P' then -(1+u²)·P'.
		d := make([]float64, max(len(p)-1, 1))
		for i := 1; i < len(p); i++ {
			d[i-1] = float64(i) * p[i]
		}
		q := make([]float64, len(d)+2)
		for i, c := range d {
			q[i] -= c
			q[i+2] -= c
		}
		p = q
	}
	v := 0.0
	for i := len(p) - 1; i >= 0; i-- {
		v = v*u + p[i]
	}
	return v
}
