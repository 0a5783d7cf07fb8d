package autodiff_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// With RecycleIntermediates an intermediate that escaped from the loss
// panics when used after the call, naming the op; auxiliary outputs, the
// loss, the model and the gradients stay valid and equal those computed
// without the option.
func TestRecycleIntermediates(t *testing.T) {
	k := tensor.NewKey(5).Split(3)
	m := nn.NewMLP(k[0], []int{4, 16, 2}, nn.MLPOptions{})
	x, y := tensor.Normal(k[1], 8, 4), tensor.Normal(k[2], 8, 2)
	var escaped *tensor.Tensor
	f := func(m nn.MLP, x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
		h := m.Layers[0].Forward(x)
		escaped = tensor.Relu(h)
		out := m.Layers[1].Forward(escaped)
		return tensor.MSE(out, y), out
	}
	l0, aux0, g0 := autodiff.ValueAndGradWithAux(f)(m, x)
	require.NotPanics(t, func() { escaped.Float32s() })
	l1, aux1, g1 := autodiff.ValueAndGradWithAux(f, autodiff.RecycleIntermediates())(m, x)
	assert.Equal(t, l0.Item(), l1.Item())
	assert.Equal(t, aux0.Float32s(), aux1.Float32s(), "the auxiliary output is spared")
	for i := range g0.Layers {
		assert.Equal(t, g0.Layers[i].W.Float32s(), g1.Layers[i].W.Float32s())
		assert.Equal(t, g0.Layers[i].B.Float32s(), g1.Layers[i].B.Float32s())
	}
	assert.True(t, escaped.IsDonated())
	assert.Equal(t, "tensor.Sum: operand x f32[8,16] was donated (tensor.Donate)", panicOf(func() { tensor.Sum(escaped) }))
	assert.Contains(t, panicOf(func() { escaped.Float32s() }), "Tensor.Float32s: operand f32[8,16] was donated")
	assert.NotPanics(t, func() { m.Layers[0].W.Float32s(); x.Float32s() })

	// DonateTree donates every leaf of the gradient.
	autodiff.DonateTree(g1)
	assert.True(t, g1.Layers[0].W.IsDonated())
	assert.True(t, g1.Layers[1].B.IsDonated())
}
