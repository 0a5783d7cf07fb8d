package checkpoint_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// A torch.nn.Transformer's state dict, saved by PyTorch 1.13 (the file
// testdata/torch_transformer.py wrote), loads into nn.Transformer with
// TorchTransformer's rules, and the model then gives PyTorch's output for
// PyTorch's input within float32 rounding.
func TestTorchTransformerRules(t *testing.T) {
	like := nn.NewTransformer(tensor.NewKey(0), 8, 2, 2, 1, nn.TransformerOptions{DimFeedforward: 8})
	m, _, err := checkpoint.ImportSafetensors("testdata/torch_transformer.safetensors", like,
		checkpoint.MapNames(checkpoint.TorchTransformer()...))
	require.NoError(t, err)
	io, _, err := checkpoint.ImportSafetensors("testdata/torch_transformer_io.safetensors", map[string]*tensor.Tensor{
		"src": tensor.Zeros(tensor.Float32, 3, 2, 8), "tgt": tensor.Zeros(tensor.Float32, 4, 2, 8), "y": tensor.Zeros(tensor.Float32, 4, 2, 8)})
	require.NoError(t, err)
	y := m.ForwardWith(io["src"], io["tgt"], nn.TransformerCall{TgtMask: nn.SquareSubsequentMask(4)})
	require.InDeltaSlice(t, io["y"].Float32s(), y.Float32s(), 2e-5)
	// Without the split (or with the parts swapped) the output is not
	// PyTorch's.
	swapped := m
	swapped.Encoder.Layers = append([]nn.TransformerEncoderLayer{}, m.Encoder.Layers...)
	a := &swapped.Encoder.Layers[0].SelfAttn
	a.QueryProj, a.KeyProj = a.KeyProj, a.QueryProj
	y2 := swapped.ForwardWith(io["src"], io["tgt"], nn.TransformerCall{TgtMask: nn.SquareSubsequentMask(4)})
	require.Greater(t, tensor.Max(tensor.Abs(tensor.Sub(io["y"], y2))).Item(), 1e-4)
}

func TestSplitRows(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	w := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 6, 2) // [3·2, 2]
	require.NoError(t, checkpoint.ExportSafetensors(path, map[string]*tensor.Tensor{"attn.in_proj_weight": w, "b": tensor.FromFloat32([]float32{1, 2, 3}, 3)}, nil))
	type tree struct{ Q, K, V, B *tensor.Tensor }
	like := tree{tensor.Zeros(tensor.Float32, 2, 2), tensor.Zeros(tensor.Float32, 2, 2), tensor.Zeros(tensor.Float32, 2, 2), tensor.Zeros(tensor.Float32, 3)}
	got, _, err := checkpoint.ImportSafetensors(path, like, checkpoint.MapNames(
		checkpoint.SplitRows(`^attn\.in_proj_weight$`, "Q", "K", "V"), checkpoint.Transpose(`^K$`), checkpoint.Rename(`^b$`, "B")))
	require.NoError(t, err)
	require.Equal(t, []float32{1, 2, 3, 4}, got.Q.Float32s())
	require.Equal(t, []float32{5, 7, 6, 8}, got.K.Float32s()) // rows 2..3, transposed
	require.Equal(t, []float32{9, 10, 11, 12}, got.V.Float32s())
	require.Equal(t, []float32{1, 2, 3}, got.B.Float32s())

	for _, c := range []struct {
		name  string
		rules []checkpoint.Rule
	}{
		{"indivisible", []checkpoint.Rule{checkpoint.SplitRows(`^b$`, "B1", "B2")}},
		{"transposed", []checkpoint.Rule{checkpoint.Transpose(`in_proj`), checkpoint.SplitRows(`in_proj`, "Q", "K", "V")}},
		{"collision", []checkpoint.Rule{checkpoint.SplitRows(`in_proj_weight`, "Q", "Q", "V")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := checkpoint.ImportSafetensors(path, like, checkpoint.MapNames(c.rules...))
			require.Error(t, err)
			require.True(t, errors.Is(err, checkpoint.ErrMismatch), "%v", err)
		})
	}
}
