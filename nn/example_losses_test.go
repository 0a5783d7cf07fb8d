package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// The losses are not reduced: one value per element here; the training
// loss is their mean.
func ExampleHuberLoss() {
	pred := tensor.FromFloat32([]float32{0.5, 2, -4}, 3)
	target := tensor.FromFloat32([]float32{0, 0, 0}, 3)
	fmt.Println(nn.HuberLoss(pred, target, 1).Float32s())
	fmt.Println(tensor.Mean(nn.HuberLoss(pred, target, 1)).Item())
	// Output:
	// [0.125 1.5 3.5]
	// 1.7083333730697632
}

// CTC aligns a label sequence without blanks to frames: here "1 2" against
// 4 frames of a batch of one, whose last frame is padding.
func ExampleCTCLoss() {
	logits := tensor.Zeros(tensor.Float32, 1, 4, 3) // uniform over {blank, 1, 2}
	logitPaddings := tensor.FromFloat32([]float32{0, 0, 0, 1}, 1, 4)
	labels := tensor.FromInts([]int{1, 2}, 1, 2)
	labelPaddings := tensor.Zeros(tensor.Float32, 1, 2)
	loss := nn.CTCLoss(logits, logitPaddings, labels, labelPaddings)
	// 5 alignments of "1 2" in 3 frames, each of probability 1/27.
	fmt.Printf("%.4f\n", loss.Item())
	// Output:
	// 1.6864
}
