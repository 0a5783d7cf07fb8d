package f64

// The transcendental kernels: dst[i] = f(src[i]). dst must be as long as
// src; it may be src itself. Their accuracy is in the package doc.

// Exp sets dst[i] = e^src[i].
func Exp(dst, src []float64) { apply(dst, src, exp) }

// Log sets dst[i] to the natural logarithm of src[i].
func Log(dst, src []float64) { apply(dst, src, log) }

// Tanh sets dst[i] = tanh src[i].
func Tanh(dst, src []float64) { apply(dst, src, tanh) }

// Sigmoid sets dst[i] = 1/(1+e^-src[i]).
func Sigmoid(dst, src []float64) { apply(dst, src, sigmoid) }

// Gelu sets dst[i] = x·σ(2·√(2/π)·(x+0.044715x³)) for x = src[i] (the
// tanh form, jax.nn.gelu's default).
func Gelu(dst, src []float64) { apply(dst, src, gelu) }

// GeluGrad sets dst[i] to the derivative of Gelu at src[i].
func GeluGrad(dst, src []float64) { apply(dst, src, geluGrad) }

// GeluExact sets dst[i] = x·Φ(x) for x = src[i], Φ the standard normal
// CDF (jax.nn.gelu with approximate=False).
func GeluExact(dst, src []float64) { apply(dst, src, geluExact) }

// GeluExactGrad sets dst[i] = Φ(x) + x·φ(x), the derivative of GeluExact.
func GeluExactGrad(dst, src []float64) { apply(dst, src, geluExactGrad) }

// Silu sets dst[i] = x·σ(x) for x = src[i].
func Silu(dst, src []float64) { apply(dst, src, silu) }

// SiluGrad sets dst[i] = σ(x)·(1+x·(1-σ(x))) for x = src[i].
func SiluGrad(dst, src []float64) { apply(dst, src, siluGrad) }

// Softplus sets dst[i] = log(1+e^x) for x = src[i], computed as
// max(x,0)+log1p(e^-|x|).
func Softplus(dst, src []float64) { apply(dst, src, softplus) }

// LogSigmoid sets dst[i] = log σ(x) = min(x,0)-log1p(e^-|x|) for x =
// src[i].
func LogSigmoid(dst, src []float64) { apply(dst, src, logSigmoid) }

// ExpShift sets dst[i] = e^(src[i] - m) and returns Σ dst[i] summed as Sum
// sums. The subtraction is compensated (its rounding error e is carried as
// e^d·(1+e)), so results stay within an ulp or two even far below the
// maximum, where src[i] - m is not exact. src[i] = -Inf gives 0.
func ExpShift(dst, src []float64, m float64) float64 {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = expShift(v, m)
	}
	return Sum(dst)
}

// apply sets dst[i] = f(src[i]). The small scalar functions are not
// inlined into it; a call costs about a nanosecond against the 5-20 of
// the functions themselves.
func apply(dst, src []float64, f func(float64) float64) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = f(v)
	}
}
