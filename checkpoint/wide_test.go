package checkpoint

import (
	"bytes"
	"testing"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type wideTree struct {
	Pix  *tensor.Tensor // u8
	W    *tensor.Tensor // f64
	Ids  *tensor.Tensor // i64
	Bias *tensor.Tensor // f32
}

// TestSafetensorsWideByteExact checks F64, I64 and U8 tensors against a
// file written by hand from the format's rules: ordered as the reference
// implementation orders dtypes (I64, F64, F32, ..., U8), little-endian,
// and read back exactly, float64 and int64 beyond 2^53 included.
func TestSafetensorsWideByteExact(t *testing.T) {
	tree := wideTree{
		Pix:  tensor.FromUint8([]uint8{0, 255, 7}, 3),
		W:    tensor.FromFloat64s([]float64{1.0 / 3, -2}, 2),
		Ids:  tensor.FromInt64([]int64{1<<53 + 1}, 1),
		Bias: tensor.FromFloat32([]float32{0.5}, 1),
	}
	header := `{"Ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},` +
		`"W":{"dtype":"F64","shape":[2],"data_offsets":[8,24]},` +
		`"Bias":{"dtype":"F32","shape":[1],"data_offsets":[24,28]},` +
		`"Pix":{"dtype":"U8","shape":[3],"data_offsets":[28,31]}}`
	require.Len(t, header, 224) // a multiple of 8: no padding
	want := []byte{224, 0, 0, 0, 0, 0, 0, 0}
	want = append(want, header...)
	want = append(want,
		0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, // 2^53 + 1
		0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0xd5, 0x3f, // 1/3
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, // -2
		0x00, 0x00, 0x00, 0x3f, // 0.5
		0x00, 0xff, 0x07,
	)
	var got bytes.Buffer
	require.NoError(t, WriteSafetensors(&got, tree, nil))
	require.Equal(t, want, got.Bytes())

	like := wideTree{Pix: tensor.Zeros(tensor.Uint8, 3), W: tensor.Zeros(tensor.Float64, 2), Ids: tensor.Zeros(tensor.Int64, 1), Bias: tensor.Zeros(tensor.Float32, 1)}
	back, _, err := ReadSafetensors(bytes.NewReader(want), int64(len(want)), like)
	require.NoError(t, err)
	assert.Equal(t, []uint8{0, 255, 7}, back.Pix.Uint8s())
	assert.Equal(t, []float64{1.0 / 3, -2}, back.W.Float64s())
	assert.Equal(t, []int64{1<<53 + 1}, back.Ids.Int64s())
	assert.Equal(t, []float32{0.5}, back.Bias.Float32s())

	// F64 reads into float32 leaves (rounded) and F32 into float64 ones
	// (exactly); I64 does not read into int32.
	conv := wideTree{Pix: like.Pix, W: tensor.Zeros(tensor.Float32, 2), Ids: like.Ids, Bias: tensor.Zeros(tensor.Float64, 1)}
	back, _, err = ReadSafetensors(bytes.NewReader(want), int64(len(want)), conv)
	require.NoError(t, err)
	assert.Equal(t, []float32{1.0 / 3, -2}, back.W.Float32s())
	assert.Equal(t, []float64{0.5}, back.Bias.Float64s())
	bad := wideTree{Pix: like.Pix, W: like.W, Ids: tensor.Zeros(tensor.Int32, 1), Bias: like.Bias}
	_, _, err = ReadSafetensors(bytes.NewReader(want), int64(len(want)), bad)
	require.ErrorIs(t, err, ErrMismatch)
	assert.Contains(t, err.Error(), "I64 elements cannot be read into int32")
}

// A transposed F64 tensor (MapNames' Transpose) is read transposed.
func TestSafetensorsWideTranspose(t *testing.T) {
	src := map[string]*tensor.Tensor{"w": tensor.FromFloat64s([]float64{1, 2, 3, 4, 5, 6}, 2, 3)}
	var b bytes.Buffer
	require.NoError(t, WriteSafetensors(&b, src, nil))
	like := map[string]*tensor.Tensor{"w": tensor.Zeros(tensor.Float64, 3, 2)}
	got, _, err := ReadSafetensors(bytes.NewReader(b.Bytes()), int64(b.Len()), like, MapNames(Transpose("w")))
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 4, 2, 5, 3, 6}, got["w"].Float64s())
}

// Save and Restore keep float64, int64 and uint8 leaves bit for bit,
// across chunk boundaries and on a mesh, in format version 4.
func TestCheckpointWide(t *testing.T) {
	k := tensor.NewKey(9)
	n := 1000
	ids := make([]int64, n)
	pix := make([]uint8, n)
	for i := range ids {
		ids[i] = int64(i)*(1<<40) + int64(i%7) - 1<<62
		pix[i] = uint8(i * 37)
	}
	tree := wideTree{
		Pix:  tensor.FromUint8(pix, 10, 100),
		W:    tensor.NormalFloat64(k, 10, 100),
		Ids:  tensor.FromInt64(ids, 100, 10),
		Bias: tensor.FromFloat32([]float32{0.5, -1}, 2),
	}
	like := wideTree{Pix: tensor.Zeros(tensor.Uint8, 10, 100), W: tensor.Zeros(tensor.Float64, 10, 100), Ids: tensor.Zeros(tensor.Int64, 100, 10), Bias: tensor.Zeros(tensor.Float32, 2)}
	for _, chunk := range []int{64, defaultChunkBytes} {
		dir := t.TempDir()
		require.NoError(t, Save(dir, 1, tree, withChunkBytes(chunk)))
		m := loadManifest(t, dir, 1)
		assert.Equal(t, formatVersionWide, m.Version)
		got, err := Restore(dir, 1, like, OnHost())
		require.NoError(t, err)
		assert.Equal(t, tree.W.Float64s(), got.W.Float64s(), "chunk %d", chunk)
		assert.Equal(t, ids, got.Ids.Int64s(), "chunk %d", chunk)
		assert.Equal(t, pix, got.Pix.Uint8s(), "chunk %d", chunk)
		assert.Equal(t, []float32{0.5, -1}, got.Bias.Float32s())

		// Placed on a mesh: saved by block, restored onto the mesh.
		mesh := shard.NewMesh([]int{2}, []string{"dp"})
		placed := tree
		placed.W = shard.Put(tree.W, shard.NewSharding(mesh, shard.P("dp")))
		placed.Ids = shard.Put(tree.Ids, shard.NewSharding(mesh, shard.P("dp")))
		pdir := t.TempDir()
		require.NoError(t, Save(pdir, 2, placed, withChunkBytes(chunk)))
		back, err := Restore(pdir, 2, placed, AsLike())
		require.NoError(t, err)
		_, ok := shard.ShardingOf(back.W)
		assert.True(t, ok, "W restored onto the mesh")
		assert.Equal(t, tree.W.Float64s(), shard.Gather(back.W).Float64s())
		assert.Equal(t, ids, shard.Gather(back.Ids).Int64s())

		_, err = Restore(dir, 1, wideTree{Pix: like.Pix, W: tensor.Zeros(tensor.Float32, 10, 100), Ids: like.Ids, Bias: like.Bias}, OnHost())
		require.ErrorIs(t, err, ErrMismatch, "float64 is restored only into float64")
	}
}
