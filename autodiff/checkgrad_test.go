package autodiff_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// noise returns a constant (untraced) tensor of pseudo-random values of
// size amp that depend on the bits of x: the model of float32 rounding
// noise whose pattern changes with the summation order of the kernels.
func noise(x *tensor.Tensor, amp float64) *tensor.Tensor {
	v := x.Float32s()
	out := make([]float32, len(v))
	for i, e := range v {
		h := math.Float32bits(e)*0x9e3779b1 + uint32(i)*0x85ebca77
		h ^= h >> 15
		h *= 0x2c1b3c6d
		h ^= h >> 12
		out[i] = float32(amp * (float64(h)/math.MaxUint32*2 - 1))
	}
	return tensor.Reshape(tensor.FromFloat32(out), x.Shape()...)
}

// scaledSquare returns x² with its derivative multiplied by k (k = 1: the
// true derivative).
func scaledSquare(k float32) func(*tensor.Tensor) *tensor.Tensor {
	return autodiff.CustomVJP("scaled_square",
		func(x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) { return tensor.Square(x), x },
		func(x, g *tensor.Tensor) *tensor.Tensor { return tensor.Mul(g, tensor.MulScalar(x, 2*k)) })
}

// TestCheckGradNoise checks that CheckGrad judges a finite difference
// against the noise of f's evaluation: noise of 1e-4 (a relative 1e-4 of
// the values, a badly conditioned float32 computation) makes a plain
// central difference with step 1e-3 wrong by up to 0.1, far beyond a fixed
// tolerance, yet a correct derivative passes whatever the noise pattern,
// and wrong ones are still reported.
func TestCheckGradNoise(t *testing.T) {
	x := tensor.FromFloat32([]float32{0.5, -1.25, 2, 0.75, -0.3, 1.5}, 2, 3)
	for _, tc := range []struct {
		name    string
		k       float32
		amp     float64
		wantErr bool
	}{
		{"exact", 1, 0, false},
		{"noisy", 1, 1e-4, false},
		{"off by 2%", 1.02, 0, true},
		{"off by 50%, noisy", 1.5, 1e-4, true},
		{"sign, noisy", -1, 1e-4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sq := scaledSquare(tc.k)
			for seed := range uint64(20) {
				f := func(xs []*tensor.Tensor) *tensor.Tensor {
					y := sq(xs[0])
					if tc.amp == 0 {
						return y
					}
					// A different noise pattern per seed, as per kernel set.
					return tensor.Add(y, noise(tensor.AddScalar(xs[0], float32(seed)), tc.amp))
				}
				err := autodiff.CheckGrad(f, []*tensor.Tensor{x}, autodiff.CheckOptions{Seed: seed})
				if tc.wantErr {
					require.Error(t, err, "seed %d", seed)
					assert.Contains(t, err.Error(), "input 0 (f32[2,3]) element ")
				} else {
					require.NoError(t, err, "seed %d", seed)
				}
			}
		})
	}
}

// TestCheckGradLargeInputs checks inputs where float32 cannot represent
// x ± Eps/2 exactly (|x| near 3000, ulp 2.4e-4, and 2048 where the ulp
// changes): a correct derivative passes and one 10% off is still reported.
func TestCheckGradLargeInputs(t *testing.T) {
	x := tensor.FromFloat32([]float32{3000.7, -2500.3, 1800.1, 2048, -2048})
	linear := func(k float32) func(xs []*tensor.Tensor) *tensor.Tensor {
		f := autodiff.CustomVJP("scaled_linear",
			func(x *tensor.Tensor) (*tensor.Tensor, struct{}) { return tensor.MulScalar(x, 0.5), struct{}{} },
			func(_ struct{}, g *tensor.Tensor) *tensor.Tensor { return tensor.MulScalar(g, 0.5*k) })
		return func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0]) }
	}
	require.NoError(t, autodiff.CheckGrad(linear(1), []*tensor.Tensor{x}, autodiff.CheckOptions{}))
	require.Error(t, autodiff.CheckGrad(linear(1.1), []*tensor.Tensor{x}, autodiff.CheckOptions{}))
}
