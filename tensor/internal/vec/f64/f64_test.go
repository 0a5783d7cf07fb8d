package f64

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/testlong"
)

var specials = []float64{0, math.Copysign(0, -1), 1, -1, math.Inf(1), math.Inf(-1), math.NaN(),
	math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, math.MaxFloat64, -math.MaxFloat64, 0x1p-1022}

func sameBits(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (a != a && b != b)
}

func randVec(rng *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = (rng.Float64()*2 - 1) * math.Exp2(float64(rng.IntN(20)-10))
	}
	return x
}

// TestBinary checks the binary kernels against Go's operators, with
// special values, dst aliasing an operand, and every length up to 40.
func TestBinary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vv := []struct {
		name string
		f    func(dst, a, b []float64)
		op   func(a, b float64) float64
	}{
		{"AddVV", AddVV, func(a, b float64) float64 { return a + b }},
		{"SubVV", SubVV, func(a, b float64) float64 { return a - b }},
		{"MulVV", MulVV, func(a, b float64) float64 { return a * b }},
		{"DivVV", DivVV, func(a, b float64) float64 { return a / b }},
		{"MaxVV", MaxVV, func(a, b float64) float64 {
			if a != a || b != b {
				return math.NaN()
			}
			return math.Max(a, b)
		}},
		{"MinVV", MinVV, func(a, b float64) float64 {
			if a != a || b != b {
				return math.NaN()
			}
			return math.Min(a, b)
		}},
	}
	for _, c := range vv {
		for n := 0; n <= 40; n++ {
			a, b := randVec(rng, n), randVec(rng, n)
			if n >= len(specials) {
				copy(a, specials)
				for i := range specials {
					b[i] = specials[(i*5+3)%len(specials)]
				}
			}
			dst := make([]float64, n)
			c.f(dst, a, b)
			for i := range dst {
				want := c.op(a[i], b[i])
				if c.name == "MaxVV" || c.name == "MinVV" {
					// ±0 ties: the kernels return the first operand, like the
					// float32 ones; math.Max prefers +0.
					if a[i] == 0 && b[i] == 0 {
						want = b[i]
						if (c.name == "MaxVV" && a[i] > b[i]) || (c.name == "MinVV" && a[i] < b[i]) {
							want = a[i]
						}
					}
				}
				require.True(t, sameBits(want, dst[i]) || (want == dst[i]), "%s(%v, %v) = %v, want %v", c.name, a[i], b[i], dst[i], want)
			}
			// In place.
			a2 := append([]float64(nil), a...)
			c.f(a2, a2, b)
			for i := range a2 {
				require.True(t, sameBits(dst[i], a2[i]), "%s in place", c.name)
			}
		}
	}
	vs := []struct {
		name string
		f    func(dst, a []float64, s float64)
		op   func(a, s float64) float64
	}{
		{"AddVS", AddVS, func(a, s float64) float64 { return a + s }},
		{"SubVS", SubVS, func(a, s float64) float64 { return a - s }},
		{"MulVS", MulVS, func(a, s float64) float64 { return a * s }},
		{"DivVS", DivVS, func(a, s float64) float64 { return a / s }},
		{"SubSV", func(dst, a []float64, s float64) { SubSV(dst, s, a) }, func(a, s float64) float64 { return s - a }},
		{"DivSV", func(dst, a []float64, s float64) { DivSV(dst, s, a) }, func(a, s float64) float64 { return s / a }},
	}
	for _, c := range vs {
		for _, s := range append([]float64{0.3, -7}, specials...) {
			a := append(randVec(rng, 17), specials...)
			dst := make([]float64, len(a))
			c.f(dst, a, s)
			for i := range a {
				require.True(t, sameBits(c.op(a[i], s), dst[i]), "%s(%v, %v)", c.name, a[i], s)
			}
		}
	}
}

func TestUnaryElementwise(t *testing.T) {
	x := append(randVec(rand.New(rand.NewPCG(3, 4)), 50), specials...)
	g := randVec(rand.New(rand.NewPCG(5, 6)), len(x))
	dst := make([]float64, len(x))

	Relu(dst, x)
	for i, v := range x {
		switch {
		case v != v:
			require.True(t, math.IsNaN(dst[i]))
		case v > 0:
			require.Equal(t, v, dst[i])
		default:
			require.True(t, sameBits(0, dst[i]), "Relu(%v) = %v, want +0", v, dst[i])
		}
	}
	ReluGradMul(dst, g, x)
	for i, v := range x {
		if v > 0 {
			require.Equal(t, g[i], dst[i])
		} else {
			require.Equal(t, 0.0, dst[i])
		}
	}
	TanhGradMul(dst, g, x)
	for i, v := range x {
		require.True(t, sameBits(g[i]*(1-float64(v*v)), dst[i]))
	}
	SigmoidGradMul(dst, g, x)
	for i, v := range x {
		require.True(t, sameBits(g[i]*float64(v*(1-v)), dst[i]))
	}
	Square(dst, x)
	for i, v := range x {
		require.True(t, sameBits(v*v, dst[i]))
	}
	Sqrt(dst, x)
	for i, v := range x {
		require.True(t, sameBits(math.Sqrt(v), dst[i]))
	}
	Rsqrt(dst, x)
	for i, v := range x {
		require.True(t, sameBits(1/math.Sqrt(v), dst[i]))
	}
	Fill(dst, 2.5)
	for _, v := range dst {
		require.Equal(t, 2.5, v)
	}
}

// Exact references for TestDense, in big.Float arithmetic (refPrec bits).
const refPrec = 200

var bigLn2, _, _ = big.ParseFloat("0.6931471805599453094172321214581765680755001343602552541206800094933936219696947", 10, refPrec, big.ToNearestEven)

func bf(x float64) *big.Float { return new(big.Float).SetPrec(refPrec).SetFloat64(x) }

// bigExp returns e^x: x = k·ln2 + r, e^r by its Taylor series.
func bigExp(x float64) *big.Float {
	k := math.Round(x / math.Ln2)
	r := bf(x)
	r.Sub(r, new(big.Float).SetPrec(refPrec).Mul(bf(k), bigLn2))
	sum, term := bf(1), bf(1)
	eps := new(big.Float).SetMantExp(bf(1), -refPrec)
	for n := 1; ; n++ {
		term.Mul(term, r)
		term.Quo(term, bf(float64(n)))
		sum.Add(sum, term)
		if new(big.Float).Abs(term).Cmp(eps) < 0 {
			break
		}
	}
	return sum.SetMantExp(sum, int(k))
}

// bigLog returns log x for x > 0: x = m·2^e, log m = 2·atanh((m-1)/(m+1)).
func bigLog(x *big.Float) *big.Float {
	m := new(big.Float).SetPrec(refPrec)
	e := x.MantExp(m) // x = m·2^e, m in [0.5, 1)
	s := new(big.Float).SetPrec(refPrec).Sub(m, bf(1))
	s.Quo(s, new(big.Float).SetPrec(refPrec).Add(m, bf(1)))
	s2 := new(big.Float).SetPrec(refPrec).Mul(s, s)
	sum, pow := new(big.Float).SetPrec(refPrec), new(big.Float).SetPrec(refPrec).Set(s)
	eps := new(big.Float).SetMantExp(bf(1), -refPrec)
	for n := 1; ; n += 2 {
		term := new(big.Float).SetPrec(refPrec).Quo(pow, bf(float64(n)))
		sum.Add(sum, term)
		if new(big.Float).Abs(term).Cmp(eps) < 0 {
			break
		}
		pow.Mul(pow, s2)
	}
	sum.Mul(sum, bf(2))
	return sum.Add(sum, new(big.Float).SetPrec(refPrec).Mul(bf(float64(e)), bigLn2))
}

// bigErr returns |got - want| in ulps of want.
func bigErr(got float64, want *big.Float) float64 {
	w, _ := want.Float64()
	d := bf(got)
	d.Sub(d, want)
	e, _ := d.Abs(d).Float64()
	return e / ulp(w)
}

// TestDense measures exp, log, log1p and tanh against exact values
// (big.Float) on many random inputs (GONOX_TEST_LONG: a hundred times
// more), and Φ against package math where math's erfc is accurate.
// TestAccuracy has exact references for every kernel on fewer points.
func TestDense(t *testing.T) {
	n := 3000
	if testlong.Enabled() {
		n = 100000
	}
	rng := rand.New(rand.NewPCG(7, 8))
	uniform := func(lo, hi float64) float64 { return lo + rng.Float64()*(hi-lo) }
	logUniform := func(lo, hi float64) float64 {
		return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
	}
	cases := []struct {
		name  string
		x     func(i int) float64
		f     func(float64) float64
		ref   func(float64) *big.Float
		bound float64
	}{
		{"exp", func(i int) float64 {
			if i%2 == 0 {
				return uniform(-708, 709)
			}
			return math.Copysign(logUniform(1e-20, 1), rng.Float64()-0.5)
		}, exp, bigExp, 1},
		{"log", func(i int) float64 {
			if i%2 == 0 {
				return logUniform(1e-307, 1e308)
			}
			return 1 + math.Copysign(logUniform(2e-16, 0.5), rng.Float64()-0.5) // not 1: log 1 = 0 has no ulp
		}, log, func(x float64) *big.Float { return bigLog(bf(x)) }, 1},
		{"log1p", func(int) float64 { return logUniform(1e-30, 1e6) }, log1p, // 1+x exact in refPrec bits
			func(x float64) *big.Float { return bigLog(new(big.Float).SetPrec(refPrec).Add(bf(1), bf(x))) }, 1.5},
		{"tanh", func(int) float64 { return math.Copysign(logUniform(1e-10, 20), rng.Float64()-0.5) }, tanh,
			func(x float64) *big.Float {
				e := bigExp(2 * x) // exact: 2x is
				num := new(big.Float).SetPrec(refPrec).Sub(e, bf(1))
				return num.Quo(num, new(big.Float).SetPrec(refPrec).Add(e, bf(1)))
			}, 1.5},
	}
	for _, c := range cases {
		worst, at := 0.0, 0.0
		for i := 0; i < n; i++ {
			x := c.x(i)
			if e := bigErr(c.f(x), c.ref(x)); e > worst {
				worst, at = e, x
			}
		}
		t.Logf("%s: max error %.3f ulp at %v (%d inputs)", c.name, worst, at, n)
		require.LessOrEqual(t, worst, c.bound, c.name)
	}
	// Φ against math's erfc, on [-0.75, 8]: below, math's reference loses
	// accuracy (erfc amplifies the rounding of x/√2 by x²).
	worst, at := 0.0, 0.0
	for i := 0; i < 20*n; i++ {
		x := uniform(-0.75, 8)
		want := 0.5 * math.Erfc(-x/math.Sqrt2)
		if e := math.Abs(phi(x)-want) / ulp(want); e > worst {
			worst, at = e, x
		}
	}
	t.Logf("phi: max difference from math %.3f ulp at %v", worst, at)
	require.LessOrEqual(t, worst, 3.0)
}

// TestSpecialValues checks every transcendental kernel at ±0, ±Inf, NaN
// and the overflow thresholds.
func TestSpecialValues(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct {
		name string
		f    func(dst, src []float64)
		x    []float64
		want []float64
	}{
		{"Exp", Exp, []float64{0, inf, -inf, nan, 709.8, -745.2, 1}, []float64{1, inf, 0, nan, inf, 0, math.E}},
		{"Log", Log, []float64{0, -1, inf, nan, 1, math.E, math.SmallestNonzeroFloat64},
			[]float64{-inf, nan, inf, nan, 0, 1, -744.4400719213812}},
		{"Tanh", Tanh, []float64{0, math.Copysign(0, -1), inf, -inf, nan, 1e-300, 30}, []float64{0, math.Copysign(0, -1), 1, -1, nan, 1e-300, 1}},
		{"Sigmoid", Sigmoid, []float64{0, inf, -inf, nan, 800, -800}, []float64{0.5, 1, 0, nan, 1, 0}},
		{"Silu", Silu, []float64{0, inf, nan, -800}, []float64{0, inf, nan, math.Copysign(0, -1)}},
		{"Softplus", Softplus, []float64{inf, -inf, nan, 0, 800}, []float64{inf, 0, nan, math.Ln2, 800}},
		{"LogSigmoid", LogSigmoid, []float64{inf, -inf, nan, 0}, []float64{0, -inf, nan, -math.Ln2}},
		{"Gelu", Gelu, []float64{0, inf, nan, -100, 100}, []float64{0, inf, nan, math.Copysign(0, -1), 100}},
		{"GeluGrad", GeluGrad, []float64{0, inf, -inf, nan}, []float64{0.5, 1, 0, nan}},
		{"SiluGrad", SiluGrad, []float64{0, inf, -inf, nan}, []float64{0.5, 1, 0, nan}},
		{"GeluExact", GeluExact, []float64{0, inf, nan, -100, 100}, []float64{0, inf, nan, math.Copysign(0, -1), 100}},
		{"GeluExactGrad", GeluExactGrad, []float64{0, inf, -inf, nan}, []float64{0.5, 1, 0, nan}},
	} {
		got := make([]float64, len(c.x))
		c.f(got, c.x)
		for i := range got {
			if math.IsNaN(c.want[i]) {
				require.True(t, math.IsNaN(got[i]), "%s(%v) = %v, want NaN", c.name, c.x[i], got[i])
				continue
			}
			require.InDelta(t, c.want[i], got[i], 2*ulp(c.want[i]), "%s(%v)", c.name, c.x[i])
			if c.want[i] == 0 {
				require.Equal(t, math.Signbit(c.want[i]), math.Signbit(got[i]), "%s(%v) = %v: sign of zero", c.name, c.x[i], got[i])
			}
		}
	}
}

// exactSum returns Σx rounded once (big.Float with enough bits for any
// float64 sum of this size).
func exactSum(x []float64) float64 {
	s := new(big.Float).SetPrec(2200)
	for _, v := range x {
		s.Add(s, new(big.Float).SetFloat64(v))
	}
	f, _ := s.Float64()
	return f
}

// TestSum: compensated sums of ill-conditioned data equal the correctly
// rounded sum, the block structure makes them independent of how a long
// slice is cut, and Inf/NaN behave as in a plain sum.
func TestSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{0, 1, 3, 4, 5, 17, 1000, SumBlock + 3, 3*SumBlock - 1} {
		// Large terms that cancel, and small ones.
		x := make([]float64, n)
		for i := range x {
			x[i] = (rng.Float64() - 0.5) * math.Exp2(float64(rng.IntN(60)))
		}
		for i := 0; i+1 < n; i += 7 {
			x[i+1] = -x[i] * (1 + 0x1p-40)
		}
		want := exactSum(x)
		got := Sum(x)
		require.InDelta(t, want, got, ulp(want), "n=%d: Sum %v, exact %v", n, got, want)
		// Plain float64 summation would be far off on this data.
		var p Partial
		for start := 0; start < n; start += SumBlock {
			p.AddPartial(SumPartial(x[start:min(start+SumBlock, n)]))
		}
		require.True(t, sameBits(got, p.Value()), "n=%d: Sum equals the blockwise sums", n)
		acc := make([]Partial, 1)
		for _, v := range x {
			AccSum(acc, []float64{v})
		}
		require.InDelta(t, want, acc[0].Value(), ulp(want), "AccSum n=%d", n)
	}
	inf := math.Inf(1)
	require.Equal(t, inf, Sum([]float64{1, inf, 2}))
	require.True(t, math.IsNaN(Sum([]float64{1, inf, -inf})))
	require.True(t, math.IsNaN(Sum([]float64{1, math.NaN()})))
	require.Equal(t, inf, Sum([]float64{math.MaxFloat64, math.MaxFloat64}))
	require.Equal(t, 0.0, Sum(nil))
	// A case Kahan's summation gets wrong and Neumaier's right.
	require.Equal(t, 2.0, Sum([]float64{1, 1e100, 1, -1e100}))
}

func TestSumSqDiffAndExpShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 5, 300, SumBlock + 7} {
		a, b := randVec(rng, n), randVec(rng, n)
		d := make([]float64, n)
		SubVV(d, a, b)
		MulVV(d, d, d)
		require.True(t, sameBits(Sum(d), SumSqDiff(a, b)), "n=%d", n)
		m := Max(a)
		e := make([]float64, n)
		s := ExpShift(e, a, m)
		require.True(t, sameBits(Sum(e), s))
		require.True(t, sameBits(s, SumExpShift(a, m)), "n=%d", n)
		for i, v := range a {
			// v-m rounds: math.Exp(v-m) errs by up to |v-m|/2 ulp.
			want := math.Exp(v - m)
			require.InDelta(t, want, e[i], (2+math.Abs(v-m))*ulp(want))
		}
	}
	e := make([]float64, 2)
	require.Equal(t, 1.0, ExpShift(e, []float64{math.Inf(-1), 3}, 3))
	require.Equal(t, []float64{0, 1}, e)
}

func TestMaxMin(t *testing.T) {
	require.Equal(t, math.Inf(-1), Max(nil))
	require.Equal(t, math.Inf(1), Min(nil))
	require.Equal(t, 3.0, Max([]float64{1, 3, -2}))
	require.Equal(t, -2.0, Min([]float64{1, 3, -2}))
	require.True(t, math.IsNaN(Max([]float64{1, math.NaN(), 5})))
	require.True(t, math.IsNaN(Min([]float64{1, math.NaN(), -5})))
	acc := []float64{1, 5, math.NaN()}
	MaxAcc(acc, []float64{2, math.NaN(), 0})
	require.Equal(t, 2.0, acc[0])
	require.True(t, math.IsNaN(acc[1]) && math.IsNaN(acc[2]))
	acc = []float64{1, 5, 0}
	MinAcc(acc, []float64{2, -1, math.NaN()})
	require.Equal(t, 1.0, acc[0])
	require.Equal(t, -1.0, acc[1])
	require.True(t, math.IsNaN(acc[2]))
}

// TestOptimizers checks Adam, AdamStep and SGDStep against the formulas
// written out.
func TestOptimizers(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	n := 1300
	p, g, m, v := randVec(rng, n), randVec(rng, n), randVec(rng, n), randVec(rng, n)
	for i := range v {
		v[i] = math.Abs(v[i])
	}
	c := &AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: -0.01, B: 0, C2: 1.5, Eps: 1e-8, EpsRoot: 0, WD: -1e-4, Post: 1}
	u, m2, v2 := make([]float64, n), make([]float64, n), make([]float64, n)
	Adam(u, m2, v2, g, m, v, p, c)
	for i := range g {
		// Products rounded apart, as the kernels round them (GOAMD64=v3
		// would fuse them otherwise).
		mi := float64(c.B1*m[i]) + float64(c.G1*g[i])
		vi := float64(c.B2*v[i]) + float64(c.G2*float64(g[i]*g[i]))
		ui := (float64(c.A*mi) + float64(c.B*g[i])) / (math.Sqrt(float64(vi*c.C2)+c.EpsRoot) + c.Eps)
		ui += float64(c.WD * p[i])
		require.InDelta(t, mi, m2[i], 4*ulp(mi))
		require.InDelta(t, vi, v2[i], 4*ulp(vi))
		require.InDelta(t, c.Post*ui, u[i], 1e-14*math.Abs(ui)+1e-300)
	}
	p2, m3, v3 := make([]float64, n), make([]float64, n), make([]float64, n)
	AdamStep(p2, m3, v3, p, g, m, v, c)
	for i := range p {
		require.True(t, sameBits(p[i]+u[i], p2[i]))
		require.True(t, sameBits(m2[i], m3[i]) && sameBits(v2[i], v3[i]))
	}
	// In place.
	pp, mm, vv := append([]float64(nil), p...), append([]float64(nil), m...), append([]float64(nil), v...)
	AdamStep(pp, mm, vv, pp, g, mm, vv, c)
	require.Equal(t, p2, pp)

	tr := randVec(rng, n)
	for _, nesterov := range []bool{false, true} {
		p3, t3 := make([]float64, n), make([]float64, n)
		SGDStep(p3, t3, p, g, tr, 0.9, -0.1, nesterov)
		for i := range p {
			nt := g[i] + float64(tr[i]*0.9)
			up := nt
			if nesterov {
				up = g[i] + float64(nt*0.9)
			}
			require.True(t, sameBits(nt, t3[i]))
			require.True(t, sameBits(p[i]+float64(up*-0.1), p3[i]))
		}
	}
	p4 := make([]float64, n)
	SGDStep(p4, nil, p, g, nil, 0, -0.1, false)
	for i := range p {
		require.True(t, sameBits(p[i]+float64(g[i]*-0.1), p4[i]))
	}
}
