package optim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
)

func TestVariantsPanics(t *testing.T) {
	lr := optim.Constant(0.1)
	p := newModel()
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"Adagrad nil lr", func() { optim.Adagrad(nil) }, "optim.Adagrad: nil learning rate schedule (use optim.Constant for a fixed rate)"},
		{"Adagrad eps", func() { optim.Adagrad(lr, optim.AdagradOptions{Eps: -1}) }, "optim.Adagrad: Eps -1 is negative"},
		{"ScaleByRSS init", func() { optim.ScaleByRSS(optim.AdagradOptions{InitialAccumulatorValue: -1}) }, "optim.ScaleByRSS: InitialAccumulatorValue -1 is negative"},
		{"Adadelta rho", func() { optim.Adadelta(lr, optim.AdadeltaOptions{Rho: 1}) }, "optim.Adadelta: Rho 1 outside [0, 1)"},
		{"ScaleByAdadelta decay", func() { optim.ScaleByAdadelta(optim.AdadeltaOptions{WeightDecay: 0.1}) },
			"optim.ScaleByAdadelta: WeightDecay is an option of Adadelta; chain AddDecayedWeights before ScaleByAdadelta"},
		{"AMSGrad B2", func() { optim.AMSGrad(lr, optim.AMSGradOptions{B2: 1}) }, "optim.AMSGrad: B2 1 outside [0, 1)"},
		{"Adamax decay", func() { optim.Adamax(lr, optim.AdamaxOptions{WeightDecay: 0.1}) }, "optim.Adamax: WeightDecay and Mask are options of AdamaxW"},
		{"AdamaxW decay", func() { optim.AdamaxW(lr, optim.AdamaxOptions{WeightDecay: -1}) }, "optim.AdamaxW: WeightDecay -1 is negative"},
		{"RAdam threshold", func() { optim.RAdam(lr, optim.RAdamOptions{Threshold: 3}) },
			"optim.RAdam: Threshold 3 below 4: the rectification sqrt((ρt-4)(ρt-2)...) is not real there"},
		{"AdaBelief eps root", func() { optim.AdaBelief(lr, optim.AdaBeliefOptions{EpsRoot: -1}) }, "optim.AdaBelief: EpsRoot -1 is negative"},
		{"Yogi init", func() { optim.Yogi(lr, optim.YogiOptions{InitialAccumulatorValue: -1}) }, "optim.Yogi: InitialAccumulatorValue -1 is negative"},
		{"NAdam nil", func() { optim.NAdam(nil) }, "optim.NAdam: nil learning rate schedule (use optim.Constant for a fixed rate)"},
		{"NAdamW decay", func() { optim.NAdamW(lr, optim.AdamWOptions{WeightDecay: -1}) }, "optim.NAdamW: WeightDecay -1 is negative"},
		{"Novograd B2", func() { optim.Novograd(lr, optim.NovogradOptions{B2: 2}) }, "optim.Novograd: B2 2 outside [0, 1)"},
		{"Lamb decay", func() { optim.Lamb(lr, optim.LambOptions{WeightDecay: -1}) }, "optim.Lamb: WeightDecay -1 is negative"},
		{"Lars Nesterov", func() { optim.Lars(lr, optim.LarsOptions{Momentum: optim.Zero, Nesterov: true}) }, "optim.Lars: Nesterov needs Momentum > 0"},
		{"TrustRatio coef", func() { optim.ScaleByTrustRatio(optim.TrustRatioOptions{TrustCoefficient: -1}) }, "optim.ScaleByTrustRatio: TrustCoefficient -1 is negative"},
		{"Lamb needs params", func() { tx := optim.Lamb(lr); tx.Update(gradsAt(0), tx.Init(p), nil) }, "optim.Lamb: Update needs params"},
		{"Lars needs params", func() { tx := optim.Lars(lr); tx.Update(gradsAt(0), tx.Init(p), nil) }, "optim.Lars: Update needs params"},
		{"AdamaxW needs params", func() { tx := optim.AdamaxW(lr); tx.Update(gradsAt(0), tx.Init(p), nil) }, "optim.AdamaxW: Update needs params"},
		{"trust ratio needs params", func() { optim.ScaleByTrustRatio().Update(gradsAt(0), optim.EmptyState{}, nil) }, "optim.ScaleByTrustRatio: Update needs params"},
		{"wrong state", func() { optim.Yogi(lr).Update(gradsAt(0), optim.AMSGrad(lr).Init(p), p) },
			"optim.Yogi: state is optim.AMSGradState, want optim.AdamState (the state Init returned)"},
		{"zero state", func() { optim.Novograd(lr).Update(gradsAt(0), optim.NovogradState{}, p) },
			"optim.Novograd: state has no step count; create it with Init"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.PanicsWithValue(t, tc.want, tc.f) })
	}
}
