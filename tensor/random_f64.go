package tensor

import (
	"fmt"
	"math"
)

// Random float64 values: JAX's samplers with dtype=jnp.float64 (under
// jax_enable_x64). Each value takes one 64-bit random word, made as JAX's
// partitionable threefry makes 64-bit random bits: element i hashes the
// counter i, as the 32-bit words do, and joins the two outputs (the first
// the high half) where a 32-bit word xors them. A value uses the top 52
// bits of its word as its mantissa. The samplers of random_dist.go take
// float64 operands (Gamma's a, Beta's a and b, Dirichlet's alpha,
// Categorical's logits, Choice's p) and then draw float64 values this way,
// with JAX's algorithms in float64 arithmetic: the numbers differ from
// the float32 draws of the same key, as they do in JAX.
//
// The float64 logarithm is rngLog (the same bits on every platform);
// exponentials, powers and erf are package math's, and normal draws use
// math.Erfinv where XLA has its own float64 erf_inv, so a value may differ
// from JAX's in its last bits.

// rngBits64 returns n 64-bit random words of key k (JAX's 64-bit
// random_bits of a shape with n elements).
func rngBits64(k Key, n int) []uint64 {
	out := make([]uint64, n)
	k0, k1 := k.data[0], k.data[1]
	rngParallel(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a, b := rngThreefry2x32(k0, k1, uint32(uint64(i)>>32), uint32(i))
			out[i] = uint64(a)<<32 | uint64(b)
		}
	})
	return out
}

// rngWord64 returns the one 64-bit random word of a scalar draw from k.
func rngWord64(k Key) uint64 {
	a, b := rngThreefry2x32(k.data[0], k.data[1], 0, 0)
	return uint64(a)<<32 | uint64(b)
}

// rngUnit64 maps a random word to [0, 1): the top 52 bits as the mantissa
// of a number in [1, 2), minus 1.
func rngUnit64(w uint64) float64 {
	return math.Float64frombits(w>>12|0x3ff0000000000000) - 1
}

// rngNormalWord64 is the standard normal value jax.random.normal (float64)
// makes of one random word: sqrt(2)·erfinv(u) for u uniform in (-1, 1)
// (u*2+lo is exact).
func rngNormalWord64(w uint64) float64 {
	lo := math.Nextafter(-1, 0)
	u := max(rngUnit64(w)*2+lo, lo)
	return math.Sqrt2 * math.Erfinv(u)
}

// rngFloat64s wraps data (which it takes over) as a float64 tensor of the
// given shape; an empty shape makes a scalar.
func rngFloat64s(data []float64, shape []int) *Tensor {
	return &Tensor{dtype: Float64, shape: append([]int{}, shape...), data: raw(data)}
}

// UniformFloat64 returns Float64 values uniform in [0, 1), like
// jax.random.uniform(k, shape, dtype=jnp.float64): multiples of 2^-52.
// It panics on a negative dimension.
func UniformFloat64(k Key, shape ...int) *Tensor {
	checkShape("tensor.UniformFloat64", shape)
	return k.sample("tensor.UniformFloat64", func(k Key, _ []*Tensor) *Tensor {
		return rngFloat64s(rngUniform64(k, numel(shape), 0, 1), shape)
	})
}

// NormalFloat64 returns standard normal Float64 values, like
// jax.random.normal(k, shape, dtype=jnp.float64): sqrt(2)·erfinv(u) for u
// uniform in (-1, 1). It panics on a negative dimension.
func NormalFloat64(k Key, shape ...int) *Tensor {
	checkShape("tensor.NormalFloat64", shape)
	return k.sample("tensor.NormalFloat64", func(k Key, _ []*Tensor) *Tensor {
		w := rngBits64(k, numel(shape))
		out := make([]float64, len(w))
		rngParallel(len(w), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				out[i] = rngNormalWord64(w[i])
			}
		})
		return rngFloat64s(out, shape)
	})
}

// rngUniform64 is jax.random.uniform for float64: max(lo, u*(hi-lo)+lo),
// the multiply-add fused as XLA compiles it.
func rngUniform64(k Key, n int, lo, hi float64) []float64 {
	w := rngBits64(k, n)
	out := make([]float64, n)
	span := hi - lo
	rngParallel(n, func(a, b int) {
		for i := a; i < b; i++ {
			out[i] = max(math.FMA(rngUnit64(w[i]), span, lo), lo)
		}
	})
	return out
}

// rngGumbel64 is jax.random.gumbel for float64: -log(-log(u)) for u
// uniform in [tiny, 1).
func rngGumbel64(k Key, n int) []float64 {
	u := rngUniform64(k, n, math.Float64frombits(0x0010000000000000), 1) // smallest normal float64
	for i, v := range u {
		u[i] = -rngLog(-rngLog(v))
	}
	return u
}

// gumbelOf is Gumbel(k, shape...) in dtype dt (Float32 or Float64), the
// noise of the categorical samplers.
func gumbelOf(k Key, dt DType, shape ...int) *Tensor {
	if dt != Float64 {
		return Gumbel(k, shape...)
	}
	return gumbel64(k, "tensor.Gumbel", shape)
}

// gumbel64 draws float64 Gumbel values for the function named op.
func gumbel64(k Key, op string, shape []int) *Tensor {
	checkShape(op, shape)
	return k.sample(op, func(k Key, _ []*Tensor) *Tensor {
		return rngFloat64s(rngGumbel64(k, numel(shape)), shape)
	})
}

// rngGamma64 is rngGamma for float64 shape parameters.
func rngGamma64(k Key, a []float64, logSpace bool) []float64 {
	keys := rngPartitionable.split(k, len(a))
	out := make([]float64, len(a))
	const weight = 256 // as rngGamma's
	rngParallel(len(a)*weight, func(lo, hi int) {
		for i := lo / weight; i < hi/weight; i++ {
			out[i] = rngGammaOne64(keys[i], a[i], logSpace)
		}
	})
	return out
}

// rngGammaOne64 is rngGammaOne in float64: JAX's _gamma_one with
// dtype=float64, whose normal and uniform draws take 64-bit words (every
// product rounded before it is added, so that nothing is fused).
func rngGammaOne64(k Key, alpha float64, logSpace bool) float64 {
	const third = 1.0 / 3
	s := rngPartitionable
	boost := alpha >= 1
	alphaOrig := alpha
	if !boost {
		alpha++
	}
	d := alpha - third
	c := third / math.Sqrt(d)
	var ks [3]Key
	s.splitInto(k, ks[:2])
	key, sub := ks[0], ks[1]
	X, V, U := 0.0, 1.0, 2.0
	for U >= 1-float64(0.0331*float64(X*X)) &&
		rngLog(U) >= float64(X*0.5)+float64(d*((1-V)+rngLog(V))) {
		s.splitInto(key, ks[:3])
		kx, ku := ks[1], ks[2]
		key = ks[0]
		x, v := 0.0, -1.0
		for v <= 0 {
			var kk [2]Key
			s.splitInto(kx, kk[:])
			kx = kk[0]
			x = rngNormalWord64(rngWord64(kk[1]))
			v = 1 + float64(x*c)
		}
		X = float64(x * x)
		V = float64(float64(v*v) * v)
		U = rngUnit64(rngWord64(ku))
	}
	u := rngUnit64(rngWord64(sub))
	if logSpace {
		logSamples := rngLog(1 - u) // log1p(-u), -exponential(sub): 1-u is exact
		var logBoost float64
		if !boost && logSamples != 0 {
			logBoost = float64(logSamples * (1 / alphaOrig))
		}
		return (rngLog(d) + rngLog(V)) + logBoost
	}
	boostV := 1.0
	if !boost {
		boostV = math.Pow(1-u, 1/alphaOrig)
	}
	return float64(float64(d*V) * boostV)
}

// rngBeta64 is rngBeta for float64 parameters.
func rngBeta64(k Key, a, b []float64) []float64 {
	ks := rngPartitionable.split(k, 2)
	ga := rngGamma64(ks[0], a, true)
	gb := rngGamma64(ks[1], b, true)
	for i := range ga {
		m := max(ga[i], gb[i])
		ea, eb := math.Exp(ga[i]-m), math.Exp(gb[i]-m)
		ga[i] = ea / (ea + eb)
	}
	return ga
}

// rngDirichlet64 is rngDirichlet for float64 concentrations.
func rngDirichlet64(k Key, alpha []float64, n int) []float64 {
	g := rngGamma64(k, alpha, true)
	for lo := 0; lo < len(g); lo += n {
		row := g[lo : lo+n]
		m := math.Inf(-1)
		for _, v := range row {
			m = max(m, v)
		}
		var sum float64
		for j, v := range row {
			row[j] = math.Exp(v - m)
			sum += row[j]
		}
		for j := range row {
			row[j] /= sum
		}
	}
	return g
}

// rngChoiceCDF64 is rngChoiceCDF for float64 probabilities: the uniform
// points are float64 draws.
func rngChoiceCDF64(k Key, p []float64, draws int) []int32 {
	cum := make([]float64, len(p))
	var acc float64
	for i, v := range p {
		acc += v
		cum[i] = acc
	}
	u := rngUniform64(k, draws, 0, 1)
	ind := make([]int32, draws)
	for i, v := range u {
		r := float64(acc * (1 - v))
		ind[i] = int32(sortSearch(cum, r))
	}
	return ind
}

// rngChoiceGumbel64 is rngChoiceGumbel for float64 probabilities.
func rngChoiceGumbel64(k Key, p []float64, draws int) []int32 {
	g := rngGumbel64(k, len(p))
	for i, v := range p {
		g[i] += rngLog(v)
	}
	_, idx := TopK(FromFloat64s(g), draws)
	return idx.Int32s()
}

// UniformRangeFloat64 returns Float64 values uniform in [lo, hi), like
// jax.random.uniform(k, shape, dtype=jnp.float64, minval=lo, maxval=hi):
// u*(hi-lo)+lo for u from UniformFloat64, with one rounding (a fused
// multiply-add, as XLA compiles it) and clamped below at lo. Rounding can
// produce hi itself when hi-lo is large compared to the spacing of floats
// near hi. It panics unless lo < hi are finite, or on a negative
// dimension.
func UniformRangeFloat64(k Key, lo, hi float64, shape ...int) *Tensor {
	checkShape("tensor.UniformRangeFloat64", shape)
	if !(lo < hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		panic(fmt.Sprintf("tensor.UniformRangeFloat64: need finite lo < hi, got lo=%v hi=%v", lo, hi))
	}
	return k.sample("tensor.UniformRangeFloat64", func(k Key, _ []*Tensor) *Tensor {
		return rngFloat64s(rngUniform64(k, numel(shape), lo, hi), shape)
	})
}

// TruncatedNormalFloat64 returns standard normal Float64 values
// conditioned on lying in the open interval (lo, hi), like
// jax.random.truncated_normal(k, lo, hi, shape, dtype=jnp.float64):
// sqrt(2)·erfinv(u) for u uniform between erf(lo/sqrt2) and erf(hi/sqrt2),
// clamped to the floats just inside (lo, hi). It panics unless lo < hi
// (infinite bounds are allowed), or on a negative dimension.
func TruncatedNormalFloat64(k Key, lo, hi float64, shape ...int) *Tensor {
	checkShape("tensor.TruncatedNormalFloat64", shape)
	if !(lo < hi) {
		panic(fmt.Sprintf("tensor.TruncatedNormalFloat64: need lo < hi, got lo=%v hi=%v", lo, hi))
	}
	return k.sample("tensor.TruncatedNormalFloat64", func(k Key, _ []*Tensor) *Tensor {
		return rngFloat64s(rngTruncatedNormal64(k, numel(shape), lo, hi), shape)
	})
}

// rngTruncatedNormal64 is jax.random.truncated_normal for float64.
func rngTruncatedNormal64(k Key, n int, lo, hi float64) []float64 {
	a := math.Erf(lo / math.Sqrt2)
	b := math.Erf(hi / math.Sqrt2)
	u := rngUniform64(k, n, a, b)
	inLo := math.Nextafter(lo, math.Inf(1))
	inHi := math.Nextafter(hi, math.Inf(-1))
	rngParallel(n, func(i0, i1 int) {
		for i := i0; i < i1; i++ {
			u[i] = min(max(math.Sqrt2*math.Erfinv(u[i]), inLo), inHi)
		}
	})
	return u
}

// GumbelFloat64 returns standard Gumbel Float64 values, -log(-log(u)) for
// u uniform in [tiny, 1) (tiny the smallest normal float64), like
// jax.random.gumbel(k, shape, dtype=jnp.float64). It panics on a negative
// dimension.
func GumbelFloat64(k Key, shape ...int) *Tensor {
	return gumbel64(k, "tensor.GumbelFloat64", shape)
}

// ExponentialFloat64 returns Float64 values from the exponential
// distribution with rate 1, like jax.random.exponential(k, shape,
// dtype=jnp.float64): -log1p(-u) for u from UniformFloat64(k, shape...).
// It panics on a negative dimension.
func ExponentialFloat64(k Key, shape ...int) *Tensor {
	checkShape("tensor.ExponentialFloat64", shape)
	return k.sample("tensor.ExponentialFloat64", func(k Key, _ []*Tensor) *Tensor {
		u := rngUniform64(k, numel(shape), 0, 1)
		for i, v := range u {
			u[i] = -rngLog(1 - v) // log1p(-v): 1-v is exact for a multiple of 2^-52
		}
		return rngFloat64s(u, shape)
	})
}

// LaplaceFloat64 returns Float64 values from the Laplace distribution
// with location 0 and scale 1, like jax.random.laplace(k, shape,
// dtype=jnp.float64): sign(u)·log1p(-|u|) for u uniform in (-1, 1). It
// panics on a negative dimension.
func LaplaceFloat64(k Key, shape ...int) *Tensor {
	checkShape("tensor.LaplaceFloat64", shape)
	return k.sample("tensor.LaplaceFloat64", func(k Key, _ []*Tensor) *Tensor {
		u := rngUniform64(k, numel(shape), math.Nextafter(-1, 0), 1) // minval -1 + float64 epsneg
		for i, v := range u {
			l := rngLog(1 - math.Abs(v)) // log1p(-|v|): 1-|v| is exact for a multiple of 2^-53
			switch {
			case v > 0:
				u[i] = l
			case v < 0:
				u[i] = -l
			default:
				u[i] = 0 // sign(0)·log1p(0)
			}
		}
		return rngFloat64s(u, shape)
	})
}
