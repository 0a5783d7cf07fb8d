package optim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// StepInto gives the bits of Step, over two steps; Adam, AdamW, NAdam
// and SGD (with and without momentum) write each new parameter into its
// destination (runs of more than one AdamSteps bucket, a parameter
// without a destination, one without a gradient kept as it is), and
// transforms without a fused step into a destination (Lion, a Chain)
// return Step's parameters and leave the destinations alone.
func TestStepInto(t *testing.T) {
	sizes := []int{1<<19 + 3, 10, 130, 7}
	txs := []struct {
		name string
		tx   optim.Transform
		into bool
	}{
		{"adam", optim.Adam(optim.Constant(1e-2)), true},
		{"adamw", optim.AdamW(optim.Constant(1e-2), optim.AdamWOptions{WeightDecay: 0.1}), true},
		{"nadam", optim.NAdam(optim.Constant(1e-2)), true},
		{"sgd", optim.SGD(optim.Constant(0.1)), true},
		{"sgd nesterov", optim.SGD(optim.Constant(0.1), optim.SGDOptions{Momentum: 0.9, Nesterov: true}), true},
		{"lion", optim.Lion(optim.Constant(1e-2)), false},
		{"chain", optim.Chain(optim.ClipByGlobalNorm(1, optim.ClipOptions{}), optim.Adam(optim.Constant(1e-2))), false},
	}
	for _, tt := range txs {
		t.Run(tt.name, func(t *testing.T) {
			params := cosParams(sizes, 1)
			grads := cosParams(sizes, 0.5)
			grads["p3"] = nil // no gradient: kept
			want, wst := params, tt.tx.Init(params)
			got, st := params, tt.tx.Init(params)
			for range 2 {
				dst := map[string]*tensor.Tensor{"p0": tensor.Zeros(tensor.Float32, sizes[0]), "p1": nil, "p2": tensor.Zeros(tensor.Float32, sizes[2]), "p3": tensor.Zeros(tensor.Float32, sizes[3])}
				want, wst = optim.Step(tt.tx, want, grads, wst)
				got, st = optim.StepInto(dst, tt.tx, got, grads, st)
				for k, w := range want {
					require.Equal(t, w.Float32s(), got[k].Float32s(), k)
				}
				for k, d := range dst {
					if d == nil {
						continue
					}
					held := &d.BorrowFloat32()[0] == &got[k].BorrowFloat32()[0]
					assert.Equal(t, tt.into && k != "p3", held, "%s in its destination", k)
					if !held {
						assert.Equal(t, make([]float32, d.Size()), d.Float32s(), "%s's destination untouched", k)
					}
				}
			}
			assert.Same(t, params["p3"], got["p3"])
		})
	}
}
