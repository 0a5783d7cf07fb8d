package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// PyTorch's nn.Embedding(5, 2, padding_idx=0): the padding row starts at
// zeros, and a batch of padded sequences gives it no gradient, so it stays
// zero through training.
func ExampleEmbedding_padding() {
	e := nn.NewEmbedding(tensor.NewKey(0), 5, 2, nn.EmbeddingOptions{Padding: true, PaddingIdx: 0})
	ids := tensor.FromInt32([]int32{
		3, 1, 4, // a sequence of three tokens
		2, 0, 0, // one token, then padding
	}, 2, 3)
	y := e.Forward(ids)
	fmt.Println(y.Shape(), tensor.Slice(y, []int{1, 1, 0}, []int{2, 2, 2}).Float32s()) // the first padding position
	g := autodiff.Grad(func(e nn.Embedding) *tensor.Tensor { return tensor.Sum(e.Forward(ids)) })(e)
	fmt.Println(tensor.SliceAxis(g.W, 0, 0, 1).Float32s(), tensor.SliceAxis(g.W, 0, 1, 2).Float32s())
	// Output:
	// [2 3 2] [0 0]
	// [0 0] [1 1]
}

// PyTorch's F.cross_entropy(logits, target) with a float target of the
// logits' shape: class probabilities (soft labels, as from mixup or a
// teacher), here with label_smoothing=0.1. PyTorch 1.13 prints
// tensor(0.9723) and tensor([0.7698, 1.0514]) for the same call.
func ExampleCrossEntropy_probabilities() {
	logits := tensor.FromFloat32([]float32{
		2, 0, -1,
		0, 1, 0,
	}, 2, 3)
	probs := tensor.FromFloat32([]float32{
		0.7, 0.3, 0, // mostly class 0
		0, 0.5, 0.5,
	}, 2, 3)
	loss := nn.CrossEntropy(logits, probs, nn.CrossEntropyOptions{LabelSmoothing: 0.1})
	fmt.Printf("%.4f\n", loss.Item())
	perExample := nn.CrossEntropy(logits, probs, nn.CrossEntropyOptions{Reduction: nn.ReduceNone})
	fmt.Printf("%.4f\n", perExample.Float32s())
	// Output:
	// 0.9723
	// [0.7698 1.0514]
}
