package vec

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/testlong"
)

// ulpOf returns the spacing of float32 values at |w| (2^-149 for subnormal
// and zero results).
func ulpOf(w float64) float64 {
	w = math.Abs(w)
	if w < 0x1p-126 {
		return 0x1p-149
	}
	_, e := math.Frexp(w) // w = f·2^e, f in [0.5,1)
	return math.Ldexp(1, e-24)
}

// ulpErr returns |got - want| in float32 ulps of want, treating equal
// infinities and NaN/NaN as exact and anything else involving them as
// infinitely wrong.
func ulpErr(got float32, want float64) float64 {
	g := float64(got)
	switch {
	case math.IsNaN(want) || math.IsNaN(g):
		if math.IsNaN(want) && math.IsNaN(g) {
			return 0
		}
		return math.Inf(1)
	case math.IsInf(want, 0) || math.IsInf(g, 0):
		// A finite result that rounds to ±MaxFloat32 while the exact value
		// overflows float32 (or vice versa) is measured at MaxFloat32.
		if g == want || float64(float32(want)) == g {
			return 0
		}
		return math.Inf(1)
	}
	return math.Abs(g-want) / ulpOf(want)
}

func stableSigmoid(v float64) (s, sd float64) {
	e := math.Exp(-math.Abs(v))
	q := 1 / (1 + e)
	s = q
	if v < 0 {
		s = e * q
	}
	return s, e * q * q // σ(v)(1-σ(v))
}

type fn struct {
	name string
	vec  func(dst, src []float32)
	ref  func(x float64) float64
	// lo, hi: the range over which bound holds; absScale > 0 measures the
	// error in ulps of absScale instead of the result (for derivatives,
	// which cross zero).
	lo, hi   float64
	bound    float64
	absScale float64
}

const gk0, gk1 = 1.5957691216057308, 0.071354816272817803

func gelu64(x float64) float64 {
	s, _ := stableSigmoid(x * (gk0 + gk1*x*x))
	return x * s
}

func geluGrad64(x float64) float64 {
	s, sd := stableSigmoid(x * (gk0 + gk1*x*x))
	return s + x*(gk0+3*gk1*x*x)*sd
}

func phi(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

var fns = []fn{
	{name: "Exp", vec: Exp, ref: math.Exp, lo: math.Inf(-1), hi: math.Inf(1), bound: 1},
	{name: "Log", vec: Log, ref: math.Log, lo: math.Inf(-1), hi: math.Inf(1), bound: 1},
	{name: "Tanh", vec: Tanh, ref: math.Tanh, lo: math.Inf(-1), hi: math.Inf(1), bound: 2},
	{name: "Sigmoid", vec: Sigmoid, ref: func(x float64) float64 { s, _ := stableSigmoid(x); return s },
		lo: math.Inf(-1), hi: math.Inf(1), bound: 3},
	{name: "Silu", vec: Silu, ref: func(x float64) float64 { s, _ := stableSigmoid(x); return x * s },
		lo: -80, hi: math.Inf(1), bound: 4},
	{name: "Silu/subnormal", vec: Silu, ref: func(x float64) float64 { s, _ := stableSigmoid(x); return x * s },
		lo: math.Inf(-1), hi: -80, bound: 64, absScale: 0x1p-149},
	{name: "Softplus", vec: Softplus, ref: func(x float64) float64 { return max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) },
		lo: math.Inf(-1), hi: math.Inf(1), bound: 3},
	{name: "LogSigmoid", vec: LogSigmoid, ref: func(x float64) float64 { return min(x, 0) - math.Log1p(math.Exp(-math.Abs(x))) },
		lo: math.Inf(-1), hi: math.Inf(1), bound: 3},
	{name: "Gelu", vec: Gelu, ref: gelu64, lo: -1, hi: math.Inf(1), bound: 4},
	{name: "Gelu/[-2,-1]", vec: Gelu, ref: gelu64, lo: -2, hi: -1, bound: 8},
	{name: "Gelu/[-4,-2]", vec: Gelu, ref: gelu64, lo: -4, hi: -2, bound: 20},
	{name: "Gelu/[-10,-4]", vec: Gelu, ref: gelu64, lo: -10, hi: -4, bound: 200},
	{name: "Gelu/subnormal", vec: Gelu, ref: gelu64, lo: math.Inf(-1), hi: -10, bound: 256, absScale: 0x1p-149},
	{name: "GeluExact", vec: GeluExact, ref: func(x float64) float64 { return x * phi(x) },
		lo: -1e30, hi: math.Inf(1), bound: 3},
	{name: "GeluGrad", vec: GeluGrad, ref: geluGrad64, lo: -1e30, hi: 1e30, bound: 4, absScale: 1},
	{name: "SiluGrad", vec: SiluGrad, ref: func(x float64) float64 { s, sd := stableSigmoid(x); return s + x*sd },
		lo: -1e30, hi: 1e30, bound: 4, absScale: 1},
	{name: "GeluExactGrad", vec: GeluExactGrad, ref: func(x float64) float64 {
		return phi(x) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
	}, lo: -1e30, hi: 1e30, bound: 4, absScale: 1},
}

// sweep returns float32 values spread over every binade: all bit patterns
// with the given stride, both signs.
func sweep(stride uint32) []float32 {
	var xs []float32
	for b := uint64(0); b < 0x7f800000; b += uint64(stride) {
		xs = append(xs, math.Float32frombits(uint32(b)), -math.Float32frombits(uint32(b)))
	}
	return xs
}

var specials = []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0x1p-149, -0x1p-149, 0x1p-126, -0x1p-126,
	0x1.fffffcp-127, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32,
	88.72283, 88.72284, 88.7228, 89, -87.33654, -103.27893, -103.97208, -104, -150, 0.625, -0.625, 0.62499994,
	9, -9, 44, -44, 1e4, -1e4, 1e5, -1e5, 1e20, -1e20}

// stride returns the step between swept bit patterns: VEC_STRIDE if set
// (the figures in the package doc were measured with VEC_STRIDE=257), else
// 1031 (4 million inputs) with GONOX_TEST_LONG=1 (package testlong), or
// 4099 (1 million inputs).
func stride() uint32 {
	if s, err := strconv.Atoi(os.Getenv("VEC_STRIDE")); err == nil && s > 0 {
		return uint32(s)
	}
	if testlong.Enabled() {
		return 1031
	}
	return 4099
}

// TestAccuracy sweeps every kernel against float64 math and checks the
// ulp bound stated in the package doc.
func TestAccuracy(t *testing.T) {
	xs := append(sweep(stride()), specials...)
	for _, asm := range asmModes() {
		for _, f := range fns {
			t.Run(f.name+asmName(asm), func(t *testing.T) {
				defer setAsm(asm)()
				got := make([]float32, len(xs))
				f.vec(got, xs)
				worst, at := 0.0, float32(0)
				for i, x := range xs {
					if !(float64(x) >= f.lo && float64(x) <= f.hi) && !math.IsNaN(float64(x)) {
						continue
					}
					want := f.ref(float64(x))
					var e float64
					if f.absScale > 0 && !math.IsNaN(want) && !math.IsInf(want, 0) {
						e = math.Abs(float64(got[i])-want) / ulpOf(max(f.absScale, math.Abs(want)))
					} else {
						e = ulpErr(got[i], want)
					}
					if e > worst {
						worst, at = e, x
					}
				}
				t.Logf("%s: max error %.3f ulp at x = %g (%d inputs)", f.name, worst, at, len(xs))
				require.LessOrEqual(t, worst, f.bound, "%s at x = %g", f.name, at)
			})
		}
	}
}

func TestSpecialValues(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	cases := []struct {
		name string
		f    func(dst, src []float32)
		in   []float32
		want []float32
	}{
		{"Exp", Exp, []float32{0, negZero, inf, -inf, nan, 89, -104, 88.7228}, []float32{1, 1, inf, 0, nan, inf, 0, 3.4027e38}},
		{"Log", Log, []float32{1, 0, negZero, -1, inf, -inf, nan}, []float32{0, -inf, -inf, nan, inf, nan, nan}},
		{"Tanh", Tanh, []float32{0, negZero, inf, -inf, nan, 20, -20}, []float32{0, negZero, 1, -1, nan, 1, -1}},
		{"Sigmoid", Sigmoid, []float32{0, negZero, inf, -inf, nan, 200, -200}, []float32{0.5, 0.5, 1, 0, nan, 1, 0}},
		{"Gelu", Gelu, []float32{0, negZero, inf, -inf, nan, 100, -100}, []float32{0, negZero, inf, nan, nan, 100, negZero}},
		{"GeluGrad", GeluGrad, []float32{0, inf, -inf, nan, 100, -100}, []float32{0.5, 1, 0, nan, 1, 0}},
		{"Silu", Silu, []float32{0, inf, -inf, nan, 200, -200}, []float32{0, inf, nan, nan, 200, negZero}},
		{"SiluGrad", SiluGrad, []float32{0, inf, -inf, nan, 200, -200}, []float32{0.5, 1, 0, nan, 1, 0}},
		{"Softplus", Softplus, []float32{0, inf, -inf, nan, 200, -200}, []float32{float32(math.Ln2), inf, 0, nan, 200, 0}},
		{"GeluExact", GeluExact, []float32{0, inf, nan, 100, -100}, []float32{0, inf, nan, 100, negZero}},
		{"GeluExactGrad", GeluExactGrad, []float32{0, inf, -inf, nan}, []float32{0.5, 1, 0, nan}},
	}
	for _, asm := range asmModes() {
		for _, c := range cases {
			defer setAsm(asm)()
			// Pad to 16 so that the assembly sees the values too.
			in := append(append([]float32{}, c.in...), make([]float32, 16)...)
			got := make([]float32, len(in))
			c.f(got, in)
			for i, w := range c.want {
				g := got[i]
				if w != w {
					require.True(t, g != g, "%s(%v) = %v, want NaN%s", c.name, c.in[i], g, asmName(asm))
					continue
				}
				if math.Abs(float64(w)) > 1e38 && !math.IsInf(float64(w), 0) {
					require.InEpsilon(t, w, g, 1e-4, "%s(%v)", c.name, c.in[i])
					continue
				}
				require.Equal(t, math.Float32bits(w), math.Float32bits(g), "%s(%v) = %v, want %v%s", c.name, c.in[i], g, w, asmName(asm))
			}
		}
	}
}

// TestAsmMatchesGo checks that the AVX2 kernels return exactly the bits of
// the pure-Go code on random bit patterns, a dense sweep and special values.
func TestAsmMatchesGo(t *testing.T) {
	if !hasAVX2() {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	xs := sweep(stride() * 4)
	random := 1 << 14
	if testlong.Enabled() {
		random = 1 << 16
	}
	for range random {
		xs = append(xs, math.Float32frombits(rng.Uint32()), float32(rng.NormFloat64()*4))
	}
	xs = append(xs, specials...)
	ys := make([]float32, len(xs))
	for i := range ys {
		ys[i] = float32(rng.NormFloat64() * 3)
	}
	ys[7], ys[9] = 0, float32(math.Copysign(0, -1))
	same := func(name string, a, b []float32) {
		t.Helper()
		for i := range a {
			if a[i] != a[i] && b[i] != b[i] {
				continue
			}
			require.Equal(t, math.Float32bits(a[i]), math.Float32bits(b[i]), "%s at %d: x = %g", name, i, xs[i])
		}
	}
	run := func(asm bool, f func(dst []float32)) []float32 {
		defer setAsm(asm)()
		d := make([]float32, len(xs))
		f(d)
		return d
	}
	for _, f := range []struct {
		name string
		f    func(dst, src []float32)
	}{{"Exp", Exp}, {"Tanh", Tanh}, {"Sigmoid", Sigmoid}, {"Gelu", Gelu}, {"GeluGrad", GeluGrad}, {"Silu", Silu}, {"SiluGrad", SiluGrad}} {
		same(f.name, run(true, func(d []float32) { f.f(d, xs) }), run(false, func(d []float32) { f.f(d, xs) }))
	}
	for _, f := range []struct {
		name string
		f    func(dst, a, b []float32)
	}{{"AddVV", AddVV}, {"SubVV", SubVV}, {"MulVV", MulVV}, {"DivVV", DivVV}} {
		same(f.name, run(true, func(d []float32) { f.f(d, xs, ys) }), run(false, func(d []float32) { f.f(d, xs, ys) }))
	}
	for _, m := range []float32{0, 3.5, -7.25, 100, float32(math.Inf(-1)), float32(math.Inf(1))} {
		same("ExpShift", run(true, func(d []float32) { ExpShift(d, xs, m) }), run(false, func(d []float32) { ExpShift(d, xs, m) }))
		// Short rows (a softmax over a few classes): the tail after the
		// last 8 goes through the vector kernel padded.
		for n := 1; n <= 17; n++ {
			for off := 0; off+n <= 200; off += 37 {
				row := xs[off : off+n]
				a := func(asm bool) []float32 { defer setAsm(asm)(); d := make([]float32, n); ExpShift(d, row, m); return d }
				same("ExpShift short", a(true), a(false))
			}
		}
	}
	for _, s := range []float32{1.5, -0.3, 0, float32(math.Inf(1))} {
		for _, f := range []struct {
			name string
			f    func(dst, a []float32, s float32)
		}{{"AddVS", AddVS}, {"SubVS", SubVS}, {"MulVS", MulVS}, {"DivVS", DivVS}} {
			same(f.name, run(true, func(d []float32) { f.f(d, xs, s) }), run(false, func(d []float32) { f.f(d, xs, s) }))
		}
		same("SubSV", run(true, func(d []float32) { SubSV(d, s, xs) }), run(false, func(d []float32) { SubSV(d, s, xs) }))
		same("DivSV", run(true, func(d []float32) { DivSV(d, s, xs) }), run(false, func(d []float32) { DivSV(d, s, xs) }))
	}
	// Sums: bitwise equal float64 results, for every length up to 40 and
	// a long slice spanning several blocks.
	for _, n := range append(seq(40), 3*SumBlock+13) {
		v := ys
		for len(v) < n {
			v = append(v, ys...)
		}
		v = v[:n]
		a := func(asm bool) float64 { defer setAsm(asm)(); return SumF64(v) }
		require.Equal(t, math.Float64bits(a(false)), math.Float64bits(a(true)), "SumF64 n=%d", n)
		acc := func(asm bool) []float64 {
			defer setAsm(asm)()
			r := make([]float64, n)
			for i := range r {
				r[i] = float64(i) * 0.1
			}
			AccF64(r, v)
			return r
		}
		require.Equal(t, acc(false), acc(true), "AccF64 n=%d", n)
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestSumF64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 5*SumBlock+77)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	exact := 0.0
	for _, v := range x {
		exact += float64(v)
	}
	s := SumF64(x)
	require.InDelta(t, exact, s, 1e-9)
	// Block decomposition: the in-order sum of block sums.
	b := 0.0
	for i := 0; i < len(x); i += SumBlock {
		b += SumBlocks(x[i:min(i+SumBlock, len(x))])
	}
	require.Equal(t, s, b)
	// SumSqDiffF64 sums the float32 squares like SumF64 of Square(Sub).
	y := make([]float32, len(x))
	for i := range y {
		y[i] = float32(rng.NormFloat64())
	}
	d := make([]float32, len(x))
	SubVV(d, x, y)
	MulVV(d, d, d)
	require.Equal(t, SumF64(d), SumSqDiffF64(x, y))
}

func TestExpShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	worst := 0.0
	for range 200000 {
		m := float32(rng.NormFloat64() * 30)
		x := m - float32(rng.Float64()*100)
		got := expShiftf(x, m)
		want := math.Exp(float64(x) - float64(m))
		worst = max(worst, ulpErr(got, want))
	}
	t.Logf("ExpShift: max error %.3f ulp", worst)
	require.LessOrEqual(t, worst, 2.0)
	require.Equal(t, float32(0), expShiftf(float32(math.Inf(-1)), 3))
	require.True(t, math.IsNaN(float64(expShiftf(float32(math.Inf(-1)), float32(math.Inf(-1))))))
	d := make([]float32, 3)
	s := ExpShift(d, []float32{1, 2, 3}, 3)
	require.InDelta(t, math.Exp(-2)+math.Exp(-1)+1, s, 1e-6)
}

func TestMaxMin(t *testing.T) {
	nan := float32(math.NaN())
	require.Equal(t, float32(3), MaxF32([]float32{1, 3, -2}))
	require.True(t, math.IsNaN(float64(MaxF32([]float32{1, nan, 5}))))
	require.True(t, math.IsInf(float64(MaxF32(nil)), -1))
	require.Equal(t, float32(-2), MinF32([]float32{1, 3, -2}))
	require.True(t, math.IsNaN(float64(MinF32([]float32{nan, 1}))))
	acc := []float32{0, 5, nan}
	MaxAcc(acc, []float32{1, 2, 3})
	require.Equal(t, float32(1), acc[0])
	require.Equal(t, float32(5), acc[1])
	require.True(t, acc[2] != acc[2])
}

// Relu and its gradient agree bit for bit with Go's max and comparison on
// every path (Go, AVX2, AVX-512's gradient), for special values and every
// tail length past the AVX-512 kernel's 32-lane loop and 16-lane step,
// the gradient also written over g.
func TestReluAsmMatchesGo(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-40, -1e-40, 3.5, -2.25}
	modes := []struct{ asm, wide bool }{{false, false}}
	for _, asm := range asmModes()[1:] {
		modes = append(modes, struct{ asm, wide bool }{asm, false}, struct{ asm, wide bool }{asm, true})
	}
	for n := 0; n <= 72; n++ {
		src := make([]float32, n)
		g := make([]float32, n)
		for i := range src {
			src[i] = special[(i*7+n)%len(special)]
			g[i] = float32(i) - 3.5
		}
		for _, m := range modes {
			asm := m.asm
			restore := setAsm(asm)
			restore512 := setAVX512(m.wide)
			dst := make([]float32, n)
			Relu(dst, src)
			dg := make([]float32, n)
			ReluGradMul(dg, g, src)
			over := slices.Clone(g)
			ReluGradMul(over, over, src)
			restore512()
			restore()
			require.Equal(t, dg, over, "asm=%v avx512=%v n=%d: ReluGradMul over g", asm, m.wide, n)
			for i, v := range src {
				want := max(v, 0)
				if math.Float32bits(dst[i]) != math.Float32bits(want) && !(v != v && dst[i] != dst[i]) {
					t.Fatalf("asm=%v n=%d: Relu(%v) = %v, want %v", asm, n, v, dst[i], want)
				}
				wg := float32(0)
				if v > 0 {
					wg = g[i]
				}
				if math.Float32bits(dg[i]) != math.Float32bits(wg) {
					t.Fatalf("asm=%v n=%d: ReluGradMul(g=%v, y=%v) = %v, want %v", asm, n, g[i], v, dg[i], wg)
				}
			}
		}
	}
}

// The Adam kernel gives the same bits with and without assembly, with and
// without weight decay, for every tail length.
func TestAdamAsmMatchesGo(t *testing.T) {
	c := &AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 5.26, B: 0.5, C2: 500.2, Eps: 1e-8, EpsRoot: 1e-9, WD: 0.01, Post: -0.003}
	for n := 0; n <= 37; n++ {
		g, m, v, p := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range g {
			g[i] = float32(math.Sin(float64(i*7+n))) * 3
			m[i] = float32(math.Cos(float64(i*3))) / 4
			v[i] = float32(i%5) / 7
			p[i] = float32(i) - 9
		}
		for _, wd := range []bool{false, true} {
			var outs [2][3][]float32
			for k, asm := range asmModes() {
				restore := setAsm(asm)
				u, m2, v2 := make([]float32, n), make([]float32, n), make([]float32, n)
				pp := p
				if !wd {
					pp = nil
				}
				Adam(u, m2, v2, g, m, v, pp, c)
				restore()
				outs[k] = [3][]float32{u, m2, v2}
			}
			if len(asmModes()) < 2 {
				continue
			}
			for j := range 3 {
				for i := range n {
					if math.Float32bits(outs[0][j][i]) != math.Float32bits(outs[1][j][i]) {
						t.Fatalf("n=%d wd=%v output %d element %d: go %v asm %v", n, wd, j, i, outs[0][j][i], outs[1][j][i])
					}
				}
			}
		}
	}
}

// AdamStep is Adam then AddVV, bit for bit, in place or not, across chunk
// boundaries.
func TestAdamStepMatchesAdamThenAdd(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 33, adamChunk - 1, adamChunk, 2*adamChunk + 13} {
		for _, wd := range []float32{0, 0.01} {
			for _, asm := range asmModes() {
				restore := setAsm(asm)
				c := &AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 5.26, B: 0.5, C2: 500.2, Eps: 1e-8, EpsRoot: 1e-9, WD: wd, Post: -0.003}
				g, m, v, p := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
				for i := range g {
					g[i] = float32(math.Sin(float64(i*7+n))) * 3
					m[i] = float32(math.Cos(float64(i*3))) / 4
					v[i] = float32(i%5) / 7
					p[i] = float32(i%11) - 5
				}
				// Reference: the two kernels, out of place.
				u, wm, wv, wp := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
				var pw []float32
				if wd != 0 {
					pw = p
				}
				Adam(u, wm, wv, g, m, v, pw, c)
				AddVV(wp, p, u)
				// Out of place.
				p2, m2, v2 := make([]float32, n), make([]float32, n), make([]float32, n)
				AdamStep(p2, m2, v2, p, g, m, v, c)
				require.Equal(t, wp, p2, "n=%d wd=%v asm=%v: p", n, wd, asm)
				require.Equal(t, wm, m2, "m")
				require.Equal(t, wv, v2, "v")
				// In place.
				AdamStep(p, m, v, p, g, m, v, c)
				require.Equal(t, wp, p, "n=%d wd=%v asm=%v: p in place", n, wd, asm)
				require.Equal(t, wm, m, "m in place")
				require.Equal(t, wv, v, "v in place")
				restore()
			}
		}
	}
}

// SGDStep gives the bits of the separate passes (MulVS, AddVV), in place or
// not, with and without a trace.
func TestSGDStepMatchesPasses(t *testing.T) {
	const n = 37
	g, tr, p := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range g {
		g[i] = float32(math.Sin(float64(i*5))) * 2
		tr[i] = float32(math.Cos(float64(i))) / 3
		p[i] = float32(i%7) - 3
	}
	const mu, s = float32(0.9), float32(-0.013)
	tmp := make([]float32, n)
	for _, nesterov := range []bool{false, true} {
		// Reference: nt = g + mu·t; u = nt or g + mu·nt; p + s·u.
		nt, u, wp := make([]float32, n), make([]float32, n), make([]float32, n)
		MulVS(tmp, tr, mu)
		AddVV(nt, g, tmp)
		copy(u, nt)
		if nesterov {
			MulVS(tmp, nt, mu)
			AddVV(u, g, tmp)
		}
		MulVS(tmp, u, s)
		AddVV(wp, p, tmp)
		p2, t2 := make([]float32, n), make([]float32, n)
		SGDStep(p2, t2, p, g, tr, mu, s, nesterov)
		require.Equal(t, wp, p2, "nesterov=%v: p", nesterov)
		require.Equal(t, nt, t2, "nesterov=%v: trace", nesterov)
		pc, tc := append([]float32(nil), p...), append([]float32(nil), tr...)
		SGDStep(pc, tc, pc, g, tc, mu, s, nesterov)
		require.Equal(t, wp, pc, "in place")
		require.Equal(t, nt, tc, "in place")
	}
	wp := make([]float32, n)
	MulVS(tmp, g, s)
	AddVV(wp, p, tmp)
	p2 := make([]float32, n)
	SGDStep(p2, nil, p, g, nil, 0, s, false)
	require.Equal(t, wp, p2, "no trace")
}
