package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// Operands of an optax loss that do not broadcast panic naming the loss,
// not the tensor op inside it (tensor.Sub, tensor.Mul).
func TestLossOperandsBroadcastNamingTheLoss(t *testing.T) {
	a, b := tensor.Ones(tensor.Float32, 2, 4), tensor.Ones(tensor.Float32, 3)
	tests := []struct {
		name string
		f    func()
	}{
		{"nn.HuberLoss", func() { nn.HuberLoss(a, b, 1) }},
		{"nn.LogCosh", func() { nn.LogCosh(a, b) }},
		{"nn.KLDivergence", func() { nn.KLDivergence(a, b) }},
		{"nn.KLDivergenceWithLogTargets", func() { nn.KLDivergenceWithLogTargets(a, b) }},
		{"nn.CosineSimilarity", func() { nn.CosineSimilarity(a, b, 0) }},
		{"nn.HingeLoss", func() { nn.HingeLoss(a, b) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.PanicsWithValue(t, tt.name+": f32[2,4] and f32[3]: shapes do not broadcast (dim -1: 4 vs 3)", tt.f)
		})
	}
	// Shapes that broadcast still do.
	require.Equal(t, "f32[2,4]", nn.HuberLoss(a, tensor.Ones(tensor.Float32, 1, 4), 1).String())
	require.Equal(t, "f32[2]", nn.KLDivergence(a, tensor.Ones(tensor.Float32, 4)).String())
}
