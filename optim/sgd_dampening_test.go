package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// TestSGDDampening: the trace is g at the first update and
// (1-d)·g + μ·t after, hand-worked; Step, StepInto and Update agree; the
// dampened SGD is elementwise and takes no later gradients.
func TestSGDDampening(t *testing.T) {
	tx := optim.SGD(optim.Constant(0.5), optim.SGDOptions{Momentum: 0.9, Dampening: 0.25})
	p := tensor.FromFloat32([]float32{1, -2}, 2)
	st := tx.Init(p)
	gs := [][]float32{{1, 2}, {4, -8}, {0, 1}}
	trace := []float64{0, 0}
	want := []float64{1, -2}
	for n, g := range gs {
		for i := range trace {
			w := 0.75
			if n == 0 {
				w = 1
			}
			trace[i] = w*float64(g[i]) + 0.9*trace[i]
			want[i] -= 0.5 * trace[i]
		}
		pi, _ := optim.StepInto(tensor.Zeros(tensor.Float32, 2), tx, p, tensor.FromFloat32(g, 2), st)
		p, st = optim.Step(tx, p, tensor.FromFloat32(g, 2), st)
		assert.InDeltaSlice(t, want, p.Float64s(), 1e-6, "step %d", n)
		assert.Equal(t, p.Float32s(), pi.Float32s(), "StepInto is Step")
		assert.InDeltaSlice(t, trace, st.(optim.SGDState).Trace.(*tensor.Tensor).Float64s(), 1e-6)
	}
	assert.True(t, optim.Elementwise(tx))
	assert.False(t, optim.TakesGradientsLater(tx), "the fused steps have no dampening")
	assert.True(t, optim.TakesGradientsLater(optim.SGD(optim.Constant(0.5), optim.SGDOptions{Momentum: 0.9})))
}

func TestSGDDampeningPanics(t *testing.T) {
	lr := optim.Constant(0.1)
	for _, c := range []struct {
		name, want string
		o          optim.SGDOptions
	}{
		{"no momentum", "optim.SGD: Dampening 0.5 needs Momentum > 0", optim.SGDOptions{Dampening: 0.5}},
		{"nesterov", "optim.SGD: Nesterov needs Dampening 0 (PyTorch's rule), not 0.1", optim.SGDOptions{Momentum: 0.9, Nesterov: true, Dampening: 0.1}},
		{"above 1", "optim.SGD: Dampening 1.5 outside [0, 1]", optim.SGDOptions{Momentum: 0.9, Dampening: 1.5}},
		{"NaN", "optim.SGD: Dampening NaN outside [0, 1]", optim.SGDOptions{Momentum: 0.9, Dampening: math.NaN()}},
	} {
		t.Run(c.name, func(t *testing.T) { require.PanicsWithValue(t, c.want, func() { optim.SGD(lr, c.o) }) })
	}
	tx := optim.SGD(lr, optim.SGDOptions{Momentum: 0.9, Dampening: 0.5})
	st := tx.Init(tensor.Zeros(tensor.Float32, 2))
	require.Panics(t, func() { tx.Update(tensor.Zeros(tensor.Float32, 3), st, nil) }, "gradient of another shape than the trace")
}

// TestCyclic: hand-worked rates of each mode, and the panics.
func TestCyclic(t *testing.T) {
	rates := func(s optim.Schedule, n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = s(i)
		}
		return out
	}
	assert.InDeltaSlice(t, []float64{1, 2, 3, 2, 1, 2, 3, 2}, rates(optim.Cyclic(1, 3, 2), 8), 1e-12)
	assert.InDeltaSlice(t, []float64{1, 3, 2.5, 2, 1.5, 1, 3}, rates(optim.Cyclic(1, 3, 1, optim.CyclicOptions{StepsDown: 4}), 7), 1e-12)
	assert.InDeltaSlice(t, []float64{0, 4, 0, 2, 0, 1, 0}, rates(optim.Cyclic(0, 4, 1, optim.CyclicOptions{Mode: optim.CyclicTriangular2}), 7), 1e-12)
	assert.InDeltaSlice(t, []float64{0, 4 * 0.5, 0, 4 * 0.125}, rates(optim.Cyclic(0, 4, 1, optim.CyclicOptions{Mode: optim.CyclicExpRange, Gamma: 0.5}), 4), 1e-12)
	assert.Equal(t, "exp_range", optim.CyclicExpRange.String())
	assert.Equal(t, "CyclicMode(9)", optim.CyclicMode(9).String())
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"stepsUp", "optim.Cyclic: stepsUp 0 and StepsDown 0: want stepsUp > 0 and StepsDown >= 0", func() { optim.Cyclic(0, 1, 0) }},
		{"StepsDown", "optim.Cyclic: stepsUp 2 and StepsDown -1: want stepsUp > 0 and StepsDown >= 0",
			func() { optim.Cyclic(0, 1, 2, optim.CyclicOptions{StepsDown: -1}) }},
		{"Gamma", "optim.Cyclic: Gamma 1.5 outside (0, 1] (0 means 1)", func() { optim.Cyclic(0, 1, 2, optim.CyclicOptions{Gamma: 1.5}) }},
		{"mode", "optim.Cyclic: unknown CyclicMode(7)", func() { optim.Cyclic(0, 1, 2, optim.CyclicOptions{Mode: 7}) }},
	} {
		t.Run(c.name, func(t *testing.T) { require.PanicsWithValue(t, c.want, c.f) })
	}
}
