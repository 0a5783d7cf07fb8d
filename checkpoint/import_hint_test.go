package checkpoint

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// TestImportNamesTheUnreadTensors: a leaf the file lacks is reported with
// a few of the file's names that no leaf reads, so that a PyTorch state
// dict read without rules says which names to map.
func TestImportNamesTheUnreadTensors(t *testing.T) {
	file := torchMLPFile("F32")
	like := zerosLike(nn.NewMLP(tensor.NewKey(0), []int{3, 4, 2}, nn.MLPOptions{}))
	tests := []struct {
		name  string
		rules []Rule
		want  string
	}{
		{"no rules", nil,
			`tensor Layers[0].W: does not match: the tree to read into has a tensor here, the file does not; ` +
				`the file's 4 names that no leaf reads are "0.bias", "0.weight", "2.bias", ...: MapNames renames them ` +
				`(TorchMLP, TorchRNN and TorchTransformer map PyTorch's state dicts)`},
		{"one layer of two mapped", TorchMLP(0),
			`the file does not; the file's 2 names (after MapNames) that no leaf reads are "2.bias", "2.weight": MapNames renames them`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ReadSafetensors(bytes.NewReader(file), int64(len(file)), like, MapNames(tt.rules...))
			require.ErrorIs(t, err, ErrMismatch)
			require.ErrorContains(t, err, tt.want)
		})
	}
}
