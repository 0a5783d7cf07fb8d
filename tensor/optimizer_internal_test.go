package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAdamUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 1000
	rnd := func() *Tensor {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(r.NormFloat64())
		}
		return FromFloat32(d)
	}
	g, mu, p := rnd(), rnd(), rnd()
	nu := Abs(rnd())
	c := AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 1 / 0.19, B: 0.5, C2: 1 / 0.001999, Eps: 1e-8, EpsRoot: 1e-9, WD: 0.01, Post: -0.003}
	u, mu2, nu2 := AdamUpdate(g, mu, nu, p, c)
	gs, ms, ns, ps := g.Float64s(), mu.Float64s(), nu.Float64s(), p.Float64s()
	for i := range gs {
		m := 0.9*ms[i] + 0.1*gs[i]
		v := 0.999*ns[i] + 0.001*gs[i]*gs[i]
		want := -0.003 * ((m/0.19+0.5*gs[i])/(math.Sqrt(v/0.001999+1e-9)+1e-8) + 0.01*ps[i])
		require.InDelta(t, m, mu2.At(i), 1e-7+1e-6*math.Abs(m), "mu %d", i)
		require.InDelta(t, v, nu2.At(i), 1e-7+1e-6*math.Abs(v), "nu %d", i)
		require.InDelta(t, want, u.At(i), 1e-9+1e-5*math.Abs(want), "u %d", i)
	}

	// Split across goroutines, the same bits.
	old := parallelMinWork
	parallelMinWork = 64
	up, mp, np := AdamUpdate(g, mu, nu, p, c)
	parallelMinWork = old
	assert.Equal(t, u.Float32s(), up.Float32s())
	assert.Equal(t, mu2.Float32s(), mp.Float32s())
	assert.Equal(t, nu2.Float32s(), np.Float32s())

	assert.PanicsWithValue(t, "tensor.AdamUpdate: weight decay needs the parameter p", func() { AdamUpdate(g, mu, nu, nil, c) })
	assert.Panics(t, func() { AdamUpdate(g, mu, Zeros(Float32, 3), nil, AdamCoeffs{}) })
}

// AdamStep gives the bits of AdamUpdate then Add, on one goroutine or
// split across several.
func TestAdamStep(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 5000
	rnd := func() *Tensor {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(r.NormFloat64())
		}
		return FromFloat32(d)
	}
	g, mu, p := rnd(), rnd(), rnd()
	nu := Abs(rnd())
	for _, wd := range []float32{0, 0.01} {
		c := AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 1 / 0.19, B: 0.5, C2: 1 / 0.001999, Eps: 1e-8, EpsRoot: 1e-9, WD: wd, Post: -0.003}
		var pw *Tensor
		if wd != 0 {
			pw = p
		}
		u, wm, wv := AdamUpdate(g, mu, nu, pw, c)
		wp := Add(p, u)
		for _, minWork := range []int{parallelMinWork, 64} {
			old := parallelMinWork
			parallelMinWork = minWork
			p2, m2, v2 := AdamStep(p, g, mu, nu, c)
			parallelMinWork = old
			require.Equal(t, wp.Float32s(), p2.Float32s(), "wd=%v p", wd)
			require.Equal(t, wm.Float32s(), m2.Float32s(), "wd=%v mu", wd)
			require.Equal(t, wv.Float32s(), v2.Float32s(), "wd=%v nu", wd)
		}
	}
	assert.PanicsWithValue(t, "tensor.AdamStep: f32[5000], f32[5000], f32[5000], f32[3]: want float32 (or float64) tensors of one shape",
		func() { AdamStep(p, g, mu, Zeros(Float32, 3), AdamCoeffs{}) })
	assert.PanicsWithValue(t, "tensor.AdamStep: operand p is nil", func() { AdamStep(nil, g, mu, nu, AdamCoeffs{}) })
}

// SGDStep gives the bits of the ops it fuses, split across goroutines or
// not.
func TestSGDStep(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 5000
	rnd := func() *Tensor {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(r.NormFloat64())
		}
		return FromFloat32(d)
	}
	p, g, tr := rnd(), rnd(), rnd()
	const mu, s = float32(0.9), float32(-0.01)
	for _, nesterov := range []bool{false, true} {
		nt := Add(g, MulScalar(tr, mu))
		u := nt
		if nesterov {
			u = Add(g, MulScalar(nt, mu))
		}
		wp := Add(p, MulScalar(u, s))
		for _, minWork := range []int{parallelMinWork, 64} {
			old := parallelMinWork
			parallelMinWork = minWork
			p2, t2 := SGDStep(p, g, tr, mu, s, nesterov)
			parallelMinWork = old
			require.Equal(t, wp.Float32s(), p2.Float32s(), "nesterov=%v p", nesterov)
			require.Equal(t, nt.Float32s(), t2.Float32s(), "nesterov=%v trace", nesterov)
		}
	}
	p2, t2 := SGDStep(p, g, nil, 0, s, false)
	assert.Nil(t, t2)
	assert.Equal(t, Add(p, MulScalar(g, s)).Float32s(), p2.Float32s())
	assert.PanicsWithValue(t, "tensor.SGDStep: operand g is nil", func() { SGDStep(p, nil, nil, 0, s, false) })
	assert.PanicsWithValue(t, "tensor.SGDStep: f32[5000], f32[5000], f32[3]: want float32 (or float64) tensors of one shape",
		func() { SGDStep(p, g, Zeros(Float32, 3), mu, s, false) })
}

// TestFusedStepsKeepLogicalAxes: the fused optimizer steps give each
// result the logical axes of the value it stands for, on the result's own
// header (its storage has one holder, so donating it recycles the
// storage); unnamed operands give unnamed results.
func TestFusedStepsKeepLogicalAxes(t *testing.T) {
	named := func(x *Tensor, ax ...string) *Tensor {
		y := WithLogicalAxes(x, ax...)
		Donate(x)
		return y
	}
	p := named(Ones(Float32, 4, 3), "embed", "mlp")
	g := named(Full(Float32, 0.5, 4, 3), "embed", "mlp")
	mu := named(Zeros(Float32, 4, 3), "mu_embed", "mu_mlp")
	nu := named(Zeros(Float32, 4, 3), "nu_embed", "nu_mlp")
	tr := named(Zeros(Float32, 4, 3), "t_embed", "t_mlp")
	c := AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 10, C2: 1000, Eps: 1e-8, Post: -1e-3}
	check := func(what string, y, like *Tensor) {
		t.Helper()
		assert.Equal(t, like.LogicalAxes(), y.LogicalAxes(), what)
		assert.Equal(t, 1, HolderCount(y), what+": one holder")
	}
	u, mu2, nu2 := AdamUpdate(g, mu, nu, nil, c)
	check("AdamUpdate u", u, g)
	check("AdamUpdate mu", mu2, mu)
	check("AdamUpdate nu", nu2, nu)
	p2, mu2, nu2 := AdamStep(p, g, mu, nu, c)
	check("AdamStep p", p2, p)
	check("AdamStep mu", mu2, mu)
	check("AdamStep nu", nu2, nu)
	p2, t2 := SGDStep(p, g, tr, 0.9, -0.1, false)
	check("SGDStep p", p2, p)
	check("SGDStep t", t2, tr)
	p2, _ = SGDStep(p, g, nil, 0, -0.1, false)
	check("SGDStep p without trace", p2, p)
	// Names a result stands for never leak onto an unnamed operand's.
	plain := Ones(Float32, 4, 3)
	p2, _ = SGDStep(plain, g, nil, 0, -0.1, false)
	assert.Nil(t, p2.LogicalAxes())
	require.Nil(t, plain.LogicalAxes())
}

// AdamSteps gives the bits of AdamStep on each parameter, whatever their
// sizes (empty ones included) and coefficients, on one goroutine or with
// the parameters' elements split together across several; placed and
// float64 parameters go through AdamStep.
func TestAdamSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	rnd := func(shape ...int) *Tensor { return normalTensor(r, shape...) }
	shapes := [][]int{{3, 4}, {0}, {17}, {1}, {64, 130}, {5000}, {2, 3, 5}}
	ps, gs, mus, nus, cs := adamOperands(rnd, shapes)
	for i := range cs {
		if i%2 == 0 {
			cs[i].WD = 0.01 * float32(i+1)
		}
	}
	ps[0] = WithLogicalAxes(ps[0], "rows", "cols")
	for _, minWork := range []int{parallelMinWork, 64, 16} {
		old := parallelMinWork
		parallelMinWork = minWork
		p2, m2, v2 := AdamSteps(ps, gs, mus, nus, cs)
		parallelMinWork = old
		for i := range shapes {
			wp, wm, wv := AdamStep(ps[i], gs[i], mus[i], nus[i], cs[i])
			require.Equal(t, wp.Shape(), p2[i].Shape(), "parameter %d", i)
			require.Equal(t, wp.Float32s(), p2[i].Float32s(), "minWork %d: p %d", minWork, i)
			require.Equal(t, wm.Float32s(), m2[i].Float32s(), "minWork %d: mu %d", minWork, i)
			require.Equal(t, wv.Float32s(), v2[i].Float32s(), "minWork %d: nu %d", minWork, i)
		}
		require.Equal(t, []string{"rows", "cols"}, p2[0].LogicalAxes())
	}

	// float64: AdamStep one by one.
	p64 := []*Tensor{AsType(ps[2], Float64)}
	g64, m64, n64 := []*Tensor{AsType(gs[2], Float64)}, []*Tensor{AsType(mus[2], Float64)}, []*Tensor{AsType(nus[2], Float64)}
	p2, _, _ := AdamSteps(p64, g64, m64, n64, cs[2:3])
	wp, _, _ := AdamStep(p64[0], g64[0], m64[0], n64[0], cs[2])
	require.Equal(t, wp.Float64s(), p2[0].Float64s())

	assert.PanicsWithValue(t, "tensor.AdamSteps: 2 parameters, 1 gradients, 2 and 2 moments, 2 coefficients: want as many of each",
		func() { AdamSteps(ps[:2], gs[:1], mus[:2], nus[:2], cs[:2]) })
	assert.PanicsWithValue(t, "tensor.AdamSteps: parameter 1: f32[0], f32[17], f32[0], f32[0]: want float32 (or float64) tensors of one shape",
		func() { AdamSteps(ps[:2], []*Tensor{gs[0], gs[2]}, mus[:2], nus[:2], cs[:2]) })
}
