package optim_test

import (
	"math"
	"testing"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
)

// sgdRef is SGD with heavy-ball or Nesterov momentum in the form PyTorch
// and optax use: buf = μ·buf + g; step = buf, or g + μ·buf with Nesterov.
func sgdRef(lr optim.Schedule, mu float64, nesterov bool) leafRef {
	buf := map[string][]float64{}
	return func(t int, name string, _ []int, g, _ []float64) []float64 {
		if buf[name] == nil {
			buf[name] = make([]float64, len(g))
		}
		u := make([]float64, len(g))
		for i := range g {
			buf[name][i] = mu*buf[name][i] + g[i]
			d := buf[name][i]
			if nesterov {
				d = g[i] + mu*buf[name][i]
			}
			u[i] = -lr(t) * d
		}
		return u
	}
}

// rmspropRef is optax.rmsprop: second moment (and first, centered) with
// optional bias correction, eps inside or outside the root, learning rate,
// then a momentum trace on the scaled update.
func rmspropRef(lr optim.Schedule, decay, eps, init float64, outside, centered, biasCorr bool, mom float64, nesterov bool) leafRef {
	nu, mu, tr := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	return func(t int, name string, _ []int, g, _ []float64) []float64 {
		if nu[name] == nil {
			nu[name], mu[name], tr[name] = make([]float64, len(g)), make([]float64, len(g)), make([]float64, len(g))
			for i := range nu[name] {
				nu[name][i] = init
			}
		}
		bc := 1.0
		if biasCorr {
			bc = 1 - math.Pow(decay, float64(t+1))
		}
		u := make([]float64, len(g))
		for i := range g {
			nu[name][i] = decay*nu[name][i] + (1-decay)*g[i]*g[i]
			mu[name][i] = decay*mu[name][i] + (1-decay)*g[i]
			v := nu[name][i] / bc
			if centered {
				m := mu[name][i] / bc
				v -= m * m
			}
			var s float64
			if outside {
				s = g[i] / (math.Sqrt(v) + eps)
			} else {
				s = g[i] / math.Sqrt(v+eps)
			}
			s *= -lr(t)
			if mom != 0 {
				tr[name][i] = s + mom*tr[name][i]
				s = tr[name][i]
				if nesterov {
					s = -lr(t)*g[i]/denom(v, eps, outside) + mom*tr[name][i]
				}
			}
			u[i] = s
		}
		return u
	}
}

func denom(v, eps float64, outside bool) float64 {
	if outside {
		return math.Sqrt(v) + eps
	}
	return math.Sqrt(v + eps)
}

// lionRef is Lion as in Chen et al. 2023 (Algorithm 2) and optax.
func lionRef(lr optim.Schedule, b1, b2, wd float64, decays func(string) bool) leafRef {
	m := map[string][]float64{}
	return func(t int, name string, _ []int, g, p []float64) []float64 {
		if m[name] == nil {
			m[name] = make([]float64, len(g))
		}
		u := make([]float64, len(g))
		for i := range g {
			c := b1*m[name][i] + (1-b1)*g[i]
			d := math.Copysign(1, c)
			if c == 0 {
				d = 0
			}
			if wd != 0 && decays(name) {
				d += wd * p[i]
			}
			u[i] = -lr(t) * d
			m[name][i] = b2*m[name][i] + (1-b2)*g[i]
		}
		return u
	}
}

func TestSGDRMSPropLionAgainstReference(t *testing.T) {
	lr := optim.Constant(0.05)
	sched := optim.Exponential(0.2, 2, 0.5)
	for _, tc := range []struct {
		name string
		tx   optim.Transform
		ref  leafRef
	}{
		{"SGD", optim.SGD(lr), sgdRef(lr, 0, false)},
		{"SGD schedule", optim.SGD(sched), sgdRef(sched, 0, false)},
		{"SGD momentum", optim.SGD(sched, optim.SGDOptions{Momentum: 0.9}), sgdRef(sched, 0.9, false)},
		{"SGD Nesterov", optim.SGD(sched, optim.SGDOptions{Momentum: 0.8, Nesterov: true}), sgdRef(sched, 0.8, true)},
		{"Trace then lr", optim.Chain(optim.Trace(0.8, true), optim.ScaleByLearningRate(sched)), sgdRef(sched, 0.8, true)},

		{"RMSProp", optim.RMSProp(lr), rmspropRef(lr, 0.9, 1e-8, 0, false, false, false, 0, false)},
		{"RMSProp options", optim.RMSProp(sched, optim.RMSPropOptions{Decay: 0.7, Eps: 1e-2, InitialScale: 1, EpsOutsideSqrt: true}),
			rmspropRef(sched, 0.7, 1e-2, 1, true, false, false, 0, false)},
		{"RMSProp centered", optim.RMSProp(sched, optim.RMSPropOptions{Centered: true, Eps: 1e-3}),
			rmspropRef(sched, 0.9, 1e-3, 0, false, true, false, 0, false)},
		{"RMSProp centered bias-corrected", optim.RMSProp(lr, optim.RMSPropOptions{Centered: true, BiasCorrection: true, Eps: 1e-2}),
			rmspropRef(lr, 0.9, 1e-2, 0, false, true, true, 0, false)},
		{"RMSProp momentum", optim.RMSProp(sched, optim.RMSPropOptions{Momentum: 0.9}),
			rmspropRef(sched, 0.9, 1e-8, 0, false, false, false, 0.9, false)},
		{"RMSProp centered Nesterov", optim.RMSProp(sched, optim.RMSPropOptions{Centered: true, Momentum: 0.5, Nesterov: true, Eps: 1e-3}),
			rmspropRef(sched, 0.9, 1e-3, 0, false, true, false, 0.5, true)},

		{"Lion", optim.Lion(lr), lionRef(lr, 0.9, 0.99, 1e-3, all)},
		{"Lion options", optim.Lion(sched, optim.LionOptions{B1: 0.5, B2: 0.9, WeightDecay: 0.2, Mask: pytree.PathGlob("W")}),
			lionRef(sched, 0.5, 0.9, 0.2, only("W"))},
		{"Lion no decay", optim.Lion(lr, optim.LionOptions{WeightDecay: optim.Zero}), lionRef(lr, 0.9, 0.99, 0, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) { compareRef(t, tc.tx, 6, tc.ref) })
	}
}
