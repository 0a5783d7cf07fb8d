package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// ExampleEmbeddingBag sums bags of rows given by offsets: bag 0 is ids 0
// and 2, bag 1 is empty (zeros), bag 2 is id 1 twice, weighted.
func ExampleEmbeddingBag() {
	e := nn.EmbeddingBag{W: tensor.FromFloat32([]float32{1, 0, 0, 1, 2, 2}, 3, 2), Mode: nn.BagSum}
	ids := tensor.FromInt32([]int32{0, 2, 1, 1}, 4)
	offsets := tensor.FromInt32([]int32{0, 2, 2}, 3)
	weights := tensor.FromFloat32([]float32{1, 1, 0.5, 2}, 4)
	fmt.Println(e.Forward(ids, offsets, weights).Float32s())
	// Output: [3 2 0 0 0 2.5]
}

// ExampleBinaryCrossEntropy is PyTorch's BCELoss on probabilities; a
// probability of exactly 0 for a positive target costs 100 (the clamped
// log), not +Inf.
func ExampleBinaryCrossEntropy() {
	p := tensor.FromFloat64s([]float64{0.5, 0}, 2)
	t := tensor.FromFloat64s([]float64{1, 1}, 2)
	fmt.Printf("%.4f\n", nn.BinaryCrossEntropy(p, t, nn.BCEOptions{Reduction: nn.ReduceNone}).Float64s())
	// Output: [0.6931 100.0000]
}

// ExampleNewDropout2d zeroes whole channels of a [N, C, H, W] batch and
// scales the others by 1/(1-rate).
func ExampleNewDropout2d() {
	d := nn.NewDropout2d(0.5)
	y := d.Forward(tensor.Ones(tensor.Float32, 1, 4, 2, 2), tensor.NewKey(5))
	for c := range 4 {
		fmt.Println(tensor.SliceAxis(y, 1, c, c+1).Float32s())
	}
	fmt.Println(nn.InferenceMode(d, true).Forward(tensor.Ones(tensor.Float32, 1, 1, 1, 2), tensor.Key{}).Float32s())
	// Output:
	// [2 2 2 2]
	// [0 0 0 0]
	// [0 0 0 0]
	// [2 2 2 2]
	// [1 1]
}
