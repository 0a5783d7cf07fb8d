package tensor

import "math"

// Random float64 values: JAX's samplers with dtype=jnp.float64 (under
// jax_enable_x64). Each value takes 64 random bits, two words of the key's
// bit stream combined as JAX's 64-bit random bits are (the first half of
// the words gives the high halves, the second half the low halves), and
// uses the top 52 of them as its mantissa.

// rngBits64 returns n 64-bit random words of key k.
func rngBits64(k Key, n int) []uint64 {
	w := rngPartitionable.bits(k, 2*n)
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(w[i])<<32 | uint64(w[n+i])
	}
	return out
}

// rngUnit64 maps a random word to [0, 1): the top 52 bits as the mantissa
// of a number in [1, 2), minus 1.
func rngUnit64(w uint64) float64 {
	return math.Float64frombits(w>>12|0x3ff0000000000000) - 1
}

// UniformFloat64 returns Float64 values uniform in [0, 1), like
// jax.random.uniform(k, shape, dtype=jnp.float64): multiples of 2^-52.
// It panics on a negative dimension.
func UniformFloat64(k Key, shape ...int) *Tensor {
	checkShape("tensor.UniformFloat64", shape)
	return k.sample("tensor.UniformFloat64", func(k Key, _ []*Tensor) *Tensor {
		w := rngBits64(k, numel(shape))
		out := newTensor(Float64, shape)
		for i, v := range w {
			out.f64[i] = rngUnit64(v)
		}
		return out
	})
}

// NormalFloat64 returns standard normal Float64 values, like
// jax.random.normal(k, shape, dtype=jnp.float64): sqrt(2)·erfinv(u) for u
// uniform in (-1, 1). It panics on a negative dimension.
func NormalFloat64(k Key, shape ...int) *Tensor {
	checkShape("tensor.NormalFloat64", shape)
	return k.sample("tensor.NormalFloat64", func(k Key, _ []*Tensor) *Tensor {
		w := rngBits64(k, numel(shape))
		out := newTensor(Float64, shape)
		lo := math.Nextafter(-1, 0)
		for i, v := range w {
			u := max(rngUnit64(v)*(1-lo)+lo, lo)
			out.f64[i] = math.Sqrt2 * math.Erfinv(u)
		}
		return out
	})
}
