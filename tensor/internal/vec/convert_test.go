package vec

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/half"
)

// convLevels returns the conversion kernel levels this machine can run for
// one of the three kernel families, given the level it chose.
func convLevels(best int) []int {
	var l []int
	for lv := convGo; lv <= best; lv++ {
		l = append(l, lv)
	}
	return l
}

// useConv forces the conversion kernels to level lv (or lower, where a
// family does not reach it) and returns a restore function.
func useConv(lv int) func() {
	b, w, f := convBF16, convWiden, convF16
	convBF16, convWiden, convF16 = min(lv, b), min(lv, w), min(lv, f)
	return func() { convBF16, convWiden, convF16 = b, w, f }
}

// narrowInputs returns float32 inputs covering the conversion edge cases:
// a sweep of bit patterns of both signs, both types' subnormals and their
// boundaries, exact ties (even and odd), NaNs with many payloads, ±Inf,
// and the float16 overflow boundary.
func narrowInputs() []float32 {
	var v []float32
	for b := uint64(0); b < 1<<32; b += 65521 { // every 65521st pattern
		v = append(v, math.Float32frombits(uint32(b)))
	}
	bits := []uint32{
		0, 0x80000000, 1, 0x80000001, 0x007fffff, 0x00800000, 0x00400000, // f32 subnormals
		0x00008000, 0x00018000, 0x00017fff, 0x00008001, 0x0000ffff, // bf16 ties in the subnormal range
		0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, // ties at 1.0 (to even, to even up), above, below
		0x7f7f8000, 0x7f7fffff, 0xff7f8000, // round up to Inf in bf16
		0x7f800000, 0xff800000, // ±Inf
		0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa00000, 0xff812345, 0x7fbfffff, 0x7f80ffff, 0x7fff0000, // NaNs
		0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x47800000, 0x4f000000, // f16: 65504, below tie, tie to Inf, above, 65536, 2^31
		0x33800000, 0x33000000, 0x33000001, 0x33c00000, 0x387fc000, 0x38800000, 0x387fe000, 0x38000000, // f16 subnormals, 2^-25 tie
		0x3a000800, 0x3a001800, 0x3a001000, // f16 ties at 2^-11 scale
	}
	for _, b := range bits {
		v = append(v, math.Float32frombits(b), math.Float32frombits(b^0x80000000))
	}
	// Every float16 and bfloat16 value and the midpoints next to them.
	for h := 0; h < 1<<16; h += 7 {
		f := half.Float16(h).Float32()
		v = append(v, f, math.Nextafter32(f, float32(math.Inf(1))))
		g := math.Float32frombits(uint32(h)<<16 | 0x8000) // bf16 tie
		v = append(v, g)
	}
	return v
}

func sameBits(t *testing.T, name string, want, got []uint16, in []float32) {
	t.Helper()
	for i := range want {
		if want[i] != got[i] {
			require.Failf(t, name, "input %#08x (%g): want %#04x, got %#04x", math.Float32bits(in[i]), in[i], want[i], got[i])
		}
	}
}

func TestConvertNarrow(t *testing.T) {
	in := narrowInputs()
	wantBF := make([]uint16, len(in))
	wantH := make([]uint16, len(in))
	for i, f := range in {
		wantBF[i] = uint16(half.FromFloat32BF(f))
		wantH[i] = uint16(half.FromFloat32(f))
	}
	for _, lv := range convLevels(max(convBF16, convF16)) {
		t.Run(fmt.Sprint("level", lv), func(t *testing.T) {
			defer useConv(lv)()
			// Lengths that exercise the vector body and the scalar tail.
			for _, n := range []int{len(in), len(in) - 1, 17, 15, 8, 7, 1, 0} {
				got := make([]uint16, n)
				BF16FromF32(got, in[:n])
				sameBits(t, "bfloat16 "+ConversionKernels(), wantBF[:n], got, in)
				F16FromF32(got, in[:n])
				sameBits(t, "float16 "+ConversionKernels(), wantH[:n], got, in)
			}
		})
	}
}

// TestBF16PairsFromF32: each 32-bit element holds the bfloat16 roundings
// of its lo and hi inputs (internal/half's bits: subnormals, NaN, ±Inf,
// ties), lo in the low half, on every kernel level and across the
// vector body and the scalar tail.
func TestBF16PairsFromF32(t *testing.T) {
	lo := narrowInputs()
	hi := slices.Clone(lo)
	slices.Reverse(hi)
	for _, lv := range convLevels(convBF16) {
		t.Run(fmt.Sprint("level", lv), func(t *testing.T) {
			defer useConv(lv)()
			for _, n := range []int{len(lo), len(lo) - 1, 33, 17, 16, 15, 1, 0} {
				got := make([]uint32, n)
				BF16PairsFromF32(got, lo[:n], hi[:n])
				for j := range got {
					want := uint32(half.FromFloat32BF(lo[j])) | uint32(half.FromFloat32BF(hi[j]))<<16
					if got[j] != want {
						require.Failf(t, "BF16PairsFromF32", "n=%d j=%d inputs %#08x, %#08x: want %#08x, got %#08x",
							n, j, math.Float32bits(lo[j]), math.Float32bits(hi[j]), want, got[j])
					}
				}
			}
		})
	}
	require.PanicsWithValue(t, "vec.BF16PairsFromF32: length mismatch", func() {
		BF16PairsFromF32(make([]uint32, 2), make([]float32, 2), make([]float32, 3))
	})
}

func TestConvertWiden(t *testing.T) {
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	for _, lv := range convLevels(max(convWiden, convF16)) {
		t.Run(fmt.Sprint("level", lv), func(t *testing.T) {
			defer useConv(lv)()
			for _, n := range []int{len(all), 1<<16 - 3, 9} {
				got := make([]float32, n)
				F32FromBF16(got, all[:n])
				for i, h := range all[:n] {
					require.Equal(t, math.Float32bits(half.BFloat16(h).Float32()), math.Float32bits(got[i]), "bf16 %#04x", h)
					require.Equal(t, uint32(h)<<16, math.Float32bits(got[i]), "bf16 %#04x: widening is a shift", h)
				}
				F32FromF16(got, all[:n])
				for i, h := range all[:n] {
					want := math.Float32bits(half.Float16(h).Float32())
					g := math.Float32bits(got[i])
					if h&0x7c00 == 0x7c00 && h&0x3ff != 0 && convF16 != convGo {
						// A signalling NaN comes out quiet from the hardware.
						want |= 0x00400000
					}
					require.Equal(t, want, g, "f16 %#04x", h)
				}
			}
		})
	}
}

func TestConvertLengthMismatch(t *testing.T) {
	require.PanicsWithValue(t, "vec.BF16FromF32: length mismatch", func() { BF16FromF32(make([]uint16, 2), make([]float32, 3)) })
	require.PanicsWithValue(t, "vec.F32FromBF16: length mismatch", func() { F32FromBF16(make([]float32, 2), make([]uint16, 3)) })
	require.PanicsWithValue(t, "vec.F16FromF32: length mismatch", func() { F16FromF32(make([]uint16, 2), make([]float32, 3)) })
	require.PanicsWithValue(t, "vec.F32FromF16: length mismatch", func() { F32FromF16(make([]float32, 2), make([]uint16, 3)) })
}

func BenchmarkConvert(b *testing.B) {
	const n = 1 << 16
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i) * 0.37
	}
	h := make([]uint16, n)
	f := make([]float32, n)
	for _, lv := range convLevels(max(convBF16, convWiden, convF16)) {
		restore := useConv(lv)
		name := fmt.Sprint("level", lv)
		for _, c := range []struct {
			name string
			fn   func()
		}{
			{"BF16FromF32", func() { BF16FromF32(h, src) }},
			{"F32FromBF16", func() { F32FromBF16(f, h) }},
			{"F16FromF32", func() { F16FromF32(h, src) }},
			{"F32FromF16", func() { F32FromF16(f, h) }},
		} {
			b.Run(c.name+"/"+name, func(b *testing.B) {
				for b.Loop() {
					c.fn()
				}
				b.ReportMetric(float64(n*6)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
		restore()
	}
}
