package optim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// adamRef is Adam/AdamW as written in the Adam paper and optax's docs, in
// float64: m, v moving averages, bias correction by 1-b^t with t = step+1,
// Nesterov as in optax's scale_by_adam (Dozat 2016), decoupled weight decay
// added before the learning rate.
func adamRef(lr optim.Schedule, b1, b2, eps, epsRoot float64, nesterov bool, wd float64, decays func(string) bool) leafRef {
	m, v := map[string][]float64{}, map[string][]float64{}
	return func(t int, name string, _ []int, g, p []float64) []float64 {
		if m[name] == nil {
			m[name], v[name] = make([]float64, len(g)), make([]float64, len(g))
		}
		n := float64(t + 1)
		u := make([]float64, len(g))
		for i := range g {
			m[name][i] = b1*m[name][i] + (1-b1)*g[i]
			v[name][i] = b2*v[name][i] + (1-b2)*g[i]*g[i]
			mhat := m[name][i] / (1 - math.Pow(b1, n))
			if nesterov {
				mhat = b1*m[name][i]/(1-math.Pow(b1, n+1)) + (1-b1)*g[i]/(1-math.Pow(b1, n))
			}
			vhat := v[name][i] / (1 - math.Pow(b2, n))
			d := mhat / (math.Sqrt(vhat+epsRoot) + eps)
			if wd != 0 && decays(name) {
				d += wd * p[i]
			}
			u[i] = -lr(t) * d
		}
		return u
	}
}

func all(string) bool { return true }

func only(names ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
}

func TestAdamFamilyAgainstReference(t *testing.T) {
	lr := optim.Constant(0.01)
	sched := optim.Linear(0.1, 0.01, 4, 0)
	isMatrix := func(_ pytree.Path, x *tensor.Tensor) bool { return x.Rank() >= 2 }
	for _, tc := range []struct {
		name string
		tx   optim.Transform
		ref  leafRef
	}{
		{"Adam defaults", optim.Adam(lr),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, false, 0, nil)},
		{"Adam options and schedule", optim.Adam(sched, optim.AdamOptions{B1: 0.8, B2: 0.99, Eps: 1e-3, EpsRoot: 1e-4}),
			adamRef(sched, 0.8, 0.99, 1e-3, 1e-4, false, 0, nil)},
		{"Adam B1 Zero", optim.Adam(lr, optim.AdamOptions{B1: optim.Zero}),
			adamRef(lr, 0, 0.999, 1e-8, 0, false, 0, nil)},
		{"Adam Nesterov", optim.Adam(sched, optim.AdamOptions{Nesterov: true}),
			adamRef(sched, 0.9, 0.999, 1e-8, 0, true, 0, nil)},
		{"AdamW default decay", optim.AdamW(lr),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, false, 1e-4, all)},
		{"AdamW decay all", optim.AdamW(sched, optim.AdamWOptions{WeightDecay: 0.5}),
			adamRef(sched, 0.9, 0.999, 1e-8, 0, false, 0.5, all)},
		{"AdamW mask by path", optim.AdamW(sched, optim.AdamWOptions{WeightDecay: 0.5, Mask: pytree.PathGlob("W")}),
			adamRef(sched, 0.9, 0.999, 1e-8, 0, false, 0.5, only("W"))},
		{"AdamW mask by rank, Nesterov", optim.AdamW(lr, optim.AdamWOptions{WeightDecay: 0.3, Mask: isMatrix, Nesterov: true, B2: 0.95}),
			adamRef(lr, 0.9, 0.95, 1e-8, 0, true, 0.3, only("W"))},
		{"AdamW mask excludes everything", optim.AdamW(lr, optim.AdamWOptions{WeightDecay: 0.5, Mask: pytree.PathGlob("nothing")}),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, false, 0, nil)},
		{"AdamW WeightDecay Zero", optim.AdamW(lr, optim.AdamWOptions{WeightDecay: optim.Zero}),
			adamRef(lr, 0.9, 0.999, 1e-8, 0, false, 0, nil)},
		{"chain of building blocks",
			optim.Chain(optim.ScaleByAdam(), optim.AddDecayedWeights(0.5, pytree.PathGlob("B")), optim.ScaleByLearningRate(sched)),
			adamRef(sched, 0.9, 0.999, 1e-8, 0, false, 0.5, only("B"))},
	} {
		t.Run(tc.name, func(t *testing.T) { compareRef(t, tc.tx, 6, tc.ref) })
	}
}

func TestAdamFirstStepIsSignTimesLR(t *testing.T) {
	// At t=1 bias correction makes m̂ = g and v̂ = g², so u = -lr·g/(|g|+eps):
	// the classic sanity check of Adam.
	opt := optim.Adam(optim.Constant(0.5))
	p := tensor.FromFloat32([]float32{1, 2, 3}, 3)
	g := tensor.FromFloat32([]float32{-4, 0.25, 1e3}, 3)
	u, st := opt.Update(g, opt.Init(p), p)
	assert.InDeltaSlice(t, []float64{0.5, -0.5, -0.5}, u.(*tensor.Tensor).Float64s(), 1e-6)
	assert.Equal(t, int32(1), st.(optim.AdamState).Count.Int32s()[0])
}

func TestAdamStateIsCheckpointable(t *testing.T) {
	opt := optim.Adam(optim.Constant(1e-3))
	st := opt.Init(newModel()).(optim.AdamState)
	// Count is an int32 scalar tensor, so a checkpoint saves it; the moments
	// mirror the float leaves only.
	require.Equal(t, "i32[]", st.Count.String())
	assert.Equal(t,
		"AdamState{Count: i32[], Mu: model{W: f32[3,4], B: f32[4], Ids: nil}, Nu: model{W: f32[3,4], B: f32[4], Ids: nil}}",
		pytree.FormatWidth(st, 200))
	assert.Equal(t, 5, len(pytree.Leaves(st)))
}

// Step updates the parameters in runs of about half a million elements
// (one tensor.AdamSteps each): with parameters large and small, some in
// runs of their own, some sharing one, some without a gradient or (AdamW's
// mask) without decay, it gives the bits of Update then Apply, and StepWith
// reports every updated parameter's old leaves once.
func TestAdamStepInRuns(t *testing.T) {
	sizes := []int{200_000, 10, 200_000, 5, 1<<19 + 3, 7, 0, 130_000, 1}
	model := func(scale float64) map[string]*tensor.Tensor { return cosParams(sizes, scale) }
	for name, tx := range map[string]optim.Transform{
		"Adam":  optim.Adam(optim.Constant(0.01)),
		"AdamW": optim.AdamW(optim.Constant(0.01), optim.AdamWOptions{WeightDecay: 0.1, Mask: pytree.PathGlob("p[0-3]")}),
	} {
		t.Run(name, func(t *testing.T) {
			fused, plain := model(1), model(1)
			fs, ps := tx.Init(fused), tx.Init(plain)
			for step := range 2 {
				grads := model(float64(step + 2))
				grads["p3"] = nil // no gradient: kept
				old := fused
				reported := map[*tensor.Tensor]int{}
				fused, fs = optim.StepWith(tx, fused, grads, fs, func(d []*tensor.Tensor) {
					for _, x := range d {
						reported[x]++
					}
				})
				var u any
				u, ps = tx.Update(grads, ps, plain)
				plain = optim.Apply(plain, u)
				for k, x := range old {
					if k == "p3" {
						assert.Zero(t, reported[x], "step %d: %s has no gradient", step, k)
						continue
					}
					assert.Equal(t, 1, reported[x], "step %d: %s", step, k)
					assert.Equal(t, 1, reported[grads[k]], "step %d: gradient of %s", step, k)
				}
			}
			for k := range plain {
				require.Equal(t, plain[k].Float32s(), fused[k].Float32s(), k)
			}
		})
	}
}

// cosParams returns parameters p0, p1, ... of the given sizes, pi holding
// scale·cos((i+1)·j) at position j: values that differ per parameter and
// per position.
func cosParams(sizes []int, scale float64) map[string]*tensor.Tensor {
	m := map[string]*tensor.Tensor{}
	for i, n := range sizes {
		m[fmt.Sprintf("p%d", i)] = tensor.MulScalar(tensor.Cos(tensor.MulScalar(tensor.AsType(tensor.Arange(n), tensor.Float32), float32(i+1))), float32(scale))
	}
	return m
}
