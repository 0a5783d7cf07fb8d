package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// TestChannelDropout checks Dropout1d/2d/3d: every (example, channel) is
// either all zeros or x/(1-rate), the dropped fraction is the rate within
// sampling error, the same key drops the same channels, and inference is
// the identity.
func TestChannelDropout(t *testing.T) {
	for _, c := range []struct {
		d     nn.ChannelDropout
		shape []int
	}{
		{nn.NewDropout1d(0.3), []int{32, 64, 5}},
		{nn.NewDropout1d(0.3), []int{2048, 5}}, // unbatched [C, L]
		{nn.NewDropout2d(0.3), []int{32, 64, 3, 2}},
		{nn.NewDropout3d(0.3), []int{16, 128, 2, 1, 2}},
	} {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
			x := tensor.Convert(tensor.AddScalar(tensor.Uniform(tensor.NewKey(3), c.shape...), 1), dt) // in [1, 2): never 0
			y := c.d.Forward(x, tensor.NewKey(7))
			require.Equal(t, dt, y.DType())
			xs, ys := x.Float64s(), y.Float64s()
			inner := 1
			for _, s := range c.shape[len(c.shape)-c.d.Spatial:] {
				inner *= s
			}
			dropped := 0
			for ch := 0; ch < len(xs)/inner; ch++ {
				zero := ys[ch*inner] == 0
				if zero {
					dropped++
				}
				for i := ch * inner; i < (ch+1)*inner; i++ {
					if zero {
						require.Zero(t, ys[i], "%v channel %d", c.shape, ch)
					} else {
						require.InDelta(t, xs[i]/0.7, ys[i], 1e-6*ys[i], "%v channel %d", c.shape, ch)
					}
				}
			}
			// 2048 channels: the dropped fraction's sd is √(0.21/2048) = 0.01.
			require.InDelta(t, 0.3, float64(dropped)/float64(len(xs)/inner), 0.05, "%v", c.shape)
			require.Equal(t, ys, c.d.Forward(x, tensor.NewKey(7)).Float64s(), "same key")
			require.NotEqual(t, ys, c.d.Forward(x, tensor.NewKey(8)).Float64s(), "another key")
			require.Same(t, x, nn.InferenceMode(c.d, true).Forward(x, tensor.Key{}))
		}
	}
	x := tensor.Ones(tensor.Float32, 2, 3, 4)
	require.Equal(t, make([]float32, 24), nn.NewDropout1d(1).Forward(x, tensor.NewKey(1)).Float32s())
	require.Same(t, x, nn.NewDropout1d(0).Forward(x, tensor.NewKey(1)))
}

// TestAlphaDropout checks that AlphaDropout and FeatureAlphaDropout keep
// the mean 0 and variance 1 of standard normal (SELU's fixed point)
// inputs within sampling error, set each element to a·x + b or a·(-α') +
// b, and drop whole channels for FeatureAlphaDropout.
func TestAlphaDropout(t *testing.T) {
	const p, alpha = 0.2, 1.7580993408473766
	a := 1 / math.Sqrt((1-p)*(1+p*alpha*alpha))
	b := a * alpha * p
	moments := func(v []float64) (mean, variance float64) {
		for _, e := range v {
			mean += e
		}
		mean /= float64(len(v))
		for _, e := range v {
			variance += (e - mean) * (e - mean)
		}
		return mean, variance / float64(len(v))
	}
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		tol := 1e-12
		if dt == tensor.Float32 {
			tol = 1e-6
		}
		x := tensor.Convert(tensor.Normal(tensor.NewKey(11), 64, 256, 16), dt) // 262144 elements
		xs := x.Float64s()
		for name, d := range map[string]nn.Module{"alpha": nn.NewAlphaDropout(p), "feature": nn.NewFeatureAlphaDropout(p)} {
			y := d.Call(x, tensor.NewKey(12))
			ys := y.Float64s()
			dropped := 0
			for i, v := range ys {
				if math.Abs(v-(a*-alpha+b)) < tol {
					dropped++
					if name == "feature" {
						require.InDelta(t, a*-alpha+b, ys[i/16*16], tol, "%s %d: its channel dropped", name, i)
					}
				} else {
					require.InDelta(t, a*xs[i]+b, v, tol*(1+math.Abs(v)), "%s %d", name, i)
				}
			}
			require.InDelta(t, p, float64(dropped)/float64(len(ys)), 0.02, name)
			mean, variance := moments(ys)
			// Sampling error of 262144 draws (16384 channel draws for
			// feature): sd of the mean 0.002 (0.008), of the variance
			// 0.003 (0.012).
			require.InDelta(t, 0, mean, 0.04, "%s %v mean", name, dt)
			require.InDelta(t, 1, variance, 0.06, "%s %v variance", name, dt)
			require.Equal(t, ys, d.Call(x, tensor.NewKey(12)).Float64s(), "same key")
			require.NotEqual(t, ys, d.Call(x, tensor.NewKey(13)).Float64s(), "another key")
		}
	}
	x := tensor.Ones(tensor.Float64, 2, 3)
	require.Same(t, x, nn.InferenceMode(nn.NewAlphaDropout(0.5), true).Forward(x, tensor.Key{}))
	require.Same(t, x, nn.InferenceMode(nn.NewFeatureAlphaDropout(0.5), true).Forward(x, tensor.Key{}))
	require.Equal(t, make([]float64, 6), nn.NewAlphaDropout(1).Forward(x, tensor.NewKey(1)).Float64s())
}

// TestDropoutChannelPanics checks the hostile inputs of the channel and
// alpha dropouts.
func TestDropoutChannelPanics(t *testing.T) {
	f3 := tensor.Zeros(tensor.Float32, 3)
	for _, c := range []struct {
		fn   func()
		want string
	}{
		{func() { nn.NewDropout2d(1.5) }, "nn.NewDropout2d: rate 1.5 is not in [0, 1]"},
		{func() { nn.NewDropout2d(0.5).Forward(f3, tensor.NewKey(1)) }, "nn.Dropout2d: x f32[3]: want [N, C, H, W] or [C, H, W]"},
		{func() { nn.NewDropout1d(0.5).Forward(tensor.Zeros(tensor.Float32, 1, 2, 3, 4), tensor.NewKey(1)) }, "nn.Dropout1d: x f32[1,2,3,4]: want [N, C, L] or [C, L]"},
		{func() { nn.NewDropout3d(0.5).Forward(tensor.Zeros(tensor.Int32, 2, 2, 2, 2), tensor.NewKey(1)) }, "nn.Dropout3d: x i32[2,2,2,2]: want a float x"},
		{func() { nn.NewDropout3d(0.5).Forward(nil, tensor.NewKey(1)) }, "nn.Dropout3d"},
		{func() { nn.ChannelDropout{}.Forward(f3, tensor.NewKey(1)) }, "nn.ChannelDropout: Spatial 0"},
		{func() { nn.NewAlphaDropout(-0.1) }, "nn.NewAlphaDropout: rate -0.1 is not in [0, 1]"},
		{func() { nn.AlphaDropout{Dropout: nn.Dropout{Rate: 2}}.Forward(f3, tensor.NewKey(1)) }, "nn.AlphaDropout: rate 2 is not in [0, 1]"},
		{func() { nn.NewFeatureAlphaDropout(0.5).Forward(f3, tensor.NewKey(1)) }, "nn.FeatureAlphaDropout: x f32[3]: want [N, C, ...]"},
		{func() { nn.NewFeatureAlphaDropout(2) }, "nn.NewFeatureAlphaDropout: rate 2 is not in [0, 1]"},
	} {
		requirePanicContains(t, c.fn, c.want)
	}
}
