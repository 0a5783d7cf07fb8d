package autodiff_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// TestOnGradient: the hook sees each float leaf's gradient once, as soon
// as it is final and before the backward pass reaches the layers used
// before it, and the tensor it sees holds the gradient the call returns.
func TestOnGradient(t *testing.T) {
	type two struct {
		W1, W2 *tensor.Tensor
		Steps  *tensor.Tensor // an integer leaf: no gradient, no call
	}
	r := rand.New(rand.NewPCG(1, 2))
	m := two{W1: randT(r, 3, 4), W2: randT(r, 4, 2), Steps: tensor.FromInt32([]int32{7}, 1)}
	x := randT(r, 5, 3)
	var events []string
	// mark records when the backward pass crosses the boundary between
	// the two layers.
	mark := autodiff.CustomVJP("mark",
		func(h *tensor.Tensor) (*tensor.Tensor, struct{}) { return h, struct{}{} },
		func(_ struct{}, g *tensor.Tensor) *tensor.Tensor {
			events = append(events, "between the layers")
			return g
		})
	seen := map[int][]float32{}
	hook := autodiff.OnGradient(func(leaf int, g *tensor.Tensor) {
		events = append(events, []string{"W1", "W2", "Steps"}[leaf])
		require.NotContains(t, seen, leaf, "leaf %d reported twice", leaf)
		seen[leaf] = g.Float32s()
	})
	loss := func(p two) *tensor.Tensor {
		h := mark(tensor.Relu(tensor.MatMul(x, p.W1)))
		// W2 is used twice: its gradient is final only after both uses.
		y := tensor.Add(tensor.MatMul(h, p.W2), tensor.MatMul(tensor.Tanh(h), p.W2))
		return tensor.Sum(tensor.Mul(y, y))
	}
	_, g := autodiff.ValueAndGrad(loss, hook)(m)
	assert.Equal(t, []string{"W2", "between the layers", "W1"}, events)
	_, want := autodiff.ValueAndGrad(loss)(m)
	assert.Equal(t, want.W1.Float32s(), seen[0])
	assert.Equal(t, want.W2.Float32s(), seen[1])
	assert.Equal(t, g.W2.Float32s(), seen[1])
}
