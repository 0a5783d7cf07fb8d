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
}

func loadTorchRef(t *testing.T) torchRef {
	t.Helper()
	b, err := os.ReadFile("testdata/torch_optim.json")
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
	ref := loadTorchRef(t)
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
	}
	require.Len(t, ref.Cases, len(cases), "every case of the script is checked")
	for name, tx := range cases {
		t.Run(name, func(t *testing.T) {
			want, ok := ref.Cases[name]
			require.True(t, ok, "no torch reference for %q: rerun testdata/torch_optim.py", name)
			params := ref.model(ref.Params)
			state := tx.Init(params)
			for step := range ref.Steps {
				grads := ref.model(ref.Grads[step])
				grads.Ids = nil
				params, state = optim.Step(tx, params, grads, state)
				closeTo(t, want[step]["W"], params.W.Float64s(), 1e-5, 1e-6, "step %d W", step)
				closeTo(t, want[step]["B"], params.B.Float64s(), 1e-5, 1e-6, "step %d B", step)
			}
			require.Equal(t, []string{"in", "out"}, params.W.LogicalAxes())
		})
	}
}
