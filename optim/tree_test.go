package optim_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// allOptimizers returns one of every optimizer and wrapper, configured so
// that every kind of state exists.
func allOptimizers() map[string]optim.Transform {
	lr := optim.Constant(0.01)
	return map[string]optim.Transform{
		"SGD":          optim.SGD(lr, optim.SGDOptions{Momentum: 0.9, Nesterov: true}),
		"Adam":         optim.Adam(lr),
		"AdamW":        optim.AdamW(lr, optim.AdamWOptions{Mask: pytree.PathGlob("W")}),
		"Lion":         optim.Lion(lr),
		"RMSProp":      optim.RMSProp(lr, optim.RMSPropOptions{Centered: true, Momentum: 0.9}),
		"Adafactor":    optim.Adafactor(lr, optim.AdafactorOptions{MinDimSizeToFactor: 3, Momentum: 0.9, WeightDecayRate: 0.1}),
		"Adafactor/V":  optim.Adafactor(lr, optim.AdafactorOptions{Momentum: 0.9}),
		"Chain":        optim.Chain(optim.ClipByGlobalNorm(1), optim.Trace(0.9, false), optim.ScaleByLearningRate(lr)),
		"Masked":       optim.Masked(optim.Adam(lr), pytree.PathGlob("W")),
		"MultiSteps":   optim.MultiSteps(optim.Adam(lr), 2),
		"ScaleByAdam":  optim.ScaleByAdam(),
		"WeightDecay":  optim.Chain(optim.AddDecayedWeights(0.1, nil), optim.ScaleBySchedule(lr)),
		"Clip":         optim.Chain(optim.Clip(0.1), optim.ClipByBlockRMS(1), optim.Scale(-0.1)),
		"Stateless":    optim.Stateless(func(u, _ any) any { return u }),
		"IdentityOnly": optim.Identity(),
	}
}

// TestStateKeepsLogicalAxes checks that every state leaf that mirrors a
// parameter carries its logical axes, after Init and after updates (new
// state tensors are computed by ops, which do not propagate names), and
// that step counters are int32 scalars.
func TestStateKeepsLogicalAxes(t *testing.T) {
	for name, tx := range allOptimizers() {
		t.Run(name, func(t *testing.T) {
			params := newModel()
			state := tx.Init(params)
			for step := 0; step < 3; step++ {
				for path, x := range stateLeaves(state) {
					switch {
					case x.DType() == tensor.Int32:
						assert.Equal(t, 0, x.Rank(), "%s: counters are scalars", path)
					case strings.HasSuffix(path, ".W") && x.Rank() == 2:
						assert.Equal(t, []string{"in", "out"}, x.LogicalAxes(), "step %d %s", step, path)
					case strings.HasSuffix(path, ".W"): // Adafactor's factors of W
						assert.Contains(t, [][]string{{"in"}, {"out"}}, x.LogicalAxes(), "step %d %s", step, path)
					case strings.HasSuffix(path, ".B"):
						assert.Equal(t, []string{"out"}, x.LogicalAxes(), "step %d %s", step, path)
					default:
						t.Errorf("unexpected state leaf %s %v", path, x)
					}
					assert.NotContains(t, path, "Ids", "integer leaves get no state")
				}
				_, state = tx.Update(gradsAt(step), state, params)
			}
		})
	}
}

// TestNilAndFrozenLeaves checks that nil gradients (integer leaves, and a
// float parameter left out of the gradient) give nil updates, leave the
// parameter as it is and keep its state unchanged.
func TestNilAndFrozenLeaves(t *testing.T) {
	for name, tx := range allOptimizers() {
		t.Run(name, func(t *testing.T) {
			params := newModel()
			state := tx.Init(params)
			_, state = tx.Update(gradsAt(0), state, params)
			before := stateLeaves(state)

			g := gradsAt(1)
			g.B = nil // B is frozen this step
			u, after := tx.Update(g, state, params)
			um := u.(model)
			assert.Nil(t, um.B)
			assert.Nil(t, um.Ids)
			assert.NotNil(t, um.W)
			for path, x := range stateLeaves(after) {
				if strings.HasSuffix(path, ".B") && !(name == "MultiSteps" && strings.HasPrefix(path, "Acc")) {
					// (MultiSteps emits at this step and resets its accumulator.)
					assert.Same(t, before[path], x, "state of the frozen leaf %s is unchanged", path)
				}
			}
			p := optim.Apply(params, u)
			assert.Same(t, params.B, p.B)
			assert.Same(t, params.Ids, p.Ids)
		})
	}
}

// A model with nested structs, slices, a map and pointers, as real models
// have.
type layer struct {
	W, B *tensor.Tensor
	Act  string // static
}

type deep struct {
	Embed  *tensor.Tensor
	Layers []layer
	Heads  map[string]*tensor.Tensor
	Groups [][]*tensor.Tensor
	Norm   *layer
	Steps  *tensor.Tensor // i32, not trained
}

func newDeep(seed float64) deep {
	return deep{
		Embed:  f32(wave(6, seed), 3, 2),
		Layers: []layer{{W: f32(wave(4, seed+1), 2, 2), B: f32(wave(2, seed+2), 2), Act: "relu"}, {W: f32(wave(2, seed+3), 2, 1), B: f32(wave(1, seed+4), 1)}},
		Heads:  map[string]*tensor.Tensor{"a": f32(wave(3, seed+5), 3), "b": f32(wave(1, seed+6), 1)},
		Groups: [][]*tensor.Tensor{{f32(wave(2, seed+7), 2)}, {}, {f32(wave(1, seed+8), 1), nil}},
		Norm:   &layer{W: f32(wave(2, seed+9), 2), Act: "none"},
		Steps:  tensor.ScalarInt(3),
	}
}

func TestNestedStructModel(t *testing.T) {
	params := newDeep(0)
	lr := optim.Constant(0.05)
	opt := optim.Adam(lr)
	state := opt.Init(params)
	ref := adamRef(lr, 0.9, 0.999, 1e-8, 0, false, 0, nil)
	paths, leaves := pytree.LeavesWithPath(params)
	p64 := map[string][]float64{}
	for i, p := range paths {
		p64[p.String()] = leaves[i].Float64s()
	}
	for step := range 4 {
		grads := newDeep(10 + float64(step))
		grads.Steps = nil
		params, state = optim.Step(opt, params, grads, state)

		gp, gl := pytree.LeavesWithPath(grads)
		got := stateLeaves(params)
		for i, path := range gp {
			name := path.String()
			u := ref(step, name, gl[i].Shape(), gl[i].Float64s(), p64[name])
			for j := range u {
				p64[name][j] += u[j]
			}
			closeTo(t, p64[name], got[name].Float64s(), 2e-5, 1e-6, "step %d %s", step, name)
		}
	}
	assert.Equal(t, 3.0, params.Steps.Item())
	assert.Equal(t, "relu", params.Layers[0].Act)
	assert.Nil(t, params.Groups[2][1])
	assert.Len(t, params.Groups[1], 0)
	// One Mu and one Nu per float leaf, plus the count.
	assert.Len(t, pytree.Leaves(state), 1+2*10)
}

func TestStepWithPointerModel(t *testing.T) {
	m := &layer{W: f32([]float64{1, 2}, 2), B: f32([]float64{3}, 1)}
	opt := optim.SGD(optim.Constant(0.5))
	g := &layer{W: f32([]float64{2, 2}, 2), B: f32([]float64{-2}, 1)}
	m2, _ := optim.Step(opt, m, g, opt.Init(m))
	assert.Equal(t, []float64{0, 1}, m2.W.Float64s())
	assert.Equal(t, []float64{4}, m2.B.Float64s())
	assert.Equal(t, []float64{1, 2}, m.W.Float64s(), "the old model is unchanged")
	assert.NotSame(t, m, m2)
}

func TestConsistencyBetweenOptimizers(t *testing.T) {
	lr := optim.Constant(0.01)
	params := newModel()
	run := func(tx optim.Transform) any {
		state := tx.Init(params)
		p := params
		for step := range 5 {
			p, state = optim.Step(tx, p, gradsAt(step), state)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		a, b optim.Transform
	}{
		// optax documents that scale_by_rms with bias correction and eps
		// outside the root is Adam without a first moment.
		{"RMSProp bias-corrected is Adam with B1 0",
			optim.RMSProp(lr, optim.RMSPropOptions{Decay: 0.999, BiasCorrection: true, EpsOutsideSqrt: true}),
			optim.Adam(lr, optim.AdamOptions{B1: optim.Zero})},
		{"AdamW is a chain", optim.AdamW(lr, optim.AdamWOptions{WeightDecay: 0.1}),
			optim.Chain(optim.ScaleByAdam(), optim.AddDecayedWeights(0.1, nil), optim.ScaleByLearningRate(lr))},
		{"AdamW without decay is Adam", optim.AdamW(lr, optim.AdamWOptions{WeightDecay: optim.Zero}), optim.Adam(lr)},
		{"SGD momentum is Trace then lr", optim.SGD(lr, optim.SGDOptions{Momentum: 0.9}),
			optim.Chain(optim.Trace(0.9, false), optim.ScaleByLearningRate(lr))},
		{"MultiSteps of 1 is the inner optimizer", optim.MultiSteps(optim.Lion(lr), 1), optim.Lion(lr)},
		{"Masked by everything is the inner optimizer", optim.Masked(optim.Adam(lr), pytree.IsTensor), optim.Adam(lr)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, pytree.Diff(run(tc.a), run(tc.b), 1e-5, 1e-7))
		})
	}
}

func TestLionRolesOfB1AndB2(t *testing.T) {
	// With B1 = 1 and B2 = 0 the direction is the sign of the momentum,
	// which is the previous gradient: a check that B1 mixes and B2 decays.
	params := newModel()
	tx := optim.Lion(optim.Constant(0.01), optim.LionOptions{B1: 1, B2: optim.Zero, WeightDecay: optim.Zero})
	state := tx.Init(params)
	u, state := tx.Update(gradsAt(0), state, params)
	assert.Equal(t, make([]float64, 12), u.(model).W.Float64s(), "sign(0) = 0 at the first step")
	u, _ = tx.Update(gradsAt(1), state, params)
	for i, g := range gradsAt(0).W.Float64s() {
		want := -0.01
		if g < 0 {
			want = 0.01
		}
		assert.InDelta(t, want, u.(model).W.Float64s()[i], 1e-9)
	}
}
