package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// The references below transcribe optax's update rules (optax/_src/
// transform.py and alias.py at 2edbcbe) into float64 loops over one leaf,
// for the optimizers torch.optim does not have in optax's form.

// moments keeps per-leaf float64 state for a reference, created on first
// use with the given initial value.
type moments map[string][]float64

func (m moments) get(name string, n int, init float64) []float64 {
	if m[name] == nil {
		m[name] = make([]float64, n)
		for i := range m[name] {
			m[name][i] = init
		}
	}
	return m[name]
}

func norm(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s)
}

func bc(b float64, t int) float64 { return 1 - math.Pow(b, float64(t)) }

// adagradRef is optax.adagrad: scale_by_rss then the learning rate.
func adagradRef(lr optim.Schedule, init, eps float64) leafRef {
	sum := moments{}
	return func(t int, name string, _ []int, g, _ []float64) []float64 {
		s := sum.get(name, len(g), init)
		u := make([]float64, len(g))
		for i := range g {
			s[i] += g[i] * g[i]
			if s[i] > 0 {
				u[i] = -lr(t) * g[i] / math.Sqrt(s[i]+eps)
			}
		}
		return u
	}
}

// amsgradRef is optax.amsgrad (scale_by_amsgrad): the maximum is taken of
// the bias-corrected second moment.
func amsgradRef(lr optim.Schedule, b1, b2, eps, epsRoot float64, biasMu, biasNu bool) leafRef {
	mm, vv, vmax := moments{}, moments{}, moments{}
	return func(t int, name string, _ []int, g, _ []float64) []float64 {
		m, v, mx := mm.get(name, len(g), 0), vv.get(name, len(g), 0), vmax.get(name, len(g), 0)
		u := make([]float64, len(g))
		for i := range g {
			m[i] = b1*m[i] + (1-b1)*g[i]
			v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
			mh, vh := m[i], v[i]
			if biasMu {
				mh /= bc(b1, t+1)
			}
			if biasNu {
				vh /= bc(b2, t+1)
			}
			mx[i] = math.Max(mx[i], vh)
			u[i] = -lr(t) * mh / (math.Sqrt(mx[i]+epsRoot) + eps)
		}
		return u
	}
}

// adamaxRef is optax.adamax/adamaxw.
func adamaxRef(lr optim.Schedule, b1, b2, eps, wd float64, decays func(string) bool) leafRef {
	mm, vv := moments{}, moments{}
	return func(t int, name string, _ []int, g, p []float64) []float64 {
		m, v := mm.get(name, len(g), 0), vv.get(name, len(g), 0)
		u := make([]float64, len(g))
		for i := range g {
			m[i] = b1*m[i] + (1-b1)*g[i]
			v[i] = math.Max(math.Abs(g[i])+eps, b2*v[i])
			d := m[i] / bc(b1, t+1) / v[i]
			if wd != 0 && decays(name) {
				d += wd * p[i]
			}
			u[i] = -lr(t) * d
		}
		return u
	}
}

// mhat is optax's bias-corrected first moment at update t (1, 2, ...),
// Nesterov's form when asked.
func mhat(m, g, b1 float64, t int, nesterov bool) float64 {
	if nesterov {
		return b1*m/bc(b1, t+1) + (1-b1)*g/bc(b1, t)
	}
	return m / bc(b1, t)
}

// radamRef is optax.radam.
func radamRef(lr optim.Schedule, b1, b2, eps, epsRoot, threshold float64, nesterov bool) leafRef {
	mm, vv := moments{}, moments{}
	return func(t int, name string, _ []int, g, _ []float64) []float64 {
		m, v := mm.get(name, len(g), 0), vv.get(name, len(g), 0)
		n := t + 1
		roInf := 2/(1-b2) - 1
		ro := roInf - 2*float64(n)*math.Pow(b2, float64(n))/bc(b2, n)
		u := make([]float64, len(g))
		for i := range g {
			m[i] = b1*m[i] + (1-b1)*g[i]
			v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
			mh := mhat(m[i], g[i], b1, n, nesterov)
			d := mh
			if ro >= threshold {
				r := math.Sqrt((ro - 4) * (ro - 2) * roInf / ((roInf - 4) * (roInf - 2) * ro))
				d = r * mh / (math.Sqrt(v[i]/bc(b2, n)+epsRoot) + eps)
			}
			u[i] = -lr(t) * d
		}
		return u
	}
}

// beliefRef is optax.adabelief.
func beliefRef(lr optim.Schedule, b1, b2, eps, epsRoot float64, nesterov bool, wd float64, decays func(string) bool) leafRef {
	mm, ss := moments{}, moments{}
	return func(t int, name string, _ []int, g, p []float64) []float64 {
		m, s := mm.get(name, len(g), 0), ss.get(name, len(g), 0)
		n := t + 1
		u := make([]float64, len(g))
		for i := range g {
			m[i] = b1*m[i] + (1-b1)*g[i]
			e := g[i] - m[i]
			s[i] = b2*s[i] + (1-b2)*e*e + epsRoot
			d := mhat(m[i], g[i], b1, n, nesterov) / (math.Sqrt(s[i]/bc(b2, n)) + eps)
			if wd != 0 && decays(name) {
				d += wd * p[i]
			}
			u[i] = -lr(t) * d
		}
		return u
	}
}

// yogiRef is optax.yogi (scale_by_yogi with its defaults).
func yogiRef(lr optim.Schedule, b1, b2, eps, epsRoot, init float64) leafRef {
	mm, vv := moments{}, moments{}
	return func(t int, name string, _ []int, g, _ []float64) []float64 {
		m, v := mm.get(name, len(g), init), vv.get(name, len(g), init)
		n := t + 1
		u := make([]float64, len(g))
		for i := range g {
			g2 := g[i] * g[i]
			m[i] = b1*m[i] + (1-b1)*g[i]
			sign := 0.0
			if d := v[i] - g2; d > 0 {
				sign = 1
			} else if d < 0 {
				sign = -1
			}
			v[i] -= (1 - b2) * sign * g2
			u[i] = -lr(t) * (m[i] / bc(b1, n)) / (math.Sqrt(v[i]/bc(b2, n)+epsRoot) + eps)
		}
		return u
	}
}

// novogradRef is optax.novograd (scale_by_novograd).
func novogradRef(lr optim.Schedule, b1, b2, eps, epsRoot, wd float64) leafRef {
	mm := moments{}
	nu := map[string]float64{}
	return func(t int, name string, _ []int, g, p []float64) []float64 {
		m := mm.get(name, len(g), 0)
		sq := norm(g) * norm(g)
		if t == 0 {
			nu[name] = sq
		} else {
			nu[name] = b2*nu[name] + (1-b2)*sq
		}
		u := make([]float64, len(g))
		for i := range g {
			d := g[i]/(math.Sqrt(nu[name]+epsRoot)+eps) + wd*p[i]
			if t == 0 {
				m[i] = d
			} else {
				m[i] = b1*m[i] + d
			}
			u[i] = -lr(t) * m[i]
		}
		return u
	}
}

// trustRatio is optax.scale_by_trust_ratio's factor.
func trustRatio(u, p []float64, coef, eps float64) float64 {
	pn, un := norm(p), norm(u)
	if pn == 0 || un == 0 {
		return 1
	}
	return coef * pn / (un + eps)
}

// lambRef is optax.lamb: scale_by_adam, add_decayed_weights,
// scale_by_trust_ratio, the learning rate.
func lambRef(lr optim.Schedule, b1, b2, eps, wd float64, decays func(string) bool) leafRef {
	mm, vv := moments{}, moments{}
	return func(t int, name string, _ []int, g, p []float64) []float64 {
		m, v := mm.get(name, len(g), 0), vv.get(name, len(g), 0)
		n := t + 1
		d := make([]float64, len(g))
		for i := range g {
			m[i] = b1*m[i] + (1-b1)*g[i]
			v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
			d[i] = (m[i] / bc(b1, n)) / (math.Sqrt(v[i]/bc(b2, n)) + eps)
			if wd != 0 && decays(name) {
				d[i] += wd * p[i]
			}
		}
		r := trustRatio(d, p, 1, 0)
		for i := range d {
			d[i] *= -lr(t) * r
		}
		return d
	}
}

// larsRef is optax.lars: add_decayed_weights, masked scale_by_trust_ratio,
// the learning rate, then trace.
func larsRef(lr optim.Schedule, wd, coef, eps, mom float64, nesterov bool, trusted func(string) bool) leafRef {
	tr := moments{}
	return func(t int, name string, _ []int, g, p []float64) []float64 {
		d := make([]float64, len(g))
		for i := range g {
			d[i] = g[i] + wd*p[i]
		}
		r := 1.0
		if trusted(name) {
			r = trustRatio(d, p, coef, eps)
		}
		buf := tr.get(name, len(g), 0)
		u := make([]float64, len(g))
		for i := range d {
			s := -lr(t) * r * d[i]
			buf[i] = s + mom*buf[i]
			u[i] = buf[i]
			if nesterov {
				u[i] = s + mom*buf[i]
			}
		}
		return u
	}
}

func TestAdamVariantsAgainstOptaxRules(t *testing.T) {
	lr := optim.Constant(0.01)
	sched := optim.Linear(0.1, 0.01, 4, 0)
	for _, tc := range []struct {
		name string
		tx   optim.Transform
		ref  leafRef
	}{
		{"Adagrad defaults", optim.Adagrad(sched), adagradRef(sched, 0.1, 1e-7)},
		{"Adagrad from zero", optim.Adagrad(lr, optim.AdagradOptions{InitialAccumulatorValue: optim.Zero, Eps: 1e-2}), adagradRef(lr, 0, 1e-2)},
		{"ScaleByRSS chain", optim.Chain(optim.ScaleByRSS(), optim.ScaleByLearningRate(sched)), adagradRef(sched, 0.1, 1e-7)},

		{"AMSGrad", optim.AMSGrad(sched), amsgradRef(sched, 0.9, 0.999, 1e-8, 0, true, true)},
		{"AMSGrad options", optim.AMSGrad(lr, optim.AMSGradOptions{B1: 0.5, B2: 0.9, Eps: 1e-3, EpsRoot: 1e-4}),
			amsgradRef(lr, 0.5, 0.9, 1e-3, 1e-4, true, true)},
		{"AMSGrad no bias correction", optim.AMSGrad(lr, optim.AMSGradOptions{B2: 0.9, NoBiasCorrectionMu: true, NoBiasCorrectionNu: true}),
			amsgradRef(lr, 0.9, 0.9, 1e-8, 0, false, false)},

		{"Adamax", optim.Adamax(sched), adamaxRef(sched, 0.9, 0.999, 1e-8, 0, nil)},
		{"AdamaxW", optim.AdamaxW(lr, optim.AdamaxOptions{WeightDecay: 0.5, Mask: pytree.PathGlob("W")}),
			adamaxRef(lr, 0.9, 0.999, 1e-8, 0.5, only("W"))},
		{"AdamaxW default decay", optim.AdamaxW(lr), adamaxRef(lr, 0.9, 0.999, 1e-8, 1e-4, all)},

		{"RAdam", optim.RAdam(lr), radamRef(lr, 0.9, 0.999, 1e-8, 0, 5, false)},
		{"RAdam rectified early, Nesterov", optim.RAdam(sched, optim.RAdamOptions{B2: 0.8, Threshold: 4.5, Eps: 1e-3, EpsRoot: 1e-4, Nesterov: true}),
			radamRef(sched, 0.9, 0.8, 1e-3, 1e-4, 4.5, true)},

		{"AdaBelief", optim.AdaBelief(lr), beliefRef(lr, 0.9, 0.999, 1e-16, 1e-16, false, 0, nil)},
		{"AdaBelief paper eps, decay, Nesterov", optim.AdaBelief(sched, optim.AdaBeliefOptions{Eps: 1e-8, EpsRoot: optim.Zero, WeightDecay: 0.3, WeightDecayMask: pytree.PathGlob("B"), Nesterov: true}),
			beliefRef(sched, 0.9, 0.999, 1e-8, 0, true, 0.3, only("B"))},

		{"Yogi", optim.Yogi(lr), yogiRef(lr, 0.9, 0.999, 1e-3, 0, 1e-6)},
		{"Yogi options", optim.Yogi(sched, optim.YogiOptions{B1: 0.8, B2: 0.9, Eps: 1e-4, EpsRoot: 1e-6, InitialAccumulatorValue: 0.5}),
			yogiRef(sched, 0.8, 0.9, 1e-4, 1e-6, 0.5)},

		{"Novograd", optim.Novograd(lr), novogradRef(lr, 0.9, 0.25, 1e-6, 0, 0)},
		{"Novograd options", optim.Novograd(sched, optim.NovogradOptions{B1: 0.5, B2: 0.6, Eps: 1e-3, EpsRoot: 1e-2, WeightDecay: 0.1}),
			novogradRef(sched, 0.5, 0.6, 1e-3, 1e-2, 0.1)},

		{"Lamb", optim.Lamb(lr), lambRef(lr, 0.9, 0.999, 1e-6, 0, nil)},
		{"Lamb decay masked", optim.Lamb(sched, optim.LambOptions{B2: 0.99, Eps: 1e-4, WeightDecay: 0.1, Mask: pytree.PathGlob("W")}),
			lambRef(sched, 0.9, 0.99, 1e-4, 0.1, only("W"))},
		{"Lamb is a chain", optim.Chain(optim.ScaleByAdam(optim.AdamOptions{Eps: 1e-6}), optim.ScaleByTrustRatio(), optim.ScaleByLearningRate(lr)),
			lambRef(lr, 0.9, 0.999, 1e-6, 0, nil)},

		{"Lars", optim.Lars(lr), larsRef(lr, 0, 0.001, 0, 0.9, false, all)},
		{"Lars options", optim.Lars(sched, optim.LarsOptions{WeightDecay: 0.1, TrustCoefficient: 0.5, Eps: 1e-3,
			TrustRatioMask: pytree.PathGlob("W"), Momentum: 0.5, Nesterov: true}),
			larsRef(sched, 0.1, 0.5, 1e-3, 0.5, true, only("W"))},
		{"Lars no momentum", optim.Lars(lr, optim.LarsOptions{Momentum: optim.Zero, TrustCoefficient: 1}), larsRef(lr, 0, 1, 0, 0, false, all)},
	} {
		t.Run(tc.name, func(t *testing.T) { compareRef(t, tc.tx, 8, tc.ref) })
	}
}

// Optimizers that are others under some options.
func TestVariantIdentities(t *testing.T) {
	lr := optim.Constant(0.01)
	params := newModel()
	run := func(tx optim.Transform) any {
		state := tx.Init(params)
		p := params
		for step := range 6 {
			p, state = optim.Step(tx, p, gradsAt(step), state)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		a, b optim.Transform
	}{
		{"NAdam is Adam with Nesterov", optim.NAdam(lr, optim.AdamOptions{B2: 0.99}), optim.Adam(lr, optim.AdamOptions{B2: 0.99, Nesterov: true})},
		{"NAdamW is AdamW with Nesterov", optim.NAdamW(lr, optim.AdamWOptions{WeightDecay: 0.1}),
			optim.AdamW(lr, optim.AdamWOptions{WeightDecay: 0.1, Nesterov: true})},
		{"AdaBelief with eps in the chain", optim.AdaBelief(lr, optim.AdaBeliefOptions{WeightDecay: 0.2}),
			optim.Chain(optim.AdaBelief(optim.Constant(1)), optim.Scale(-1), optim.AddDecayedWeights(0.2, nil), optim.ScaleByLearningRate(lr))},
		{"AMSGrad is a chain", optim.AMSGrad(lr, optim.AMSGradOptions{B2: 0.9}),
			optim.Chain(optim.ScaleByAMSGrad(optim.AMSGradOptions{B2: 0.9}), optim.ScaleByLearningRate(lr))},
		{"Adamax is a chain", optim.Adamax(lr), optim.Chain(optim.ScaleByAdamax(), optim.ScaleByLearningRate(lr))},
		{"RAdam is a chain", optim.RAdam(lr, optim.RAdamOptions{B2: 0.8, Threshold: 4}),
			optim.Chain(optim.ScaleByRAdam(optim.RAdamOptions{B2: 0.8, Threshold: 4}), optim.ScaleByLearningRate(lr))},
		{"AdaBelief is a chain", optim.AdaBelief(lr, optim.AdaBeliefOptions{Nesterov: true}),
			optim.Chain(optim.ScaleByBelief(optim.AdaBeliefOptions{Nesterov: true}), optim.ScaleByLearningRate(lr))},
		{"Yogi is a chain", optim.Yogi(lr), optim.Chain(optim.ScaleByYogi(), optim.ScaleByLearningRate(lr))},
		{"Adadelta is a chain", optim.Adadelta(lr, optim.AdadeltaOptions{WeightDecay: 0.1}),
			optim.Chain(optim.AddDecayedWeights(0.1, nil), optim.ScaleByAdadelta(), optim.ScaleByLearningRate(lr))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, pytree.Diff(run(tc.a), run(tc.b), 1e-5, 1e-7))
		})
	}
}

// Lamb and Lars scale each parameter's update to a fixed ratio of the
// parameter's norm: the first Lamb step of a parameter has norm lr·‖p‖.
func TestTrustRatioNorm(t *testing.T) {
	params := newModel()
	u, _ := optim.Lamb(optim.Constant(0.1)).Update(gradsAt(0), optim.Lamb(optim.Constant(0.1)).Init(params), params)
	for _, leaf := range []struct{ u, p *tensor.Tensor }{{u.(model).W, params.W}, {u.(model).B, params.B}} {
		assert.InDelta(t, 0.1*norm(leaf.p.Float64s()), norm(leaf.u.Float64s()), 1e-6)
	}
	// A zero parameter has ratio 1: the update is the plain direction.
	zero := model{W: tensor.Zeros(tensor.Float32, 3, 4), B: tensor.Zeros(tensor.Float32, 4)}
	g := gradsAt(0)
	u, _ = optim.ScaleByTrustRatio().Update(g, optim.EmptyState{}, zero)
	assert.Equal(t, g.W.Float32s(), u.(model).W.Float32s())
}
