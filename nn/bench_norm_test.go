package nn_test

import (
	"testing"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkBatchNormStep is the forward and backward pass of a training
// BatchNorm on the activations of bench/anchors.py's ResNet block,
// [32, 64, 32, 32], from a given cotangent to the gradients of the input,
// weight and bias:
//
//	go test -run '^$' -bench BatchNormStep -cpu 1 ./nn/
func BenchmarkBatchNormStep(b *testing.B) {
	m, s := nn.MakeWithState(nn.NewBatchNorm(64, nn.BatchNormOptions{}))
	x := tensor.Normal(tensor.NewKey(1), 32, 64, 32, 32)
	g := tensor.Normal(tensor.NewKey(2), 32, 64, 32, 32)
	runStep(b, func() {
		tr := tensor.NewTrace()
		lm := m
		lx, lw, lb := tr.Leaf(x), tr.Leaf(m.Weight), tr.Leaf(m.Bias)
		lm.Weight, lm.Bias = lw, lb
		y, _ := lm.Forward(lx, s)
		grads := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{g}, []*tensor.Tensor{lx, lw, lb}, false)
		tensor.Donate(grads...)
	}, 0)
}
