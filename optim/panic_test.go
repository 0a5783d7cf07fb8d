package optim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

func TestPanics(t *testing.T) {
	lr := optim.Constant(0.1)
	p := newModel()
	g := gradsAt(0)
	adam := optim.Adam(lr)
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"nil schedule", func() { optim.Adam(nil) }, "optim.Adam: nil learning rate schedule (use optim.Constant for a fixed rate)"},
		{"Adam B1", func() { optim.Adam(lr, optim.AdamOptions{B1: 1.5}) }, "optim.Adam: B1 1.5 outside [0, 1)"},
		{"Adam B2", func() { optim.Adam(lr, optim.AdamOptions{B2: 1}) }, "optim.Adam: B2 1 outside [0, 1)"},
		{"Adam Eps", func() { optim.Adam(lr, optim.AdamOptions{Eps: -1}) }, "optim.Adam: Eps -1 is negative"},
		{"two option structs", func() { optim.Adam(lr, optim.AdamOptions{}, optim.AdamOptions{}) }, "optim.Adam: 2 option structs, want at most 1"},
		{"AdamW decay", func() { optim.AdamW(lr, optim.AdamWOptions{WeightDecay: -1}) }, "optim.AdamW: WeightDecay -1 is negative"},
		{"ScaleByAdam B1", func() { optim.ScaleByAdam(optim.AdamOptions{B1: -0.1}) }, "optim.ScaleByAdam: B1 -0.1 outside [0, 1)"},
		{"SGD Nesterov", func() { optim.SGD(lr, optim.SGDOptions{Nesterov: true}) }, "optim.SGD: Nesterov needs Momentum > 0"},
		{"SGD momentum", func() { optim.SGD(lr, optim.SGDOptions{Momentum: 1}) }, "optim.SGD: Momentum 1 outside [0, 1)"},
		{"RMSProp decay", func() { optim.RMSProp(lr, optim.RMSPropOptions{Decay: 2}) }, "optim.RMSProp: Decay 2 outside [0, 1)"},
		{"RMSProp Nesterov", func() { optim.RMSProp(lr, optim.RMSPropOptions{Nesterov: true}) }, "optim.RMSProp: Nesterov needs Momentum > 0"},
		{"Lion B2", func() { optim.Lion(lr, optim.LionOptions{B2: 1}) }, "optim.Lion: B2 1 outside [0, 1)"},
		{"Lion B1", func() { optim.Lion(lr, optim.LionOptions{B1: 1.1}) }, "optim.Lion: B1 1.1 outside [0, 1]"},
		{"Adafactor momentum", func() { optim.Adafactor(nil, optim.AdafactorOptions{Momentum: 1}) }, "optim.Adafactor: Momentum 1 outside [0, 1)"},
		{"Adafactor clipping", func() { optim.Adafactor(nil, optim.AdafactorOptions{ClippingThreshold: -1}) }, "optim.Adafactor: ClippingThreshold -1 is negative"},
		{"Adafactor clipping Zero", func() { optim.Adafactor(nil, optim.AdafactorOptions{ClippingThreshold: optim.Zero}) },
			"optim.Adafactor: ClippingThreshold Zero would clip every update to 0; set NoClipping to turn clipping off"},
		{"Adafactor NoClipping and threshold", func() { optim.Adafactor(nil, optim.AdafactorOptions{ClippingThreshold: 0.5, NoClipping: true}) },
			"optim.Adafactor: NoClipping with ClippingThreshold 0.5: set one or the other"},
		{"Trace", func() { optim.Trace(1, false) }, "optim.Trace: decay 1 outside [0, 1)"},
		{"ClipByGlobalNorm", func() { optim.ClipByGlobalNorm(0) }, "optim.ClipByGlobalNorm: maxNorm 0, want > 0"},
		{"Clip", func() { optim.Clip(-1) }, "optim.Clip: maxDelta -1 is negative"},
		{"ClipByBlockRMS", func() { optim.ClipByBlockRMS(0) }, "optim.ClipByBlockRMS: threshold 0, want > 0"},
		{"AddDecayedWeights", func() { optim.AddDecayedWeights(-1, nil) }, "optim.AddDecayedWeights: weightDecay -1 is negative"},
		{"ScaleByLearningRate", func() { optim.ScaleByLearningRate(nil) }, "optim.ScaleByLearningRate: nil learning rate schedule (use optim.Constant for a fixed rate)"},
		{"Chain nil", func() { optim.Chain(adam, nil) }, "optim.Chain: transform 1 is nil"},
		{"Masked nil", func() { optim.Masked(adam, nil) }, "optim.Masked: nil inner transform or mask"},
		{"MultiSteps k", func() { optim.MultiSteps(adam, 0) }, "optim.MultiSteps: k 0, want >= 1"},
		{"Stateless nil", func() { optim.Stateless(nil) }, "optim.Stateless: nil func"},
		{"NewEMA", func() { optim.NewEMA(p, 1.5, false) }, "optim.NewEMA: decay 1.5 outside [0, 1]"},

		{"CosineDecay", func() { optim.CosineDecay(1, 0, 0) }, "optim.CosineDecay: decaySteps 0, want > 0"},
		{"WarmupCosineDecay", func() { optim.WarmupCosineDecay(0, 1, 10, 10, 0) },
			"optim.WarmupCosineDecay: warmupSteps 10, decaySteps 10: want 0 <= warmupSteps < decaySteps (decaySteps includes the warmup)"},
		{"PiecewiseConstant", func() { optim.PiecewiseConstant(1, map[int]float64{10: -0.5}) }, "optim.PiecewiseConstant: scale -0.5 at step 10 is negative"},
		{"Join count", func() { optim.Join([]optim.Schedule{lr}, []int{3}) }, "optim.Join: 1 schedules and 1 boundaries, want one boundary fewer than schedules"},
		{"Join nil", func() { optim.Join([]optim.Schedule{lr, nil}, []int{3}) }, "optim.Join: schedule 1 is nil"},
		{"Join order", func() { optim.Join([]optim.Schedule{lr, lr, lr}, []int{3, 2}) }, "optim.Join: boundaries [3 2] do not increase"},

		{"state of another optimizer", func() { adam.Update(g, optim.SGD(lr).Init(p), p) },
			"optim.Adam: state is optim.SGDState, want optim.AdamState (the state Init returned)"},
		{"zero state", func() { adam.Update(g, optim.AdamState{}, p) }, "optim.Adam: state has no step count; create it with Init"},
		{"AdamW without params", func() {
			tx := optim.AdamW(lr)
			tx.Update(g, tx.Init(p), nil)
		}, "optim.AdamW: Update needs params"},
		{"Adafactor without params", func() {
			tx := optim.Adafactor(nil)
			tx.Update(g, tx.Init(p), nil)
		}, "optim.Adafactor: Update needs params"},
		{"gradient without state", func() {
			st := adam.Init(model{W: p.W, Ids: p.Ids}) // no B
			adam.Update(g, st, p)
		}, "optim.Adam: gradient f32[4] has no optimizer state (was Init given these params?)"},
		{"chain state length", func() {
			tx := optim.Chain(adam, adam)
			tx.Update(g, optim.ChainState{adam.Init(p)}, p)
		}, "optim.Chain: state has 1 entries for 2 transforms"},
		{"MultiSteps state", func() {
			tx := optim.MultiSteps(adam, 2)
			st := tx.Init(p).(optim.MultiStepsState)
			st.MiniStep = tensor.ScalarInt(2)
			tx.Update(g, st, p)
		}, "optim.MultiSteps: state MiniStep 2, want < k = 2"},
		{"counter dtype", func() {
			adam.Update(g, optim.AdamState{Count: tensor.Scalar(1)}, p)
		}, "optim.Adam: step count is f32[], want i32[]"},
		{"Apply to a nil parameter", func() { optim.Apply(model{}, gradsAt(0)) }, "optim.Apply: update f32[3,4] for a nil parameter"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.PanicsWithValue(t, tc.want, tc.f) })
	}
}
