package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// scheduleFreeRef is optax.contrib.schedule_free around a base rule given
// per element: base(t, i, g, y) returns the base update of element i at
// the base optimizer's step t. lr is read at step t+1 for the weights, as
// optax reads it at its step_count.
func scheduleFreeRef(lr optim.Schedule, b1, power float64, base func(name string, t, i int, g, y float64) float64) leafRef {
	zz := moments{}
	maxLR, wsum := map[string]float64{}, map[string]float64{}
	return func(t int, name string, _ []int, g, y []float64) []float64 {
		if zz[name] == nil {
			zz[name] = append([]float64(nil), y...)
		}
		z := zz[name]
		maxLR[name] = math.Max(maxLR[name], lr(t+1))
		w := math.Pow(maxLR[name], power)
		wsum[name] += w
		c := 0.0
		if wsum[name] != 0 {
			c = w / wsum[name]
		}
		u := make([]float64, len(g))
		for i := range g {
			z2 := z[i] + base(name, t, i, g[i], y[i])
			x := (y[i] - (1-b1)*z[i]) / b1
			x = (1-c)*x + c*z2
			u[i] = b1*x + (1-b1)*z2 - y[i]
			z[i] = z2
		}
		return u
	}
}

func TestScheduleFreeAgainstOptaxRules(t *testing.T) {
	warm := optim.WarmupConstant(0, 0.5, 3)
	sgd := func(lr optim.Schedule, wd float64) func(string, int, int, float64, float64) float64 {
		return func(_ string, t, _ int, g, y float64) float64 { return -lr(t) * (g + wd*y) }
	}
	adamw := func(lr optim.Schedule, b2, eps, wd float64) func(string, int, int, float64, float64) float64 {
		nu := moments{}
		return func(name string, t, i int, g, y float64) float64 {
			v := nu.get(name, 12, 0)
			v[i] = b2*v[i] + (1-b2)*g*g
			return -lr(t) * (g/(math.Sqrt(v[i]/bc(b2, t+1))+eps) + wd*y)
		}
	}
	for _, tc := range []struct {
		name string
		tx   optim.Transform
		ref  leafRef
	}{
		{"SGD", optim.ScheduleFreeSGD(0.1), scheduleFreeRef(optim.Constant(0.1), 0.9, 2, sgd(optim.Constant(0.1), 0))},
		{"SGD warmup, decay", optim.ScheduleFreeSGD(0.5, optim.ScheduleFreeSGDOptions{WarmupSteps: 3, B1: 0.8, WeightDecay: 0.1, WeightLRPower: 1}),
			scheduleFreeRef(warm, 0.8, 1, sgd(warm, 0.1))},
		{"AdamW", optim.ScheduleFreeAdamW(0.0025), scheduleFreeRef(optim.Constant(0.0025), 0.9, 2, adamw(optim.Constant(0.0025), 0.999, 1e-8, 0))},
		{"AdamW options", optim.ScheduleFreeAdamW(0.5, optim.ScheduleFreeAdamWOptions{WarmupSteps: 3, B1: 0.5, B2: 0.9, Eps: 1e-3, WeightDecay: 0.2}),
			scheduleFreeRef(warm, 0.5, 2, adamw(warm, 0.9, 1e-3, 0.2))},
	} {
		t.Run(tc.name, func(t *testing.T) { compareRef(t, tc.tx, 6, tc.ref) })
	}
}

// The evaluation parameters are the average x; on a quadratic, training at
// y converges and x is the better point.
func TestScheduleFreeEvalParams(t *testing.T) {
	params := newModel()
	opt := optim.ScheduleFreeSGD(0.1, optim.ScheduleFreeSGDOptions{B1: 0.5})
	st := opt.Init(params)
	// At Init, x = y.
	require.NoError(t, pytree.Diff(params, optim.ScheduleFreeEvalParams(st, params), 1e-6, 1e-7))
	target := gradsAt(9)
	loss := func(m model) float64 {
		s := 0.0
		for i, v := range m.W.Float64s() {
			d := v - target.W.Float64s()[i]
			s += d * d
		}
		return s
	}
	for range 200 {
		g := model{W: tensor.Sub(params.W, target.W), B: tensor.Sub(params.B, target.B)}
		params, st = optim.Step(opt, params, g, st)
	}
	x := optim.ScheduleFreeEvalParams(st, params)
	assert.Less(t, loss(x), 1e-3)
	assert.Equal(t, []int{7, 9}, x.Ids.Ints(), "non-float leaves are the params'")

	// In a chain, the state is found inside the ChainState; it survives a
	// checkpoint.
	ch := optim.Chain(optim.ClipByGlobalNorm(10), opt)
	cst := ch.Init(params)
	_ = optim.ScheduleFreeEvalParams(cst, params)
	dir := t.TempDir()
	require.NoError(t, checkpoint.Save(dir, 1, st))
	back, err := checkpoint.Restore(dir, 1, opt.Init(params), checkpoint.OnHost())
	require.NoError(t, err)
	require.NoError(t, pytree.Diff(st, back, 0, 0))
	require.PanicsWithValue(t, "optim.ScheduleFreeEvalParams: state is optim.AdamState, which holds no ScheduleFreeState", func() {
		optim.ScheduleFreeEvalParams(optim.Adam(optim.Constant(1)).Init(params), params)
	})
}

func TestScaleByRMS(t *testing.T) {
	lr := optim.Constant(0.01)
	// RMSProp without momentum is ScaleByRMS then the learning rate.
	for _, o := range []optim.RMSPropOptions{{}, {Decay: 0.8, Eps: 1e-3, EpsOutsideSqrt: true, BiasCorrection: true, InitialScale: 0.5}} {
		compareRef(t, optim.Chain(optim.ScaleByRMS(o), optim.ScaleByLearningRate(lr)), 5,
			rmspropRef(lr, orDef(o.Decay, 0.9), orDef(o.Eps, 1e-8), o.InitialScale, o.EpsOutsideSqrt, false, o.BiasCorrection, 0, false))
	}
	require.PanicsWithValue(t, "optim.ScaleByRMS: Centered, Momentum and Nesterov are options of RMSProp", func() {
		optim.ScaleByRMS(optim.RMSPropOptions{Centered: true})
	})
}

func orDef(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}
