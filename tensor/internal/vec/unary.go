package vec

// Exp sets dst[i] to f(src[i]) with f(x) = e^x. dst must be as long as src; it
// may be src itself.
func Exp(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if useAVX2 {
		n = len(src) &^ 7
		expAVX2(dst[:n], src[:n])
	}
	for i := n; i < len(src); i++ {
		dst[i] = expf(src[i])
	}
}

// Tanh sets dst[i] to f(src[i]) with f(x) = tanh x. dst must be as long as src; it
// may be src itself.
func Tanh(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if useAVX2 {
		n = len(src) &^ 7
		tanhAVX2(dst[:n], src[:n])
	}
	for i := n; i < len(src); i++ {
		dst[i] = tanhf(src[i])
	}
}

// Sigmoid sets dst[i] to f(src[i]) with f(x) = 1/(1+e^-x). dst must be as long as src; it
// may be src itself.
func Sigmoid(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if useAVX2 {
		n = len(src) &^ 7
		sigmoidAVX2(dst[:n], src[:n])
	}
	for i := n; i < len(src); i++ {
		dst[i] = sigmoidf(src[i])
	}
}

// Gelu sets dst[i] to f(src[i]) with f(x) = x·σ(2·√(2/π)·(x+0.044715x³)). dst must be as long as src; it
// may be src itself.
func Gelu(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if useAVX512 {
		n = len(src) &^ 31
		geluAVX512(dst[:n], src[:n])
	}
	if useAVX2 {
		m := n + (len(src)-n)&^7
		geluAVX2(dst[n:m], src[n:m])
		n = m
	}
	for i := n; i < len(src); i++ {
		dst[i] = geluf(src[i])
	}
}

// GeluGrad sets dst[i] to f(src[i]) with f the derivative of Gelu. dst must be as long as src; it
// may be src itself.
func GeluGrad(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if useAVX512 {
		n = len(src) &^ 31
		geluGradAVX512(dst[:n], src[:n])
	}
	if useAVX2 {
		m := n + (len(src)-n)&^7
		geluGradAVX2(dst[n:m], src[n:m])
		n = m
	}
	for i := n; i < len(src); i++ {
		dst[i] = geluGradf(src[i])
	}
}

// GeluParts sets h[i] to Gelu(src[i]) and d[i] to GeluGrad(src[i]), with
// their bits, computing the sigmoid they share once (AVX-512) or each in
// turn. h and d must be as long as src; either may be src itself.
func GeluParts(h, d, src []float32) {
	h, d = h[:len(src)], d[:len(src)]
	n := 0
	if useAVX512 {
		n = len(src) &^ 31
		geluPartsAVX512(h[:n], d[:n], src[:n])
	}
	if n < len(src) {
		Gelu(h[n:], src[n:]) // before d overwrites src, if d is src
		GeluGrad(d[n:], src[n:])
	}
}

// Silu sets dst[i] to f(src[i]) with f(x) = x·σ(x). dst must be as long as src; it
// may be src itself.
func Silu(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if useAVX2 {
		n = len(src) &^ 7
		siluAVX2(dst[:n], src[:n])
	}
	for i := n; i < len(src); i++ {
		dst[i] = siluf(src[i])
	}
}

// SiluGrad sets dst[i] to f(src[i]) with f(x) = σ(x)·(1+x·(1-σ(x))). dst must be as long as src; it
// may be src itself.
func SiluGrad(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if useAVX2 {
		n = len(src) &^ 7
		siluGradAVX2(dst[:n], src[:n])
	}
	for i := n; i < len(src); i++ {
		dst[i] = siluGradf(src[i])
	}
}

// Log sets dst[i] to f(src[i]) with f the natural logarithm. dst must be as long as src; it
// may be src itself.
func Log(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	for i := n; i < len(src); i++ {
		dst[i] = logf(src[i])
	}
}

// Softplus sets dst[i] to f(src[i]) with f(x) = log(1+e^x), computed as max(x,0)+log1p(e^-|x|). dst must be as long as src; it
// may be src itself.
func Softplus(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	for i := n; i < len(src); i++ {
		dst[i] = softplusf(src[i])
	}
}

// LogSigmoid sets dst[i] to f(src[i]) with f(x) = log σ(x) = min(x,0)-log1p(e^-|x|). dst must be as long as src; it
// may be src itself.
func LogSigmoid(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	for i := n; i < len(src); i++ {
		dst[i] = logSigmoidf(src[i])
	}
}

// GeluExact sets dst[i] to f(src[i]) with f(x) = x·Φ(x) with the normal CDF Φ, evaluated in float64. dst must be as long as src; it
// may be src itself.
func GeluExact(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	for i := n; i < len(src); i++ {
		dst[i] = geluExactf(src[i])
	}
}

// GeluExactGrad sets dst[i] to f(src[i]) with f(x) = Φ(x)+x·φ(x), the derivative of GeluExact. dst must be as long as src; it
// may be src itself.
func GeluExactGrad(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	for i := n; i < len(src); i++ {
		dst[i] = geluExactGradf(src[i])
	}
}
