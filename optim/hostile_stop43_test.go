package optim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// hostileTree is a model of three parameters for the hostile-input tests.
type hostileTree struct{ A, B, C *tensor.Tensor }

// Hostile inputs to StepIntoOverStateLater (stop 43): each mistake panics
// naming the op and the operands in type notation. A position with both a
// gradient now and a leaf in later used to be updated at once and get no
// PieceStep, so that the caller, handing each later gradient to the step
// at its index, fed one parameter's gradient to another's step.
func TestHostileStepIntoOverStateLater(t *testing.T) {
	ones := func(n int) *tensor.Tensor { return tensor.Ones(tensor.Float32, n) }
	params := hostileTree{ones(2), ones(3), ones(4)}
	later := hostileTree{B: ones(3), C: ones(4)}
	for _, c := range []struct {
		name string
		tx   optim.Transform
		op   string
	}{
		{"adam", optim.Adam(optim.Constant(0.1)), "optim.Adam"},
		{"sgd momentum", optim.SGD(optim.Constant(0.1), optim.SGDOptions{Momentum: 0.9}), "optim.SGD"},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := c.tx.Init(params)
			step := func(dst, p, g, l hostileTree, s optim.State) func() {
				return func() { optim.StepIntoOverStateLater(dst, c.tx, p, g, l, s) }
			}
			requirePanicMsg := func(want string, f func(), name string) {
				t.Helper()
				var got any
				func() {
					defer func() { got = recover() }()
					f()
				}()
				require.NotNil(t, got, "%s: no panic", name)
				assert.Equal(t, want, got, name)
			}
			requirePanicMsg("optim.StepIntoOverStateLater: parameter f32[3] has both a gradient f32[3] and a leaf in later; a gradient that comes later must be nil in grads",
				step(hostileTree{}, params, hostileTree{A: ones(2), B: ones(3)}, later, state), "a gradient now and later")
			requirePanicMsg(c.op+": state is <nil>, want "+map[string]string{"optim.Adam": "optim.AdamState", "optim.SGD": "optim.SGDState"}[c.op]+" (the state Init returned)",
				step(hostileTree{}, params, hostileTree{A: ones(2)}, later, nil), "no state")
			dstOp := map[string]string{"optim.Adam": "tensor.AdamStepIntoOverMomentsLater", "optim.SGD": "tensor.SGDStepIntoLater"}[c.op]
			requirePanicMsg(dstOp+": destination 0 f32[5] for parameter f32[3]: want an untraced float32 host tensor of its shape",
				step(hostileTree{B: ones(5)}, params, hostileTree{A: ones(2)}, later, state), "a destination of another shape")
			requirePanicMsg(dstOp+": operand p is nil",
				step(hostileTree{}, hostileTree{A: ones(2), B: ones(3)}, hostileTree{A: ones(2)}, later, state), "a later leaf without a parameter")

			// The right call: one PieceStep per later leaf, in order, each
			// of its own parameter's size.
			_, _, steps, ok := optim.StepIntoOverStateLater(hostileTree{}, c.tx, params, hostileTree{A: ones(2)}, later, state)
			require.True(t, ok)
			require.Len(t, steps, 2)
			steps[0](0, make([]float32, 3))
			steps[1](0, make([]float32, 4))
			assert.Panics(t, func() { steps[0](0, make([]float32, 4)) }, "B's step given C's gradient")
		})
	}
	// A transform that cannot take gradients later does nothing.
	_, s, steps, ok := optim.StepIntoOverStateLater(hostileTree{}, optim.Lion(optim.Constant(0.1)), params, hostileTree{A: ones(2)}, later, nil)
	assert.False(t, ok)
	assert.Nil(t, s)
	assert.Nil(t, steps)
}

// Optimizer state built by Init for another model whose leaves line up
// one for one: Adam and SGD name the parameter and the state (it was
// tensor.AdamSteps' "parameter 0: f32[2,3], f32[2,3], f32[2,2], f32[2,2]").
func TestHostileStateOfAnotherModel(t *testing.T) {
	small := hostileTree{tensor.Ones(tensor.Float32, 2, 2), tensor.Ones(tensor.Float32, 3), nil}
	big := hostileTree{tensor.Ones(tensor.Float32, 2, 3), tensor.Ones(tensor.Float32, 3), nil}
	for _, c := range []struct {
		tx optim.Transform
		op string
	}{
		{optim.Adam(optim.Constant(0.1)), "optim.Adam"},
		{optim.AdamW(optim.Constant(0.1)), "optim.AdamW"},
		{optim.SGD(optim.Constant(0.1), optim.SGDOptions{Momentum: 0.9}), "optim.SGD"},
	} {
		st := c.tx.Init(small)
		require.PanicsWithValue(t, c.op+": parameter f32[2,3] has optimizer state f32[2,2] (was Init given these params?)",
			func() { optim.Step(c.tx, big, big, st) }, c.op)
	}
}
