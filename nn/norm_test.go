package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// normRef normalizes each row of x (rows of length d) with naive loops:
// LayerNorm if center, RMSNorm otherwise.
func normRef(x []float64, d int, eps float64, w, b []float64, center bool) []float64 {
	out := make([]float64, len(x))
	for r := 0; r < len(x)/d; r++ {
		row := x[r*d : (r+1)*d]
		mean := 0.0
		if center {
			for _, v := range row {
				mean += v
			}
			mean /= float64(d)
		}
		ss := 0.0
		for _, v := range row {
			ss += (v - mean) * (v - mean)
		}
		inv := 1 / math.Sqrt(ss/float64(d)+eps)
		for j, v := range row {
			y := (v - mean) * inv
			if w != nil {
				y *= w[j]
			}
			if b != nil {
				y += b[j]
			}
			out[r*d+j] = y
		}
	}
	return out
}

func f64OrNil(x *tensor.Tensor) []float64 {
	if x == nil {
		return nil
	}
	return x.Float64s()
}

func TestNormForward(t *testing.T) {
	const d = 6
	type norm struct {
		w, b   *tensor.Tensor
		eps    float64
		center bool
	}
	ln := func(o nn.LayerNormOptions) norm {
		n := nn.NewLayerNorm(d, o)
		return norm{n.Weight, n.Bias, n.Eps, true}
	}
	rms := func(o nn.RMSNormOptions) norm {
		n := nn.NewRMSNorm(d, o)
		return norm{n.Weight, n.Bias, n.Eps, false}
	}
	cases := []struct {
		name       string
		n          norm
		hasW, hasB bool
		eps        float64
	}{
		{"LayerNorm defaults", ln(nn.LayerNormOptions{}), true, true, 1e-5},
		{"LayerNorm no weight, eps 0.1", ln(nn.LayerNormOptions{NoWeight: true, Eps: 0.1}), false, true, 0.1},
		{"LayerNorm bare", ln(nn.LayerNormOptions{NoWeight: true, NoBias: true}), false, false, 1e-5},
		{"RMSNorm defaults", rms(nn.RMSNormOptions{}), true, false, 1e-5},
		{"RMSNorm with bias, eps 0.5", rms(nn.RMSNormOptions{Bias: true, Eps: 0.5}), true, true, 0.5},
		{"RMSNorm bare", rms(nn.RMSNormOptions{NoWeight: true}), false, false, 1e-5},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := c.n
			require.Equal(t, c.hasW, n.w != nil)
			require.Equal(t, c.hasB, n.b != nil)
			require.Equal(t, c.eps, n.eps)
			if n.w != nil {
				assert.Equal(t, []float32{1, 1, 1, 1, 1, 1}, n.w.Float32s(), "weight starts at ones")
				n.w = randn(uint64(10+i), d)
			}
			if n.b != nil {
				assert.Equal(t, make([]float32, d), n.b.Float32s(), "bias starts at zeros")
				n.b = randn(uint64(20+i), d)
			}
			x := tensor.AddScalar(tensor.MulScalar(randn(uint64(i), 2, 3, d), 3), 1.5)
			var got *tensor.Tensor
			if n.center {
				got = nn.LayerNorm{Weight: n.w, Bias: n.b, Eps: n.eps}.Forward(x)
			} else {
				got = nn.RMSNorm{Weight: n.w, Bias: n.b, Eps: n.eps}.Forward(x)
			}
			want := normRef(x.Float64s(), d, n.eps, f64OrNil(n.w), f64OrNil(n.b), n.center)
			require.Equal(t, x.Shape(), got.Shape())
			assert.InDeltaSlice(t, want, got.Float64s(), 2e-5)
		})
	}
}

func TestNormDefaults(t *testing.T) {
	ln := nn.NewLayerNorm(4, nn.LayerNormOptions{})
	assert.Equal(t, 1e-5, ln.Eps)
	rms := nn.NewRMSNorm(4, nn.RMSNormOptions{})
	assert.Equal(t, 1e-5, rms.Eps)
	assert.Nil(t, rms.Bias)
	// LayerNorm output has zero mean and unit variance per row.
	y := ln.Forward(tensor.FromFloat32([]float32{1, 2, 3, 4, 10, 10, 10, 14}, 2, 4)).Float64s()
	for r := range 2 {
		mean, std := meanStd(y[r*4 : r*4+4])
		assert.InDelta(t, 0, mean, 1e-6)
		assert.InDelta(t, 1, std, 1e-4)
	}
	// RMSNorm of [3, 4] is [3, 4]/√12.5.
	rms2 := nn.NewRMSNorm(2, nn.RMSNormOptions{})
	assert.InDeltaSlice(t, []float64{3 / math.Sqrt(12.5+1e-5), 4 / math.Sqrt(12.5+1e-5)},
		rms2.Forward(tensor.FromFloat32([]float32{3, 4}, 1, 2)).Float64s(), 1e-6)
}

func TestNormGrad(t *testing.T) {
	x := randn(3, 3, 5)
	w, b := randn(4, 5), randn(5, 5)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
		return nn.LayerNorm{Weight: xs[0], Bias: xs[1], Eps: 1e-5}.Forward(xs[2])
	}, w, b, x)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
		return nn.RMSNorm{Weight: xs[0], Bias: xs[1], Eps: 1e-5}.Forward(xs[2])
	}, w, b, x)
}

func TestNormPanics(t *testing.T) {
	ln := nn.NewLayerNorm(4, nn.LayerNormOptions{})
	requirePanicContains(t, func() { ln.Forward(tensor.Zeros(tensor.Float32, 2, 3)) }, "nn.LayerNorm: x f32[2,3]: want float [..., 4]")
	requirePanicContains(t, func() { ln.Forward(tensor.Zeros(tensor.Int32, 2, 4)) }, "nn.LayerNorm: x i32[2,4]")
	requirePanicContains(t, func() { ln.Forward(tensor.Zeros(tensor.Float64, 2, 4)) },
		"nn.LayerNorm: x f64[2,4], parameter f32[4]: dtypes differ; convert x with tensor.Convert or the layer with nn.CastTo")
	requirePanicContains(t, func() { nn.NewGroupNorm(2, 4, nn.GroupNormOptions{}).Forward(tensor.Zeros(tensor.Float64, 1, 4, 3)) },
		"nn.GroupNorm: x f64[1,4,3], parameter f32[4]: dtypes differ")
	rms := nn.NewRMSNorm(4, nn.RMSNormOptions{NoWeight: true})
	requirePanicContains(t, func() { rms.Forward(tensor.Scalar(2)) }, "nn.RMSNorm: x f32[]: want float with at least one dimension")
	requirePanicContains(t, func() { nn.NewLayerNorm(-1, nn.LayerNormOptions{}) }, "nn.NewLayerNorm: negative dim -1")
	requirePanicContains(t, func() { nn.NewRMSNorm(-2, nn.RMSNormOptions{}) }, "nn.NewRMSNorm: negative dim -2")
}
