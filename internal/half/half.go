package half

import "math"

// BFloat16 is the bit pattern of a bfloat16 value.
type BFloat16 uint16

// Float16 is the bit pattern of an IEEE 754 binary16 value.
type Float16 uint16

// FromFloat32BF rounds f to the nearest bfloat16, ties to even.
func FromFloat32BF(f float32) BFloat16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep sign and top payload, force quiet
		return BFloat16(b>>16 | 0x0040)
	}
	// Add half an ulp of the result, plus one if the kept lsb is odd (ties
	// to even). Overflow of the mantissa carries into the exponent, which
	// is exactly right, up to and including rounding to Inf.
	b += 0x7fff + (b>>16)&1
	return BFloat16(b >> 16)
}

// Float32 returns h widened to float32 (exact).
func (h BFloat16) Float32() float32 { return math.Float32frombits(uint32(h) << 16) }

// FromFloat32 rounds f to the nearest float16, ties to even. Values beyond
// the largest finite float16 (65504) that do not round down to it become
// ±Inf; tiny values become float16 subnormals or ±0.
func FromFloat32(f float32) Float16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff:
		if man != 0 { // NaN
			return Float16(sign | 0x7e00 | uint16(man>>13))
		}
		return Float16(sign | 0x7c00)
	case exp > 127+15: // ≥ 2^16: overflow
		return Float16(sign | 0x7c00)
	case exp >= 127-14: // normal float16 range (before rounding)
		// 10 mantissa bits kept, 13 dropped.
		v := uint32(exp-(127-15))<<10 | man>>13
		rest := man & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && v&1 == 1) {
			v++ // may carry into the exponent, up to Inf (0x7c00)
		}
		return Float16(uint32(sign) | v)
	case exp >= 127-25: // subnormal float16 (or rounds up to the smallest normal)
		m := man | 0x800000 // implicit bit
		// f = m * 2^(exp-150) and the float16 subnormal unit is 2^-24, so
		// the result is m >> (126-exp), rounded; 14 <= 126-exp <= 24.
		s := uint32(126 - exp)
		v := m >> s
		rest := m & (1<<s - 1)
		halfway := uint32(1) << (s - 1)
		if rest > halfway || (rest == halfway && v&1 == 1) {
			v++
		}
		return Float16(uint32(sign) | v)
	default: // below half the smallest subnormal: ±0
		return Float16(sign)
	}
}

// Float32 returns h widened to float32 (exact).
func (h Float16) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: normalise.
	e := uint32(127 - 15 + 1)
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
}

// FromFloat32sBF rounds each element of src into dst; it panics if the
// lengths differ.
func FromFloat32sBF(dst []BFloat16, src []float32) {
	if len(dst) != len(src) {
		panic("half.FromFloat32sBF: length mismatch")
	}
	for i, f := range src {
		dst[i] = FromFloat32BF(f)
	}
}

// ToFloat32sBF widens each element of src into dst; it panics if the
// lengths differ.
func ToFloat32sBF(dst []float32, src []BFloat16) {
	if len(dst) != len(src) {
		panic("half.ToFloat32sBF: length mismatch")
	}
	for i, h := range src {
		dst[i] = h.Float32()
	}
}

// FromFloat32s rounds each element of src into dst; it panics if the
// lengths differ.
func FromFloat32s(dst []Float16, src []float32) {
	if len(dst) != len(src) {
		panic("half.FromFloat32s: length mismatch")
	}
	for i, f := range src {
		dst[i] = FromFloat32(f)
	}
}

// ToFloat32s widens each element of src into dst; it panics if the
// lengths differ.
func ToFloat32s(dst []float32, src []Float16) {
	if len(dst) != len(src) {
		panic("half.ToFloat32s: length mismatch")
	}
	for i, h := range src {
		dst[i] = h.Float32()
	}
}
