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

type gradLayer struct{ W, B *tensor.Tensor }

type gradNet struct{ Layers []gradLayer }

// Gradients that do not match the parameters — a leaf of another shape or
// dtype, a tree of another structure — panic naming the optimizer, the
// parameter's path and both operands, through Step (the fused steps of
// Adam and SGD included) and through Update. They used to panic in the
// kernel (tensor.AdamSteps: parameter 2: ..., tensor.Add: ...) or in
// pytree.MapNOut, naming no optimizer and no path.
func TestHostileGradientsOfAnotherModel(t *testing.T) {
	f32s := func(s ...int) *tensor.Tensor { return tensor.Ones(tensor.Float32, s...) }
	params := gradNet{[]gradLayer{{f32s(2, 3), f32s(3)}, {f32s(4, 3), f32s(3)}}}
	transposed := gradNet{[]gradLayer{{f32s(2, 3), f32s(3)}, {f32s(3, 4), f32s(3)}}}
	float64s := gradNet{[]gradLayer{{f32s(2, 3), f32s(3)}, {tensor.Ones(tensor.Float64, 4, 3), f32s(3)}}}
	short := gradNet{[]gradLayer{{f32s(2, 3), f32s(3)}}}
	lr := optim.Constant(0.01)
	for _, c := range []struct {
		op        string
		tx        optim.Transform
		structure string // the first line of the structure panic, after op
		plain     bool   // plain SGD: Update has no state to compare with
		leafOp    string // the op naming a leaf's mismatch, if not op (a Partition's group)
	}{
		{"optim.Adam", optim.Adam(lr), "parameters and gradients differ in structure: gradNet.Layers: length 2 vs 1 (parameters vs gradients)", false, ""},
		{"optim.AdamW", optim.AdamW(lr), "parameters and gradients differ in structure: gradNet.Layers: length 2 vs 1 (parameters vs gradients)", false, ""},
		{"optim.NAdam", optim.NAdam(lr), "parameters and gradients differ in structure: gradNet.Layers: length 2 vs 1 (parameters vs gradients)", false, ""},
		{"optim.SGD", optim.SGD(lr), "parameters and gradients differ in structure: gradNet.Layers: length 2 vs 1 (parameters vs gradients)", true, ""},
		{"optim.SGD", optim.SGD(lr, optim.SGDOptions{Momentum: 0.9}), "parameters and gradients differ in structure: gradNet.Layers: length 2 vs 1 (parameters vs gradients)", false, ""},
		{"optim.Lion", optim.Lion(lr), "gradients and optimizer state's Mu differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state's Mu)", false, ""},
		{"optim.RMSProp", optim.RMSProp(lr), "gradients and optimizer state's Nu differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state's Nu)", false, ""},
		{"optim.Adagrad", optim.Adagrad(lr), "gradients and optimizer state differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state)", false, ""},
		{"optim.Adadelta", optim.Adadelta(lr), "gradients and optimizer state differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state)", false, ""},
		{"optim.AMSGrad", optim.AMSGrad(lr), "gradients and optimizer state differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state)", false, ""},
		{"optim.Adamax", optim.Adamax(lr), "gradients and optimizer state differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state)", false, ""},
		{"optim.RAdam", optim.RAdam(lr), "gradients and optimizer state differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state)", false, ""},
		{"optim.AdaBelief", optim.AdaBelief(lr), "gradients and optimizer state differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state)", false, ""},
		{"optim.Yogi", optim.Yogi(lr), "gradients and optimizer state differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state)", false, ""},
		{"optim.Novograd", optim.Novograd(lr), "gradients and optimizer state differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state)", false, ""},
		{"optim.Adafactor", optim.Adafactor(lr), "gradients and optimizer state's VRow differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state's VRow)", false, ""},
		{"optim.Lars", optim.Lars(lr), "gradients and parameters differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs parameters)", false, ""},
		{"optim.Lamb", optim.Lamb(lr), "gradients and optimizer state's Mu differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state's Mu)", false, ""},
		{"optim.MultiSteps", optim.MultiSteps(optim.Adam(lr), 2), "optimizer state's Acc and gradients differ in structure: gradNet.Layers: length 2 vs 1 (optimizer state's Acc vs gradients)", false, ""},
		{"optim.Muon", optim.Muon(lr), "gradients and parameters differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs parameters)", false, ""},
		{"optim.Partition", optim.Partition(map[string]optim.Transform{"a": optim.Adam(lr), "s": optim.SGD(lr)}, func(p pytree.Path, _ *tensor.Tensor) string {
			if strings.HasSuffix(p.String(), ".W") {
				return "a"
			}
			return "s"
		}), "gradients and parameters differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs parameters)", false, "optim.Adam"},
		{"optim.ScheduleFree", optim.ScheduleFree(optim.Adam(lr), lr), "gradients and parameters differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs parameters)", false, ""},
		{"optim.ScheduleFreeSGD", optim.ScheduleFreeSGD(0.1), "gradients and parameters differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs parameters)", false, ""},
		{"optim.ScheduleFreeAdamW", optim.ScheduleFreeAdamW(0.1), "gradients and parameters differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs parameters)", false, ""},
		{"optim.Trace", optim.Trace(0.9, false), "gradients and optimizer state's Trace differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs optimizer state's Trace)", false, ""},
	} {
		t.Run(c.op, func(t *testing.T) {
			state := c.tx.Init(params)
			for _, how := range []struct {
				name string
				run  func(g gradNet)
			}{
				{"Step", func(g gradNet) { optim.Step(c.tx, params, g, state) }},
				{"Update", func(g gradNet) { optim.Apply(params, first(c.tx.Update(g, state, params))) }},
			} {
				op, what := c.op, "gradient"
				if c.leafOp != "" {
					op = c.leafOp
				}
				if how.name == "Update" && c.plain {
					// Plain SGD's Update scales the gradients, which
					// it has nothing to compare with; Apply catches them.
					op, what = "optim.Apply", "update"
				}
				assert.Equal(t, op+": "+what+" of Layers[1].W is f32[3,4], parameter f32[4,3]", panicOf(func() { how.run(transposed) }), "%s: shape", how.name)
				assert.Equal(t, op+": "+what+" of Layers[1].W is f64[4,3], parameter f32[4,3]", panicOf(func() { how.run(float64s) }), "%s: dtype", how.name)
				if how.name == "Update" && c.structure[:len("parameters")] == "parameters" {
					// Update walks the gradients and the state.
					continue
				}
				msg, ok := panicOf(func() { how.run(short) }).(string)
				require.True(t, ok, "%s: structure", how.name)
				assert.Contains(t, msg, c.op+": "+c.structure+"\n", "%s: structure", how.name)
			}
		})
	}
}

// Apply names the parameter whose update has another shape, rather than
// broadcasting it: an update f32[3] for a parameter f32[4,3] used to add
// to every row.
func TestHostileApply(t *testing.T) {
	params := gradNet{[]gradLayer{{tensor.Ones(tensor.Float32, 4, 3), tensor.Ones(tensor.Float32, 3)}}}
	updates := gradNet{[]gradLayer{{tensor.Ones(tensor.Float32, 3), nil}}}
	assert.Equal(t, "optim.Apply: update of Layers[0].W is f32[3], parameter f32[4,3]", panicOf(func() { optim.Apply(params, updates) }))
	msg, _ := panicOf(func() { optim.Apply(params, gradNet{}) }).(string)
	assert.Contains(t, msg, "optim.Apply: parameters and updates differ in structure: gradNet.Layers: length 1 vs 0 (parameters vs updates)\n  parameters: ")
	assert.Equal(t, "optim.Apply: update is f32[2], parameter f32[3]", panicOf(func() { optim.Apply(tensor.Ones(tensor.Float32, 3), tensor.Ones(tensor.Float32, 2)) }))
}

// first returns its first argument.
func first(u any, _ optim.State) any { return u }

// Lookahead checks the fast gradients against the fast weights, naming
// itself: around plain SGD, which keeps no state to compare with, they
// used to reach Lookahead's own arithmetic (tensor.Add: f32[4,3] +
// f32[3,4]: ...).
func TestHostileLookaheadGradients(t *testing.T) {
	f32s := func(s ...int) *tensor.Tensor { return tensor.Ones(tensor.Float32, s...) }
	model := gradNet{[]gradLayer{{f32s(2, 3), f32s(3)}, {f32s(4, 3), f32s(3)}}}
	transposed := gradNet{[]gradLayer{{f32s(2, 3), f32s(3)}, {f32s(3, 4), f32s(3)}}}
	float64s := gradNet{[]gradLayer{{f32s(2, 3), f32s(3)}, {tensor.Ones(tensor.Float64, 4, 3), f32s(3)}}}
	short := gradNet{[]gradLayer{{f32s(2, 3), f32s(3)}}}
	for _, inner := range []optim.Transform{optim.SGD(optim.Constant(0.1)), optim.Adam(optim.Constant(0.1))} {
		tx := optim.Lookahead(inner, 1, 0.5)
		lp := optim.NewLookaheadParams(model)
		state := tx.Init(lp)
		step := func(g gradNet) func() {
			return func() { optim.Step(tx, lp, optim.LookaheadParams[gradNet]{Fast: g}, state) }
		}
		assert.Equal(t, "optim.Lookahead: gradient of Layers[1].W is f32[3,4], parameter f32[4,3]", panicOf(step(transposed)))
		assert.Equal(t, "optim.Lookahead: gradient of Layers[1].W is f64[4,3], parameter f32[4,3]", panicOf(step(float64s)))
		msg, ok := panicOf(step(short)).(string)
		require.True(t, ok)
		assert.Contains(t, msg, "optim.Lookahead: gradients and parameters differ in structure: gradNet.Layers: length 1 vs 2 (gradients vs parameters)\n")
		assert.Nil(t, panicOf(step(model)))
	}
}
