package checkpoint

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type small struct {
	W    *tensor.Tensor
	Ids  *tensor.Tensor
	Mask *tensor.Tensor
	Name string
}

// TestSafetensorsByteExact checks a file written by hand from the format's
// rules: the header length, the compact JSON with tensors ordered F32
// before I32 before BOOL, the space padding to a multiple of 8, and the
// little-endian data.
func TestSafetensorsByteExact(t *testing.T) {
	tree := small{
		W:    tensor.FromFloat32([]float32{1, -2, 0.5}, 3),
		Ids:  tensor.FromInt32([]int32{7, -1}, 1, 2),
		Mask: tensor.FromBool([]bool{true, false}, 2),
	}
	header := `{"__metadata__":{"format":"pt"},` +
		`"W":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},` +
		`"Ids":{"dtype":"I32","shape":[1,2],"data_offsets":[12,20]},` +
		`"Mask":{"dtype":"BOOL","shape":[2],"data_offsets":[20,22]}}`
	require.Len(t, header, 204)
	header += "    " // 204 + 4 = 208, a multiple of 8
	var want []byte
	want = append(want, 208, 0, 0, 0, 0, 0, 0, 0)
	want = append(want, header...)
	want = append(want,
		0x00, 0x00, 0x80, 0x3f, // 1
		0x00, 0x00, 0x00, 0xc0, // -2
		0x00, 0x00, 0x00, 0x3f, // 0.5
		0x07, 0x00, 0x00, 0x00, // 7
		0xff, 0xff, 0xff, 0xff, // -1
		0x01, 0x00, // true, false
	)
	var got bytes.Buffer
	require.NoError(t, WriteSafetensors(&got, tree, map[string]string{"format": "pt"}))
	require.Equal(t, want, got.Bytes())

	back, meta, err := ReadSafetensors(bytes.NewReader(want), int64(len(want)), zerosLike(tree))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"format": "pt"}, meta)
	requireBitExact(t, tree, back)
}

// eofReaderAt is a valid io.ReaderAt that returns io.EOF with a read that
// fills its buffer up to the end of the data, as the interface allows.
type eofReaderAt struct{ b []byte }

func (r eofReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r.b)) {
		return 0, io.EOF
	}
	n := copy(p, r.b[off:])
	if n < len(p) || off+int64(n) == int64(len(r.b)) {
		return n, io.EOF
	}
	return n, nil
}

// TestReadSafetensorsEOFAtEnd reads files whose last tensor ends the file
// (of each dtype, since they are read differently) through a ReaderAt that
// reports io.EOF with the final full read; and a file one byte short is
// still an error.
func TestReadSafetensorsEOFAtEnd(t *testing.T) {
	for _, tree := range []map[string]*tensor.Tensor{
		{"w": tensor.FromFloat32([]float32{1, -2, 0.5}, 3)},
		{"ids": tensor.FromInt32([]int32{7, -1}, 2)},
		{"w": tensor.FromFloat32([]float32{3}, 1), "mask": tensor.FromBool([]bool{true, false}, 2)},
	} {
		var file bytes.Buffer
		require.NoError(t, WriteSafetensors(&file, tree, nil))
		like := map[string]*tensor.Tensor{}
		for k, x := range tree {
			like[k] = tensor.Zeros(x.DType(), x.Shape()...)
		}
		back, _, err := ReadSafetensors(eofReaderAt{file.Bytes()}, int64(file.Len()), like)
		require.NoError(t, err)
		requireBitExact(t, tree, back)

		short := file.Bytes()[:file.Len()-1]
		_, _, err = ReadSafetensors(eofReaderAt{short}, int64(file.Len()), like)
		require.ErrorIs(t, err, ErrCorrupt)
	}
}

// TestSafetensorsReference reads the bytes the reference implementation's
// own serialization test expects for an f32[1,2,3] named "attn.0" (no
// padding needed: the header is 64 bytes), and writes them back identically.
func TestSafetensorsReference(t *testing.T) {
	header := `{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}`
	require.Len(t, header, 64)
	file := append([]byte{64, 0, 0, 0, 0, 0, 0, 0}, header...)
	for _, v := range []float32{0, 1, 2, 3, 4, 5} {
		file = binary.LittleEndian.AppendUint32(file, math.Float32bits(v))
	}
	like := map[string]*tensor.Tensor{"attn.0": tensor.Zeros(tensor.Float32, 1, 2, 3)}
	got, meta, err := ReadSafetensors(bytes.NewReader(file), int64(len(file)), like)
	require.NoError(t, err)
	require.Nil(t, meta)
	require.Equal(t, []float32{0, 1, 2, 3, 4, 5}, got["attn.0"].Float32s())
	var out bytes.Buffer
	require.NoError(t, WriteSafetensors(&out, got, nil))
	require.Equal(t, file, out.Bytes())

	// The empty file is "{}" padded to 8 bytes.
	out.Reset()
	require.NoError(t, WriteSafetensors(&out, map[string]*tensor.Tensor{}, nil))
	require.Equal(t, []byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '}, out.Bytes())
}

func TestSafetensorsRoundTrip(t *testing.T) {
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	st := newState(3)
	st.Params.W = shard.Put(st.Params.W, shard.NewSharding(mesh, shard.P("dp", "tp")))
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, ExportSafetensors(path, st, map[string]string{"step": "3"}))
	got, meta, err := ImportSafetensors(path, zerosLike(st))
	require.NoError(t, err)
	require.Equal(t, "3", meta["step"])
	requireBitExact(t, st, got)

	// Names are paths; a subtree and a partial tree can be read.
	params, _, err := ImportSafetensors(path, zerosLike(st.Params), Subtree("Params"))
	require.NoError(t, err)
	requireBitExact(t, st.Params, params)
	_, _, err = ImportSafetensors(path, zerosLike(st.Params))
	require.ErrorIs(t, err, ErrMismatch)

	// Every tensor starts at a multiple of its element size.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(data)
	require.Zero(t, n%8)
	entries, _, start, err := parseSafetensorsHeader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	require.Zero(t, start%8)
	for _, e := range entries {
		assert.Zero(t, e.Begin%int64(safetensorsDTypes[e.DType]), e.Name)
	}
}

// stFile builds a safetensors file from a raw header and data length.
func stFile(header string, data int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, data)...)
}

func TestSafetensorsInvalid(t *testing.T) {
	like := map[string]*tensor.Tensor{"a": tensor.Zeros(tensor.Float32, 2), "b": tensor.Zeros(tensor.Int32, 1)}
	ok := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`
	long := binary.LittleEndian.AppendUint64(nil, 1000)
	long = append(long, ok...)
	cases := []struct {
		name string
		file []byte
		kind error
		msg  string
	}{
		{"valid", stFile(ok, 12), nil, ""},
		{"too short", []byte{1, 2, 3}, ErrCorrupt, "shorter than the 8-byte"},
		{"header length larger than the file", long, ErrCorrupt, "larger than the file"},
		{"header length huge", binary.LittleEndian.AppendUint64(nil, math.MaxUint64), ErrCorrupt, "exceeds the limit"},
		{"not json", stFile(`{"a":`, 12), ErrCorrupt, ""},
		{"not an object", stFile(`[1,2]   `, 0), ErrCorrupt, "start with '{'"},
		{"trailing garbage", stFile(ok+`x`, 12), ErrCorrupt, "after the JSON object"},
		{"duplicate name", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`, 12), ErrCorrupt, "appears twice"},
		{"duplicate field", stFile(`{"a":{"dtype":"F32","dtype":"I32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`, 12), ErrCorrupt, `tensor "a": key "dtype" appears twice in an object`},
		{"duplicate offsets", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`, 12), ErrCorrupt, `tensor "a": key "data_offsets" appears twice`},
		{"duplicate metadata key", stFile(`{"__metadata__":{"format":"pt","format":"np"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`, 12), ErrCorrupt, `__metadata__: key "format" appears twice`},
		{"duplicate metadata", stFile(`{"__metadata__":{},"__metadata__":{},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`, 12), ErrCorrupt, `name "__metadata__" appears twice`},
		{"metadata not an object", stFile(`{"__metadata__":[],"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`, 12), ErrCorrupt, `__metadata__: not a JSON object`},
		{"entry not an object", stFile(`{"a":[1],"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`, 12), ErrCorrupt, `tensor "a": not a JSON object`},
		{"overlap", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}}`, 8), ErrCorrupt, "overlap"},
		{"hole", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[12,16]}}`, 16), ErrCorrupt, "hole"},
		{"hole at end", stFile(ok, 16), ErrCorrupt, "cover 12 bytes"},
		{"out of range", stFile(ok, 10), ErrCorrupt, "past the end"},
		{"size mismatch", stFile(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`, 12), ErrCorrupt, "needs 12 bytes"},
		{"end before begin", stFile(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, 8), ErrCorrupt, ""},
		{"unknown dtype", stFile(`{"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}}`, 8), ErrCorrupt, "unknown dtype"},
		{"negative shape", stFile(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, 8), ErrCorrupt, ""},
		{"overflowing shape", stFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, 8), ErrCorrupt, "too large"},
		{"metadata not strings", stFile(`{"__metadata__":{"x":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8), ErrCorrupt, "not a string"},
		{"missing field", stFile(`{"a":{"dtype":"F32","shape":[2]}}`, 8), ErrCorrupt, "needs dtype"},
		{"dtype mismatch", stFile(`{"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`, 12), ErrMismatch, "tensor a: does not match: file has i32[2], the tree to read into has f32[2]: I32 elements cannot be read into float32 (F32, BF16, F16 and F64 are read into float32, F32, BF16 and F16 into bfloat16 and float16, F64 and F32 into float64, I32 into int32, I64 into int64, U8 into uint8, BOOL into bool)"},
		{"shape mismatch", stFile(`{"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`, 12), ErrMismatch, "tensor a: does not match: file has f32[1,2], the tree to read into has f32[2]"},
		{"half shape mismatch", stFile(`{"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}`, 12), ErrMismatch, "file has f16[4], the tree to read into has f32[2]"},
		{"unsupported dtype", stFile(`{"a":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"b":{"dtype":"I32","shape":[1],"data_offsets":[16,20]}}`, 20), ErrMismatch, "file has i64[2], the tree to read into has f32[2]: I64 elements cannot be read into float32"},
		{"bf16 into int32", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[8,10]}}`, 10), ErrMismatch, "file has bf16[1], the tree to read into has i32[1]: BF16 elements cannot be read into int32"},
		{"missing tensor", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8), ErrMismatch, "tensor b"},
		{"extra tensor", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]},"c":{"dtype":"BOOL","shape":[1],"data_offsets":[12,13]}}`, 13), ErrMismatch, "tensor c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ReadSafetensors(bytes.NewReader(c.file), int64(len(c.file)), like)
			if c.kind == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, c.kind)
			require.Contains(t, err.Error(), c.msg)
		})
	}
	// A bool byte other than 0 or 1 is refused.
	f := stFile(`{"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}`, 0)
	f = append(f, 1, 7)
	_, _, err := ReadSafetensors(bytes.NewReader(f), int64(len(f)), map[string]*tensor.Tensor{"m": tensor.Zeros(tensor.Bool, 2)})
	require.ErrorIs(t, err, ErrCorrupt)
}
