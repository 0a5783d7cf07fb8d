package f64

import "math"

// Binary kernels. In each, dst must be as long as the vector operands and
// may be one of them. "VV" takes two vectors, "VS" a vector and a scalar
// second operand, "SV" a scalar first operand.

// AddVV sets dst[i] = a[i] + b[i].
func AddVV(dst, a, b []float64) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

// SubVV sets dst[i] = a[i] - b[i].
func SubVV(dst, a, b []float64) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] - b[i]
	}
}

// MulVV sets dst[i] = a[i] * b[i].
func MulVV(dst, a, b []float64) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] * b[i]
	}
}

// DivVV sets dst[i] = a[i] / b[i].
func DivVV(dst, a, b []float64) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] / b[i]
	}
}

// AddVS sets dst[i] = a[i] + s.
func AddVS(dst, a []float64, s float64) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] = a[i] + s
	}
}

// SubVS sets dst[i] = a[i] - s.
func SubVS(dst, a []float64, s float64) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] = a[i] - s
	}
}

// SubSV sets dst[i] = s - b[i].
func SubSV(dst []float64, s float64, b []float64) {
	b = b[:len(dst)]
	for i := range dst {
		dst[i] = s - b[i]
	}
}

// MulVS sets dst[i] = a[i] * s.
func MulVS(dst, a []float64, s float64) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] = a[i] * s
	}
}

// DivVS sets dst[i] = a[i] / s.
func DivVS(dst, a []float64, s float64) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] = a[i] / s
	}
}

// DivSV sets dst[i] = s / b[i].
func DivSV(dst []float64, s float64, b []float64) {
	b = b[:len(dst)]
	for i := range dst {
		dst[i] = s / b[i]
	}
}

// Fill sets every element of dst to v.
func Fill(dst []float64, v float64) {
	for i := range dst {
		dst[i] = v
	}
}

// MaxVV sets dst[i] = max(a[i], b[i]), NaN if either is NaN (jnp.maximum).
func MaxVV(dst, a, b []float64) {
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
func MinVV(dst, a, b []float64) {
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
func Relu(dst, src []float64) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = max(v, 0)
	}
}

// ReluGradMul sets dst[i] = g[i] where y[i] > 0 and 0 elsewhere.
func ReluGradMul(dst, g, y []float64) {
	g, y = g[:len(dst)], y[:len(dst)]
	for i := range dst {
		if y[i] > 0 {
			dst[i] = g[i]
		} else {
			dst[i] = 0
		}
	}
}

// TanhGradMul sets dst[i] = g[i]·(1 - y[i]²), the tanh VJP from the output.
func TanhGradMul(dst, g, y []float64) {
	g, y = g[:len(dst)], y[:len(dst)]
	for i := range dst {
		v := y[i]
		dst[i] = g[i] * (1 - float64(v*v))
	}
}

// SigmoidGradMul sets dst[i] = g[i]·y[i]·(1 - y[i]), the sigmoid VJP from
// the output.
func SigmoidGradMul(dst, g, y []float64) {
	g, y = g[:len(dst)], y[:len(dst)]
	for i := range dst {
		v := y[i]
		dst[i] = g[i] * float64(v*(1-v))
	}
}

// Square sets dst[i] = src[i]².
func Square(dst, src []float64) {
	MulVV(dst, src, src)
}

// Sqrt sets dst[i] to the correctly rounded square root of src[i].
func Sqrt(dst, src []float64) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = math.Sqrt(v)
	}
}

// Rsqrt sets dst[i] = 1/√src[i] (two roundings: below 1 ulp).
func Rsqrt(dst, src []float64) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = 1 / math.Sqrt(v)
	}
}
