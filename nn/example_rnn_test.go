package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// An LSTM over a sequence: the cell computes one step for a batch of rows,
// autodiff.Scan drives it over the time axis (lax.scan; ScanRemat bounds the
// memory of its gradient), and the gradient reaches the cell's parameters
// through every step.
func ExampleLSTMCell() {
	k := tensor.NewKey(0).Split(3)
	cell := nn.NewLSTMCell(k[0], 3, 16, nn.RNNOptions{}) // torch.nn.LSTMCell(3, 16)
	head := nn.NewLinear(k[1], 16, 1, nn.LinearOptions{})
	xs := tensor.Normal(k[2], 20, 4, 3) // [time, batch, features]

	step := func(s nn.LSTMState, x *tensor.Tensor) (nn.LSTMState, *tensor.Tensor) {
		s = cell.Forward(x, s)
		return s, s.H
	}
	last, hs := autodiff.Scan(step, cell.ZeroState(4), xs)
	fmt.Println("hidden states:", hs, "last:", last.H, last.C)

	loss := func(c nn.LSTMCell) *tensor.Tensor {
		step := func(s nn.LSTMState, x *tensor.Tensor) (nn.LSTMState, *tensor.Tensor) {
			return c.Forward(x, s), nil
		}
		last, _ := autodiff.Scan(step, c.ZeroState(4), xs, autodiff.ScanRemat(0))
		return tensor.Mean(tensor.Square(head.Forward(last.H)))
	}
	g := autodiff.Grad(loss)(cell)
	fmt.Println("gradient:", g.WeightIH, g.WeightHH, g.Bias)
	// Output:
	// hidden states: f32[20,4,16] last: f32[4,16] f32[4,16]
	// gradient: f32[3,64] f32[16,64] f32[64]
}
