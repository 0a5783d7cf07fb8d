package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// mlp is a one-hidden-layer perceptron written with tensor ops.
type mlp struct {
	W1, B1, W2, B2 *tensor.Tensor
}

func newMLP(k tensor.Key, in, hidden, out int) mlp {
	ks := k.Split(2)
	return mlp{
		W1: tensor.WithLogicalAxes(tensor.MulScalar(tensor.Normal(ks[0], in, hidden), 0.7), "in", "hidden"),
		B1: tensor.WithLogicalAxes(tensor.Zeros(tensor.Float32, hidden), "hidden"),
		W2: tensor.WithLogicalAxes(tensor.MulScalar(tensor.Normal(ks[1], hidden, out), 0.3), "hidden", "out"),
		B2: tensor.WithLogicalAxes(tensor.Zeros(tensor.Float32, out), "out"),
	}
}

func (m mlp) forward(x *tensor.Tensor) *tensor.Tensor {
	h := tensor.Tanh(tensor.Add(tensor.MatMul(x, m.W1), m.B1))
	return tensor.Add(tensor.MatMul(h, m.W2), m.B2)
}

type batch struct{ X, Y *tensor.Tensor }

// regression is y = sin(2·x0) + 0.5·x1² - 0.3·x0·x1 on 128 points of [-1,1]².
func regression(k tensor.Key) batch {
	x := tensor.UniformRange(k, -1, 1, 128, 2)
	xs := x.Float64s()
	y := make([]float64, 128)
	for i := range y {
		a, b := xs[2*i], xs[2*i+1]
		y[i] = math.Sin(2*a) + 0.5*b*b - 0.3*a*b
	}
	return batch{X: x, Y: f32(y, 128, 1)}
}

func TestTrainMLPWithAdamConverges(t *testing.T) {
	k1, k2 := tensor.NewKey(7).Split2()
	data := regression(k1)
	model := newMLP(k2, 2, 32, 1)
	lossAndGrad := autodiff.ValueAndGradWith(func(m mlp, b batch) *tensor.Tensor {
		return tensor.MSE(m.forward(b.X), b.Y)
	})

	opt := optim.Chain(optim.ClipByGlobalNorm(10), optim.Adam(optim.WarmupCosineDecay(0, 0.05, 20, 800, 0.005)))
	state := opt.Init(model)
	first, _ := lossAndGrad(model, data)
	var loss *tensor.Tensor
	for range 800 {
		var grads mlp
		loss, grads = lossAndGrad(model, data)
		model, state = optim.Step(opt, model, grads, state)
	}
	final, _ := lossAndGrad(model, data)
	t.Logf("loss %.4f -> %.5f", first.Item(), final.Item())
	require.Less(t, final.Item(), 2e-3, "Adam fits the regression")
	assert.Less(t, final.Item(), first.Item()/50)
	assert.Less(t, final.Item(), loss.Item()*1.01, "no blow-up at the end")
	assert.Equal(t, []string{"in", "hidden"}, model.W1.LogicalAxes(), "trained params keep their axes")
}
