package tensor

import (
	"hash/adler32"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jaxValuesKey is the key of JAX's tests/random_test.py _RANDOM_VALUES_CASES
// for a distribution name: random.key(zlib.adler32(name + "threefry2x32")).
func jaxValuesKey(name string) Key {
	return NewKey(uint64(adler32.Checksum([]byte(name + "threefry2x32"))))
}

// requireNear6 compares with values JAX's test table prints to 6 decimals.
func requireNear6(t *testing.T, want []float64, got []float32, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		require.InDeltaf(t, want[i], float64(got[i]), 1e-6*max(1, math.Abs(want[i])), "%s: element %d: got %v, want %v", msg, i, got[i], want)
	}
}

// TestJAXDistributionValues checks the samplers against the values in JAX's
// tests/random_test.py (_RANDOM_VALUES_CASES, threefry2x32, float32,
// shape (5,)). They were recorded with the counter layout JAX used before
// 0.5.0 (the test is skipped under jax_threefry_partitionable), so they
// are checked with that layout (rngLegacy, as TestJAXLegacy does): they
// test the algorithms (key splits, draw order, formulas) that the public
// functions run on today's layout. Uniform and Normal rows of the same
// table are checked first, to show the table is of that layout.
func TestJAXDistributionValues(t *testing.T) {
	s := rngLegacy
	requireNear6(t, []float64{0.298671, 0.073213, 0.873356, 0.260549, 0.412797},
		rngUniform(s, jaxValuesKey("uniform"), 5, 0, 1), "uniform")
	requireNear6(t, []float64{-1.173234, -1.511662, 0.070593, -0.099764, 1.052845},
		rngNormal(s, jaxValuesKey("normal"), 5), "normal")

	requireNear6(t, []float64{0.526067, 0.043046, 0.039932, 0.46427, 0.123886},
		rngExponential(s, jaxValuesKey("exponential"), 5), "exponential")
	requireNear6(t, []float64{0.578939, -0.204902, 0.555733, 0.911053, -0.96456},
		rngLaplace(s, jaxValuesKey("laplace"), 5), "laplace")
	a := []float32{0.8, 0.8, 0.8, 0.8, 0.8}
	requireNear6(t, []float64{0.824221, 1.724476, 0.502882, 5.386132, 0.685543},
		rngGamma(s, jaxValuesKey("gamma"), a, false), "gamma(a=0.8)")
	requireNear6(t, []float64{0.240559, -3.575443, -0.450946, -2.161372, -2.943277},
		rngGamma(s, jaxValuesKey("loggamma"), a, true), "loggamma(a=0.8)")
	requireNear6(t, []float64{0.13259, 0.824893, 0.948363, 0.964155, 0.235448},
		rngBeta(s, jaxValuesKey("beta"), a, []float32{0.9, 0.9, 0.9, 0.9, 0.9}), "beta(0.8, 0.9)")
	requireNear6(t, []float64{0.003128, 0.009694, 0.987178, 0.025938, 0.479091, 0.494971},
		rngDirichlet(s, jaxValuesKey("dirichlet"), []float32{0.5, 0.6, 0.7, 0.5, 0.6, 0.7}, 3), "dirichlet")
	assert.Equal(t, []int32{7, 3, 6, 11, 6},
		rngPoisson(s, jaxValuesKey("poisson"), []float32{5, 5, 5, 5, 5}), "poisson(5)")
}

// The public samplers (today's counter layout) have the moments of their
// distributions, respect their supports and are consistent across shapes
// where JAX's are.
func TestDistributionMoments(t *testing.T) {
	const n = 1 << 17
	k := NewKey(31)
	fill := func(v float32) *Tensor { return Full(Float32, float64(v), n) }
	beta := func(a, b float64) (float64, float64) {
		return a / (a + b), a * b / ((a + b) * (a + b) * (a + b + 1))
	}
	bm, bv := beta(0.5, 2.5)
	cases := []struct {
		name           string
		xs             []float64
		lo, hi         float64
		mean, variance float64
	}{
		{"Exponential", Exponential(k, n).Float64s(), 0, 30, 1, 1},
		{"Laplace", Laplace(k, n).Float64s(), -30, 30, 0, 2},
		{"Gamma(0.3)", Gamma(k, fill(0.3)).Float64s(), 0, 50, 0.3, 0.3},
		{"Gamma(1)", Gamma(k, fill(1)).Float64s(), 0, 50, 1, 1},
		{"Gamma(4.5)", Gamma(k, Scalar(4.5), n).Float64s(), 0, 50, 4.5, 4.5},
		{"exp LogGamma(2)", expAll(LogGamma(k, fill(2)).Float64s()), 0, 50, 2, 2},
		{"Beta(0.5, 2.5)", Beta(k, Scalar(0.5), Scalar(2.5), n).Float64s(), 0, 1, bm, bv},
		{"Poisson(3)", Poisson(k, fill(3)).Float64s(), 0, 40, 3, 3},
		{"Poisson(40)", Poisson(k, Scalar(40), n).Float64s(), 0, 200, 40, 40},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Len(t, c.xs, n)
			m, v := moments(c.xs)
			sd := math.Sqrt(c.variance)
			assert.InDelta(t, c.mean, m, 5*sd/math.Sqrt(n), "mean")
			assert.InEpsilon(t, c.variance, v, 0.03, "variance")
			assert.GreaterOrEqual(t, slices.Min(c.xs), c.lo)
			assert.LessOrEqual(t, slices.Max(c.xs), c.hi)
		})
	}
	t.Run("Dirichlet", func(t *testing.T) {
		alpha := FromFloat32([]float32{0.2, 1, 3}, 3)
		d := Dirichlet(k, alpha, n/4)
		require.Equal(t, []int{n / 4, 3}, d.Shape())
		v := d.Float64s()
		var mean [3]float64
		for i := 0; i < len(v); i += 3 {
			assert.InDelta(t, 1, v[i]+v[i+1]+v[i+2], 1e-6)
			for j := range 3 {
				mean[j] += v[i+j] / (n / 4)
			}
		}
		for j, a := range []float64{0.2, 1, 3} {
			assert.InDelta(t, a/4.2, mean[j], 0.005, "mean of component %d", j)
		}
	})
	t.Run("Poisson corner cases", func(t *testing.T) {
		// JAX's testPoissonCornerCases: lam -1, 0, NaN give -1, 0, -1.
		lam := FromFloat32([]float32{-1, 0, float32(math.NaN())})
		assert.Equal(t, []int32{-1, 0, -1}, Poisson(k, lam).Int32s())
		assert.Equal(t, Int32, Poisson(k, Scalar(2)).DType())
	})
	t.Run("element i depends only on i", func(t *testing.T) {
		assert.Equal(t, Exponential(k, 6).Float32s()[:4], Exponential(k, 2, 2).Float32s())
		assert.Equal(t, Laplace(k, 6).Float32s()[:1], Laplace(k).Float32s())
	})
	t.Run("parameter shapes", func(t *testing.T) {
		a := FromFloat32([]float32{0.5, 5}, 2)
		g := Gamma(k, a, 3, 2)
		assert.Equal(t, []int{3, 2}, g.Shape())
		assert.Equal(t, []int{2}, Gamma(k, a).Shape(), "the default shape is a's")
		assert.Equal(t, []int{4, 2}, Beta(k, a, FromFloat32([]float32{1, 2, 3, 4}, 4, 1)).Shape())
		assert.Equal(t, []int{2, 3}, Dirichlet(k, FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)).Shape())
	})
}

func expAll(xs []float64) []float64 {
	for i, x := range xs {
		xs[i] = math.Exp(x)
	}
	return xs
}

func TestChoice(t *testing.T) {
	k := NewKey(5)
	a := FromFloat32([]float32{10, 20, 30, 40, 50, 60}, 3, 2)
	t.Run("JAX's index draws", func(t *testing.T) {
		// With replacement: RandInt indices; without: Permutation's first.
		idx := RandInt(k, 0, 3, 4).Int32s()
		got := Choice(k, a, []int{4}, ChoiceOptions{})
		assert.Equal(t, []int{4, 2}, got.Shape())
		for i, j := range idx {
			assert.Equal(t, a.Float32s()[2*j:2*j+2], got.Float32s()[2*i:2*i+2])
		}
		perm := Permutation(k, 3).Int32s()
		got = Choice(k, a, []int{2}, ChoiceOptions{WithoutReplacement: true, Axis: 0})
		assert.Equal(t, Take(a, FromInt32(perm[:2]), 0).Float32s(), got.Float32s())
		// Along axis 1, into a sample shape of rank 2.
		got = Choice(k, a, []int{2, 2}, ChoiceOptions{Axis: -1})
		assert.Equal(t, []int{3, 2, 2}, got.Shape())
		// A scalar count draws indices.
		assert.Equal(t, RandInt(k, 0, 7, 5).Int32s(), Choice(k, ScalarInt(7), []int{5}, ChoiceOptions{}).Int32s())
		assert.Equal(t, []int{0, 2}, Choice(k, a, []int{0}, ChoiceOptions{}).Shape())
	})
	t.Run("frequencies", func(t *testing.T) {
		const n = 200000
		p := FromFloat32([]float32{1, 0, 3, 6}) // unnormalised
		counts := make([]float64, 4)
		for _, v := range Choice(k, ScalarInt(4), []int{n}, ChoiceOptions{P: p}).Int32s() {
			counts[v]++
		}
		for i, w := range []float64{0.1, 0, 0.3, 0.6} {
			assert.InDelta(t, w, counts[i]/n, 0.005, "element %d", i)
		}
		// Without replacement, with p: distinct, the zero-probability
		// element never drawn in the first three, and the largest most
		// often first.
		first := make([]float64, 4)
		for i := range 2000 {
			d := Choice(FoldIn(k, uint32(i)), ScalarInt(4), []int{3}, ChoiceOptions{P: p, WithoutReplacement: true}).Int32s()
			assert.NotContains(t, d, int32(1))
			assert.Len(t, uniq(d), 3)
			first[d[0]]++
		}
		assert.InDelta(t, 0.6, first[3]/2000, 0.04)
		// Without replacement, uniform: distinct.
		d := Choice(k, ScalarInt(50), []int{50}, ChoiceOptions{WithoutReplacement: true}).Int32s()
		assert.Len(t, uniq(d), 50)
	})
	t.Run("panics", func(t *testing.T) {
		assert.PanicsWithValue(t, "tensor.Choice: cannot draw 4 of 3 elements without replacement", func() {
			Choice(k, a, []int{4}, ChoiceOptions{WithoutReplacement: true})
		})
		assert.PanicsWithValue(t, "tensor.Choice: p f32[2] must be float32[3] or float64[3], one probability per element of a along the axis", func() {
			Choice(k, a, []int{4}, ChoiceOptions{P: FromFloat32([]float32{1, 2})})
		})
		assert.PanicsWithValue(t, "tensor.Choice: scalar a f32[] must be an int32 count", func() {
			Choice(k, Scalar(3), []int{4}, ChoiceOptions{})
		})
		assert.PanicsWithValue(t, "tensor.Choice: a i32[] has no elements to choose from", func() {
			Choice(k, ScalarInt(0), []int{1}, ChoiceOptions{})
		})
	})
}

func uniq(xs []int32) []int32 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return slices.Compact(s)
}

func TestCategoricalSample(t *testing.T) {
	k := NewKey(9)
	logits := Log(FromFloat32([]float32{0.2, 0.3, 0.5, 0.5, 0.25, 0.25}, 2, 3))
	t.Run("default is Categorical", func(t *testing.T) {
		assert.Equal(t, Categorical(k, logits, -1).Int32s(), CategoricalSample(k, logits, -1, CategoricalOptions{}).Int32s())
		assert.Equal(t, Categorical(k, logits, 0).Int32s(), CategoricalSample(k, logits, 0, CategoricalOptions{}).Int32s())
	})
	t.Run("frequencies with a sample shape", func(t *testing.T) {
		const n = 100000
		s := CategoricalSample(k, logits, 1, CategoricalOptions{Shape: []int{n, 2}})
		require.Equal(t, []int{n, 2}, s.Shape())
		var counts [2][3]float64
		v := s.Int32s()
		for i := range n {
			counts[0][v[2*i]]++
			counts[1][v[2*i+1]]++
		}
		for j, p := range [][3]float64{{0.2, 0.3, 0.5}, {0.5, 0.25, 0.25}} {
			for c := range 3 {
				assert.InDelta(t, p[c], counts[j][c]/n, 0.006, "row %d category %d", j, c)
			}
		}
	})
	t.Run("without replacement", func(t *testing.T) {
		for i := range 200 {
			s := CategoricalSample(FoldIn(k, uint32(i)), logits, -1, CategoricalOptions{Shape: []int{3, 2}, WithoutReplacement: true})
			require.Equal(t, []int{3, 2}, s.Shape())
			v := s.Int32s()
			for row := range 2 {
				assert.Len(t, uniq([]int32{v[row], v[2+row], v[4+row]}), 3, "draw %d row %d", i, row)
			}
		}
		assert.PanicsWithValue(t, "tensor.CategoricalSample: 4 samples without replacement from 3 categories", func() {
			CategoricalSample(k, logits, -1, CategoricalOptions{Shape: []int{4, 2}, WithoutReplacement: true})
		})
	})
	t.Run("panics", func(t *testing.T) {
		assert.PanicsWithValue(t, "tensor.CategoricalSample: logits f32[2,3] (batch shape [2]) do not broadcast to the sample shape [5 3]", func() {
			CategoricalSample(k, logits, -1, CategoricalOptions{Shape: []int{5, 3}})
		})
	})
}

func TestDistributionPanics(t *testing.T) {
	k := NewKey(0)
	cases := []struct {
		f    func()
		want string
	}{
		{func() { Gamma(k, FromFloat32([]float32{1, 0})) }, "tensor.Gamma: a f32[2] holds 0; every element must be positive"},
		{func() { Gamma(k, ScalarInt(1)) }, "tensor.Gamma: a i32[] must be float32 or float64"},
		{func() { Gamma(k, FromFloat32([]float32{1, 2}), 3) }, "tensor.Gamma: a f32[2] does not broadcast to the sample shape [3]"},
		{func() { Beta(k, Scalar(1), Scalar(-1)) }, "tensor.Beta: b f32[] holds -1; every element must be positive"},
		{func() { Dirichlet(k, Scalar(1)) }, "tensor.Dirichlet: alpha f32[] needs at least one axis (the categories)"},
		{func() { Poisson(k, ScalarInt(3)) }, "tensor.Poisson: lam i32[] must be float32 or float64"},
		{func() { Beta(k, Scalar(1), ScalarFloat64(1)) }, "tensor.Beta: a f32[] and b f64[] must have one dtype"},
		{func() { Gamma(k, FromFloat64s([]float64{1, -2})) }, "tensor.Gamma: a f64[2] holds -2; every element must be positive"},
		{func() { Exponential(k, -1) }, "tensor.Exponential: negative dimension in shape [-1]"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) { assert.PanicsWithValue(t, c.want, c.f) })
	}
}
