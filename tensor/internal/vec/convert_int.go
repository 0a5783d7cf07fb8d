package vec

import "math"

// Conversions between float32, float64 and the integer storage types
// (int32, int64, uint8), with the semantics of tensor.AsType and JAX's
// convert_element_type:
//
//   - float to float rounds to nearest, ties to even (float64 to float32:
//     beyond float32's range to ±Inf); widening is exact;
//   - float to integer truncates toward zero and saturates: values beyond
//     the type's range become its minimum or maximum, ±Inf too, NaN
//     becomes 0;
//   - integer to float rounds to nearest (int64 to float64 beyond 2^53,
//     int32 and int64 to float32 beyond 2^24), exactly once;
//   - integer to integer wraps (two's complement: 300 as uint8 is 44, -1
//     is 255), as Go's conversions, numpy's and XLA's do.
//
// Each panics if the lengths of dst and src differ. They are pure Go:
// memory-bound loops the compiler turns into one instruction or a few per
// element.

// Float is a floating-point element type of the conversions.
type Float interface{ float32 | float64 }

// Integer is an integer element type of the conversions.
type Integer interface{ int32 | int64 | uint8 }

// F64FromF32 widens each element of src into dst (exact).
func F64FromF32(dst []float64, src []float32) {
	checkLen("vec.F64FromF32", len(dst), len(src))
	for i, v := range src {
		dst[i] = float64(v)
	}
}

// F32FromF64 rounds each element of src to float32 into dst.
func F32FromF64(dst []float32, src []float64) {
	checkLen("vec.F32FromF64", len(dst), len(src))
	for i, v := range src {
		dst[i] = float32(v)
	}
}

// IntFromFloat sets dst[i] to src[i] truncated toward zero, saturated to
// D's range, with NaN as 0.
func IntFromFloat[D Integer, S Float](dst []D, src []S) {
	checkLen("vec.IntFromFloat", len(dst), len(src))
	lo, hi := intRange[D]()
	for i, v := range src {
		f := float64(v)
		switch {
		case f != f:
			dst[i] = 0
		case f <= lo:
			dst[i] = D(lo)
		case f >= hi:
			dst[i] = intMax[D]()
		default:
			dst[i] = D(f) // truncates; in range
		}
	}
}

// intRange returns the float64 values at or below which a float saturates
// to D's minimum, and at or above which to its maximum: -2^(b-1) and
// 2^(b-1) for signed types of b bits (both exact in float64), 0 (below
// which truncation gives 0 or less) and 255 for uint8.
func intRange[D Integer]() (lo, hi float64) {
	switch any(D(0)).(type) {
	case int32:
		return math.MinInt32, math.MaxInt32 + 1
	case int64:
		return math.MinInt64, -math.MinInt64
	default:
		return 0, math.MaxUint8
	}
}

// intMax returns the maximum of D.
func intMax[D Integer]() D {
	switch any(D(0)).(type) {
	case int32:
		v := int32(math.MaxInt32)
		return D(v)
	case int64:
		v := int64(math.MaxInt64)
		return D(v)
	default:
		v := uint8(math.MaxUint8)
		return D(v)
	}
}

// FloatFromInt sets dst[i] to src[i] rounded to D.
func FloatFromInt[D Float, S Integer](dst []D, src []S) {
	checkLen("vec.FloatFromInt", len(dst), len(src))
	for i, v := range src {
		dst[i] = D(v)
	}
}

// IntFromInt sets dst[i] to src[i] wrapped to D (two's complement).
func IntFromInt[D, S Integer](dst []D, src []S) {
	checkLen("vec.IntFromInt", len(dst), len(src))
	for i, v := range src {
		dst[i] = D(v)
	}
}

func checkLen(op string, nd, ns int) {
	if nd != ns {
		panic(op + ": length mismatch")
	}
}
