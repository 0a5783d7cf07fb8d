package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// PyTorch's F.cross_entropy(logits.transpose(1, 2), labels,
// ignore_index=-100, label_smoothing=0.1) on a batch of token sequences
// [N, T, C] whose padding positions hold -100. gonox keeps the class axis
// last.
func ExampleCrossEntropy() {
	logits := tensor.FromFloat32([]float32{
		2, 0, 0, 0, 3, 0, // sequence 1: tokens 0 and 1
		0, 0, 1, 9, 9, 9, // sequence 2: token 2, then padding
	}, 2, 2, 3)
	labels := tensor.FromInt32([]int32{0, 1, 2, -100}, 2, 2)
	loss := nn.CrossEntropy(logits, labels, nn.CrossEntropyOptions{
		Ignore: true, IgnoreIndex: nn.TorchIgnoreIndex, LabelSmoothing: 0.1})
	fmt.Printf("%.4f\n", loss.Item())
	perToken := nn.CrossEntropy(logits, labels, nn.CrossEntropyOptions{
		Ignore: true, IgnoreIndex: nn.TorchIgnoreIndex, Reduction: nn.ReduceNone})
	fmt.Printf("%.4f\n", perToken.Float32s()) // shape [2,2], the padding 0
	// Output:
	// 0.4286
	// [0.2395 0.0949 0.5514 0.0000]
}
