package optim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// model is the tree most tests optimize: a matrix and a vector with logical
// axes, and an integer leaf that must get no state and no update.
type model struct {
	W   *tensor.Tensor // f32[3,4] ("in", "out")
	B   *tensor.Tensor // f32[4] ("out")
	Ids *tensor.Tensor // i32[2]
}

// wave returns n deterministic values, different for every seed.
func wave(n int, seed float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Sin(0.9*float64(i)+1.7*seed) * (0.5 + 0.25*float64(i%3))
	}
	return v
}

func f32(v []float64, shape ...int) *tensor.Tensor { return tensor.FromFloat64(v, shape...) }

func newModel() model {
	return model{
		W:   tensor.WithLogicalAxes(f32(wave(12, 0.3), 3, 4), "in", "out"),
		B:   tensor.WithLogicalAxes(f32(wave(4, 0.8), 4), "out"),
		Ids: tensor.FromInts([]int{7, 9}, 2),
	}
}

// gradsAt returns the gradient of step t: W and B only, Ids nil as
// autodiff.ValueAndGrad gives it.
func gradsAt(t int) model {
	return model{W: f32(wave(12, 2+float64(t)), 3, 4), B: f32(wave(4, 5+2*float64(t)), 4)}
}

// leafRef is a reference optimizer for one leaf, in float64: it gets the
// step t (0 for the first update), the leaf's name, its shape, the gradient
// and the parameter, and returns the update. It keeps its own state.
type leafRef func(t int, name string, shape []int, g, p []float64) []float64

// compareRef runs tx for steps updates on newModel with gradsAt, and checks
// every update and the parameters against ref, with params updated by the
// reference's own updates in float64.
func compareRef(t *testing.T, tx optim.Transform, steps int, ref leafRef) {
	t.Helper()
	params := newModel()
	state := tx.Init(params)
	ref64 := map[string][]float64{"W": params.W.Float64s(), "B": params.B.Float64s()}
	for step := range steps {
		g := gradsAt(step)
		u, st := tx.Update(g, state, params)
		state = st
		upd := u.(model)
		require.Nil(t, upd.Ids, "step %d: integer leaf got an update", step)
		for _, leaf := range []struct {
			name  string
			g, u  *tensor.Tensor
			shape []int
		}{{"W", g.W, upd.W, []int{3, 4}}, {"B", g.B, upd.B, []int{4}}} {
			want := ref(step, leaf.name, leaf.shape, leaf.g.Float64s(), ref64[leaf.name])
			require.NotNil(t, leaf.u, "step %d: %s has no update", step, leaf.name)
			require.Equal(t, leaf.shape, leaf.u.Shape())
			closeTo(t, want, leaf.u.Float64s(), 2e-5, 1e-7, "step %d update of %s", step, leaf.name)
			for i := range want {
				ref64[leaf.name][i] += want[i]
			}
		}
		params = optim.Apply(params, u)
		closeTo(t, ref64["W"], params.W.Float64s(), 2e-5, 1e-6, "step %d params W", step)
		closeTo(t, ref64["B"], params.B.Float64s(), 2e-5, 1e-6, "step %d params B", step)
		require.Equal(t, []int{7, 9}, params.Ids.Ints())
	}
}

// closeTo checks |got-want| <= atol + rtol·|want| elementwise.
func closeTo(t *testing.T, want, got []float64, rtol, atol float64, msg string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want), fmt.Sprintf(msg, args...))
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= atol+rtol*math.Abs(want[i])) {
			require.Failf(t, "values differ", "%s: element %d: got %.9g, want %.9g (diff %.3g)\n got  %v\n want %v",
				fmt.Sprintf(msg, args...), i, got[i], want[i], d, got, want)
		}
	}
}

// stateLeaves returns the paths and tensors of a state tree, for checks on
// logical axes.
func stateLeaves(s any) map[string]*tensor.Tensor {
	paths, leaves := pytree.LeavesWithPath(s)
	m := map[string]*tensor.Tensor{}
	for i, p := range paths {
		m[p.String()] = leaves[i]
	}
	return m
}
