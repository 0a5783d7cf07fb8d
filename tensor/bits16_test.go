package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/tensor"
)

// TestBits16: WidenBits16 and RoundBits16 give the bits of the scalar
// reference conversions (internal/half, integer bit arithmetic) on edge
// cases and on lengths that exercise the vector kernels' tails, and panic
// on a wrong dtype or length.
func TestBits16(t *testing.T) {
	f := []float32{0, float32(math.Copysign(0, -1)), 1, -2, 1 + 0x1p-8, 1 + 3*0x1p-8, 65504, 65520, 70000, 0x1p-24, 0x1p-25, 0x1p-133,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.Float32frombits(0x7fc12345), math.MaxFloat32, 3.14159}
	for len(f) < 53 {
		f = append(f, float32(len(f))*0.3712-7)
	}
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		got := make([]uint16, len(f))
		tensor.RoundBits16(got, dt, f)
		back := make([]float32, len(f))
		tensor.WidenBits16(back, dt, got)
		for i, v := range f {
			var want uint16
			var wide float32
			if dt == tensor.BFloat16 {
				want = uint16(half.FromFloat32BF(v))
				wide = half.BFloat16(want).Float32()
			} else {
				want = uint16(half.FromFloat32(v))
				wide = half.Float16(want).Float32()
			}
			if math.IsNaN(float64(v)) {
				require.True(t, math.IsNaN(float64(back[i])), "%v NaN", dt)
				continue
			}
			require.Equal(t, want, got[i], "%v: %v", dt, v)
			require.Equal(t, math.Float32bits(wide), math.Float32bits(back[i]), "%v: widen %#04x", dt, want)
		}
		require.Panics(t, func() { tensor.RoundBits16(make([]uint16, 2), dt, make([]float32, 3)) })
		require.Panics(t, func() { tensor.WidenBits16(make([]float32, 2), dt, make([]uint16, 3)) })
	}
	require.Panics(t, func() { tensor.RoundBits16(nil, tensor.Float32, nil) })
}
