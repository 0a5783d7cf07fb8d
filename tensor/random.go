package tensor

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"

	"github.com/gonox/gonox/internal/devices"
)

// This file holds gonox's random numbers: splittable, counter-based keys
// (threefry2x32, JAX's default PRNG) and the samplers built on them. The
// guide is the doc comment of Key.

// Key is a PRNG key: the state of JAX's default generator, threefry2x32,
// held in two uint32 words. Keys are small comparable values; the zero Key
// is NewKey(0). A key prints as key<fry>[w0 w1], the way JAX prints a key
// array's data.
//
// There is no global random state in gonox. Every sampler (Uniform, Normal,
// RandInt, ...) takes a key, and the same key always gives the same
// numbers, on every platform and however many goroutines compute them.
// Using a key does not change it, so fresh randomness comes from deriving
// new keys:
//
//	key := tensor.NewKey(0)
//	key, sub := key.Split2() // or keys := key.Split(n)
//	w := tensor.Normal(sub, 784, 128)
//
// The discipline is JAX's:
//
//   - Never use a key twice. Two draws with one key are the same numbers
//     (or, for different samplers, strongly dependent ones), and nothing
//     warns you. Once a key has been given to a sampler, split or folded,
//     treat it as consumed.
//   - Split before use: carry one key forward and split off a subkey for
//     each draw (key, sub = key.Split2()), or split once into as many keys
//     as there are consumers (one per layer, per step, per device).
//   - FoldIn derives a key from data (a step number, a device index, an
//     example id) without threading keys through the program.
//
// Compatibility with JAX. Keys and samplers follow JAX's default PRNG,
// jax.random with threefry2x32 and jax_threefry_partitionable=True (the
// default since JAX 0.5.0), operation for operation: NewKey is
// jax.random.key, Key.Split is split, FoldIn is fold_in, Bits is bits, and
// Uniform, UniformRange, Normal, TruncatedNormal, Bernoulli, RandInt,
// Permutation, Gumbel and Categorical are the samplers of the same names,
// for float32 and int32. Keys, bits, Uniform, Bernoulli and RandInt are
// integer arithmetic and exact float32 operations, so they equal JAX's
// values bit for bit; UniformRange rounds u*(hi-lo)+lo once, as the fused
// multiply-add XLA emits on CPU and GPU. Normal and TruncatedNormal use
// XLA's float32 erf_inv (Giles' polynomial, with fused multiply-adds), and
// Gumbel and Categorical a logarithm; there XLA evaluates log1p, log and
// erf with its own float32 approximations while gonox rounds
// high-precision values, so an occasional result can differ from JAX's in
// the last bit (every published JAX value gonox was checked against
// matches). The tests list the JAX outputs reproduced.
//
// Results are constants for autodiff: samplers never return traced
// tensors, and Categorical reads its logits through StopGradient.
//
// Consistency across shapes. Element i (in row-major order) of a draw
// depends only on the key and on i, as in JAX's partitionable scheme. So
// Uniform(k, 2, 3) holds the same numbers as Uniform(k, 6); Uniform(k, 4)
// is the first four of Uniform(k, 10); Uniform(k) (a scalar) is the first
// element of both. The same holds for Bits, RandomBits, UniformRange,
// Normal, TruncatedNormal, Bernoulli, Gumbel and RandInt. k.Split(n)[i] is
// FoldIn(k, uint32(i)), so k.Split(2) is a prefix of k.Split(5).
// Permutation and Categorical have no such property. (JAX before 0.5.0 laid
// counters out differently: equal sizes agreed, but a shorter draw was not
// a prefix of a longer one, and its numbers differ from today's.)
//
// Keys under Vmap. A key may also hold its words in a tensor (StackKeys
// makes such a stack of keys, JAX's key array): it is then a pytree node
// whose leaf Vmap maps, so that inside the vmapped function every example
// has its own key, and Split, FoldIn and every sampler act on each
// example's key (random_keys.go). That is how an ensemble is initialised:
// autodiff.Vmap(newModel)(tensor.StackKeys(key.Split(8))).
type Key struct {
	data [2]uint32
	// t, when set, holds the words: i32[2] for one key, [..., 2] for a
	// stack of keys.
	t *Tensor
}

// NewKey returns the key for an integer seed, like jax.random.key(seed):
// its words are the high and low 32 bits of the seed. It equals JAX's key
// for every seed JAX holds exactly: 0 <= seed < 2^31 always, and any 64-bit
// seed with jax_enable_x64 (a negative int64 seed s as NewKey(uint64(s))).
func NewKey(seed uint64) Key {
	return Key{data: [2]uint32{uint32(seed >> 32), uint32(seed)}}
}

// WrapKeyData returns the key with the given raw words, like
// jax.random.wrap_key_data. It is the inverse of Key.Data.
func WrapKeyData(data [2]uint32) Key { return Key{data: data} }

// Data returns the key's raw words, like jax.random.key_data. Use it to save
// a key or to hand it to JAX. It panics for a stack of keys and for a key
// inside Vmap (whose words are many examples').
func (k Key) Data() [2]uint32 { return k.words("tensor.Key.Data") }

// String prints the key like JAX prints a key array's data:
// key<fry>[0 42]; a key held in a tensor prints its type: key<fry>i32[8,2].
func (k Key) String() string {
	if k.t != nil {
		return "key<fry>" + k.t.String()
	}
	return fmt.Sprintf("key<fry>[%d %d]", k.data[0], k.data[1])
}

// Split returns n new keys derived from k, like jax.random.split(k, n).
// The keys are independent of each other and of k; k must not be used
// again. k.Split(n)[i] equals FoldIn(k, uint32(i)), and k.Split(n) is a
// prefix of k.Split(m) for n <= m. It panics if n is negative.
//
// (It is a method because tensor.Split splits arrays, like jnp.split.)
func (k Key) Split(n int) []Key {
	if n < 0 {
		panic(fmt.Sprintf("tensor.Key.Split: number of keys %d is negative", n))
	}
	if k.t != nil {
		return k.splitTensor("tensor.Key.Split", n)
	}
	return rngPartitionable.split(k, n)
}

// Split2 splits k into two keys, like `k1, k2 = jax.random.split(k)`. The
// usual pattern carries the first forward and consumes the second:
//
//	key, sub := key.Split2()
func (k Key) Split2() (Key, Key) {
	if k.t != nil {
		ks := k.splitTensor("tensor.Key.Split2", 2)
		return ks[0], ks[1]
	}
	ks := rngPartitionable.split(k, 2)
	return ks[0], ks[1]
}

// FoldIn returns a new key that mixes data into k, like
// jax.random.fold_in(k, data). Different data give independent keys; use it
// to derive per-step, per-device or per-example keys from one key.
func FoldIn(k Key, data uint32) Key {
	if k.t != nil {
		return k.foldInTensor(data)
	}
	a, b := rngThreefry2x32(k.data[0], k.data[1], 0, data)
	return Key{data: [2]uint32{a, b}}
}

// Bits returns uniformly random 32-bit words for the given shape in
// row-major order (one word for an empty shape), like
// jax.random.bits(k, shape, 'uint32'). It panics on a negative dimension.
// A key held in a tensor is read as Data reads it (inside Vmap, use
// RandomBits).
func Bits(k Key, shape ...int) []uint32 {
	checkShape("tensor.Bits", shape)
	return rngPartitionable.bits(WrapKeyData(k.words("tensor.Bits")), numel(shape))
}

// RandomBits returns an int32 tensor of the given shape holding uniformly
// random bits: the words of Bits(k, shape...) reinterpreted as int32 (gonox
// has no uint32 dtype). It panics on a negative dimension.
func RandomBits(k Key, shape ...int) *Tensor {
	checkShape("tensor.RandomBits", shape)
	return k.sample("tensor.RandomBits", func(k Key, _ []*Tensor) *Tensor {
		b := rngPartitionable.bits(k, numel(shape))
		out := newTensor(Int32, shape)
		d := out.i32()
		for i, v := range b {
			d[i] = int32(v)
		}
		return out
	})
}

// Uniform returns float32 values uniform in [0, 1), like
// jax.random.uniform(k, shape). With no shape the result is a scalar. The
// values are multiples of 2^-23: each takes the top 23 bits of a random
// word as its mantissa. It panics on a negative dimension.
func Uniform(k Key, shape ...int) *Tensor {
	checkShape("tensor.Uniform", shape)
	return k.sample("tensor.Uniform", func(k Key, _ []*Tensor) *Tensor {
		return rngFloat32s(rngUniform(rngPartitionable, k, numel(shape), 0, 1), shape)
	})
}

// UniformRange returns float32 values uniform in [lo, hi), like
// jax.random.uniform(k, shape, minval=lo, maxval=hi): u*(hi-lo)+lo for u
// from Uniform, computed in float32 with one rounding (a fused multiply-add,
// as XLA compiles it) and clamped below at lo. Rounding can produce hi
// itself when hi-lo is large compared to the spacing of floats near hi. It
// panics unless lo < hi are finite, or on a negative dimension.
func UniformRange(k Key, lo, hi float32, shape ...int) *Tensor {
	checkShape("tensor.UniformRange", shape)
	if !(lo < hi) || math.IsInf(float64(lo), 0) || math.IsInf(float64(hi), 0) {
		panic(fmt.Sprintf("tensor.UniformRange: need finite lo < hi, got lo=%v hi=%v", lo, hi))
	}
	return k.sample("tensor.UniformRange", func(k Key, _ []*Tensor) *Tensor {
		return rngFloat32s(rngUniform(rngPartitionable, k, numel(shape), lo, hi), shape)
	})
}

// Normal returns standard normal float32 values, like
// jax.random.normal(k, shape): sqrt(2)*erfinv(u) for u uniform in (-1, 1),
// with XLA's float32 erf_inv polynomial. It panics on a negative dimension.
func Normal(k Key, shape ...int) *Tensor {
	checkShape("tensor.Normal", shape)
	return k.sample("tensor.Normal", func(k Key, _ []*Tensor) *Tensor {
		return rngFloat32s(rngNormal(rngPartitionable, k, numel(shape)), shape)
	})
}

// TruncatedNormal returns standard normal float32 values conditioned on
// lying in the open interval (lo, hi), like
// jax.random.truncated_normal(k, lo, hi, shape): inverse-CDF sampling
// between erf(lo/sqrt2) and erf(hi/sqrt2), then clamped to the floats just
// inside (lo, hi). Initializers use it with lo=-2, hi=2. It panics unless
// lo < hi (infinite bounds are allowed), or on a negative dimension.
func TruncatedNormal(k Key, lo, hi float32, shape ...int) *Tensor {
	checkShape("tensor.TruncatedNormal", shape)
	if !(lo < hi) {
		panic(fmt.Sprintf("tensor.TruncatedNormal: need lo < hi, got lo=%v hi=%v", lo, hi))
	}
	return k.sample("tensor.TruncatedNormal", func(k Key, _ []*Tensor) *Tensor {
		return rngFloat32s(rngTruncatedNormal(rngPartitionable, k, numel(shape), lo, hi), shape)
	})
}

// Bernoulli returns a bool tensor whose elements are true with probability
// p, like jax.random.bernoulli(k, p, shape): element i is u_i < p for u from
// Uniform(k, shape...). Because u is a multiple of 2^-23, probabilities
// below about 1e-7 are not resolved (JAX's mode="low", its default). It
// panics unless 0 <= p <= 1, or on a negative dimension.
func Bernoulli(k Key, p float32, shape ...int) *Tensor {
	checkShape("tensor.Bernoulli", shape)
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("tensor.Bernoulli: probability p=%v is outside [0, 1]", p))
	}
	return k.sample("tensor.Bernoulli", func(k Key, _ []*Tensor) *Tensor {
		u := rngUniform(rngPartitionable, k, numel(shape), 0, 1)
		out := newTensor(Bool, shape)
		d := out.b()
		for i, v := range u {
			d[i] = v < p
		}
		return out
	})
}

// RandInt returns int32 values uniform in [lo, hi), like
// jax.random.randint(k, shape, lo, hi), with JAX's algorithm and its uint32
// arithmetic: two random words per element, from the two keys of
// k.Split(2), reduced modulo hi-lo. For hi-lo <= 2^16 that is a 64-bit
// random number modulo hi-lo (bias below 2^-48); for wider ranges JAX's
// arithmetic keeps only the second word, so when hi-lo is not a power of
// two the values are biased by up to (hi-lo)/2^32 relative. It panics
// unless math.MinInt32 <= lo < hi <= math.MaxInt32+1, or on a negative
// dimension.
func RandInt(k Key, lo, hi int, shape ...int) *Tensor {
	checkShape("tensor.RandInt", shape)
	if lo >= hi || lo < math.MinInt32 || hi > math.MaxInt32+1 {
		panic(fmt.Sprintf("tensor.RandInt: need %d <= lo < hi <= %d, got lo=%d hi=%d",
			math.MinInt32, int64(math.MaxInt32)+1, lo, hi))
	}
	return k.sample("tensor.RandInt", func(k Key, _ []*Tensor) *Tensor {
		return rngInt32s(rngRandInt(rngPartitionable, k, numel(shape), lo, hi), shape)
	})
}

// Permutation returns a uniformly random permutation of 0, 1, ..., n-1 as
// an int32 vector, like jax.random.permutation(k, n): JAX's shuffle, which
// stably sorts by fresh random 32-bit sort keys in ceil(3 ln n / ln(2^32-1))
// rounds (one round for n up to 1625), splitting k once per round. It
// panics if n is negative or does not fit in int32.
func Permutation(k Key, n int) *Tensor {
	if n < 0 || n > math.MaxInt32 {
		panic(fmt.Sprintf("tensor.Permutation: n=%d must be in [0, %d]", n, math.MaxInt32))
	}
	return k.sample("tensor.Permutation", func(k Key, _ []*Tensor) *Tensor {
		return rngInt32s(rngPermutation(rngPartitionable, k, n), []int{n})
	})
}

// Gumbel returns standard Gumbel float32 values, -log(-log(u)) for u
// uniform in [tiny, 1), like jax.random.gumbel(k, shape). It panics on a
// negative dimension.
func Gumbel(k Key, shape ...int) *Tensor {
	checkShape("tensor.Gumbel", shape)
	return k.sample("tensor.Gumbel", func(k Key, _ []*Tensor) *Tensor {
		return rngFloat32s(rngGumbel(rngPartitionable, k, numel(shape)), shape)
	})
}

// Categorical draws one category index per distribution from unnormalized
// log-probabilities, like jax.random.categorical(k, logits, axis): the
// categories lie along axis (negative counts from the end) and the result,
// an int32 tensor, has logits' shape without that axis. It uses the
// Gumbel-max trick, argmax(logits + Gumbel(k, logits.shape)), so category
// j is drawn with probability softmax(logits)[j]; a logit of -Inf is never
// drawn. Logits are read through StopGradient; float64 logits take
// float64 Gumbel noise, as in JAX. It panics if logits is not float32 or
// float64, if axis is out of range or if the axis is empty.
func Categorical(k Key, logits *Tensor, axis int) *Tensor {
	checkNil("tensor.Categorical", "logits", logits)
	if logits.dtype != Float32 && logits.dtype != Float64 {
		panic(fmt.Sprintf("tensor.Categorical: logits %v must be float32 or float64", logits))
	}
	a := normAxis("tensor.Categorical", logits, axis)
	if logits.shape[a] == 0 {
		panic(fmt.Sprintf("tensor.Categorical: logits %v: axis %d has no categories", logits, axis))
	}
	return ArgMax(Add(gumbelOf(k, logits.dtype, logits.shape...), StopGradient(logits)), a)
}

// rngFloat32s wraps data (which it takes over) as a float32 tensor of the
// given shape; an empty shape makes a scalar.
func rngFloat32s(data []float32, shape []int) *Tensor {
	return &Tensor{dtype: Float32, shape: append([]int{}, shape...), data: raw(data)}
}

// rngInt32s is rngFloat32s for int32 data.
func rngInt32s(data []int32, shape []int) *Tensor {
	return &Tensor{dtype: Int32, shape: append([]int{}, shape...), data: raw(data)}
}

// rngScheme selects how threefry counters are laid out. gonox's public API
// always uses rngPartitionable (JAX's jax_threefry_partitionable=True, the
// default since JAX 0.5.0); rngLegacy is JAX's earlier layout, kept so tests
// can check the shared arithmetic against outputs published by older JAX.
type rngScheme bool

const (
	rngPartitionable rngScheme = true
	rngLegacy        rngScheme = false
)

// rngThreefry2x32 is the Threefry-2x32 block cipher with 20 rounds (Salmon
// et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), as JAX
// uses it: key (k0, k1), counter (x0, x1).
func rngThreefry2x32(k0, k1, x0, x1 uint32) (uint32, uint32) {
	k2 := k0 ^ k1 ^ 0x1BD11BDA // Skein key-schedule parity constant
	x0 += k0
	x1 += k1
	// Five groups of four rounds; rotations alternate between
	// (13, 15, 26, 6) and (17, 29, 16, 24); a key injection follows each group.
	x0, x1 = rngRounds(x0, x1, 13, 15, 26, 6)
	x0 += k1
	x1 += k2 + 1
	x0, x1 = rngRounds(x0, x1, 17, 29, 16, 24)
	x0 += k2
	x1 += k0 + 2
	x0, x1 = rngRounds(x0, x1, 13, 15, 26, 6)
	x0 += k0
	x1 += k1 + 3
	x0, x1 = rngRounds(x0, x1, 17, 29, 16, 24)
	x0 += k1
	x1 += k2 + 4
	x0, x1 = rngRounds(x0, x1, 13, 15, 26, 6)
	x0 += k2
	x1 += k0 + 5
	return x0, x1
}

// rngRounds applies four Threefry mix rounds with the given rotations.
func rngRounds(x0, x1 uint32, r0, r1, r2, r3 int) (uint32, uint32) {
	x0 += x1
	x1 = bits.RotateLeft32(x1, r0) ^ x0
	x0 += x1
	x1 = bits.RotateLeft32(x1, r1) ^ x0
	x0 += x1
	x1 = bits.RotateLeft32(x1, r2) ^ x0
	x0 += x1
	x1 = bits.RotateLeft32(x1, r3) ^ x0
	return x0, x1
}

// rngGrain is the number of elements below which work stays on the calling
// goroutine.
const rngGrain = 1 << 15

// rngParallel runs fn over [0, n) in contiguous chunks, on several
// goroutines when n is large and no shard.Map devices are running (a
// sampler has no operand to carry a device mark, so it asks package
// devices). Every element is computed from its index alone, so the result
// does not depend on the chunking.
func rngParallel(n int, fn func(lo, hi int)) {
	if devices.Running() {
		fn(0, n)
		return
	}
	w := runtime.GOMAXPROCS(0)
	if c := n / rngGrain; c < w {
		w = c
	}
	if w <= 1 {
		fn(0, n)
		return
	}
	spread(w, func(c int) int { return n * c / w }, fn)
}

// split derives n keys from k (jax.random.split).
func (s rngScheme) split(k Key, n int) []Key {
	out := make([]Key, n)
	k0, k1 := k.data[0], k.data[1]
	if s == rngPartitionable {
		// Key i hashes the 64-bit counter i, as (hi, lo) words.
		for i := range out {
			a, b := rngThreefry2x32(k0, k1, uint32(uint64(i)>>32), uint32(i))
			out[i] = Key{data: [2]uint32{a, b}}
		}
		return out
	}
	// Legacy: hash iota(2n) split in halves, then read the output pairwise.
	words := make([]uint32, 2*n)
	for i := range n {
		a, b := rngThreefry2x32(k0, k1, uint32(i), uint32(n+i))
		words[i], words[n+i] = a, b
	}
	for i := range out {
		out[i] = Key{data: [2]uint32{words[2*i], words[2*i+1]}}
	}
	return out
}

// bits returns n random words from k (JAX's 32-bit random_bits of a
// shape with n elements).
func (s rngScheme) bits(k Key, n int) []uint32 {
	out := make([]uint32, n)
	k0, k1 := k.data[0], k.data[1]
	if s == rngPartitionable {
		// Word i is the xor of the two outputs for the 64-bit counter i.
		rngParallel(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				a, b := rngThreefry2x32(k0, k1, uint32(uint64(i)>>32), uint32(i))
				out[i] = a ^ b
			}
		})
		return out
	}
	// Legacy: the counters 0..n-1 (padded with one 0 if n is odd) split in
	// halves; the first outputs fill the first half, the second the rest.
	if uint64(n) >= math.MaxUint32 {
		panic("tensor: legacy threefry bits beyond 2^32-1 words are not implemented")
	}
	h := (n + 1) / 2
	for i := range h {
		c1 := uint32(h + i)
		if h+i == n {
			c1 = 0
		}
		a, b := rngThreefry2x32(k0, k1, uint32(i), c1)
		out[i] = a
		if h+i < n {
			out[h+i] = b
		}
	}
	return out
}

// rngUnit maps a random word to a float32 in [0, 1): its top 23 bits become
// the mantissa of a float in [1, 2), from which 1 is subtracted (exactly).
func rngUnit(w uint32) float32 {
	return math.Float32frombits(w>>9|0x3F800000) - 1
}

// rngUniform is jax.random.uniform for float32: max(lo, u*(hi-lo)+lo),
// with the multiply-add fused as XLA's CPU and GPU backends compile it.
func rngUniform(s rngScheme, k Key, n int, lo, hi float32) []float32 {
	w := s.bits(k, n)
	out := make([]float32, n)
	span := hi - lo
	rngParallel(n, func(a, b int) {
		for i := a; i < b; i++ {
			v := rngFMA32(rngUnit(w[i]), span, lo)
			out[i] = max(v, lo)
		}
	})
	return out
}

// rngNormal is jax.random.normal for float32.
func rngNormal(s rngScheme, k Key, n int) []float32 {
	// u is uniform in [nextafter(-1, 0), 1), i.e. (-1, 1): rngUniform with
	// lo = -1+2^-24 and hi = 1, where hi-lo rounds to 2 and f*2+lo is
	// exact, so no fused multiply-add is needed.
	u := s.bits(k, n)
	out := make([]float32, n)
	rngParallel(n, func(a, b int) {
		for i := a; i < b; i++ {
			out[i] = rngNormalWord(u[i])
		}
	})
	return out
}

// rngNormalWord is the standard normal value jax.random.normal makes of
// one random word.
func rngNormalWord(w uint32) float32 {
	lo := math.Nextafter32(-1, 0)
	x := max(rngUnit(w)*2+lo, lo)
	return float32(math.Sqrt2) * rngErfInv32(x)
}

// rngTruncatedNormal is jax.random.truncated_normal for float32.
func rngTruncatedNormal(s rngScheme, k Key, n int, lo, hi float32) []float32 {
	sqrt2 := float32(math.Sqrt2)
	a := rngErf32(lo / sqrt2)
	b := rngErf32(hi / sqrt2)
	u := rngUniform(s, k, n, a, b)
	// Clamp to the open interval: just inside lo and hi.
	inLo := math.Nextafter32(lo, float32(math.Inf(1)))
	inHi := math.Nextafter32(hi, float32(math.Inf(-1)))
	rngParallel(n, func(i0, i1 int) {
		for i := i0; i < i1; i++ {
			v := sqrt2 * rngErfInv32(u[i])
			u[i] = min(max(v, inLo), inHi)
		}
	})
	return u
}

// rngGumbel is jax.random.gumbel for float32 (mode "low").
func rngGumbel(s rngScheme, k Key, n int) []float32 {
	tiny := math.Float32frombits(0x00800000) // smallest normal float32
	u := rngUniform(s, k, n, tiny, 1)
	rngParallel(n, func(a, b int) {
		for i := a; i < b; i++ {
			l := float32(rngLog(float64(u[i]))) // in [-87.4, 0)
			u[i] = -float32(rngLog(float64(-l)))
		}
	})
	return u
}

// rngRandInt is jax.random.randint for int32, with JAX's uint32 arithmetic
// (wrapping) reproduced exactly.
func rngRandInt(s rngScheme, k Key, n int, lo, hi int) []int32 {
	ks := s.split(k, 2)
	higher := s.bits(ks[0], n)
	lower := s.bits(ks[1], n)
	maxv := min(hi, math.MaxInt32) // JAX clips maxval to the dtype...
	span := uint32(int32(maxv) - int32(lo))
	if hi > math.MaxInt32 {
		span++ // ...and widens the span by one when it had to (may wrap to 0).
	}
	rem := func(x, m uint32) uint32 { // XLA's remainder: x % 0 == x
		if m == 0 {
			return x
		}
		return x % m
	}
	mult := rem(1<<16, span)
	mult = rem(mult*mult, span)
	out := make([]int32, n)
	for i := range out {
		off := rem(higher[i], span)*mult + rem(lower[i], span)
		out[i] = int32(lo) + int32(rem(off, span))
	}
	return out
}

// rngShuffleRounds is the number of sort rounds of JAX's shuffle for n
// elements: ceil(3 ln(max(1, n)) / ln(2^32-1)).
func rngShuffleRounds(n int) int {
	return int(math.Ceil(3 * math.Log(float64(max(1, n))) / math.Log(math.MaxUint32)))
}

// rngPermutation is jax.random.permutation(k, n).
func rngPermutation(s rngScheme, k Key, n int) []int32 {
	x := make([]int32, n)
	for i := range x {
		x[i] = int32(i)
	}
	type item struct {
		key uint32
		val int32
	}
	items := make([]item, n)
	for range rngShuffleRounds(n) {
		ks := s.split(k, 2)
		k = ks[0]
		sortKeys := s.bits(ks[1], n)
		for i := range items {
			items[i] = item{sortKeys[i], x[i]}
		}
		// lax.sort_key_val is stable.
		slices.SortStableFunc(items, func(a, b item) int {
			switch {
			case a.key < b.key:
				return -1
			case a.key > b.key:
				return 1
			}
			return 0
		})
		for i := range items {
			x[i] = items[i].val
		}
	}
	return x
}

// rngErfInv32 is XLA's float32 ErfInv: Giles' single-precision polynomial
// ("Approximating the erfinv function", GPU Computing Gems, 2011) in w =
// -log1p(-x*x), evaluated in float32 with fused multiply-adds as XLA's CPU
// and GPU code generators emit them. log1p is computed to within rounding
// (XLA uses its own approximation, accurate to an ulp or so).
func rngErfInv32(x float32) float32 {
	if x == 1 || x == -1 {
		return x * float32(math.Inf(1))
	}
	t := float32(float64(-x) * float64(x)) // -x*x rounded to float32
	w := -float32(rngLog1p(t))
	var c *[9]float32
	if w < 5 {
		w -= 2.5
		c = &rngErfInvSmall
	} else {
		w = float32(math.Sqrt(float64(w))) - 3
		c = &rngErfInvLarge
	}
	p := c[0]
	for _, ci := range c[1:] {
		// p = rngFMA32(p, w, ci), with its common case inlined by hand.
		pw := float64(p) * float64(w) // exact
		s := pw + float64(ci)
		if b := math.Float64bits(s); b&(1<<29-1) != 1<<28 && (b>>52)&0x7ff >= 1023-126 {
			p = float32(s)
		} else {
			p = rngFMA32Tie(pw, float64(ci), s)
		}
	}
	return p * x
}

// Coefficients of XLA's ErfInv32 (Giles), highest degree first, for
// w < 5 (central region) and w >= 5 (tails).
var (
	rngErfInvSmall = [9]float32{
		2.81022636e-08, 3.43273939e-07, -3.5233877e-06,
		-4.39150654e-06, 0.00021858087, -0.00125372503,
		-0.00417768164, 0.246640727, 1.50140941,
	}
	rngErfInvLarge = [9]float32{
		-0.000200214257, 0.000100950558, 0.00134934322,
		-0.00367342844, 0.00573950773, -0.0076224613,
		0.00943887047, 1.00167406, 2.83297682,
	}
)

// The transcendental functions below are written out in float64 with every
// rounding explicit (a conversion after each product that feeds a sum, so
// that no platform fuses them), instead of calling package math: Go's math
// functions are assembly on some architectures and pure Go, compiled with
// or without fused multiply-adds, on others, so their last bits differ
// between platforms. These are accurate to a few float64 ulps, far inside
// the float32 results built from them, and give the same bits everywhere.

const (
	rngLn2Hi = 6.93147180369123816490e-01 // ln 2, high 32 bits
	rngLn2Lo = 1.90821492927058770002e-10 // ln 2 - rngLn2Hi
)

// rngLog returns ln(y) for y >= 0 (-Inf for 0).
func rngLog(y float64) float64 {
	if y == 0 {
		return math.Inf(-1)
	}
	m, e := math.Frexp(y) // y = m * 2^e, m in [1/2, 1)
	if m < math.Sqrt2/2 {
		m *= 2 // exact; now m is in [sqrt(1/2), sqrt(2))
		e--
	}
	// ln m = 2 atanh(s) = 2s (1 + s^2/3 + s^4/5 + ...), |s| < 0.172.
	s := (m - 1) / (m + 1) // m-1 is exact
	s2 := float64(s * s)
	p := 1.0 / 21
	for k := 19; k >= 3; k -= 2 {
		p = float64(p*s2) + 1/float64(k)
	}
	twoS := 2 * s
	lnm := twoS + float64(float64(twoS*s2)*p)
	fe := float64(e)
	return float64(fe*rngLn2Hi) + (float64(fe*rngLn2Lo) + lnm)
}

// rngLog1p returns ln(1+t) for a float32 t in [-1, 0].
func rngLog1p(t float32) float64 {
	if t > -0x1p-29 {
		// ln(1+t) = t - t^2/2 + ...: within a fraction of a float32 ulp of t.
		return float64(t)
	}
	return rngLog(1 + float64(t)) // exact sum: t has no bits below 2^-53
}

// rngErf returns erf(x) to within about 5e-11 (absolute), ample for a
// float32 result.
func rngErf(x float64) float64 {
	if math.IsNaN(x) {
		return x
	}
	if x >= 4 || x <= -4 {
		return math.Copysign(1, x) // |1 - erf(x)| < 1.6e-8: erf rounds to ±1 in float32
	}
	// erf(x) = 2/sqrt(pi) sum_n (-1)^n x^(2n+1) / (n! (2n+1)); for |x| < 4
	// the largest term is below 1e5, so cancellation costs < 5e-11.
	nx2 := -float64(x * x)
	term, sum := x, x
	for n := 1; n < 200; n++ {
		term = float64(term*nx2) / float64(n)
		d := term / float64(2*n+1)
		sum += d
		if math.Abs(d) < 1e-17 {
			break
		}
	}
	return float64(sum * (2 / math.SqrtPi))
}

// rngErf32 is erf(x) rounded to float32.
func rngErf32(x float32) float32 { return float32(rngErf(float64(x))) }

// rngFMA32 returns a*b+c rounded once to float32, the result of a float32
// fused multiply-add, identically on every platform. The product is exact
// in float64, so rounding the float64 sum to float32 is right unless that
// sum is exactly halfway between two float32s (double rounding); then the
// exact error of the sum decides.
func rngFMA32(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact: 24+24 significant bits
	cc := float64(c)
	s := p + cc
	bits := math.Float64bits(s)
	// A float32 tie has the 29 low mantissa bits 1000...0; below 2^-126
	// (float32 subnormals) ties look different, so take the careful path.
	if bits&(1<<29-1) != 1<<28 && (bits>>52)&0x7ff >= 1023-126 {
		return float32(s)
	}
	return rngFMA32Tie(p, cc, s)
}

// rngFMA32Tie rounds p+c to float32 when s, the float64 sum, may be a tie.
func rngFMA32Tie(p, c, s float64) float32 {
	r := float32(s)
	if float64(r) == s || math.IsInf(s, 0) || math.IsNaN(s) {
		return r
	}
	// e is the exact error of s (Knuth's TwoSum): p + c == s + e.
	bv := s - p
	e := (p - (s - bv)) + (c - bv)
	if e == 0 {
		return r
	}
	var o float32 // the float32 neighbour of s on the other side from r
	if float64(r) < s {
		o = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		o = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if s-float64(r) != float64(o)-s {
		return r // not a tie: rounding s is rounding p+c
	}
	// s is a tie; the exact sum lies on the side of e.
	if (e > 0) == (float64(o) > s) {
		return o
	}
	return r
}
