package half

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The references below compute in float64 / big.Float, not with the bit
// tricks of the implementation.

// f16Value is the exact value of a finite float16 bit pattern, computed from
// the IEEE 754 formula in float64.
func f16Value(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	if e == 0 {
		return sign * math.Ldexp(m, -24)
	}
	return sign * math.Ldexp(1024+m, e-25)
}

func TestFloat16WidenExhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := Float16(i)
		got := h.Float32()
		e := (i >> 10) & 0x1f
		switch {
		case e == 0x1f && i&0x3ff == 0:
			require.True(t, math.IsInf(float64(got), 1-2*(i>>15)), "%#04x", i)
		case e == 0x1f:
			require.True(t, math.IsNaN(float64(got)), "%#04x", i)
			// payload kept in the top mantissa bits
			require.Equal(t, uint32(i&0x3ff)<<13, math.Float32bits(got)&0x7fffff, "%#04x", i)
		default:
			require.Equal(t, f16Value(uint16(i)), float64(got), "%#04x", i)
			require.Equal(t, i&0x8000 != 0, math.Signbit(float64(got)), "%#04x", i)
		}
	}
}

// nearestF16 finds the float16 nearest to x by comparing exact distances to
// its two neighbours among all finite float16 values (ties to even
// mantissa), treating values at or beyond 65520 as overflow.
func nearestF16(x float32) uint16 {
	var sign uint16
	v := float64(x)
	if math.Signbit(v) {
		sign = 0x8000
		v = -v
	}
	if v >= 65520 { // 65504 + half an ulp (16): rounds to Inf
		return sign | 0x7c00
	}
	// Binary search the largest non-negative finite pattern <= v.
	lo, hi := 0, 0x7bff
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if f16Value(uint16(mid)) <= v {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	a := uint16(lo)
	if f16Value(a) == v || a == 0x7bff {
		return sign | a
	}
	b := a + 1
	da := new(big.Float).Sub(big.NewFloat(v), big.NewFloat(f16Value(a)))
	db := new(big.Float).Sub(big.NewFloat(f16Value(b)), big.NewFloat(v))
	switch da.Cmp(db) {
	case -1:
		return sign | a
	case 1:
		return sign | b
	}
	if a&1 == 0 {
		return sign | a
	}
	return sign | b
}

func TestFloat16NarrowAgainstNearest(t *testing.T) {
	check := func(x float32) {
		t.Helper()
		require.Equal(t, Float16(nearestF16(x)), FromFloat32(x), "x=%g bits=%#08x", x, math.Float32bits(x))
	}
	// Every float16 value, the midpoints between neighbours (ties) and
	// one float32 ulp either side of each midpoint.
	for i := 0; i < 0x7c00; i++ {
		for _, s := range []float32{1, -1} {
			v := s * float32(f16Value(uint16(i)))
			check(v)
			if i < 0x7bff {
				mid := s * float32((f16Value(uint16(i))+f16Value(uint16(i+1)))/2)
				check(mid)
				check(math.Nextafter32(mid, 0))
				check(math.Nextafter32(mid, float32(math.Inf(int(s)))))
			}
		}
	}
	for _, x := range []float32{65504, 65519.998, 65520, 65536, 1e10, math.MaxFloat32, 1e-8, 2.9802322e-08, 2.9802326e-08, 5.9604645e-08, 1e-45, 0} {
		check(x)
		check(-x)
	}
}

func TestFloat16Special(t *testing.T) {
	assert.Equal(t, Float16(0x7c00), FromFloat32(float32(math.Inf(1))))
	assert.Equal(t, Float16(0xfc00), FromFloat32(float32(math.Inf(-1))))
	assert.Equal(t, Float16(0x8000), FromFloat32(float32(math.Copysign(0, -1))))
	// NaN payload: top 10 bits kept, quiet bit set, sign kept.
	nan := math.Float32frombits(0xff800001) // signalling NaN, payload only in low bits
	h := FromFloat32(nan)
	assert.Equal(t, Float16(0xfe00), h)
	assert.True(t, math.IsNaN(float64(h.Float32())))
	nan = math.Float32frombits(0x7fa02000)
	assert.Equal(t, Float16(0x7e00|0x101), FromFloat32(nan))
}

func TestBFloat16Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := BFloat16(i)
		got := h.Float32()
		require.Equal(t, uint32(i)<<16, math.Float32bits(got), "%#04x", i)
	}
}

// nearestBF rounds x to bfloat16 with exact big.Float arithmetic.
func nearestBF(x float32) uint16 {
	b := math.Float32bits(x)
	lo := uint16(b >> 16)
	if b&0xffff == 0 {
		return lo
	}
	hi := lo + 1 // next pattern in magnitude (may be Inf)
	vlo := float64(math.Float32frombits(uint32(lo) << 16))
	vhi := float64(math.Float32frombits(uint32(hi) << 16))
	if lo&0x7fff == 0x7f7f { // largest finite: the "next" is Inf, compare to 2^128
		vhi = math.Copysign(math.Ldexp(1, 128), vlo)
	}
	v := float64(x)
	d1 := math.Abs(v - vlo) // exact: all fit in float64's 53 bits
	d2 := math.Abs(vhi - v)
	switch {
	case d1 < d2:
		return lo
	case d2 < d1:
		return hi
	case lo&1 == 0:
		return lo
	}
	return hi
}

func TestBFloat16Narrow(t *testing.T) {
	rng := uint32(12345)
	for i := 0; i < 2_000_000; i++ {
		rng = rng*1664525 + 1013904223
		b := rng
		if b&0x7fffffff >= 0x7f800000 {
			continue
		}
		x := math.Float32frombits(b)
		require.Equal(t, BFloat16(nearestBF(x)), FromFloat32BF(x), "bits=%#08x", b)
	}
	// Ties (low half exactly 0x8000), odd and even, subnormals and the top.
	for _, b := range []uint32{0x3f808000, 0x3f818000, 0x00008000, 0x00018000, 0x0000ffff, 0x00000001, 0x7f7f8000, 0x7f7f7fff, 0x7f7fffff, 0xff7fffff} {
		x := math.Float32frombits(b)
		require.Equal(t, BFloat16(nearestBF(x)), FromFloat32BF(x), "bits=%#08x", b)
	}
	assert.Equal(t, BFloat16(0x7f80), FromFloat32BF(math.Float32frombits(0x7f7fffff)), "rounds to +Inf")
	assert.Equal(t, BFloat16(0x7f80), FromFloat32BF(float32(math.Inf(1))))
	assert.Equal(t, BFloat16(0xff80), FromFloat32BF(float32(math.Inf(-1))))
	// NaN whose payload lives only in the low 16 bits stays NaN.
	h := FromFloat32BF(math.Float32frombits(0x7f800001))
	assert.True(t, math.IsNaN(float64(h.Float32())))
	assert.Equal(t, BFloat16(0x7fc0), h)
	assert.Equal(t, BFloat16(0xffc1), FromFloat32BF(math.Float32frombits(0xff810000)))
}

func TestSlices(t *testing.T) {
	src := []float32{1, -2.5, 65504, 1e-7, float32(math.Inf(1))}
	f16 := make([]Float16, len(src))
	FromFloat32s(f16, src)
	back := make([]float32, len(src))
	ToFloat32s(back, f16)
	for i, x := range src {
		assert.Equal(t, FromFloat32(x).Float32(), back[i])
	}
	bf := make([]BFloat16, len(src))
	FromFloat32sBF(bf, src)
	ToFloat32sBF(back, bf)
	for i, x := range src {
		assert.Equal(t, FromFloat32BF(x).Float32(), back[i])
	}
	assert.Panics(t, func() { FromFloat32s(f16[:1], src) })
	assert.Panics(t, func() { ToFloat32sBF(back[:1], bf) })
}
