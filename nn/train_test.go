package nn_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// TestMLPTrainsOnRegression fits y = sin(2·x0)·cos(x1) + 0.3·x0·x1 on 128
// points with full-batch gradient descent, the update written inline with
// pytree.MapN.
func TestMLPTrainsOnRegression(t *testing.T) {
	// lr 0.1: at 0.2 full-batch descent sits at the edge of stability and the
	// loss oscillates, so any one step's value depends on float rounding.
	const n, steps, lr = 128, 500, 0.1
	kx, km := tensor.NewKey(0).Split2()
	x := tensor.UniformRange(kx, -1.5, 1.5, n, 2)
	xv := x.Float64s()
	yv := make([]float64, n)
	for i := range n {
		a, b := xv[2*i], xv[2*i+1]
		yv[i] = math.Sin(2*a)*math.Cos(b) + 0.3*a*b
	}
	y := tensor.FromFloat64(yv, n, 1)

	model := nn.NewMLP(km, []int{2, 32, 32, 1}, nn.MLPOptions{Activation: nn.Tanh})
	lossAndGrad := autodiff.ValueAndGradWith(func(m nn.MLP, x *tensor.Tensor) *tensor.Tensor {
		return tensor.MSE(m.Forward(x), y)
	})
	start := time.Now()
	var first, last float64
	for step := range steps {
		loss, grad := lossAndGrad(model, x)
		if step == 0 {
			first = loss.Item()
		}
		last = loss.Item()
		model = pytree.MapN(func(p []*tensor.Tensor) *tensor.Tensor {
			return tensor.Sub(p[0], tensor.MulScalar(p[1], lr))
		}, model, grad)
	}
	elapsed := time.Since(start)
	t.Logf("loss %.4f -> %.5f in %d steps, %v", first, last, steps, elapsed)
	require.False(t, math.IsNaN(last))
	assert.Less(t, last, 0.015, "final loss")
	assert.Less(t, last, first/20, "the loss must fall by more than 20x")
	assert.Equal(t, "Tanh", model.Activation.String(), "static fields survive the updates")
}
