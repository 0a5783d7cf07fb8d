package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moments64 returns the mean and the (population) variance of xs.
func moments64(xs []float64) (mean, variance float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(xs))
}

// requireMoments checks the mean and variance of n draws against the
// distribution's, to within 5 standard errors: the mean's is
// sqrt(var/n); the variance's sqrt((mu4 - var^2)/n), with mu4, the fourth
// central moment, given.
func requireMoments(t *testing.T, xs []float64, mean, variance, mu4 float64, msg string) {
	t.Helper()
	n := float64(len(xs))
	m, v := moments64(xs)
	assert.InDelta(t, mean, m, 5*math.Sqrt(variance/n), "%s: mean", msg)
	assert.InDelta(t, variance, v, 5*math.Sqrt((mu4-variance*variance)/n), "%s: variance", msg)
}

// finer counts the values that float32 cannot hold: draws from 52-bit
// words, not widened float32 ones.
func finer(xs []float64) int {
	c := 0
	for _, x := range xs {
		if x != float64(float32(x)) {
			c++
		}
	}
	return c
}

// The 64-bit words are JAX's partitionable 64-bit random bits: element i
// joins the two threefry outputs of counter i, high half first.
func TestRandomBits64Layout(t *testing.T) {
	k := NewKey(42)
	w := rngBits64(k, 5)
	for i, got := range w {
		a, b := rngThreefry2x32(k.data[0], k.data[1], 0, uint32(i))
		require.Equal(t, uint64(a)<<32|uint64(b), got, "word %d", i)
		// The 32-bit word of the same element is their xor.
		require.Equal(t, a^b, Bits(k, 5)[i])
	}
	assert.Equal(t, w[0], rngWord64(k), "a scalar draw is element 0")
	u := UniformFloat64(k, 5).Float64s()
	for i, v := range u {
		assert.Equal(t, float64(w[i]>>12)/(1<<52), v, "uniform %d: the top 52 bits", i)
	}
	assert.Equal(t, u[:3], UniformFloat64(k, 3).Float64s(), "a shorter draw is a prefix")
}

func TestGammaFloat64(t *testing.T) {
	k := NewKey(11)
	const n = 40000
	for _, a := range []float64{0.3, 1, 2.5, 10} {
		g := Gamma(k, ScalarFloat64(a), n)
		require.Equal(t, Float64, g.DType())
		require.Equal(t, []int{n}, g.Shape())
		xs := g.Float64s()
		for _, x := range xs {
			require.True(t, x >= 0 && !math.IsInf(x, 0), "gamma(%v) draw %v", a, x)
		}
		// Gamma(a, 1): mean a, variance a, fourth central moment 3a^2+6a.
		requireMoments(t, xs, a, a, 3*a*a+6*a, "gamma")
		assert.Greater(t, finer(xs), n*99/100, "gamma(%v): float64 draws", a)
		// LogGamma draws the same numbers in log space.
		lg := LogGamma(k, ScalarFloat64(a), n).Float64s()
		for i := range 1000 {
			require.InDelta(t, math.Log(xs[i]), lg[i], 1e-12*max(1, math.Abs(lg[i])), "loggamma(%v) %d", a, i)
		}
	}
	// A small a, where float32 samples underflow to 0: LogGamma keeps
	// them, with the mean of log X = digamma(a).
	lg := LogGamma(k, ScalarFloat64(0.01), n).Float64s()
	m, _ := moments64(lg)
	assert.InDelta(t, -100.56, m, 5*math.Sqrt(1/(0.01*0.01)/n), "mean of log gamma(0.01)") // ψ(0.01) = -100.56, ψ'(0.01) ≈ 1e4
	// The parameter broadcasts, and the result keeps its shape.
	a := FromFloat64s([]float64{1, 2, 3}, 3)
	g := Gamma(k, a, 2, 3)
	assert.Equal(t, []int{2, 3}, g.Shape())
	assert.Equal(t, Float64, g.DType())
	assert.Equal(t, Gamma(k, a).Float64s(), Gamma(k, Reshape(a, 1, 3), 1, 3).Float64s())
}

func TestBetaDirichletFloat64(t *testing.T) {
	k := NewKey(12)
	const n = 40000
	for _, ab := range [][2]float64{{0.5, 0.5}, {2, 5}, {0.2, 3}} {
		a, b := ab[0], ab[1]
		x := Beta(k, ScalarFloat64(a), ScalarFloat64(b), n)
		require.Equal(t, Float64, x.DType())
		xs := x.Float64s()
		for _, v := range xs {
			require.True(t, v >= 0 && v <= 1, "beta(%v, %v) draw %v", a, b, v)
		}
		s := a + b
		mean := a / s
		variance := a * b / (s * s * (s + 1))
		// The fourth central moment of the beta distribution.
		mu4 := 3 * a * b * (a*b*(s-6) + 2*s*s) / (s * s * s * s * (s + 1) * (s + 2) * (s + 3))
		requireMoments(t, xs, mean, variance, mu4, "beta")
		assert.Greater(t, finer(xs), n*9/10, "beta(%v, %v): float64 draws", a, b)
	}
	alpha := FromFloat64s([]float64{0.5, 1, 2.5}, 3)
	d := Dirichlet(k, alpha, n)
	require.Equal(t, []int{n, 3}, d.Shape())
	require.Equal(t, Float64, d.DType())
	v := d.Float64s()
	cols := make([][]float64, 3)
	for i := range n {
		sum := 0.0
		for j := range 3 {
			sum += v[3*i+j]
			cols[j] = append(cols[j], v[3*i+j])
		}
		require.InDelta(t, 1, sum, 1e-14, "row %d sums to 1", i)
	}
	// Each component is Beta(alpha_j, alpha0 - alpha_j).
	a0 := 4.0
	for j, aj := range []float64{0.5, 1, 2.5} {
		b := a0 - aj
		mu4 := 3 * aj * b * (aj*b*(a0-6) + 2*a0*a0) / (a0 * a0 * a0 * a0 * (a0 + 1) * (a0 + 2) * (a0 + 3))
		requireMoments(t, cols[j], aj/a0, aj*b/(a0*a0*(a0+1)), mu4, "dirichlet component")
	}
}

// Poisson rounds a float64 lam to float32, as JAX does: the draws equal
// those of the float32 rates.
func TestPoissonFloat64(t *testing.T) {
	k := NewKey(13)
	lam := FromFloat64s([]float64{0, 0.5, 3, 9.99, 10, 42.5, 1000.1}, 7)
	got := Poisson(k, lam, 500, 7)
	require.Equal(t, Int32, got.DType())
	assert.Equal(t, Poisson(k, AsType(lam, Float32), 500, 7).Int32s(), got.Int32s())
	xs := Poisson(k, ScalarFloat64(3), 40000).Float64s()
	requireMoments(t, xs, 3, 3, 3+3*9, "poisson(3)") // mu4 = lam + 3 lam^2
}

func TestCategoricalFloat64(t *testing.T) {
	k := NewKey(14)
	p := []float64{0.2, 0.3, 0.5}
	logits := Log(FromFloat64s(p, 3))
	const n = 60000
	check := func(draws []int32, msg string) {
		t.Helper()
		var counts [3]float64
		for _, d := range draws {
			counts[d]++
		}
		for c := range 3 {
			assert.InDelta(t, p[c], counts[c]/n, 5*math.Sqrt(p[c]*(1-p[c])/n), "%s: category %d", msg, c)
		}
	}
	s := CategoricalSample(k, logits, 0, CategoricalOptions{Shape: []int{n}})
	require.Equal(t, Int32, s.DType())
	check(s.Int32s(), "categorical")
	check(Choice(k, ScalarInt(3), []int{n}, ChoiceOptions{P: FromFloat64s(p, 3)}).Int32s(), "choice")
	// The float64 noise: Gumbel's mean is the Euler–Mascheroni constant,
	// its variance pi^2/6, its excess kurtosis 12/5 (mu4 = 5.4 var^2).
	g := rngGumbel64(k, n)
	v := math.Pi * math.Pi / 6
	requireMoments(t, g, 0.5772156649, v, 5.4*v*v, "gumbel")
	assert.Greater(t, finer(g), n*99/100)
	// Without replacement: distinct categories.
	for i := range 50 {
		d := CategoricalSample(FoldIn(k, uint32(i)), logits, 0, CategoricalOptions{Shape: []int{3}, WithoutReplacement: true}).Int32s()
		assert.Len(t, uniq(d), 3)
		c := Choice(FoldIn(k, uint32(i)), ScalarInt(3), []int{3}, ChoiceOptions{P: FromFloat64s(p, 3), WithoutReplacement: true}).Int32s()
		assert.Len(t, uniq(c), 3)
	}
	assert.Equal(t, Categorical(k, Reshape(logits, 1, 3), 1).Int32s(),
		CategoricalSample(k, Reshape(logits, 1, 3), 1, CategoricalOptions{}).Int32s())
}

// Under Vmap each example's key draws from each example's float64
// parameter, as a loop over the examples does.
func TestRandomFloat64Vmap(t *testing.T) {
	keys := NewKey(15).Split(3)
	a := FromFloat64s([]float64{0.5, 1, 2, 3, 4, 5}, 3, 2)
	bt := NewBatchTrace(3)
	k := Key{t: bt.Batched(StackKeys(keys).t, 0)}
	ab := bt.Batched(a, 0)
	got := map[string]*Tensor{
		"gamma":     bt.Unbatched(Gamma(k, ab, 4, 2), 0),
		"beta":      bt.Unbatched(Beta(k, ab, ab), 0),
		"dirichlet": bt.Unbatched(Dirichlet(k, ab), 0),
		"poisson":   bt.Unbatched(Poisson(k, ab), 0),
		"categ":     bt.Unbatched(Categorical(k, ab, 0), 0),
	}
	for i, ki := range keys {
		ai := Unstack(a, 0)[i]
		want := map[string]*Tensor{
			"gamma":     Gamma(ki, ai, 4, 2),
			"beta":      Beta(ki, ai, ai),
			"dirichlet": Dirichlet(ki, ai),
			"poisson":   Poisson(ki, ai),
			"categ":     Categorical(ki, ai, 0),
		}
		for name, w := range want {
			g := Unstack(got[name], 0)[i]
			require.Equal(t, w.DType(), g.DType(), name)
			assert.Equal(t, w.Float64s(), g.Float64s(), "%s: example %d", name, i)
		}
	}
}

// The float64 samplers without float operands, each with the moments of
// its distribution in closed form (the truncated normal's fourth moment by
// numerical integration).
func TestRandomSamplersFloat64(t *testing.T) {
	const n = 40000
	phi := func(x float64) float64 {
		if math.IsInf(x, 0) {
			return 0
		}
		return math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
	}
	// truncMoments returns the mean, variance and fourth central moment of
	// the standard normal truncated to (lo, hi): the mean and variance in
	// closed form, mu4 by Simpson's rule on the density.
	truncMoments := func(lo, hi float64) (mean, variance, mu4 float64) {
		z := (math.Erf(hi/math.Sqrt2) - math.Erf(lo/math.Sqrt2)) / 2
		mean = (phi(lo) - phi(hi)) / z
		xphi := func(x float64) float64 {
			if math.IsInf(x, 0) {
				return 0
			}
			return x * phi(x)
		}
		variance = 1 + (xphi(lo)-xphi(hi))/z - mean*mean
		a, b := max(lo, -12), min(hi, 12)
		const m = 20000
		h := (b - a) / m
		for i := 0; i <= m; i++ {
			x := a + float64(i)*h
			w := 2.0
			if i == 0 || i == m {
				w = 1
			} else if i%2 == 1 {
				w = 4
			}
			d := x - mean
			mu4 += w * d * d * d * d * phi(x) / z
		}
		return mean, variance, mu4 * h / 3
	}
	type sampler struct {
		name                string
		draw                func(k Key, shape ...int) *Tensor
		mean, variance, mu4 float64
		lo, hi              float64 // the support, open or closed
	}
	gv := math.Pi * math.Pi / 6
	tnMean, tnVar, tnMu4 := truncMoments(-1, 2)
	hnMean, hnVar, hnMu4 := truncMoments(0, math.Inf(1))
	assert.InDelta(t, math.Sqrt(2/math.Pi), hnMean, 1e-12, "half-normal mean")
	assert.InDelta(t, 1-2/math.Pi, hnVar, 1e-12, "half-normal variance")
	cases := []sampler{
		{"uniform range", func(k Key, s ...int) *Tensor { return UniformRangeFloat64(k, -2, 3, s...) },
			0.5, 25.0 / 12, 625.0 / 80, -2, 3},
		{"truncated normal", func(k Key, s ...int) *Tensor { return TruncatedNormalFloat64(k, -1, 2, s...) },
			tnMean, tnVar, tnMu4, -1, 2},
		{"half normal", func(k Key, s ...int) *Tensor { return TruncatedNormalFloat64(k, 0, math.Inf(1), s...) },
			hnMean, hnVar, hnMu4, 0, math.Inf(1)},
		{"gumbel", GumbelFloat64, 0.5772156649015329, gv, 5.4 * gv * gv, math.Inf(-1), math.Inf(1)},
		{"exponential", ExponentialFloat64, 1, 1, 9, 0, math.Inf(1)},
		{"laplace", LaplaceFloat64, 0, 2, 24, math.Inf(-1), math.Inf(1)},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := NewKey(uint64(20 + i))
			x := c.draw(k, n)
			require.Equal(t, Float64, x.DType())
			require.Equal(t, []int{n}, x.Shape())
			assert.Equal(t, []int{2, 3}, c.draw(k, 2, 3).Shape())
			assert.Equal(t, []int{}, c.draw(k).Shape(), "no shape: a scalar")
			xs := x.Float64s()
			for _, v := range xs {
				require.True(t, v >= c.lo && v <= c.hi && !math.IsInf(v, 0), "%s draw %v outside [%v, %v]", c.name, v, c.lo, c.hi)
			}
			requireMoments(t, xs, c.mean, c.variance, c.mu4, c.name)
			assert.Greater(t, finer(xs), n*99/100, "%s: float64 draws", c.name)
			assert.Equal(t, xs, c.draw(k, n).Float64s(), "one key, one draw")
			assert.NotEqual(t, xs[:10], c.draw(NewKey(99), n).Float64s()[:10], "another key, other draws")
		})
	}
	// The truncated normal stays inside an open interval even where erf
	// rounds its ends, and its mean matches the closed form.
	x := TruncatedNormalFloat64(NewKey(30), 5, 6, n).Float64s()
	for _, v := range x {
		require.True(t, v > 5 && v < 6, "draw %v outside (5, 6)", v)
	}
	m, _, _ := truncMoments(5, 6)
	mx, _ := moments64(x)
	assert.InDelta(t, m, mx, 0.01, "mean of the normal truncated to (5, 6)")
	// The transforms of the float64 uniforms, element by element.
	k := NewKey(31)
	u := UniformFloat64(k, 100).Float64s()
	e := ExponentialFloat64(k, 100).Float64s()
	for i := range u {
		assert.InDelta(t, -math.Log1p(-u[i]), e[i], 1e-15*max(1, e[i]), "exponential %d", i)
	}
	r := UniformRangeFloat64(k, -2, 3, 100).Float64s()
	for i := range u {
		assert.InDelta(t, u[i]*5-2, r[i], 1e-15, "uniform range %d", i)
	}
	require.PanicsWithValue(t, "tensor.UniformRangeFloat64: need finite lo < hi, got lo=1 hi=1", func() { UniformRangeFloat64(k, 1, 1) })
	require.Panics(t, func() { UniformRangeFloat64(k, 0, math.Inf(1)) })
	require.PanicsWithValue(t, "tensor.TruncatedNormalFloat64: need lo < hi, got lo=2 hi=-2", func() { TruncatedNormalFloat64(k, 2, -2) })
}

// Under Vmap over stacked keys the float64 samplers draw as a loop over
// the keys does.
func TestRandomSamplersFloat64Vmap(t *testing.T) {
	keys := NewKey(32).Split(3)
	draws := map[string]func(k Key) *Tensor{
		"uniform range":    func(k Key) *Tensor { return UniformRangeFloat64(k, -2, 3, 4, 2) },
		"truncated normal": func(k Key) *Tensor { return TruncatedNormalFloat64(k, -1, 2, 4, 2) },
		"gumbel":           func(k Key) *Tensor { return GumbelFloat64(k, 4, 2) },
		"exponential":      func(k Key) *Tensor { return ExponentialFloat64(k, 4, 2) },
		"laplace":          func(k Key) *Tensor { return LaplaceFloat64(k, 4, 2) },
	}
	for name, draw := range draws {
		bt := NewBatchTrace(3)
		got := bt.Unbatched(draw(Key{t: bt.Batched(StackKeys(keys).t, 0)}), 0)
		require.Equal(t, []int{3, 4, 2}, got.Shape(), name)
		require.Equal(t, Float64, got.DType(), name)
		for i, ki := range keys {
			assert.Equal(t, draw(ki).Float64s(), Unstack(got, 0)[i].Float64s(), "%s: example %d", name, i)
		}
	}
}
