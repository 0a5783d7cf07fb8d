package optim_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// torchRef is testdata/torch_optim.json, written by testdata/torch_optim.py
// with PyTorch: the starting parameters, the gradient of every step, and
// for each case the parameters after every step.
type torchRef struct {
	Torch  string                            `json:"torch"`
	Steps  int                               `json:"steps"`
	Params map[string][]float64              `json:"params"`
	Grads  []map[string][]float64            `json:"grads"`
	Cases  map[string][]map[string][]float64 `json:"cases"`
	// Schedules holds the learning rate of each step of a
	// torch.optim.lr_scheduler case (before that step's update).
	Schedules map[string][]float64 `json:"schedules"`
	// PlateauLosses are the losses fed to ReduceLROnPlateau, Plateaus the
	// rate after each scheduler.step(loss) of a case, from a rate of 1.
	PlateauLosses []float64            `json:"plateau_losses"`
	Plateaus      map[string][]float64 `json:"plateaus"`
}

// loadTorchRef reads the references a script in testdata wrote to
// testdata/name (torch_optim.json, torch_parity3.json).
func loadTorchRef(t *testing.T, name string) torchRef {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	var r torchRef
	require.NoError(t, json.Unmarshal(b, &r))
	require.GreaterOrEqual(t, r.Steps, 5)
	return r
}

func (r torchRef) model(m map[string][]float64) model {
	return model{
		W:   tensor.WithLogicalAxes(f32(m["W"], 3, 4), "in", "out"),
		B:   tensor.WithLogicalAxes(f32(m["B"], 4), "out"),
		Ids: tensor.FromInts([]int{7, 9}, 2),
	}
}

// TestTorchReference: the optimizers that torch.optim also has, with
// options that mean the same thing on both sides, follow PyTorch's
// trajectory on identical weights and gradients step by step.
func TestTorchReference(t *testing.T) {
	ref := loadTorchRef(t, "torch_optim.json")
	c := optim.Constant
	cases := map[string]optim.Transform{
		"SGD momentum":              optim.SGD(c(0.05), optim.SGDOptions{Momentum: 0.9}),
		"SGD Nesterov":              optim.SGD(c(0.05), optim.SGDOptions{Momentum: 0.8, Nesterov: true}),
		"Adam":                      optim.Adam(c(0.01)),
		"AdamW":                     optim.AdamW(c(0.01), optim.AdamWOptions{WeightDecay: 0.1}),
		"RMSProp centered momentum": optim.RMSProp(c(0.01), optim.RMSPropOptions{Decay: 0.9, Eps: 1e-3, EpsOutsideSqrt: true, Centered: true, Momentum: 0.5}),
		"Adagrad":                   optim.Adagrad(c(0.1), optim.AdagradOptions{Eps: optim.Zero}),
		// torch's lr_decay is the schedule lr/(1 + n·decay).
		"Adagrad lr decay": optim.Adagrad(func(n int) float64 { return 0.1 / (1 + float64(n)*0.5) },
			optim.AdagradOptions{Eps: optim.Zero, InitialAccumulatorValue: 0.3}),
		"Adadelta":              optim.Adadelta(c(1)),
		"Adadelta weight decay": optim.Adadelta(c(0.5), optim.AdadeltaOptions{Rho: 0.8, Eps: 1e-4, WeightDecay: 0.1}),
		"Adamax":                optim.Adamax(c(0.02)),
		"Adamax options":        optim.Adamax(c(0.02), optim.AdamaxOptions{B1: 0.8, B2: 0.9, Eps: 1e-3}),
		"RAdam":                 optim.RAdam(c(0.01), optim.RAdamOptions{B2: 0.9, Eps: optim.Zero}),
		"SGD":                   optim.SGD(c(0.05)),
		// PyTorch's weight_decay (other than AdamW's) is L2: wd·p added to
		// the gradient before anything else, AddDecayedWeights in front.
		"SGD momentum weight decay": optim.Chain(optim.AddDecayedWeights(0.01, nil),
			optim.SGD(c(0.05), optim.SGDOptions{Momentum: 0.9})),
		"SGD Nesterov weight decay": optim.Chain(optim.AddDecayedWeights(0.1, nil),
			optim.SGD(c(0.05), optim.SGDOptions{Momentum: 0.7, Nesterov: true})),
		"Adam options":         optim.Adam(c(0.01), optim.AdamOptions{B1: 0.8, B2: 0.95, Eps: 1e-3}),
		"Adam L2 weight decay": optim.Chain(optim.AddDecayedWeights(0.1, nil), optim.Adam(c(0.01))),
		"AdamW options":        optim.AdamW(c(0.02), optim.AdamWOptions{B1: 0.85, B2: 0.98, Eps: 1e-4, WeightDecay: 0.3}),
		"RMSProp":              optim.RMSProp(c(0.01), optim.RMSPropOptions{Decay: 0.99, Eps: 1e-8, EpsOutsideSqrt: true}),
		"RMSProp momentum":     optim.RMSProp(c(0.01), optim.RMSPropOptions{Decay: 0.9, Eps: 1e-6, EpsOutsideSqrt: true, Momentum: 0.7}),
		"RMSProp weight decay": optim.Chain(optim.AddDecayedWeights(0.05, nil),
			optim.RMSProp(c(0.01), optim.RMSPropOptions{Decay: 0.95, Eps: 1e-4, EpsOutsideSqrt: true})),
		"Adagrad weight decay": optim.Chain(optim.AddDecayedWeights(0.05, nil), optim.Adagrad(c(0.1), optim.AdagradOptions{Eps: optim.Zero})),
		"Adamax weight decay":  optim.Chain(optim.AddDecayedWeights(0.1, nil), optim.Adamax(c(0.02))),
		"SGD momentum StepLR": optim.SGD(optim.Exponential(0.05, 3, 0.5, optim.ExponentialOptions{Staircase: true}),
			optim.SGDOptions{Momentum: 0.9}),
		"Adam CosineAnnealingLR": optim.Adam(optim.CosineDecay(0.01, 8, 0)),
		"clip_grad_norm SGD momentum": optim.Chain(optim.ClipByGlobalNorm(0.5),
			optim.SGD(c(0.05), optim.SGDOptions{Momentum: 0.9})),
	}
	ref.checkTrajectories(t, cases, "torch_optim.py")
}

// checkTrajectories runs each of cases from the script's parameters over
// its gradients and checks every step's parameters against the script's
// trajectory of the same name; script names the script to rerun.
func (r torchRef) checkTrajectories(t *testing.T, cases map[string]optim.Transform, script string) {
	t.Helper()
	require.Len(t, r.Cases, len(cases), "every case of the script is checked")
	for name, tx := range cases {
		t.Run(name, func(t *testing.T) {
			want, ok := r.Cases[name]
			require.True(t, ok, "no torch reference for %q: rerun testdata/%s", name, script)
			params := r.model(r.Params)
			state := tx.Init(params)
			for step := range r.Steps {
				grads := r.model(r.Grads[step])
				grads.Ids = nil
				params, state = optim.Step(tx, params, grads, state)
				closeTo(t, want[step]["W"], params.W.Float64s(), 1e-5, 1e-6, "step %d W", step)
				closeTo(t, want[step]["B"], params.B.Float64s(), 1e-5, 1e-6, "step %d B", step)
			}
			require.Equal(t, []string{"in", "out"}, params.W.LogicalAxes())
		})
	}
}

// TestTorchSchedules: the schedules give the learning rates of
// torch.optim.lr_scheduler's, step by step (gonox's Schedule(n) is the
// rate of the n-th update; PyTorch's scheduler.step() comes after it).
// OneCycleLR maps onto the optax one-cycle schedules with one step less
// and the phase boundaries a step earlier, as their docs say.
func TestTorchSchedules(t *testing.T) {
	ref := loadTorchRef(t, "torch_optim.json")
	warm := func(n int, end float64) optim.SGDRCycle {
		return optim.SGDRCycle{Init: 0.1, Peak: 0.1, DecaySteps: n, End: end}
	}
	// OneCycleLR(total_steps=T, pct_start=p) peaks at step p·T-1 and ends
	// at step T-1 (three_phase: back at the start at 2·p·T-2).
	const total, pct = 20, 0.3
	torchPct := func(at float64) float64 { return (at + 0.5) / (total - 1) }
	cases := map[string]optim.Schedule{
		"StepLR":                             optim.Exponential(0.1, 3, 0.5, optim.ExponentialOptions{Staircase: true}),
		"ExponentialLR":                      optim.Exponential(0.1, 1, 0.9),
		"MultiStepLR":                        optim.PiecewiseConstant(0.1, map[int]float64{4: 0.1, 9: 0.1}),
		"ConstantLR":                         optim.PiecewiseConstant(0.05, map[int]float64{4: 2}),
		"LinearLR warmup":                    optim.Linear(0.02, 0.1, 5, 0),
		"LinearLR decay":                     optim.Linear(0.1, 0.01, 6, 0),
		"PolynomialLR":                       optim.Polynomial(0.1, 0, 2, 8, 0),
		"CosineAnnealingLR":                  optim.CosineDecay(0.1, 12, 0.01),
		"CosineAnnealingWarmRestarts":        optim.SGDR(warm(5, 0.001), warm(5, 0.001), warm(5, 0.001), warm(5, 0.001), warm(5, 0.001)),
		"CosineAnnealingWarmRestarts Tmult2": optim.SGDR(warm(3, 0.002), warm(6, 0.002), warm(12, 0.002)),
		"warmup cosine":                      optim.WarmupCosineDecay(0.001, 0.1, 5, 20, 0),
		"warmup constant":                    optim.WarmupConstant(0.01, 0.1, 4),
		"warmup exponential":                 optim.WarmupExponentialDecay(0.025, 0.1, 6, 1, 0.8),
		"OneCycleLR cos":                     optim.CosineOneCycle(total-1, 1, optim.OneCycleOptions{PctStart: torchPct(pct*total - 1)}),
		"OneCycleLR linear three_phase": optim.LinearOneCycle(total-1, 1,
			optim.OneCycleOptions{PctStart: torchPct(pct*total - 1), PctFinal: torchPct(2*pct*total - 2)}),
	}
	ref.checkSchedules(t, cases, 1e-9, "torch_optim.py")
}

// checkSchedules checks each schedule's rates against the script's
// sequence of the same name, to relative tolerance rtol.
func (r torchRef) checkSchedules(t *testing.T, cases map[string]optim.Schedule, rtol float64, script string) {
	t.Helper()
	require.Len(t, r.Schedules, len(cases), "every schedule of the script is checked")
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			want, ok := r.Schedules[name]
			require.True(t, ok, "no torch reference for %q: rerun testdata/%s", name, script)
			got := make([]float64, len(want))
			for n := range got {
				got[n] = s(n)
			}
			closeTo(t, want, got, rtol, 1e-12, "%s", name)
		})
	}
}

// TestTorchReduceOnPlateau: ReduceOnPlateau scales the updates as
// ReduceLROnPlateau scales the rate, with Patience one more than PyTorch's
// patience (as its doc says: optax reduces after Patience bad values,
// PyTorch after patience+1) and the scale applied to the update whose
// loss decided it (PyTorch's scheduler.step(loss) comes after the step).
func TestTorchReduceOnPlateau(t *testing.T) {
	ref := loadTorchRef(t, "torch_optim.json")
	cases := map[string]optim.ReduceOnPlateauOptions{
		"rel patience 1 cooldown 1": {Factor: 0.5, Patience: 2, Cooldown: 1, RTol: 0.01, MinScale: 0.1},
		"abs patience 2 cooldown 2": {Factor: 0.3, Patience: 3, Cooldown: 2, RTol: optim.Zero, ATol: 0.004},
		"rel patience 0":            {Factor: 0.5, Patience: 1, RTol: 1e-4, MinScale: 0.01},
	}
	require.Len(t, ref.Plateaus, len(cases), "every plateau case of the script is checked")
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			want, ok := ref.Plateaus[name]
			require.True(t, ok, "no torch reference for %q: rerun testdata/torch_optim.py", name)
			params := newModel()
			tx := optim.ReduceOnPlateau(o)
			st := tx.Init(params)
			got := make([]float64, len(want))
			for i, loss := range ref.PlateauLosses {
				var u any
				// The losses are float32 in gonox: a loss equal to the
				// best within float32 rounding must compare as in float64.
				u, st = optim.UpdateExtra(tx, gradsAt(0), st, params, optim.Extra{Value: tensor.Scalar(float32(loss))})
				got[i] = u.(model).W.Float64s()[0] / gradsAt(0).W.Float64s()[0]
			}
			closeTo(t, want, got, 1e-6, 0, "%s", name)
		})
	}
}
