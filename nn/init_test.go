package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

func TestComputeFans(t *testing.T) {
	cases := []struct {
		name    string
		shape   []int
		axes    nn.FanAxes
		in, out float64
	}{
		{"matrix", []int{3, 4}, nn.FanAxes{}, 3, 4},
		{"conv kernel: receptive field h*w", []int{2, 3, 4, 5}, nn.FanAxes{}, 2 * 3 * 4, 2 * 3 * 5},
		{"stacked experts, batch axis 0", []int{8, 3, 4}, nn.FanAxes{Batch: []int{0}}, 3, 4},
		{"stacked experts without batch axis", []int{8, 3, 4}, nn.FanAxes{}, 8 * 3, 8 * 4},
		{"explicit axes", []int{3, 4, 5}, nn.FanAxes{In: []int{0}, Out: []int{1}}, 3 * 5, 4 * 5},
		{"several in axes", []int{3, 4, 5}, nn.FanAxes{In: []int{0, 1}, Out: []int{-1}}, 12, 5},
		{"negative batch axis", []int{3, 4, 6}, nn.FanAxes{In: []int{0}, Out: []int{1}, Batch: []int{-1}}, 3, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, out := nn.ComputeFans(c.shape, c.axes)
			assert.Equal(t, c.in, in)
			assert.Equal(t, c.out, out)
		})
	}
}

func TestComputeFansPanics(t *testing.T) {
	requirePanicContains(t, func() { nn.ComputeFans([]int{5}, nn.FanAxes{}) }, "nn.ComputeFans: shape [5]", "at least 2 dimensions")
	requirePanicContains(t, func() { nn.ComputeFans(nil, nn.FanAxes{}) }, "at least 2 dimensions")
	requirePanicContains(t, func() { nn.ComputeFans([]int{3, 4}, nn.FanAxes{In: []int{2}}) }, "axis 2 out of range")
	requirePanicContains(t, func() { nn.ComputeFans([]int{3, 4}, nn.FanAxes{In: []int{-1}}) }, "used twice")
	// The initializers report the same error for a bias-shaped tensor.
	requirePanicContains(t, func() { nn.HeNormal()(tensor.NewKey(0), 7) }, "at least 2 dimensions")
}

// TestInitializerStatistics draws 240 000 values per initializer and checks
// mean, standard deviation and bounds against the distribution's.
func TestInitializerStatistics(t *testing.T) {
	const fanIn, fanOut = 400, 600
	shape := []int{fanIn, fanOut}
	sq := math.Sqrt
	avg := (fanIn + fanOut) / 2.0
	cases := []struct {
		name      string
		init      nn.Initializer
		mean, std float64
		lo, hi    float64 // bounds all values must respect (±Inf for none)
		hitBounds bool    // values come within 2% of the bounds
	}{
		{"Normal(0.5)", nn.Normal(0.5), 0, 0.5, math.Inf(-1), math.Inf(1), false},
		{"TruncatedNormal(0.5)", nn.TruncatedNormal(0.5), 0, 0.5 * 0.8796256610342398, -1, 1, true},
		{"Uniform(0.3)", nn.Uniform(0.3), 0.15, 0.3 / sq(12), 0, 0.3, true},
		{"UniformRange(-2, 1)", nn.UniformRange(-2, 1), -0.5, 3 / sq(12), -2, 1, true},
		{"GlorotUniform", nn.GlorotUniform(), 0, sq(1 / avg), -sq(3 / avg), sq(3 / avg), true},
		{"GlorotNormal", nn.GlorotNormal(), 0, sq(1 / avg), -2 * sq(1/avg) / 0.8796256610342398, 2 * sq(1/avg) / 0.8796256610342398, true},
		{"HeUniform", nn.HeUniform(), 0, sq(2.0 / fanIn), -sq(6.0 / fanIn), sq(6.0 / fanIn), true},
		{"HeNormal", nn.HeNormal(), 0, sq(2.0 / fanIn), -2 * sq(2.0/fanIn) / 0.8796256610342398, 2 * sq(2.0/fanIn) / 0.8796256610342398, true},
		{"LeCunUniform", nn.LeCunUniform(), 0, sq(1.0 / fanIn), -sq(3.0 / fanIn), sq(3.0 / fanIn), true},
		{"LeCunNormal", nn.LeCunNormal(), 0, sq(1.0 / fanIn), -2 * sq(1.0/fanIn) / 0.8796256610342398, 2 * sq(1.0/fanIn) / 0.8796256610342398, true},
		{"VarianceScaling(3, FanOut, Normal)", nn.VarianceScaling(3, nn.FanOut, nn.DistNormal), 0, sq(3.0 / fanOut), math.Inf(-1), math.Inf(1), false},
		{"VarianceScaling(3, FanOut, Uniform)", nn.VarianceScaling(3, nn.FanOut, nn.DistUniform), 0, sq(3.0 / fanOut), -sq(9.0 / fanOut), sq(9.0 / fanOut), true},
		{"VarianceScaling(0.5, FanAvg, TruncatedNormal)", nn.VarianceScaling(0.5, nn.FanAvg, nn.DistTruncatedNormal), 0, sq(0.5 / avg), -2 * sq(0.5/avg) / 0.8796256610342398, 2 * sq(0.5/avg) / 0.8796256610342398, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := c.init(tensor.NewKey(uint64(i)), shape...)
			require.Equal(t, shape, x.Shape())
			require.Equal(t, tensor.Float32, x.DType())
			v := x.Float64s()
			mean, std := meanStd(v)
			// Standard error of the mean is std/√n ≈ std/490; allow 5 of them.
			assert.InDelta(t, c.mean, mean, 5*c.std/sq(float64(len(v))), "mean")
			assert.InEpsilon(t, c.std, std, 0.01, "std")
			lo, hi := minMax(v)
			assert.GreaterOrEqual(t, lo, c.lo)
			assert.LessOrEqual(t, hi, c.hi)
			if c.hitBounds {
				assert.Less(t, lo, c.lo+0.02*(c.hi-c.lo), "values should reach the lower bound")
				assert.Greater(t, hi, c.hi-0.02*(c.hi-c.lo), "values should reach the upper bound")
			}
		})
	}
}

// TestVarianceScalingMatchesSamplers checks the formulas value by value
// against the tensor samplers they are built on, as JAX writes them.
func TestVarianceScalingMatchesSamplers(t *testing.T) {
	k := tensor.NewKey(42)
	shape := []int{2, 3, 5} // fan_in = 2*3 = 6, fan_out = 2*5 = 10
	cases := []struct {
		name string
		init nn.Initializer
		want *tensor.Tensor
	}{
		{"truncated normal fan_in", nn.VarianceScaling(2, nn.FanIn, nn.DistTruncatedNormal),
			tensor.MulScalar(tensor.TruncatedNormal(k, -2, 2, shape...), float32(math.Sqrt(2.0/6)/.87962566103423978))},
		{"normal fan_out", nn.VarianceScaling(2, nn.FanOut, nn.DistNormal),
			tensor.MulScalar(tensor.Normal(k, shape...), float32(math.Sqrt(2.0/10)))},
		{"uniform fan_avg", nn.VarianceScaling(2, nn.FanAvg, nn.DistUniform),
			tensor.MulScalar(tensor.UniformRange(k, -1, 1, shape...), float32(math.Sqrt(3*2.0/8)))},
		{"batch axis", nn.VarianceScalingAxes(1, nn.FanIn, nn.DistNormal, nn.FanAxes{Batch: []int{0}}),
			tensor.MulScalar(tensor.Normal(k, shape...), float32(math.Sqrt(1.0/3)))},
		{"normal", nn.Normal(0.02), tensor.MulScalar(tensor.Normal(k, shape...), 0.02)},
		{"truncated normal", nn.TruncatedNormal(0.02), tensor.MulScalar(tensor.TruncatedNormal(k, -2, 2, shape...), 0.02)},
		{"uniform", nn.Uniform(0.02), tensor.MulScalar(tensor.Uniform(k, shape...), 0.02)},
		{"uniform range", nn.UniformRange(-0.5, 0.5), tensor.UniformRange(k, -0.5, 0.5, shape...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want.Float32s(), c.init(k, shape...).Float32s())
		})
	}
}

func TestInitializerDeterminism(t *testing.T) {
	inits := map[string]nn.Initializer{
		"Normal": nn.Normal(1), "TruncatedNormal": nn.TruncatedNormal(1), "Uniform": nn.Uniform(1),
		"UniformRange": nn.UniformRange(-1, 1), "GlorotUniform": nn.GlorotUniform(), "GlorotNormal": nn.GlorotNormal(),
		"HeUniform": nn.HeUniform(), "HeNormal": nn.HeNormal(), "LeCunUniform": nn.LeCunUniform(), "LeCunNormal": nn.LeCunNormal(),
	}
	k1, k2 := tensor.NewKey(1).Split2()
	for name, init := range inits {
		t.Run(name, func(t *testing.T) {
			a := init(k1, 16, 8).Float32s()
			assert.Equal(t, a, init(k1, 16, 8).Float32s(), "same key, same values")
			assert.NotEqual(t, a, init(k2, 16, 8).Float32s(), "another key, other values")
		})
	}
}

func TestConstantInitializers(t *testing.T) {
	k := tensor.NewKey(0)
	assert.Equal(t, []float32{0, 0, 0, 0, 0, 0}, nn.Zeros(k, 2, 3).Float32s())
	assert.Equal(t, []float32{1, 1, 1}, nn.Ones(k, 3).Float32s())
	c := nn.Constant(0.25)(k, 2, 2)
	assert.Equal(t, []int{2, 2}, c.Shape())
	assert.Equal(t, []float32{0.25, 0.25, 0.25, 0.25}, c.Float32s())
	assert.Equal(t, tensor.Float32, nn.Zeros(k).DType())
	// Fan-based initializers of an empty weight return it empty.
	assert.Equal(t, []int{0, 4}, nn.HeNormal()(k, 0, 4).Shape())
}

func TestInitializerPanics(t *testing.T) {
	requirePanicContains(t, func() { nn.Normal(-1) }, "nn.Normal: stddev must be finite and >= 0, got -1")
	requirePanicContains(t, func() { nn.TruncatedNormal(math.NaN()) }, "nn.TruncatedNormal: stddev")
	requirePanicContains(t, func() { nn.Uniform(math.Inf(1)) }, "nn.Uniform: scale")
	requirePanicContains(t, func() { nn.UniformRange(1, 1) }, "nn.UniformRange: need finite lo < hi, got [1, 1)")
	requirePanicContains(t, func() { nn.VarianceScaling(-2, nn.FanIn, nn.DistNormal) }, "nn.VarianceScaling: scale must be finite and >= 0, got -2")
	requirePanicContains(t, func() { nn.VarianceScaling(1, nn.FanMode(7), nn.DistNormal) }, "nn.VarianceScaling: invalid FanMode(7)")
	requirePanicContains(t, func() { nn.VarianceScaling(1, nn.FanIn, nn.Distribution(9)) }, "nn.VarianceScaling: invalid Distribution(9)")
}

func TestModeAndDistributionNames(t *testing.T) {
	assert.Equal(t, "fan_in", nn.FanIn.String())
	assert.Equal(t, "fan_out", nn.FanOut.String())
	assert.Equal(t, "fan_avg", nn.FanAvg.String())
	assert.Equal(t, "truncated_normal", nn.DistTruncatedNormal.String())
	assert.Equal(t, "normal", nn.DistNormal.String())
	assert.Equal(t, "uniform", nn.DistUniform.String())
}
