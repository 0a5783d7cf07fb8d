package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// A two-layer Transformer encoder as torch.nn.TransformerEncoder builds
// it, run causally on a padded batch: the second sequence has 2 padded
// positions, which no other position attends to, so changing them
// changes nothing else.
func ExampleTransformerEncoder() {
	const dModel, nhead, T = 16, 4, 5
	enc := nn.NewTransformerEncoder(tensor.NewKey(0), dModel, nhead, 2, true, nn.TransformerOptions{
		DimFeedforward: 32, Dropout: 0.1, Activation: nn.GeluExact, BatchFirst: true, NormFirst: true})
	src := tensor.Normal(tensor.NewKey(1), 2, T, dModel) // [batch, length, d_model]
	padding := tensor.FromBool([]bool{
		false, false, false, false, false,
		false, false, false, true, true}, 2, T) // true: padding
	call := nn.TransformerEncoderCall{Mask: nn.SquareSubsequentMask(T), KeyPaddingMask: padding}

	// Training: the dropouts draw from the call's key.
	key := tensor.NewKey(2)
	call.Key = &key
	fmt.Println(enc.ForwardWith(src, call))

	// Evaluation: no dropout, no key.
	eval := nn.InferenceMode(enc, true)
	call.Key = nil
	y := eval.ForwardWith(src, call)
	noise := tensor.Where(tensor.Reshape(padding, 2, T, 1), tensor.Normal(tensor.NewKey(3), 2, T, dModel), tensor.Zeros(tensor.Float32))
	y2 := eval.ForwardWith(tensor.Add(src, noise), call)
	diff := tensor.Abs(tensor.Sub(y, y2))
	fmt.Printf("largest change at real positions: %g\n", tensor.Max(tensor.Slice(diff, []int{1, 0, 0}, []int{2, 3, dModel})).Item())
	// Output:
	// f32[2,5,16]
	// largest change at real positions: 0
}
