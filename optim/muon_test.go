package optim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// dmat is a dense float64 matrix for the reference Newton–Schulz.
type dmat struct {
	r, c int
	v    []float64
}

func (a dmat) at(i, j int) float64 { return a.v[i*a.c+j] }

func (a dmat) t() dmat {
	out := dmat{a.c, a.r, make([]float64, len(a.v))}
	for i := range a.r {
		for j := range a.c {
			out.v[j*a.r+i] = a.at(i, j)
		}
	}
	return out
}

func (a dmat) mul(b dmat) dmat {
	out := dmat{a.r, b.c, make([]float64, a.r*b.c)}
	for i := range a.r {
		for j := range b.c {
			s := 0.0
			for k := range a.c {
				s += a.at(i, k) * b.at(k, j)
			}
			out.v[i*b.c+j] = s
		}
	}
	return out
}

// lin returns x·a + y·b elementwise.
func lin(x float64, a dmat, y float64, b dmat) dmat {
	out := dmat{a.r, a.c, make([]float64, len(a.v))}
	for i := range a.v {
		out.v[i] = x*a.v[i] + y*b.v[i]
	}
	return out
}

// nsRef is optax's orthogonalize_via_newton_schulz for one matrix, in
// float64 loops.
func nsRef(x dmat, coeffs []optim.NewtonSchulzCoeffs, steps int, precond optim.Preconditioning, eps float64) dmat {
	x = lin(1, x, 0, x) // a copy: AOL scales its rows in place
	tr := x.r > x.c
	if tr {
		x = x.t()
	}
	if precond == optim.Frobenius {
		f := math.Sqrt(dot(x.v, x.v)) + eps
		x = lin(1/f, x, 0, x)
	}
	for i := range steps {
		c := coeffs[min(i, len(coeffs)-1)]
		a := x.mul(x.t())
		switch {
		case i == 0 && precond == optim.AOL:
			s := make([]float64, a.r)
			for r := range a.r {
				sum := 0.0
				for k := range a.c {
					sum += math.Abs(a.at(r, k))
				}
				s[r] = 1 / math.Sqrt(math.Max(sum, eps))
			}
			for r := range x.r {
				for k := range x.c {
					x.v[r*x.c+k] *= s[r]
				}
				for k := range a.c {
					a.v[r*a.c+k] *= s[r] * s[k]
				}
			}
		case i == 0 && precond == optim.Schatten:
			f := math.Max(math.Sqrt(dot(a.v, a.v)), eps)
			x = lin(1/math.Sqrt(f), x, 0, x)
			a = lin(1/f, a, 0, a)
		}
		b := lin(c[1], a, c[2], a.mul(a))
		x = lin(c[0], x, 1, b.mul(x))
	}
	if tr {
		x = x.t()
	}
	return x
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// muonRef is optax.contrib.muon on a [r, c] matrix leaf (reduction 0,
// output 1): Nesterov momentum, Newton–Schulz, the width scaling or
// consistent RMS, weight decay, learning rate.
func muonRef(lr optim.Schedule, beta float64, nesterov, adaptive bool, coeffs []optim.NewtonSchulzCoeffs, steps int, precond optim.Preconditioning, rms, wd float64) leafRef {
	mm := moments{}
	return func(t int, name string, shape []int, g, p []float64) []float64 {
		m := mm.get(name, len(g), 0)
		n := t + 1
		mh := make([]float64, len(g))
		for i := range g {
			m[i] = beta*m[i] + (1-beta)*g[i]
			mh[i] = mhat(m[i], g[i], beta, n, nesterov)
		}
		o := nsRef(dmat{shape[0], shape[1], mh}, coeffs, steps, precond, 1e-8).v
		if adaptive {
			d := dot(mh, o)
			for i := range o {
				o[i] *= d
			}
		}
		fanIn, fanOut := float64(shape[0]), float64(shape[1])
		s := math.Sqrt(math.Max(1, fanOut/fanIn))
		if rms != 0 {
			s = math.Sqrt(math.Max(fanIn, fanOut)) * rms
		}
		u := make([]float64, len(g))
		for i := range o {
			u[i] = -lr(t) * (s*o[i] + wd*p[i])
		}
		return u
	}
}

// byLeaf sends W to one reference and B to another.
func byLeaf(w, b leafRef) leafRef {
	return func(t int, name string, shape []int, g, p []float64) []float64 {
		if name == "W" {
			return w(t, name, shape, g, p)
		}
		return b(t, name, shape, g, p)
	}
}

func TestMuonAgainstOptaxRules(t *testing.T) {
	lr := optim.Constant(0.02)
	sched := optim.Linear(0.05, 0.01, 4, 0)
	std := optim.MuonCoeffs
	bareRef := muonRef(lr, 0.95, true, false, std, 5, optim.Frobenius, 0, 0)
	for _, tc := range []struct {
		name string
		tx   optim.Transform
		ref  leafRef
	}{
		{"Muon defaults", optim.Muon(lr), byLeaf(
			muonRef(lr, 0.95, true, false, std, 5, optim.Frobenius, 0, 0),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, true, 0, nil))},
		{"Muon options", optim.Muon(sched, optim.MuonOptions{Beta: 0.8, NoNesterov: true, NSSteps: 3, WeightDecay: 0.1,
			ConsistentRMS: 0.2, AdamB1: 0.5, AdamWeightDecay: 0.3, AdamLearningRate: lr}), byLeaf(
			muonRef(sched, 0.8, false, false, std, 3, optim.Frobenius, 0.2, 0.1),
			adamRef(lr, 0.5, 0.999, 1e-8, 0, false, 0.3, all))},
		{"Muon Dion AOL adaptive", optim.Muon(lr, optim.MuonOptions{Coeffs: optim.DionCoeffs, Preconditioning: optim.AOL, Adaptive: true}), byLeaf(
			muonRef(lr, 0.95, true, true, optim.DionCoeffs, 5, optim.AOL, 0, 0),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, true, 0, nil))},
		{"Muon AOL", optim.Muon(lr, optim.MuonOptions{Preconditioning: optim.AOL}), byLeaf(
			muonRef(lr, 0.95, true, false, std, 5, optim.AOL, 0, 0),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, true, 0, nil))},
		{"Muon Dion AOL", optim.Muon(lr, optim.MuonOptions{Coeffs: optim.DionCoeffs, Preconditioning: optim.AOL}), byLeaf(
			muonRef(lr, 0.95, true, false, optim.DionCoeffs, 5, optim.AOL, 0, 0),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, true, 0, nil))},
		{"Muon AOL adaptive", optim.Muon(lr, optim.MuonOptions{Preconditioning: optim.AOL, Adaptive: true}), byLeaf(
			muonRef(lr, 0.95, true, true, std, 5, optim.AOL, 0, 0),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, true, 0, nil))},
		{"Muon Dion", optim.Muon(lr, optim.MuonOptions{Coeffs: optim.DionCoeffs}), byLeaf(
			muonRef(lr, 0.95, true, false, optim.DionCoeffs, 5, optim.Frobenius, 0, 0),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, true, 0, nil))},
		{"Muon adaptive", optim.Muon(lr, optim.MuonOptions{Adaptive: true}), byLeaf(
			muonRef(lr, 0.95, true, true, std, 5, optim.Frobenius, 0, 0),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, true, 0, nil))},
		{"Muon Schatten", optim.Muon(lr, optim.MuonOptions{Preconditioning: optim.Schatten, NSSteps: 4}), byLeaf(
			muonRef(lr, 0.95, true, false, std, 4, optim.Schatten, 0, 0),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, true, 0, nil))},
		{"ScaleByMuon in a Partition", optim.Partition(map[string]optim.Transform{
			"m": optim.Chain(optim.ScaleByMuon(), optim.ScaleByLearningRate(lr)),
			"s": optim.SGD(lr),
		}, func(_ pytree.Path, x *tensor.Tensor) string {
			if x.Rank() == 2 {
				return "m"
			}
			return "s"
		}), byLeaf(
			func(t int, name string, shape []int, g, p []float64) []float64 {
				// without the width scaling sqrt(4/3)
				u := bareRef(t, name, shape, g, p)
				for i := range u {
					u[i] /= math.Sqrt(4.0 / 3)
				}
				return u
			},
			sgdRef(lr, 0, false))},
	} {
		t.Run(tc.name, func(t *testing.T) { compareRef(t, tc.tx, 6, tc.ref) })
	}
}

// OrthogonalizeNewtonSchulz on a batch of matrices read through MuonDims:
// with the reduction and output dimensions swapped, each matrix is
// orthogonalized transposed, which is the transpose of orthogonalizing it.
func TestOrthogonalizeNewtonSchulz(t *testing.T) {
	x := f32(wave(24, 1.1), 2, 3, 4)
	got := optim.OrthogonalizeNewtonSchulz(x, &optim.MuonDims{Reduction: []int{-1}, Output: []int{1}}, optim.MuonCoeffs, 5, optim.Frobenius, 1e-8)
	require.Equal(t, []int{2, 3, 4}, got.Shape())
	xs := x.Float64s()
	for b := range 2 {
		want := nsRef(dmat{3, 4, xs[12*b : 12*b+12]}, optim.MuonCoeffs, 5, optim.Frobenius, 1e-8)
		closeTo(t, want.v, got.Float64s()[12*b:12*b+12], 1e-5, 1e-6, "matrix %d", b)
	}
	// The classic cubic iteration X ← 1.5X - 0.5XXᵀX converges to the
	// polar factor U·Vᵀ: O·Oᵀ = I.
	o := optim.OrthogonalizeNewtonSchulz(f32(wave(12, 0.4), 3, 4), nil, []optim.NewtonSchulzCoeffs{{1.5, -0.5, 0}}, 40, optim.Frobenius, 1e-8)
	oot := dmat{3, 4, o.Float64s()}
	oot = oot.mul(oot.t())
	for i := range 3 {
		for j := range 3 {
			assert.InDelta(t, map[bool]float64{true: 1}[i == j], oot.at(i, j), 1e-4, "O·Oᵀ at %d,%d", i, j)
		}
	}
	require.PanicsWithValue(t, "optim.OrthogonalizeNewtonSchulz: f32[2,3,4] is not a matrix and has no MuonDims", func() {
		optim.OrthogonalizeNewtonSchulz(x, nil, optim.MuonCoeffs, 5, optim.Frobenius, 1e-8)
	})
}

// Muon on parameters placed on a mesh computes what it computes on the
// host; inside shard.Map it refuses a sharded matrix.
func TestMuonSharded(t *testing.T) {
	mesh, params, grads := shardedSetup()
	tx := optim.Muon(optim.Constant(0.02))
	hp, hs := params, tx.Init(params)
	pp := shard.FilterShard(params, mesh, byAxes)
	ps := tx.Init(pp)
	pg := shard.FilterShard(grads, mesh, byRank)
	for range 2 {
		hp, hs = optim.Step(tx, hp, grads, hs)
		pp, ps = optim.Step(tx, pp, pg, ps)
	}
	assert.Equal(t, "f32[8@dp,4]", pp.W.String())
	closeTo(t, hp.W.Float64s(), shard.Gather(pp.W).Float64s(), 1e-5, 1e-6, "W")
	closeTo(t, hp.B.Float64s(), shard.Gather(pp.B).Float64s(), 1e-5, 1e-6, "B")
	mu := ps.(optim.PartitionState).Inner["muon"].(optim.MuonState).Mu.(wb).W
	s, ok := shard.ShardingOf(mu)
	require.True(t, ok)
	assert.Equal(t, shard.P("dp", nil), s.Spec())
	require.NoError(t, pytree.Diff(hs, gatherTree(ps), 1e-5, 1e-6))

	type in struct {
		P, G  wb
		State optim.State
	}
	step := shard.Map(mesh, byRank, byRank, func(c *shard.Ctx, x in) in {
		p, s := optim.Step(tx, x.P, x.G, x.State)
		return in{P: p, G: x.G, State: s}
	})
	msg := func() (msg string) {
		defer func() { msg = fmt.Sprint(recover()) }()
		step(in{P: params, G: grads, State: tx.Init(params)})
		return ""
	}()
	assert.Contains(t, msg, "optim.Muon: f32[2,4]{dp} varies over mesh axes [dp] inside shard.Map: Newton–Schulz needs the whole matrix")
}

func TestMuonPanics(t *testing.T) {
	lr := optim.Constant(0.1)
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"beta", func() { optim.Muon(lr, optim.MuonOptions{Beta: 1}) }, "optim.Muon: Beta 1 outside [0, 1)"},
		{"coeffs and steps", func() { optim.Muon(lr, optim.MuonOptions{Coeffs: optim.DionCoeffs, NSSteps: 3}) },
			"optim.Muon: 5 Coeffs (one per iteration) and NSSteps 3"},
		{"preconditioning", func() { optim.ScaleByMuon(optim.MuonOptions{Preconditioning: 9}) }, "optim.ScaleByMuon: unknown Preconditioning(9)"},
		{"vector", func() {
			tx := optim.ScaleByMuon()
			p := newModel()
			tx.Update(gradsAt(0), tx.Init(p), p)
		}, "optim.ScaleByMuon: parameter B f32[4] is not one Muon updates (its Dims leave it out): use Muon, which gives it to Adam, or Partition"},
		{"dims", func() {
			optim.OrthogonalizeNewtonSchulz(tensor.Zeros(tensor.Float32, 2, 3), &optim.MuonDims{Reduction: []int{0}, Output: []int{-2}}, optim.MuonCoeffs, 5, optim.Frobenius, 0)
		}, "optim.OrthogonalizeNewtonSchulz: f32[2,3]: MuonDims {[0] [-2]}: dimension -2 is out of range or given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.PanicsWithValue(t, tc.want, tc.f) })
	}
}
