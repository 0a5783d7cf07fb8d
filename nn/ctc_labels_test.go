package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// A real (unpadded) label outside the K classes, or equal to the blank,
// panics naming it and its position: OneHot turned an id beyond the classes
// into a row of zeros, a log-probability of 0 (certainty) for every frame,
// and CTCLoss returned a finite, negative, meaningless loss. Padded
// positions may hold anything.
func TestCTCLossLabelRange(t *testing.T) {
	logits := tensor.Zeros(tensor.Float32, 2, 5, 3)
	frames := tensor.Zeros(tensor.Float32, 2, 5)
	pads := tensor.FromFloat32([]float32{0, 0, 0, 1}, 2, 2) // sequence 1 has one label
	ctc := func(labels []int32, opts ...nn.CTCOptions) func() {
		return func() { nn.CTCLoss(logits, frames, tensor.FromInt32(labels, 2, 2), pads, opts...) }
	}
	require.PanicsWithValue(t, "nn.CTCLoss: labels i32[2,2]: label 7 at [0,1] is outside [0, 3)", ctc([]int32{1, 7, 2, 0}))
	require.PanicsWithValue(t, "nn.CTCLoss: labels i32[2,2]: label -1 at [1,0] is outside [0, 3)", ctc([]int32{1, 2, -1, 0}))
	require.PanicsWithValue(t, "nn.CTCLoss: labels i32[2,2]: label 0 at [0,0] is the blank (BlankID 0); labels come without blanks", ctc([]int32{0, 1, 2, 0}))
	require.PanicsWithValue(t, "nn.CTCLoss: labels i32[2,2]: label 2 at [1,0] is the blank (BlankID 2); labels come without blanks", ctc([]int32{1, 1, 2, 0}, nn.CTCOptions{BlankID: 2}))
	// Padding may hold anything.
	require.NotPanics(t, ctc([]int32{1, 2, 1, -1}))
	require.NotPanics(t, ctc([]int32{1, 2, 1, 99}))
	require.NotPanics(t, ctc([]int32{0, 1, 0, 2}, nn.CTCOptions{BlankID: 2}))
}
