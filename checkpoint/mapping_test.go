package checkpoint

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// torchMLP is the state_dict of PyTorch's
// nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)): weights
// [out, in], row-major.
var torchMLP = struct {
	w0, b0, w2, b2 []float32
}{
	w0: []float32{0.5, -1, 0.25, 2, 0, -0.5, -1.5, 1, 0.75, 0.125, -0.25, 1.5}, // [4,3]
	b0: []float32{0.125, -0.25, 0.375, 0},
	w2: []float32{1, -2, 0.5, 0.25, -0.75, 1.25, 2, -1}, // [2,4]
	b2: []float32{0.5, -0.5},
}

// torchMLPFile writes the state_dict as safetensors.torch.save_file lays
// it out: tensors of one dtype ordered by name, metadata {"format":"pt"},
// elements little-endian, F32 or BF16 (the weights above are exact in
// bfloat16).
func torchMLPFile(dtype string) []byte {
	size := 4
	enc := func(b []byte, v []float32) []byte {
		for _, x := range v {
			if dtype == "BF16" {
				b = binary.LittleEndian.AppendUint16(b, uint16(half.FromFloat32BF(x)))
			} else {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
			}
		}
		return b
	}
	if dtype == "BF16" {
		size = 2
	}
	o := func(n int) string { return itoa(n * size) }
	header := `{"__metadata__":{"format":"pt"},` +
		`"0.bias":{"dtype":"` + dtype + `","shape":[4],"data_offsets":[0,` + o(4) + `]},` +
		`"0.weight":{"dtype":"` + dtype + `","shape":[4,3],"data_offsets":[` + o(4) + `,` + o(16) + `]},` +
		`"2.bias":{"dtype":"` + dtype + `","shape":[2],"data_offsets":[` + o(16) + `,` + o(18) + `]},` +
		`"2.weight":{"dtype":"` + dtype + `","shape":[2,4],"data_offsets":[` + o(18) + `,` + o(26) + `]}}`
	var data []byte
	data = enc(data, torchMLP.b0)
	data = enc(data, torchMLP.w0)
	data = enc(data, torchMLP.b2)
	data = enc(data, torchMLP.w2)
	return stBytes(header, data)
}

// torchForward is PyTorch's forward pass of the Sequential, in float64:
// relu(x·W0ᵀ + b0)·W2ᵀ + b2.
func torchForward(x []float64) []float64 {
	h := make([]float64, 4)
	for o := range 4 {
		s := float64(torchMLP.b0[o])
		for i := range 3 {
			s += float64(torchMLP.w0[o*3+i]) * x[i]
		}
		h[o] = max(s, 0)
	}
	y := make([]float64, 2)
	for o := range 2 {
		s := float64(torchMLP.b2[o])
		for i := range 4 {
			s += float64(torchMLP.w2[o*4+i]) * h[i]
		}
		y[o] = s
	}
	return y
}

// TestLoadTorchMLP loads a PyTorch nn.Sequential MLP saved with
// safetensors (F32 and BF16) into the equivalent gonox nn.MLP, and checks
// the weights (transposed to [in, out]) and that both compute the same
// function on inputs that make some hidden units negative.
func TestLoadTorchMLP(t *testing.T) {
	like := zerosLike(nn.NewMLP(tensor.NewKey(0), []int{3, 4, 2}, nn.MLPOptions{}))
	for _, dtype := range []string{"F32", "BF16"} {
		t.Run(dtype, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mlp.safetensors")
			require.NoError(t, os.WriteFile(path, torchMLPFile(dtype), 0o644))
			mlp, meta, err := ImportSafetensors(path, like, MapNames(TorchMLP(0, 2)...))
			require.NoError(t, err)
			require.Equal(t, "pt", meta["format"])
			require.Equal(t, []int{3, 4}, mlp.Layers[0].W.Shape())
			require.Equal(t, []int{4, 2}, mlp.Layers[1].W.Shape())
			w0 := mlp.Layers[0].W.Float32s()
			for o := range 4 {
				for i := range 3 {
					require.Equal(t, torchMLP.w0[o*3+i], w0[i*4+o], "W[%d,%d]", i, o)
				}
			}
			require.Equal(t, torchMLP.b2, mlp.Layers[1].B.Float32s())

			xs := [][]float64{{1, 2, 3}, {-1, 0.5, 2}, {0.3, -0.7, 0.1}}
			var in []float32
			for _, x := range xs {
				for _, v := range x {
					in = append(in, float32(v))
				}
			}
			got := mlp.Forward(tensor.FromFloat32(in, 3, 3)).Float32s()
			for r, x := range xs {
				want := torchForward(x)
				for o := range 2 {
					require.InDelta(t, want[o], float64(got[r*2+o]), 1e-5, "input %d output %d", r, o)
				}
			}
		})
	}
}

func TestMapNamesErrors(t *testing.T) {
	file := torchMLPFile("F32")
	like := zerosLike(nn.NewMLP(tensor.NewKey(0), []int{3, 4, 2}, nn.MLPOptions{}))
	read := func(rules ...Rule) error {
		_, _, err := ReadSafetensors(bytes.NewReader(file), int64(len(file)), like, MapNames(rules...))
		return err
	}
	// Without the transposition the shapes differ, and the error names
	// the path and the file's name.
	err := read(TorchMLP(0, 2)[:4]...)
	require.ErrorIs(t, err, ErrMismatch)
	require.ErrorContains(t, err, `tensor Layers[0].W: does not match: file tensor "0.weight": file has f32[4,3], the tree to read into has f32[3,4]`)
	err = read(append(TorchMLP(0, 2), Transpose(`\.B$`))...)
	require.ErrorContains(t, err, `file tensor "0.bias" of rank 1 cannot be transposed`)
	err = read(Rename(`^\d\.`, "Layers[0]."))
	require.ErrorContains(t, err, `file tensors "0.bias" and "2.bias" are both mapped here`)
	err = read(Rename(`(`, ""))
	require.ErrorContains(t, err, "MapNames rule 0: error parsing regexp")
	// Unmapped, the names are not the tree's.
	err = read()
	require.ErrorContains(t, err, "tensor Layers[0].W: does not match: the tree to read into has a tensor here, the file does not")
	// Restore reads by path and refuses MapNames.
	dir := t.TempDir()
	require.NoError(t, Save(dir, 1, like))
	_, err = Restore(dir, 1, like, nil, MapNames(TorchMLP(0, 2)...))
	require.ErrorContains(t, err, "MapNames applies to safetensors files")
}
