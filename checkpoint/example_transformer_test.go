package checkpoint_test

import (
	"fmt"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// Loading a torch.nn.Transformer saved from PyTorch with
//
//	m = nn.Transformer(8, 2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=8)
//	save_file(m.state_dict(), "torch_transformer.safetensors")
//
// (testdata/torch_transformer.py): TorchTransformer maps PyTorch's names,
// splitting each in_proj_weight into the query, key and value
// projections, and the model then computes PyTorch's output.
func ExampleTorchTransformer() {
	like := nn.NewTransformer(tensor.NewKey(0), 8, 2, 2, 1, nn.TransformerOptions{DimFeedforward: 8})
	m, _, err := checkpoint.ImportSafetensors("testdata/torch_transformer.safetensors", like,
		checkpoint.MapNames(checkpoint.TorchTransformer()...))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("decoder cross-attention query:", m.Decoder.Layers[0].MultiheadAttn.QueryProj.W)

	// PyTorch's input and output, saved beside the model.
	io, _, err := checkpoint.ImportSafetensors("testdata/torch_transformer_io.safetensors", map[string]*tensor.Tensor{
		"src": tensor.Zeros(tensor.Float32, 3, 2, 8), "tgt": tensor.Zeros(tensor.Float32, 4, 2, 8), "y": tensor.Zeros(tensor.Float32, 4, 2, 8)})
	if err != nil {
		fmt.Println(err)
		return
	}
	y := m.ForwardWith(io["src"], io["tgt"], nn.TransformerCall{TgtMask: nn.SquareSubsequentMask(4)})
	fmt.Println(y, "largest difference from PyTorch below 1e-5:",
		tensor.Max(tensor.Abs(tensor.Sub(y, io["y"]))).Item() < 1e-5)
	// Output:
	// decoder cross-attention query: f32[8,8]
	// f32[4,2,8] largest difference from PyTorch below 1e-5: true
}
