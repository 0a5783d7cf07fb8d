package checkpoint

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// stBytes builds a safetensors file by hand: the 8-byte little-endian
// header length, the header padded with spaces to a multiple of 8, the
// data.
func stBytes(header string, data []byte) []byte {
	for len(header)%8 != 0 {
		header += " "
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func le16(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

func le64(v ...uint64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

func f32bits(x *tensor.Tensor) []uint32 {
	out := make([]uint32, x.Size())
	for i, v := range x.Float32s() {
		out[i] = math.Float32bits(v)
	}
	return out
}

// TestSafetensorsBF16F16 reads BF16 and F16 tensors laid out as PyTorch's
// safetensors.torch.save_file writes them (compact JSON header with
// metadata {"format":"pt"}, space padding, little-endian 16-bit elements)
// into float32 leaves: each value is the exact widening, checked bit for
// bit against patterns worked out by hand.
func TestSafetensorsBF16F16(t *testing.T) {
	bf := []uint16{0x3f80, 0xc000, 0x3f00, 0x4049, 0x0001, 0x7f80, 0xff80, 0x7fc1, 0x8000}
	// 1, -2, 0.5, 3.140625, 2^-133 (smallest subnormal), +Inf, -Inf, NaN
	// with payload, -0: a bfloat16 is the upper half of a float32.
	bfWant := []uint32{0x3f800000, 0xc0000000, 0x3f000000, 0x40490000, 0x00010000, 0x7f800000, 0xff800000, 0x7fc10000, 0x80000000}
	h := []uint16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x7c00, 0xfc00, 0x7e01, 0x8000, 0x3555}
	hWant := []float32{1, -2, 65504, 0x1p-24, 1023 * 0x1p-24, float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 0.333251953125}
	header := `{"__metadata__":{"format":"pt"},"h":{"dtype":"F16","shape":[2,5],"data_offsets":[0,20]},"w":{"dtype":"BF16","shape":[3,3],"data_offsets":[20,38]}}`
	file := stBytes(header, append(le16(h...), le16(bf...)...))
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, os.WriteFile(path, file, 0o644))

	like := map[string]*tensor.Tensor{"w": tensor.Zeros(tensor.Float32, 3, 3), "h": tensor.Zeros(tensor.Float32, 2, 5)}
	got, meta, err := ImportSafetensors(path, like)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"format": "pt"}, meta)
	require.Equal(t, []int{3, 3}, got["w"].Shape())
	require.Equal(t, bfWant, f32bits(got["w"]))
	hb := f32bits(got["h"])
	for i, w := range hWant {
		if i == 7 {
			// NaN 0x7e01: quiet bit and payload 1 move up 13 bits.
			require.Equal(t, uint32(0x7fc02000), hb[i])
			continue
		}
		require.Equal(t, math.Float32bits(w), hb[i], "f16 element %d (%#04x)", i, h[i])
	}
}

// TestSafetensorsF64 reads an F64 tensor into float32: rounding to
// nearest, ties to even, overflow to ±Inf, underflow through subnormals,
// NaN quieted with its payload's top bits, each expectation worked out by
// hand.
func TestSafetensorsF64(t *testing.T) {
	mid := 0x1.ffffffp127 // halfway between the largest float32 and 2^128
	cases := []struct {
		in   float64
		want uint32
	}{
		{1 + 0x1p-24, 0x3f800000},           // tie: to the even 1
		{1 + 0x1p-24 + 0x1p-52, 0x3f800001}, // just above the tie
		{1 + 3*0x1p-24, 0x3f800002},         // tie between odd ...01 and even ...02
		{-1.5, 0xbfc00000},
		{math.MaxFloat32, 0x7f7fffff},
		{mid, 0x7f800000},                    // the tie goes to even: 2^128, infinity
		{math.Nextafter(mid, 0), 0x7f7fffff}, // below it: the largest float32
		{-1e300, 0xff800000},                 // overflow: -Inf
		{math.Inf(1), 0x7f800000},
		{0x1p-150, 0x00000000},                                 // half the smallest subnormal: tie to 0
		{3 * 0x1p-150, 0x00000002},                             // 1.5 times the smallest subnormal: tie, to the even 2
		{0x1p-150 + 0x1p-200, 0x00000001},                      // above the tie: the smallest subnormal
		{math.Copysign(0, -1), 0x80000000},                     // -0 stays -0
		{math.Float64frombits(0xfff4000020000000), 0xffe00001}, // signalling NaN: quieted, payload bits 50..29 kept
	}
	var in []uint64
	for _, c := range cases {
		in = append(in, math.Float64bits(c.in))
	}
	n := len(cases)
	file := stBytes(`{"x":{"dtype":"F64","shape":[`+itoa(n)+`],"data_offsets":[0,`+itoa(8*n)+`]}}`, le64(in...))
	got, _, err := ReadSafetensors(bytes.NewReader(file), int64(len(file)), map[string]*tensor.Tensor{"x": tensor.Zeros(tensor.Float32, n)})
	require.NoError(t, err)
	bits := f32bits(got["x"])
	for i, c := range cases {
		require.Equal(t, c.want, bits[i], "element %d: %v (%#x)", i, c.in, math.Float64bits(c.in))
		// Where Go's conversion is defined (in range), it agrees.
		if math.Abs(c.in) <= math.MaxFloat32 {
			require.Equal(t, math.Float32bits(float32(c.in)), bits[i], "element %d", i)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestExportFloatsAs writes float32 leaves as BF16, F16 and F64 and
// compares the bytes with a file written by hand; reading them back
// gives the rounded values exactly.
func TestExportFloatsAs(t *testing.T) {
	x := []float32{1, -2, 1 + 0x1p-8, 1 + 3*0x1p-8, 70000, 0x1p-20}
	tree := map[string]*tensor.Tensor{"b": tensor.FromFloat32(x, 2, 3), "n": tensor.FromInt32([]int32{7}, 1)}
	cases := []struct {
		s    FloatStorage
		data []byte
		back []float32
	}{
		// bf16: 1+2^-8 is a tie between 1 and 1+2^-7: to the even 1;
		// 1+3*2^-8 a tie between 1+2^-7 (odd) and 1+2^-6: to 1+2^-6.
		{AsBFloat16, le16(0x3f80, 0xc000, 0x3f80, 0x3f82, 0x4789, 0x3580), []float32{1, -2, 1, 1 + 0x1p-6, 70144, 0x1p-20}},
		// f16: 1+2^-8 and 1+3*2^-8 are exact; 70000 overflows to Inf;
		// 2^-20 is the subnormal 16*2^-24.
		{AsFloat16, le16(0x3c00, 0xc000, 0x3c04, 0x3c0c, 0x7c00, 0x0010), []float32{1, -2, 1 + 0x1p-8, 1 + 3*0x1p-8, float32(math.Inf(1)), 0x1p-20}},
		{AsFloat64, le64(0x3ff0000000000000, 0xc000000000000000, 0x3ff0100000000000, 0x3ff0300000000000, 0x40f1170000000000, 0x3eb0000000000000), x},
	}
	for _, c := range cases {
		t.Run(c.s.String(), func(t *testing.T) {
			size := c.s.size()
			header := `{"b":{"dtype":"` + c.s.String() + `","shape":[2,3],"data_offsets":[0,` + itoa(6*size) + `]},"n":{"dtype":"I32","shape":[1],"data_offsets":[` + itoa(6*size) + `,` + itoa(6*size+4) + `]}}`
			if size == 2 {
				// I32 (4 bytes) sorts before a 2-byte dtype.
				header = `{"n":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"` + c.s.String() + `","shape":[2,3],"data_offsets":[4,16]}}`
			}
			var want []byte
			if size == 2 {
				want = stBytes(header, append([]byte{7, 0, 0, 0}, c.data...))
			} else {
				want = stBytes(header, append(c.data, 7, 0, 0, 0))
			}
			var out bytes.Buffer
			require.NoError(t, WriteSafetensors(&out, tree, nil, ExportFloatsAs(c.s)))
			require.Equal(t, string(want), out.String())
			got, _, err := ReadSafetensors(bytes.NewReader(out.Bytes()), int64(out.Len()), map[string]*tensor.Tensor{"b": tensor.Zeros(tensor.Float32, 2, 3), "n": tensor.Zeros(tensor.Int32, 1)})
			require.NoError(t, err)
			require.Equal(t, c.back, got["b"].Float32s())
			require.Equal(t, []int32{7}, got["n"].Int32s())
		})
	}
	require.ErrorContains(t, WriteSafetensors(&bytes.Buffer{}, tree, nil, ExportFloatsAs(FloatStorage(9))), "unknown FloatStorage(9)")
}

// roundedTo returns tree with every float32 leaf rounded to storage s and
// widened back, computed element by element with internal/half.
func roundedTo[T any](tree T, s FloatStorage) T {
	return pytree.Map(tree, func(x *tensor.Tensor) *tensor.Tensor {
		if x.DType() != tensor.Float32 {
			return x
		}
		v := shard.Gather(x).Float32s()
		for i := range v {
			var w float32
			if s == AsBFloat16 {
				w = half.FromFloat32BF(v[i]).Float32()
			} else {
				w = half.FromFloat32(v[i]).Float32()
			}
			v[i] = w
		}
		return tensor.FromFloat32(v, x.Shape()...)
	})
}

// TestStoreFloatsAs saves float32 leaves as bfloat16 and float16, sharded
// and on the host, in chunks small enough that blocks span several, and
// restores them on the saving mesh, another mesh and the host: the
// leaves hold the rounded values exactly, int32 and bool leaves are
// untouched, and the manifest records the storage.
func TestStoreFloatsAs(t *testing.T) {
	for _, s := range []FloatStorage{AsBFloat16, AsFloat16} {
		t.Run(s.String(), func(t *testing.T) {
			dir := t.TempDir()
			mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
			st := newState(5)
			st.Params.W = shard.Put(st.Params.W, shard.NewSharding(mesh, shard.P("dp", "tp")))
			require.NoError(t, Save(dir, 1, st, withChunkBytes(16), StoreFloatsAs(s)))
			want := roundedTo(newState(5), s)

			got, err := Restore(dir, 1, zerosLike(st), nil)
			require.NoError(t, err)
			requireBitExact(t, want, got)
			other := shard.NewMesh([]int{2, 4}, []string{"a", "b"})
			got, err = Restore(dir, 1, zerosLike(st), OnMesh(other, shard.SpecFunc(func(p pytree.Path, x *tensor.Tensor) shard.Spec {
				if p.String() == "Params.W" {
					return shard.P("b", "a")
				}
				return shard.P()
			})))
			require.NoError(t, err)
			requireBitExact(t, want, got)

			m := loadManifest(t, dir, 1)
			require.Equal(t, formatVersionStorage, m.Version)
			require.Equal(t, s.manifestName(), entryOf(m, "Params.W").Storage)
			require.Equal(t, "", entryOf(m, "Step").Storage)
			w := entryOf(m, "Params.W")
			require.Equal(t, int64(2*4*4), w.Shards[0].Raw, "f32[4,4] blocks stored in 2 bytes an element")
			require.Len(t, w.Shards[0].Chunks, 2, "16-byte chunks of 8 elements")
		})
	}
	dir := t.TempDir()
	require.ErrorContains(t, Save(dir, 1, newState(1), StoreFloatsAs(AsFloat64)), "not F64")
	// A storage field in a version 1 manifest, or on an int32 tensor, is
	// refused.
	require.NoError(t, Save(dir, 2, newState(1), StoreFloatsAs(AsBFloat16)))
	m := loadManifest(t, dir, 2)
	m.Version = 1
	writeManifest(t, dir, 2, m)
	_, err := Restore(dir, 2, zerosLike(newState(1)), nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, `storage "bfloat16" is not a storage of float32 in format version 1`)
	m.Version = 2
	entryOf(m, "Step").Storage = "bfloat16"
	writeManifest(t, dir, 2, m)
	_, err = Restore(dir, 2, zerosLike(newState(1)), nil)
	require.ErrorContains(t, err, `storage "bfloat16" is not a storage of int32`)
}

// TestExportOntoDirectory: exporting to the path of a directory names
// it, rather than failing the final rename ("rename /.tmp.tmp-… /tmp:
// file exists") after writing the whole file next to it; a path to a
// regular file is replaced as before.
func TestExportOntoDirectory(t *testing.T) {
	dir := t.TempDir()
	tree := map[string]*tensor.Tensor{"w": tensor.FromFloat32([]float32{1, 2}, 2)}
	err := ExportSafetensors(dir, tree, nil)
	require.ErrorIs(t, err, errNotRegular)
	require.EqualError(t, err, "checkpoint: export: file "+dir+": not a regular file: it is a directory")
	left, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	require.Len(t, left, 1, "no temporary file left beside it")
	path := filepath.Join(dir, "m.safetensors")
	require.NoError(t, ExportSafetensors(path, tree, nil))
	require.NoError(t, ExportSafetensors(path, tree, nil))
}
