package vec

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestF64F32(t *testing.T) {
	src := []float64{0, math.Copysign(0, -1), 1.5, 1 + 0x1p-30, math.MaxFloat32 + 1e30, 1e39, -1e39, math.Inf(1), math.NaN(), 1e-46, 0x1p-149}
	dst := make([]float32, len(src))
	F32FromF64(dst, src)
	want := []float32{0, float32(math.Copysign(0, -1)), 1.5, 1, math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), 0, 0x1p-149}
	for i := range want {
		if math.IsNaN(float64(want[i])) {
			require.True(t, math.IsNaN(float64(dst[i])))
			continue
		}
		require.Equal(t, math.Float32bits(want[i]), math.Float32bits(dst[i]), "F32FromF64(%v)", src[i])
	}
	back := make([]float64, len(dst))
	F64FromF32(back, dst)
	for i, v := range dst {
		require.True(t, float64(v) == back[i] || math.IsNaN(back[i]))
	}
	require.PanicsWithValue(t, "vec.F32FromF64: length mismatch", func() { F32FromF64(make([]float32, 1), src) })
	require.PanicsWithValue(t, "vec.F64FromF32: length mismatch", func() { F64FromF32(make([]float64, 1), dst) })
}

// TestIntFromFloat: truncation toward zero, saturation, NaN as 0, for
// every pair of types, hand-worked.
func TestIntFromFloat(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	src := []float64{0, 1.9, -1.9, 254.7, 255, 256, -0.5, -300, 2147483647.9, 2147483648, -2147483648.9, -2147483649,
		0x1p63, 9.223372036854775e18, -9.223372036854775808e18, -1e19, inf, -inf, nan}
	i32 := make([]int32, len(src))
	IntFromFloat(i32, src)
	require.Equal(t, []int32{0, 1, -1, 254, 255, 256, 0, -300, 2147483647, 2147483647, -2147483648, -2147483648,
		math.MaxInt32, math.MaxInt32, math.MinInt32, math.MinInt32, math.MaxInt32, math.MinInt32, 0}, i32)
	i64 := make([]int64, len(src))
	IntFromFloat(i64, src)
	require.Equal(t, []int64{0, 1, -1, 254, 255, 256, 0, -300, 2147483647, 2147483648, -2147483648, -2147483649,
		math.MaxInt64, 9223372036854774784, math.MinInt64, math.MinInt64, math.MaxInt64, math.MinInt64, 0}, i64)
	u8 := make([]uint8, len(src))
	IntFromFloat(u8, src)
	require.Equal(t, []uint8{0, 1, 0, 254, 255, 255, 0, 0, 255, 255, 0, 0, 255, 255, 0, 0, 255, 0, 0}, u8)
	// float32 sources.
	f32 := []float32{2.9, -2.9, float32(nan), 3e9, -3e9}
	i32b := make([]int32, len(f32))
	IntFromFloat(i32b, f32)
	require.Equal(t, []int32{2, -2, 0, math.MaxInt32, math.MinInt32}, i32b)
	require.Panics(t, func() { IntFromFloat(make([]int64, 2), f32) })
}

// TestIntFromFloatRandom checks random floats against the definition.
func TestIntFromFloatRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]float64, 10000)
	for i := range src {
		src[i] = (rng.Float64()*2 - 1) * math.Exp2(float64(rng.IntN(70)))
	}
	i64 := make([]int64, len(src))
	IntFromFloat(i64, src)
	u8 := make([]uint8, len(src))
	IntFromFloat(u8, src)
	for i, v := range src {
		tr := math.Trunc(v)
		switch {
		case tr >= 0x1p63:
			require.Equal(t, int64(math.MaxInt64), i64[i])
		case tr < -0x1p63:
			require.Equal(t, int64(math.MinInt64), i64[i])
		default:
			require.Equal(t, int64(tr), i64[i], "%v", v)
		}
		require.Equal(t, uint8(min(max(tr, 0), 255)), u8[i], "%v", v)
	}
}

func TestFloatFromInt(t *testing.T) {
	i64 := []int64{0, -1, 1<<53 + 1, 1<<24 + 1, math.MaxInt64, math.MinInt64}
	f64 := make([]float64, len(i64))
	FloatFromInt(f64, i64)
	require.Equal(t, []float64{0, -1, 1 << 53, 1<<24 + 1, 0x1p63, -0x1p63}, f64)
	f32 := make([]float32, len(i64))
	FloatFromInt(f32, i64)
	// Rounded once: 2^24+1 is a tie (to even: 2^24); 2^53+1 rounds to 2^53.
	require.Equal(t, []float32{0, -1, 1 << 53, 1 << 24, 0x1p63, -0x1p63}, f32)
	// 2^24+3 is not a tie: one rounding gives 2^24+4 (through float64:
	// the same here, but int64 2^60+2^36+1 would round twice).
	big := []int64{1<<60 + 1<<36 + 1}
	f32b := make([]float32, 1)
	FloatFromInt(f32b, big)
	require.Equal(t, float32(1<<60+1<<37), f32b[0], "rounded once, up")
	u8 := []uint8{0, 7, 255}
	f := make([]float64, 3)
	FloatFromInt(f, u8)
	require.Equal(t, []float64{0, 7, 255}, f)
	require.Panics(t, func() { FloatFromInt(make([]float32, 1), u8) })
}

func TestIntFromInt(t *testing.T) {
	i64 := []int64{300, -1, 1 << 40, -(1 << 31), 255}
	u8 := make([]uint8, len(i64))
	IntFromInt(u8, i64)
	require.Equal(t, []uint8{44, 255, 0, 0, 255}, u8)
	i32 := make([]int32, len(i64))
	IntFromInt(i32, i64)
	require.Equal(t, []int32{300, -1, 0, -(1 << 31), 255}, i32)
	back := make([]int64, len(u8))
	IntFromInt(back, u8)
	require.Equal(t, []int64{44, 255, 0, 0, 255}, back)
	require.Panics(t, func() { IntFromInt(make([]int32, 1), u8) })
}
