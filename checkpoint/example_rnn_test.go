package checkpoint_test

import (
	"fmt"
	"os"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// Loading a torch.nn.LSTM saved from PyTorch with
//
//	lstm = nn.LSTM(2, 1)
//	safetensors.torch.save_file(lstm.state_dict(), "lstm.safetensors")
//
// The file holds weight_ih_l0 [4, 2], weight_hh_l0 [4, 1], bias_ih_l0 and
// bias_hh_l0, gates in PyTorch's order i, f, g, o; TorchRNN(1, false) maps
// them to Weights[0] of nn.LSTM, transposing the weights. The outputs are
// PyTorch's for the same weights and input (y = [0.2464, -0.0631], c_n =
// -0.0932 to four places).
func ExampleTorchRNN() {
	dir, _ := os.MkdirTemp("", "torch")
	defer os.RemoveAll(dir)
	path := dir + "/lstm.safetensors"
	// Stand-in for the PyTorch file: a state dict under PyTorch's names.
	stateDict := map[string]*tensor.Tensor{
		"weight_ih_l0": tensor.FromFloat32([]float32{0.5, -0.5, 0.25, 0.25, 1, 0, 0, 1}, 4, 2),
		"weight_hh_l0": tensor.FromFloat32([]float32{0.5, -0.5, 0.25, 1}, 4, 1),
		"bias_ih_l0":   tensor.FromFloat32([]float32{0, 1, 0, 0}, 4),
		"bias_hh_l0":   tensor.FromFloat32([]float32{0.1, 0, -0.1, 0}, 4),
	}
	if err := checkpoint.ExportSafetensors(path, stateDict, map[string]string{"format": "pt"}); err != nil {
		fmt.Println(err)
		return
	}

	like := nn.NewLSTM(tensor.NewKey(0), 2, 1, nn.RecurrentOptions{})
	lstm, _, err := checkpoint.ImportSafetensors(path, like, checkpoint.MapNames(checkpoint.TorchRNN(1, false)...))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(lstm.Weights[0].WeightIH, lstm.Weights[0].WeightIH.Float32s())
	x := tensor.FromFloat32([]float32{1, 2, -1, 0.5}, 2, 1, 2) // [T, batch, in]
	y, s := lstm.Forward(x, nn.LSTMState{})
	fmt.Printf("y %.4f c_n %.4f\n", y.Float32s(), s.C.Float32s())
	// Output:
	// f32[2,4] [0.5 0.25 1 0 -0.5 0.25 0 1]
	// y [0.2464 -0.0631] c_n [-0.0932]
}
