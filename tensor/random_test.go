package tensor

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// f32s parses float32 values printed with enough digits to identify them.
func f32s(t *testing.T, ss ...string) []float32 {
	t.Helper()
	out := make([]float32, len(ss))
	for i, s := range ss {
		v, err := strconv.ParseFloat(s, 32)
		require.NoError(t, err)
		out[i] = float32(v)
	}
	return out
}

// requireSameBits compares float32 slices bit for bit, reporting both.
func requireSameBits(t *testing.T, want, got []float32, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		require.Equalf(t, math.Float32bits(want[i]), math.Float32bits(got[i]),
			"%s: element %d: want %v, got %v", msg, i, want[i], got[i])
	}
}

// npRepr formats a float32 as NumPy prints array elements by default
// (floatmode "maxprec", precision 8): the shortest decimal that
// identifies the float32, unless that needs more than 8 fractional digits,
// in which case the value rounded to 8 fractional digits.
func npRepr(v float32) string {
	s := strconv.FormatFloat(float64(v), 'f', -1, 32)
	if i := strings.IndexByte(s, '.'); i < 0 || len(s)-i-1 <= 8 {
		return s
	}
	s = strings.TrimRight(strconv.FormatFloat(float64(v), 'f', 8, 32), "0")
	return strings.TrimSuffix(s, ".")
}

// requirePrinted checks got against float32 values as JAX printed them.
// Where NumPy printed the shortest round-trip decimal (at most 8 fractional
// digits) equal strings mean equal bits; elsewhere they mean agreement to
// the 8 digits printed.
func requirePrinted(t *testing.T, want []string, got []float32, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		require.Equalf(t, want[i], npRepr(got[i]), "%s: element %d (%v)", msg, i, got[i])
	}
}

func keyData(ks []Key) [][2]uint32 {
	out := make([][2]uint32, len(ks))
	for i, k := range ks {
		out[i] = k.Data()
	}
	return out
}

func TestThreefry2x32KnownAnswers(t *testing.T) {
	// Random123's known-answer vectors for threefry2x32 with 20 rounds
	// (kat_vectors; the same three JAX checks in testThreefry2x32).
	cases := []struct {
		name           string
		key, ctr, want [2]uint32
	}{
		{"zeros", [2]uint32{0, 0}, [2]uint32{0, 0}, [2]uint32{0x6b200159, 0x99ba4efe}},
		{"ones", [2]uint32{0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [2]uint32{0x1cb996fc, 0xbb002be7}},
		{"pi", [2]uint32{0x13198a2e, 0x03707344}, [2]uint32{0x243f6a88, 0x85a308d3}, [2]uint32{0xc4923a9c, 0x483df7a0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := rngThreefry2x32(c.key[0], c.key[1], c.ctr[0], c.ctr[1])
			assert.Equal(t, c.want, [2]uint32{a, b})
		})
	}
}

func TestNewKey(t *testing.T) {
	cases := []struct {
		seed uint64
		want [2]uint32
		str  string
	}{
		{0, [2]uint32{0, 0}, "key<fry>[0 0]"},
		{42, [2]uint32{0, 42}, "key<fry>[0 42]"},
		{1 << 32, [2]uint32{1, 0}, "key<fry>[1 0]"},
		{1<<32 + 1, [2]uint32{1, 1}, "key<fry>[1 1]"},
		{math.MaxUint64, [2]uint32{math.MaxUint32, math.MaxUint32}, "key<fry>[4294967295 4294967295]"},
	}
	for _, c := range cases {
		t.Run(c.str, func(t *testing.T) {
			k := NewKey(c.seed)
			assert.Equal(t, c.want, k.Data())
			assert.Equal(t, c.str, k.String())
			assert.Equal(t, c.str, fmt.Sprint(k))
			assert.Equal(t, k, WrapKeyData(c.want))
		})
	}
	assert.Equal(t, Key{}, NewKey(0), "the zero Key is NewKey(0)")
	assert.NotEqual(t, NewKey(1), NewKey(2))
}

// TestJAXPartitionable checks outputs that JAX with its current default
// (jax_threefry_partitionable=True, JAX >= 0.5.0) printed in public sources.
func TestJAXPartitionable(t *testing.T) {
	t.Run("docs uniform and split", func(t *testing.T) {
		// docs.jax.dev/en/latest/jax.random.html, "PRNG keys": random.uniform
		// of key(0), then of the subkey from random.split(key).
		k := NewKey(0)
		requirePrinted(t, []string{"0.947667"}, Uniform(k).Float32s(), "uniform(key(0))")
		_, sub := k.Split2()
		requirePrinted(t, []string{"0.00729382"}, Uniform(sub).Float32s(), "uniform(subkey)")
	})
	t.Run("fold_in and split key data", func(t *testing.T) {
		// Golden key_data of fold_in(key(seed), i), i = 0..12, recorded with
		// JAX for xtrax's tests/test_random (chunk-invariant key streams);
		// under the partitionable scheme split(key, n)[i] is the same key.
		golden := map[uint64][][2]uint32{
			0: {{1797259609, 2579123966}, {928981903, 3453687069}, {4146024105, 2718843009},
				{2467461003, 3840466878}, {2285895361, 433833334}, {1524306142, 1887795613},
				{3792494674, 2909014575}, {2716826189, 292468403}, {2292653872, 931858003},
				{823147153, 450340679}, {3668660785, 652965180}, {255289810, 156206175},
				{2763346363, 124557586}},
			12345: {{1214163296, 439912094}, {867802714, 3762255628}, {795667951, 2300365598},
				{709272294, 1661227809}, {305750198, 730924241}, {1545186055, 432531754},
				{3552431482, 1517125165}, {3645526921, 1314572738}, {3549796694, 2529333308},
				{2657012232, 1416960692}, {1763606390, 309040335}, {3052679535, 1314812838},
				{2650252694, 1226034348}},
		}
		for seed, want := range golden {
			k := NewKey(seed)
			assert.Equal(t, want, keyData(k.Split(len(want))), "split(key(%d), 13)", seed)
			for i, w := range want {
				assert.Equal(t, w, FoldIn(k, uint32(i)).Data(), "fold_in(key(%d), %d)", seed, i)
			}
		}
	})
	t.Run("Deep Learning with R, 3rd ed.", func(t *testing.T) {
		// Manning, Deep Learning with R 3rd ed., section 3.5.3:
		// jax$random$normal(key(123), shape(3)) and the same draw from
		// split(key(123), num=1)[0]. The values differ from the Python
		// edition's (below, legacy): this book ran a JAX >= 0.5.
		k := NewKey(123)
		requirePrinted(t, []string{"1.6359469", "0.8408094", "0.02212393"},
			Normal(k, 3).Float32s(), "normal(key(123), (3,))")
		requirePrinted(t, []string{"-0.49093357", "-0.9478693", "-1.775197"},
			Normal(k.Split(1)[0], 3).Float32s(), "normal(split(key(123), 1)[0], (3,))")
	})
	t.Run("uniform randint bernoulli", func(t *testing.T) {
		// Golden values in the test_rng of a CUDA port of a JAX program
		// (antibody.cu, checked against JAX): for key(0), split into 3 keys,
		// uniform at i = 0..3, randint(0, 20) and bernoulli(0.25) at i = 0..7.
		k := NewKey(0)
		assert.Equal(t, [][2]uint32{{1797259609, 2579123966}, {928981903, 3453687069}, {4146024105, 2718843009}},
			keyData(k.Split(3)))
		requireSameBits(t, f32s(t, "0.9476670027", "0.9785798788", "0.3322914839", "0.4686684608"),
			Uniform(k, 4).Float32s(), "uniform(key(0), (4,))")
		assert.Equal(t, []int32{9, 0, 12, 13, 11, 7, 12, 3}, RandInt(k, 0, 20, 8).Int32s())
		assert.Equal(t, []bool{false, false, false, false, false, true, false, false}, Bernoulli(k, 0.25, 8).Bools())
	})
}

// TestJAXLegacy checks the arithmetic shared by both schemes (threefry,
// uniform, erf_inv, randint, split) against outputs published by JAX before
// 0.5.0, when jax_threefry_partitionable defaulted to False. gonox keeps
// that counter layout internally (rngLegacy) only for this test.
func TestJAXLegacy(t *testing.T) {
	s := rngLegacy
	k := NewKey(0)
	t.Run("docs uniform and split", func(t *testing.T) {
		// The jax.random module docs before 0.5.0 (as translated at
		// developer.aliyun.com/article/1559758): uniform(key(0)) and
		// uniform(subkey) after key, subkey = split(key).
		requirePrinted(t, []string{"0.41845703"}, rngUniform(s, k, 1, 0, 1), "uniform(key(0))")
		requirePrinted(t, []string{"0.10536897"}, rngUniform(s, s.split(k, 2)[1], 1, 0, 1), "uniform(subkey)")
	})
	t.Run("split chain and normals", func(t *testing.T) {
		// Tershire/JAX_Study S01P07_random_numbers.ipynb (April 2024; the
		// same cells appear in the Korean JAX tutorial translation).
		ks := s.split(k, 2)
		assert.Equal(t, [][2]uint32{{4146024105, 967050713}, {2718843009, 1272950319}}, keyData(ks))
		requirePrinted(t, []string{"-0.20584226"}, rngNormal(s, k, 1), "normal(key(0), (1,))")
		requirePrinted(t, []string{"-1.2515389"}, rngNormal(s, ks[1], 1), "normal(subkey, (1,))")
		requirePrinted(t, []string{"0.14389051"}, rngNormal(s, ks[0], 1), "normal(key, (1,))")
		assert.Equal(t, [][2]uint32{{2384771982, 3928867769}, {1278412471, 2182328957}}, keyData(s.split(ks[0], 2)))
	})
	t.Run("jax 0.4.38 session", func(t *testing.T) {
		// A lesson file whose every value was run on jax 0.4.38 CPU
		// (site/src/data/lessons/jax-random.ts): bits, normals of several
		// shapes, split, fold_in, and a randint loop.
		assert.Equal(t, []uint32{4146024105, 967050713, 2718843009, 1272950319}, s.bits(k, 4))
		assert.Equal(t, []uint32{4146024105, 1351547692, 2718843009}, s.bits(k, 3))
		eight := []uint32{2285895361, 1501764800, 1518642379, 4090693311, 433833334, 4221794875, 839183663, 3740430601}
		assert.Equal(t, eight, s.bits(k, 8))
		var flat []uint32
		for _, kk := range s.split(k, 4) {
			flat = append(flat, kk.Data()[0], kk.Data()[1])
		}
		assert.Equal(t, eight, flat, "split(k, 4) is bits(k, (8,))")
		assert.Equal(t, [2]uint32{2467461003, 3840466878}, FoldIn(k, 3).Data(), "fold_in is the same in both schemes")

		requirePrinted(t, []string{"1.8160863", "-0.75488514", "0.33988908", "-0.53483534"}, rngNormal(s, k, 4), "normal (4,)")
		requirePrinted(t, []string{"1.8160863", "-0.48262316", "0.33988908"}, rngNormal(s, k, 3), "normal (3,)")
		requirePrinted(t, []string{"-0.3721109", "0.26423115", "-0.18252768", "-0.7368197", "0.44973662",
			"-0.1521442", "-0.67135346", "-0.5908641", "0.73168886"}, rngNormal(s, k, 9), "normal (3,3)")

		want := [][]int32{{8, 45, 78, 7}, {81, 73, 74, 37}, {43, 35, 56, 43}}
		kk := k
		for i, w := range want {
			ks := s.split(kk, 2)
			kk = ks[0]
			assert.Equal(t, w, rngRandInt(s, ks[1], 4, 0, 100), "randint step %d", i)
		}
	})
	t.Run("Deep Learning with Python, 3rd ed.", func(t *testing.T) {
		// Manning, Deep Learning with Python 3rd ed., section 3.5.3.
		k := NewKey(123)
		requirePrinted(t, []string{"-0.1470326", "0.5524756", "1.648498"}, rngNormal(s, k, 3), "normal(key(123), (3,))")
		requirePrinted(t, []string{"0.5362355", "-1.1920372", "2.450225"}, rngNormal(s, s.split(k, 1)[0], 3),
			"normal(split(key(123), 1)[0], (3,))")
	})
	t.Run("tutorial draw loop", func(t *testing.T) {
		// The JAX "Pseudorandom numbers" tutorial loop with PRNGKey(12), as
		// run in GALVINLAI/lai_PSR_RCBCD (printed as float64 reprs of the
		// float32 results, so exact).
		want := []float64{0.735927939414978, 1.810187578201294, 0.11553369462490082}
		kk := NewKey(12)
		for i, w := range want {
			ks := s.split(kk, 2)
			kk = ks[0]
			assert.Equal(t, w, float64(rngNormal(s, ks[1], 1)[0]), "draw %d", i)
		}
	})
}

func TestSplitFoldIn(t *testing.T) {
	k := NewKey(1701)
	five := k.Split(5)
	require.Len(t, five, 5)
	for i, kk := range five {
		assert.Equal(t, FoldIn(k, uint32(i)), kk, "k.Split(5)[%d] is FoldIn(k, %d)", i, i)
	}
	assert.Equal(t, five[:2], k.Split(2), "k.Split(2) is a prefix of k.Split(5)")
	a, b := k.Split2()
	assert.Equal(t, []Key{a, b}, k.Split(2))
	assert.Empty(t, k.Split(0))
	seen := map[Key]bool{k: true}
	for _, kk := range k.Split(1000) {
		assert.False(t, seen[kk], "duplicate key %v", kk)
		seen[kk] = true
	}
	assert.NotEqual(t, FoldIn(k, 1), FoldIn(NewKey(1702), 1))
}

func TestDeterminismAndShapeConsistency(t *testing.T) {
	k := NewKey(7)
	t.Run("same key same numbers", func(t *testing.T) {
		assert.Equal(t, Normal(k, 100).Float32s(), Normal(k, 100).Float32s())
		assert.Equal(t, Permutation(k, 100).Int32s(), Permutation(k, 100).Int32s())
		assert.NotEqual(t, Normal(k, 100).Float32s(), Normal(NewKey(8), 100).Float32s())
	})
	t.Run("element i depends only on i", func(t *testing.T) {
		draws := []struct {
			name string
			f    func(shape ...int) []float64
		}{
			{"Bits", func(s ...int) []float64 {
				var o []float64
				for _, w := range Bits(k, s...) {
					o = append(o, float64(w))
				}
				return o
			}},
			{"RandomBits", func(s ...int) []float64 { return RandomBits(k, s...).Float64s() }},
			{"Uniform", func(s ...int) []float64 { return Uniform(k, s...).Float64s() }},
			{"UniformRange", func(s ...int) []float64 { return UniformRange(k, -3, 5, s...).Float64s() }},
			{"Normal", func(s ...int) []float64 { return Normal(k, s...).Float64s() }},
			{"TruncatedNormal", func(s ...int) []float64 { return TruncatedNormal(k, -1, 2, s...).Float64s() }},
			{"Bernoulli", func(s ...int) []float64 { return Bernoulli(k, 0.5, s...).Float64s() }},
			{"RandInt", func(s ...int) []float64 { return RandInt(k, -50, 50, s...).Float64s() }},
			{"Gumbel", func(s ...int) []float64 { return Gumbel(k, s...).Float64s() }},
		}
		for _, d := range draws {
			t.Run(d.name, func(t *testing.T) {
				six := d.f(6)
				assert.Equal(t, six, d.f(2, 3), "same numbers for shape [2,3] and [6]")
				assert.Equal(t, six[:4], d.f(4), "[4] is a prefix of [6]")
				assert.Equal(t, six[:1], d.f(), "the scalar is the first element")
				big := d.f(3*rngGrain + 17) // computed on several goroutines
				assert.Equal(t, six, big[:6])
				assert.Equal(t, d.f(3*rngGrain+17), big, "chunked computation is deterministic")
			})
		}
	})
	t.Run("parallel chunks equal the definition", func(t *testing.T) {
		n := 4*rngGrain + 3
		w := Bits(k, n)
		for _, i := range []int{0, 1, rngGrain - 1, rngGrain, 2*rngGrain + 5, n - 1} {
			a, b := rngThreefry2x32(k.data[0], k.data[1], 0, uint32(i))
			assert.Equal(t, a^b, w[i], "word %d", i)
		}
	})
	t.Run("shapes", func(t *testing.T) {
		assert.Zero(t, Uniform(k).Rank(), "no shape: a scalar")
		assert.Zero(t, RandInt(k, 0, 3).Rank())
		assert.Equal(t, []int{2, 0, 3}, Normal(k, 2, 0, 3).Shape())
		assert.Equal(t, Int32, RandomBits(k, 3).DType())
		assert.Equal(t, Bool, Bernoulli(k, 0.5, 3).DType())
		assert.Equal(t, Int32, RandInt(k, 0, 3, 3).DType())
		assert.Equal(t, []int{0}, Permutation(k, 0).Shape())
	})
}

// moments returns the mean and variance of xs.
func moments(xs []float64) (mean, variance float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(xs))
}

func TestDistributions(t *testing.T) {
	const n = 1 << 20
	k := NewKey(2024)
	cases := []struct {
		name           string
		xs             []float64
		lo, hi         float64 // closed bounds the values must respect
		mean, variance float64
	}{
		{"Uniform", Uniform(k, n).Float64s(), 0, math.Nextafter(1, 0), 0.5, 1.0 / 12},
		{"UniformRange", UniformRange(k, -2, 6, n).Float64s(), -2, 6, 2, 64.0 / 12},
		{"Normal", Normal(k, n).Float64s(), -7, 7, 0, 1},
		// Truncated to (-2, 2): variance 1 - 4 phi(2) / (Phi(2) - Phi(-2)).
		{"TruncatedNormal", TruncatedNormal(k, -2, 2, n).Float64s(), math.Nextafter(-2, 0), math.Nextafter(2, 0),
			0, 1 - 4*math.Exp(-2)/math.Sqrt(2*math.Pi)/math.Erf(math.Sqrt2)},
		// Gumbel: mean is the Euler-Mascheroni constant, variance pi^2/6.
		{"Gumbel", Gumbel(k, n).Float64s(), -5, 90, 0.5772156649015329, math.Pi * math.Pi / 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Len(t, c.xs, n)
			m, v := moments(c.xs)
			sd := math.Sqrt(c.variance)
			assert.InDelta(t, c.mean, m, 5*sd/math.Sqrt(n), "mean")
			assert.InEpsilon(t, c.variance, v, 0.01, "variance")
			lo, hi := slices.Min(c.xs), slices.Max(c.xs)
			assert.GreaterOrEqual(t, lo, c.lo)
			assert.LessOrEqual(t, hi, c.hi)
		})
	}
	t.Run("Normal tails", func(t *testing.T) {
		xs := Normal(k, n).Float64s()
		within := 0
		for _, x := range xs {
			if math.Abs(x) < 1 {
				within++
			}
		}
		assert.InDelta(t, math.Erf(1/math.Sqrt2), float64(within)/n, 0.002)
	})
	t.Run("TruncatedNormal bounds", func(t *testing.T) {
		for _, b := range [][2]float32{{0.5, 3}, {-0.3, 0.3}, {2, 2.001}, {-10, -3}, {4, 6}, {float32(math.Inf(-1)), 0}} {
			xs := TruncatedNormal(NewKey(1), b[0], b[1], 10000).Float32s()
			for _, x := range xs {
				require.Truef(t, x > b[0] && x < b[1], "TruncatedNormal(%v, %v) gave %v", b[0], b[1], x)
			}
		}
	})
	t.Run("Bernoulli", func(t *testing.T) {
		for _, p := range []float32{0, 0.1, 0.5, 0.9, 1} {
			bs := Bernoulli(k, p, n).Bools()
			count := 0
			for _, b := range bs {
				if b {
					count++
				}
			}
			assert.InDelta(t, float64(p), float64(count)/n, 0.002, "p=%v", p)
			if p == 0 || p == 1 {
				assert.Equal(t, int(p)*n, count, "p=%v is exact", p)
			}
		}
	})
}

func TestRandInt(t *testing.T) {
	k := NewKey(99)
	cases := []struct {
		lo, hi int
	}{
		{0, 1}, {-3, 7}, {5, 10}, {0, 1 << 20},
		{math.MinInt32, math.MaxInt32}, {math.MinInt32, math.MaxInt32 + 1}, {math.MaxInt32, math.MaxInt32 + 1},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("[%d,%d)", c.lo, c.hi), func(t *testing.T) {
			xs := RandInt(k, c.lo, c.hi, 100000).Ints()
			counts := map[int]int{}
			neg := 0
			for _, x := range xs {
				require.True(t, x >= c.lo && x < c.hi, "value %d outside [%d, %d)", x, c.lo, c.hi)
				counts[x]++
				if x < 0 {
					neg++
				}
			}
			span := c.hi - c.lo
			switch {
			case span <= 10: // every value, each about equally often
				assert.Len(t, counts, span)
				for v, cnt := range counts {
					assert.InDelta(t, 1/float64(span), float64(cnt)/1e5, 0.006, "value %d", v)
				}
			case c.lo < 0: // the whole int32 range: about half negative
				assert.InDelta(t, 0.5, float64(neg)/1e5, 0.01)
			}
		})
	}
}

func TestBernoulliIsUniformLessThanP(t *testing.T) {
	k := NewKey(12)
	u := Uniform(k, 1000).Float32s()
	for _, p := range []float32{u[3], u[500], 0.5} { // p equal to a draw: strictly less
		b := Bernoulli(k, p, 1000).Bools()
		for i := range b {
			require.Equal(t, u[i] < p, b[i], "p=%v element %d (u=%v)", p, i, u[i])
		}
	}
}

func TestRandIntIsJAXArithmetic(t *testing.T) {
	k := NewKey(31)
	ks := k.Split(2)
	hiw, low := Bits(ks[0], 1000), Bits(ks[1], 1000)
	for _, c := range []struct{ lo, hi int }{{0, 7}, {-100, 1000}, {0, 1 << 16}, {5, 5 + 1<<16 + 1}, {-1 << 30, 1 << 30}} {
		span := uint64(c.hi - c.lo)
		got := RandInt(k, c.lo, c.hi, 1000).Ints()
		for i := range got {
			var want int
			if span <= 1<<16 {
				// A 64-bit random number modulo the span.
				want = c.lo + int((uint64(hiw[i])<<32|uint64(low[i]))%span)
			} else {
				// 2^16 * 2^16 wraps to 0 in uint32: only the second word counts.
				want = c.lo + int(uint64(low[i])%span)
			}
			require.Equal(t, want, got[i], "[%d, %d) element %d", c.lo, c.hi, i)
		}
	}
}

func TestUniformRangeRoundsOnce(t *testing.T) {
	k := NewKey(8)
	lo, hi := float32(-3.3), float32(7.1)
	w := Bits(k, 10000)
	got := UniformRange(k, lo, hi, 10000).Float32s()
	fused := 0
	for i, v := range got {
		u := rngUnit(w[i])
		require.Equal(t, max(lo, exactFMA32(u, hi-lo, lo)), v, "element %d", i)
		if v != max(lo, float32(u*(hi-lo))+lo) {
			fused++
		}
	}
	assert.Positive(t, fused, "the test should see values where one rounding differs from two")
}

func TestPermutation(t *testing.T) {
	t.Run("rounds", func(t *testing.T) {
		// ceil(3 ln n / ln(2^32-1)): one more round once n^3 (n^3/...) passes
		// (2^32-1)^r, i.e. after n = 1625 and after n = 2642245.
		for n, want := range map[int]int{0: 0, 1: 0, 2: 1, 1625: 1, 1626: 2, 2642245: 2, 2642246: 3} {
			assert.Equal(t, want, rngShuffleRounds(n), "n=%d", n)
		}
	})
	for _, n := range []int{0, 1, 2, 10, 1000, 2000} { // 2000 takes two rounds
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			p := Permutation(NewKey(5), n).Ints()
			require.Len(t, p, n)
			sorted := slices.Clone(p)
			slices.Sort(sorted)
			for i, v := range sorted {
				require.Equal(t, i, v, "not a permutation")
			}
			if n >= 10 {
				assert.NotEqual(t, p, Permutation(NewKey(6), n).Ints(), "different keys, different permutations")
				identity := true
				for i, v := range p {
					identity = identity && i == v
				}
				assert.False(t, identity)
			}
		})
	}
	t.Run("uniform over the 6 permutations of 3", func(t *testing.T) {
		counts := map[string]int{}
		keys := NewKey(3).Split(12000)
		for _, k := range keys {
			counts[fmt.Sprint(Permutation(k, 3).Ints())]++
		}
		assert.Len(t, counts, 6)
		for p, c := range counts {
			assert.InDelta(t, 2000, c, 200, "permutation %s", p)
		}
	})
	t.Run("is JAX's sort-based shuffle", func(t *testing.T) {
		// One round: split k, then stably sort 0..n-1 by Bits(subkey).
		k := NewKey(11)
		_, sub := k.Split2()
		w := Bits(sub, 50)
		want := make([]int, 50)
		for i := range want {
			want[i] = i
		}
		slices.SortStableFunc(want, func(a, b int) int {
			switch {
			case w[a] < w[b]:
				return -1
			case w[a] > w[b]:
				return 1
			}
			return 0
		})
		assert.Equal(t, want, Permutation(k, 50).Ints())
	})
}

func TestCategorical(t *testing.T) {
	probs := []float64{0.1, 0.2, 0.3, 0.4}
	const n = 200000
	freqs := func(samples []int, m int) []float64 {
		f := make([]float64, m)
		for _, s := range samples {
			f[s] += 1.0 / float64(len(samples))
		}
		return f
	}
	t.Run("last axis", func(t *testing.T) {
		logits := make([]float64, 0, 4*n)
		for range n {
			for _, p := range probs {
				logits = append(logits, math.Log(p)-42) // unnormalized
			}
		}
		s := Categorical(NewKey(1), FromFloat64(logits, n, 4), -1)
		assert.Equal(t, []int{n}, s.Shape())
		assert.Equal(t, Int32, s.DType())
		f := freqs(s.Ints(), 4)
		for j, p := range probs {
			assert.InDelta(t, p, f[j], 0.004, "category %d", j)
		}
	})
	t.Run("first axis", func(t *testing.T) {
		logits := make([]float64, 4*n)
		for j, p := range probs {
			for i := range n {
				logits[j*n+i] = math.Log(p)
			}
		}
		s := Categorical(NewKey(2), FromFloat64(logits, 4, n), 0)
		assert.Equal(t, []int{n}, s.Shape())
		f := freqs(s.Ints(), 4)
		for j, p := range probs {
			assert.InDelta(t, p, f[j], 0.004, "category %d", j)
		}
	})
	t.Run("is argmax of logits plus Gumbel noise", func(t *testing.T) {
		k := NewKey(3)
		logits := FromFloat32([]float32{0.5, -1, 2, 0.25, 3, -2}, 2, 3)
		g := Gumbel(k, 2, 3).Float32s()
		l := logits.Float32s()
		var want []int32
		for r := range 2 {
			best := 0
			for j := 1; j < 3; j++ {
				if g[r*3+j]+l[r*3+j] > g[r*3+best]+l[r*3+best] {
					best = j
				}
			}
			want = append(want, int32(best))
		}
		assert.Equal(t, want, Categorical(k, logits, 1).Int32s())
	})
	t.Run("never draws a -Inf logit", func(t *testing.T) {
		inf := math.Inf(-1)
		s := Categorical(NewKey(4), FromFloat64(slices.Repeat([]float64{inf, 0, inf}, 1000), 1000, 3), 1)
		for _, v := range s.Ints() {
			require.Equal(t, 1, v)
		}
	})
	t.Run("traced logits give an untraced sample", func(t *testing.T) {
		tr := NewTrace()
		x := tr.Leaf(FromFloat32([]float32{1, 2, 3}))
		s := Categorical(NewKey(5), x, 0)
		assert.False(t, s.IsTraced())
		assert.Zero(t, s.Rank())
	})
}

func TestSamplersAreUntraced(t *testing.T) {
	k := NewKey(0)
	for _, x := range []*Tensor{Uniform(k, 2), UniformRange(k, 1, 2, 2), Normal(k, 2), TruncatedNormal(k, -1, 1, 2),
		Bernoulli(k, 0.5, 2), RandInt(k, 0, 5, 2), Permutation(k, 2), Gumbel(k, 2), RandomBits(k, 2)} {
		assert.False(t, x.IsTraced(), "%v", x)
	}
}

func TestRandomPanics(t *testing.T) {
	k := NewKey(0)
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := []struct {
		msg string
		f   func()
	}{
		{"tensor.Key.Split: number of keys -1 is negative", func() { k.Split(-1) }},
		{"tensor.Bits: negative dimension in shape [2 -1]", func() { Bits(k, 2, -1) }},
		{"tensor.RandomBits: negative dimension in shape [-3]", func() { RandomBits(k, -3) }},
		{"tensor.Uniform: negative dimension in shape [-1]", func() { Uniform(k, -1) }},
		{"tensor.UniformRange: negative dimension in shape [-1]", func() { UniformRange(k, 0, 1, -1) }},
		{"tensor.UniformRange: need finite lo < hi, got lo=1 hi=1", func() { UniformRange(k, 1, 1, 3) }},
		{"tensor.UniformRange: need finite lo < hi, got lo=2 hi=1", func() { UniformRange(k, 2, 1, 3) }},
		{"tensor.UniformRange: need finite lo < hi, got lo=0 hi=+Inf", func() { UniformRange(k, 0, inf, 3) }},
		{"tensor.UniformRange: need finite lo < hi, got lo=NaN hi=1", func() { UniformRange(k, nan, 1, 3) }},
		{"tensor.Normal: negative dimension in shape [4 -2]", func() { Normal(k, 4, -2) }},
		{"tensor.TruncatedNormal: negative dimension in shape [-1]", func() { TruncatedNormal(k, -1, 1, -1) }},
		{"tensor.TruncatedNormal: need lo < hi, got lo=2 hi=-2", func() { TruncatedNormal(k, 2, -2, 3) }},
		{"tensor.TruncatedNormal: need lo < hi, got lo=NaN hi=1", func() { TruncatedNormal(k, nan, 1, 3) }},
		{"tensor.Bernoulli: negative dimension in shape [-1]", func() { Bernoulli(k, 0.5, -1) }},
		{"tensor.Bernoulli: probability p=-0.1 is outside [0, 1]", func() { Bernoulli(k, -0.1, 3) }},
		{"tensor.Bernoulli: probability p=1.5 is outside [0, 1]", func() { Bernoulli(k, 1.5, 3) }},
		{"tensor.Bernoulli: probability p=NaN is outside [0, 1]", func() { Bernoulli(k, nan, 3) }},
		{"tensor.RandInt: negative dimension in shape [-1]", func() { RandInt(k, 0, 1, -1) }},
		{"tensor.RandInt: need -2147483648 <= lo < hi <= 2147483648, got lo=3 hi=3", func() { RandInt(k, 3, 3, 2) }},
		{"tensor.RandInt: need -2147483648 <= lo < hi <= 2147483648, got lo=5 hi=-5", func() { RandInt(k, 5, -5, 2) }},
		{"tensor.RandInt: need -2147483648 <= lo < hi <= 2147483648, got lo=-2147483649 hi=0", func() { RandInt(k, math.MinInt32-1, 0, 2) }},
		{"tensor.RandInt: need -2147483648 <= lo < hi <= 2147483648, got lo=0 hi=2147483649", func() { RandInt(k, 0, math.MaxInt32+2, 2) }},
		{"tensor.Permutation: n=-1 must be in [0, 2147483647]", func() { Permutation(k, -1) }},
		{"tensor.Permutation: n=2147483648 must be in [0, 2147483647]", func() { Permutation(k, math.MaxInt32+1) }},
		{"tensor.Gumbel: negative dimension in shape [-1]", func() { Gumbel(k, -1) }},
		{"tensor.Categorical: logits i32[3] must be float32 or float64", func() { Categorical(k, FromInt32([]int32{1, 2, 3}), 0) }},
		{"tensor.Categorical: axis 2 out of range for f32[2,3]", func() { Categorical(k, Zeros(Float32, 2, 3), 2) }},
		{"tensor.Categorical: axis -3 out of range for f32[2,3]", func() { Categorical(k, Zeros(Float32, 2, 3), -3) }},
		{"tensor.Categorical: logits f32[2,0]: axis -1 has no categories", func() { Categorical(k, Zeros(Float32, 2, 0), -1) }},
	}
	for _, c := range cases {
		t.Run(c.msg, func(t *testing.T) {
			require.PanicsWithValue(t, c.msg, c.f)
		})
	}
}

// exactFMA32 rounds a*b+c, computed exactly, to float32.
func exactFMA32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(300).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(300).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(300).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

func TestFMA32(t *testing.T) {
	one := float32(1)
	below1 := math.Nextafter32(1, 0) // 1 - 2^-24
	above1 := math.Nextafter32(1, 2) // 1 + 2^-23
	cases := []struct {
		name    string
		a, b, c float32
		want    float32
	}{
		{"exact", 3, 4, 5, 17},
		// a*b = 1 + 2^-24 - 2^-47, just below the midpoint between 1 and
		// 1+2^-23. Adding c lands within 2^-70 of the midpoint, where the
		// float64 sum rounds to the midpoint itself and a plain conversion
		// would round to even (1) whichever side the exact sum is on.
		{"tie broken upward", below1, above1, float32(0x1p-47 + 0x1p-70), above1},
		{"tie broken downward", below1, above1, float32(0x1p-47 - 0x1p-71), one},
		{"true tie rounds to even", below1, above1, float32(0x1p-47), one},
		{"cancellation", 1.5, 2, -3, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, exactFMA32(c.a, c.b, c.c), c.want, "test case itself")
			assert.Equal(t, c.want, rngFMA32(c.a, c.b, c.c))
		})
	}
	t.Run("random operands", func(t *testing.T) {
		w := Bits(NewKey(77), 3*20000)
		for i := 0; i < len(w); i += 3 {
			// Random signs, mantissas and nearby exponents, so sums cancel and round.
			a := math.Float32frombits(w[i]&0x807fffff | 0x3f000000)
			b := math.Float32frombits(w[i+1]&0x807fffff | (0x38+w[i+1]>>28)<<23)
			c := math.Float32frombits(w[i+2]&0x807fffff | (0x30+w[i+2]>>27)<<23)
			require.Equal(t, exactFMA32(a, b, c), rngFMA32(a, b, c), "fma(%v, %v, %v)", a, b, c)
		}
	})
}

func TestErfInv32(t *testing.T) {
	// Giles' single-precision polynomial: relative error below 1e-6 in the
	// central region, a few 1e-6 in the tails.
	for i := -9999; i <= 9999; i++ {
		x := float32(i) / 10000
		got := float64(rngErfInv32(x))
		want := math.Erfinv(float64(x))
		tol := 1e-6
		if math.Abs(float64(x)) > 0.99 {
			tol = 4e-6
		}
		assert.InDelta(t, want, got, tol*math.Max(1e-3, math.Abs(want)), "erfinv(%v)", x)
	}
	for _, x := range []float32{0.99999, 0.99999994, -0.99999994} { // the w >= 5 branch
		got := float64(rngErfInv32(x))
		assert.InEpsilon(t, math.Erfinv(float64(x)), got, 4e-6, "erfinv(%v)", x)
	}
	assert.Equal(t, float32(0), rngErfInv32(0))
	assert.True(t, math.IsInf(float64(rngErfInv32(1)), 1))
	assert.True(t, math.IsInf(float64(rngErfInv32(-1)), -1))
}

func TestTranscendentals(t *testing.T) {
	t.Run("log", func(t *testing.T) {
		for _, y := range []float64{1, 2, 0.5, math.E, 1e-300, 1e300, 0.7071, 1.4142, 1 - 1e-9, 1 + 1e-9, 3.7e-39, 123456.789} {
			want := math.Log(y)
			assert.InDelta(t, want, rngLog(y), 4e-16*math.Max(1, math.Abs(want)), "log(%v)", y)
		}
		assert.True(t, math.IsInf(rngLog(0), -1))
	})
	t.Run("log1p", func(t *testing.T) {
		for _, x := range []float32{0, -1e-10, -1e-8, -0.25, -0.5, -0.99, math.Nextafter32(-1, 0)} {
			want := math.Log1p(float64(x))
			assert.Equal(t, float32(want), float32(rngLog1p(x)), "log1p(%v) to float32", x)
			if x < -0x1p-29 {
				assert.InDelta(t, want, rngLog1p(x), 4e-16*math.Abs(want), "log1p(%v)", x)
			}
		}
		assert.True(t, math.IsInf(rngLog1p(-1), -1))
	})
	t.Run("erf", func(t *testing.T) {
		for i := -500; i <= 500; i++ {
			x := float64(i) / 100
			assert.InDelta(t, math.Erf(x), rngErf(x), 1.6e-8, "erf(%v)", x) // 1.6e-8: erfc(4)
			if math.Abs(x) < 4 {
				assert.InDelta(t, math.Erf(x), rngErf(x), 5e-11, "erf(%v)", x)
			}
		}
		assert.Equal(t, 1.0, rngErf(math.Inf(1)))
		assert.Equal(t, -1.0, rngErf(math.Inf(-1)))
	})
}

func BenchmarkNormal(b *testing.B) {
	const n = 1 << 20
	k := NewKey(0)
	b.SetBytes(4 * n)
	b.ReportAllocs()
	for b.Loop() {
		Normal(k, n)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Msamples/s")
}

func BenchmarkUniform(b *testing.B) {
	const n = 1 << 20
	k := NewKey(0)
	b.SetBytes(4 * n)
	for b.Loop() {
		Uniform(k, n)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Msamples/s")
}
