package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// A two-layer bidirectional LSTM over batch-first sequences of different
// lengths, torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True,
// batch_first=True, dropout=0.1) on a packed batch: the outputs hold both
// directions, the final states one row per layer and direction, and the
// gradient reaches every layer's weights.
func ExampleLSTM() {
	k := tensor.NewKey(0).Split(3)
	lstm := nn.NewLSTM(k[0], 8, 16, nn.RecurrentOptions{Layers: 2, Bidirectional: true, BatchFirst: true, Dropout: 0.1})
	x := tensor.Normal(k[1], 4, 10, 8) // [batch, time, features]
	lengths := []int{10, 7, 3, 9}      // the rest of each row is padding

	y, s := lstm.ForwardWith(x, nn.LSTMState{}, nn.RecurrentCall{Key: &k[2], Lengths: lengths})
	fmt.Println("outputs:", y, "h_n:", s.H, "c_n:", s.C)

	// Evaluation: no dropout, so no key; zero states when none are given.
	eval := nn.InferenceMode(lstm, true)
	y, _ = eval.ForwardWith(x, nn.LSTMState{}, nn.RecurrentCall{Lengths: lengths})
	pad := tensor.SliceAxis(tensor.SliceAxis(y, 0, 2, 3), 1, 3, 10) // row 2 after its 3 steps
	fmt.Println("padding:", tensor.Sum(tensor.Abs(pad)).Float64s())

	loss := func(l nn.LSTM) *tensor.Tensor {
		_, s := l.ForwardWith(x, nn.LSTMState{}, nn.RecurrentCall{Key: &k[2], Lengths: lengths})
		return tensor.Mean(tensor.Square(s.H))
	}
	g := autodiff.Grad(loss)(lstm)
	fmt.Println("gradient of layer 1, reverse:", g.Weights[3].WeightIH, g.Weights[3].WeightHH, g.Weights[3].BiasHH)
	// Output:
	// outputs: f32[4,10,32] h_n: f32[4,4,16] c_n: f32[4,4,16]
	// padding: [0]
	// gradient of layer 1, reverse: f32[32,64] f32[16,64] f32[64]
}
