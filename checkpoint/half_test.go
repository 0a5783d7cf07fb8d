package checkpoint

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// halfState is a tree with bfloat16 and float16 leaves beside float32
// and int32 ones, as a model kept in bf16 with a float32 master copy.
type halfState struct {
	W     *tensor.Tensor // bf16[16,8]
	H     *tensor.Tensor // f16[8,4]
	S     *tensor.Tensor // bf16[] scalar
	E     *tensor.Tensor // f16[0,3] empty
	M     *tensor.Tensor // f32[16,8] master copy
	Count *tensor.Tensor // i32[]
}

// specialBits are 16-bit patterns whose bits must survive: ±0, ±Inf,
// NaNs with payloads (quiet and signalling), the smallest subnormal, the
// largest finite value.
var specialBits = []uint16{0x8000, 0x7f80, 0xff80, 0x7fc1, 0x7f81, 0x0001, 0x7f7f, 0x7c00, 0xfc00, 0x7e01, 0x7bff}

func newHalfState(seed uint64) halfState {
	k := tensor.NewKey(seed).Split(3)
	w := tensor.Convert(tensor.Normal(k[0], 16, 8), tensor.BFloat16).Bits16()
	copy(w[5:], specialBits)
	h := tensor.Convert(tensor.Normal(k[1], 8, 4), tensor.Float16).Bits16()
	copy(h[2:], specialBits)
	return halfState{
		W:     tensor.FromBits16(tensor.BFloat16, w, 16, 8),
		H:     tensor.FromBits16(tensor.Float16, h, 8, 4),
		S:     tensor.FromBits16(tensor.BFloat16, []uint16{0x3fc0}), // 1.5
		E:     tensor.Zeros(tensor.Float16, 0, 3),
		M:     tensor.Normal(k[2], 16, 8),
		Count: tensor.ScalarInt(int32(seed)),
	}
}

// TestSaveRestoreHalf saves bfloat16 and float16 leaves on the host and
// sharded on a dp=4,tp=2 mesh, in chunks that cut blocks into several,
// and restores them bit for bit on the saving mesh, resharded on another
// mesh and on the host. The manifest names the dtypes and counts 2 bytes
// an element; StoreFloatsAs leaves them alone (it is about float32).
func TestSaveRestoreHalf(t *testing.T) {
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	other := shard.NewMesh([]int{2, 4}, []string{"a", "b"})
	for _, chunk := range []int{16, defaultChunkBytes} {
		for _, store := range []FloatStorage{AsFloat32, AsBFloat16} {
			t.Run(itoa(chunk)+"/"+store.String(), func(t *testing.T) {
				st := newHalfState(3)
				st.W = shard.Put(st.W, shard.NewSharding(mesh, shard.P("dp", "tp")))
				st.H = shard.Put(st.H, shard.NewSharding(mesh, shard.P("tp")))
				dir := t.TempDir()
				require.NoError(t, Save(dir, 4, st, withChunkBytes(chunk), StoreFloatsAs(store)))
				want := newHalfState(3)
				if store != AsFloat32 {
					want = roundedTo(want, store)
				}

				got, err := Restore(dir, 4, st, AsLike())
				require.NoError(t, err)
				requireBitExact(t, want, got)
				s, ok := shard.ShardingOf(got.W)
				require.True(t, ok)
				require.True(t, s.Equal(shard.NewSharding(mesh, shard.P("dp", "tp"))))

				got, err = Restore(dir, 4, zerosLike(newHalfState(3)), nil)
				require.NoError(t, err)
				requireBitExact(t, want, got)

				got, err = Restore(dir, 4, zerosLike(newHalfState(3)), OnMesh(other, shard.SpecFunc(func(p pytree.Path, x *tensor.Tensor) shard.Spec {
					switch p.String() {
					case "W":
						return shard.P("b", "a")
					case "H":
						return shard.P(nil, "b")
					}
					return shard.P()
				})))
				require.NoError(t, err)
				requireBitExact(t, want, got)
				require.Equal(t, tensor.BFloat16, got.W.DType())

				m := loadManifest(t, dir, 4)
				require.Equal(t, formatVersionStorage, m.Version)
				w, h := entryOf(m, "W"), entryOf(m, "H")
				require.Equal(t, "bfloat16", w.DType)
				require.Equal(t, "float16", h.DType)
				require.Equal(t, "float16", entryOf(m, "E").DType)
				require.Equal(t, "", w.Storage, "a bf16 leaf is stored as it is")
				require.Equal(t, int64(2*4*4), w.Shards[0].Raw, "bf16[4,4] blocks: 2 bytes an element")
				require.Equal(t, int64(2*4*4), h.Shards[0].Raw, "f16[4,4] blocks")
				require.Len(t, w.Shards[0].Chunks, (2*16+chunk-1)/chunk)
			})
		}
	}
}

// TestHalfChunkLayout decodes the data file of a host bf16 leaf with the
// zstd decoder alone: the chunk is the plane of low bytes, then the plane
// of high bytes, as for float32 leaves stored as bfloat16.
func TestHalfChunkLayout(t *testing.T) {
	dir := t.TempDir()
	x := tensor.FromBits16(tensor.BFloat16, []uint16{0x3f80, 0xc000, 0x7fc1, 0x0001}, 4)
	require.NoError(t, Save(dir, 1, struct{ X *tensor.Tensor }{x}))
	m := loadManifest(t, dir, 1)
	e := entryOf(m, "X")
	require.Equal(t, "bfloat16", e.DType)
	data, err := os.ReadFile(filepath.Join(stepDir(dir, 1), e.Shards[0].File))
	require.NoError(t, err)
	raw, err := zstdDecoder().DecodeAll(data[e.Shards[0].Pos:e.Shards[0].Pos+e.Shards[0].Size], nil)
	require.NoError(t, err)
	require.Equal(t, []byte{0x80, 0x00, 0xc1, 0x01, 0x3f, 0xc0, 0x7f, 0x00}, raw)
}

// TestRestoreConvertsFloats saves bf16, f16 and f32 leaves and restores
// each into another float dtype, sharded and on the host: the values are
// tensor.Convert's (widening exact, narrowing to nearest even, bf16 to f16
// through float32), NaNs staying NaN. An int32 leaf does not restore into
// a float one, and a bfloat16 dtype in a version 1 manifest is corrupt.
func TestRestoreConvertsFloats(t *testing.T) {
	dir := t.TempDir()
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	saved := newHalfState(1)
	placed := saved
	placed.W = shard.Put(saved.W, shard.NewSharding(mesh, shard.P("dp", "tp")))
	placed.M = shard.Put(saved.M, shard.NewSharding(mesh, shard.P("tp")))
	require.NoError(t, Save(dir, 1, placed, withChunkBytes(16)))
	conv := func(x *tensor.Tensor, dt tensor.DType) *tensor.Tensor { return tensor.Convert(x, dt) }
	like := zerosLike(saved)
	like.W = tensor.Zeros(tensor.Float32, 16, 8)
	like.H = tensor.Zeros(tensor.BFloat16, 8, 4)
	like.M = tensor.Zeros(tensor.BFloat16, 16, 8)
	like.S = tensor.Zeros(tensor.Float16, 1)
	want := saved
	want.W, want.H, want.M, want.S = conv(saved.W, tensor.Float32), conv(saved.H, tensor.BFloat16), conv(saved.M, tensor.BFloat16), conv(saved.S, tensor.Float16)
	for _, to := range []Placement{nil, OnMesh(mesh, shard.SpecFunc(func(p pytree.Path, x *tensor.Tensor) shard.Spec {
		if x.Rank() == 2 && x.Size() > 0 {
			return shard.P("tp", "dp")
		}
		return shard.P()
	}))} {
		got, err := Restore(dir, 1, like, to)
		require.NoError(t, err)
		wp, wl := pytree.LeavesWithPath(want)
		_, gl := pytree.LeavesWithPath(got)
		for i := range wl {
			require.Equal(t, wl[i].DType(), gl[i].DType(), "%v", wp[i])
			wb, gb := leafBits(wl[i]), leafBits(gl[i])
			for k := range wb {
				if isNaNBits(wl[i].DType(), wb[k]) {
					require.True(t, isNaNBits(gl[i].DType(), gb[k]), "%v[%d] NaN", wp[i], k)
					continue
				}
				require.Equal(t, wb[k], gb[k], "%v[%d]", wp[i], k)
			}
		}
	}

	bad := zerosLike(saved)
	bad.Count = tensor.Zeros(tensor.Float32)
	_, err := Restore(dir, 1, bad, nil)
	require.ErrorIs(t, err, ErrMismatch)
	require.ErrorContains(t, err, "the manifest records i32[], the tree to restore into has f32[]")

	m := loadManifest(t, dir, 1)
	m.Version = 1
	writeManifest(t, dir, 1, m)
	_, err = Restore(dir, 1, zerosLike(saved), nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, `dtype "bfloat16" needs format version 2`)
}

// isNaNBits reports whether the bits of leafBits are a NaN of dtype dt.
func isNaNBits(dt tensor.DType, b uint32) bool {
	switch dt {
	case tensor.Float32:
		return math.IsNaN(float64(math.Float32frombits(b)))
	case tensor.BFloat16:
		return math.IsNaN(float64(half.BFloat16(b).Float32()))
	case tensor.Float16:
		return math.IsNaN(float64(half.Float16(b).Float32()))
	}
	return false
}

// TestSafetensorsIntoHalf reads a file written by hand (PyTorch's layout)
// into bfloat16 and float16 leaves. Every expected pattern is worked out
// by hand from the bits:
//   - BF16 into bf16 and F16 into f16 copy, NaN payloads included;
//   - F32 into bf16 rounds to nearest even on the low 16 bits;
//   - F32 into f16 rounds to nearest even, overflowing to Inf;
//   - F16 into bf16 and BF16 into f16 go through float32.
func TestSafetensorsIntoHalf(t *testing.T) {
	bf := []uint16{0x3f80, 0x7fc1, 0x7f81, 0x0001, 0x8000}
	f16 := []uint16{0x3c00, 0x7e01, 0x0001, 0x7bff, 0x3555}
	f32 := []uint32{
		0x3f808000, // 1 + 2^-8: tie between bf16 0x3f80 (even) and 0x3f81: 0x3f80
		0x3f818000, // tie between 0x3f81 (odd) and 0x3f82: 0x3f82
		0x3f808001, // above the tie: 0x3f81
		0x7f7fffff, // the largest float32 rounds up to +Inf in bf16
		0x477fe000, // 65504, the largest f16
		0x477ff000, // 65520: tie between 65504 (odd) and 65536 (overflow): +Inf in f16
		0x33000000, // 2^-25: tie between f16 0 and 2^-24: 0
		0x33400000, // 1.5*2^-25: rounds to the smallest subnormal 0x0001
	}
	var f32le []byte
	for _, v := range f32 {
		f32le = append(f32le, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	header := `{"__metadata__":{"format":"pt"},"f":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},"b":{"dtype":"BF16","shape":[5],"data_offsets":[32,42]},"h":{"dtype":"F16","shape":[5],"data_offsets":[42,52]}}`
	file := stBytes(header, append(append(f32le, le16(bf...)...), le16(f16...)...))
	read := func(t *testing.T, like map[string]*tensor.Tensor) map[string]*tensor.Tensor {
		got, meta, err := ReadSafetensors(bytes.NewReader(file), int64(len(file)), like, Partial())
		require.NoError(t, err)
		require.Equal(t, "pt", meta["format"])
		for k, x := range got {
			require.Equal(t, like[k].DType(), x.DType(), k)
		}
		return got
	}
	got := read(t, map[string]*tensor.Tensor{"b": tensor.Zeros(tensor.BFloat16, 5), "h": tensor.Zeros(tensor.Float16, 5)})
	require.Equal(t, bf, got["b"].Bits16(), "BF16 into bf16 is a copy")
	require.Equal(t, f16, got["h"].Bits16(), "F16 into f16 is a copy")

	got = read(t, map[string]*tensor.Tensor{"f": tensor.Zeros(tensor.BFloat16, 8)})
	require.Equal(t, []uint16{0x3f80, 0x3f82, 0x3f81, 0x7f80, 0x4780, 0x4780, 0x3300, 0x3340}, got["f"].Bits16())
	got = read(t, map[string]*tensor.Tensor{"f": tensor.Zeros(tensor.Float16, 8)})
	// In f16 (ulp 2^-10 at 1) 1+2^-8, 1+3*2^-8 are exact (0x3c04, 0x3c0c)
	// and 1+2^-8+2^-23 rounds down to 0x3c04.
	require.Equal(t, []uint16{0x3c04, 0x3c0c, 0x3c04, 0x7c00, 0x7bff, 0x7c00, 0x0000, 0x0001}, got["f"].Bits16())

	// F16 into bf16: 1 → 0x3f80; the NaN 0x7e01 (float32 0x7fc02000)
	// keeps its top payload bits: 0x7fc0; 2^-24 → 0x3380; 65504
	// (0x477fe000) rounds up to 65536 = 0x4780; 0x3555 = 0x3eaaa000
	// rounds up to 0x3eab.
	got = read(t, map[string]*tensor.Tensor{"h": tensor.Zeros(tensor.BFloat16, 5)})
	hb := got["h"].Bits16()
	require.Equal(t, []uint16{0x3f80, 0x3380, 0x4780, 0x3eab}, []uint16{hb[0], hb[2], hb[3], hb[4]})
	require.True(t, math.IsNaN(float64(half.BFloat16(hb[1]).Float32())))
	// BF16 into f16: 1 → 0x3c00; NaNs stay NaN; 2^-133 underflows to +0;
	// -0 stays -0.
	got = read(t, map[string]*tensor.Tensor{"b": tensor.Zeros(tensor.Float16, 5)})
	bh := got["b"].Bits16()
	require.Equal(t, []uint16{0x3c00, 0x0000, 0x8000}, []uint16{bh[0], bh[3], bh[4]})
	for _, v := range bh[1:3] {
		require.Equal(t, uint16(0x7c00), v&0x7c00, "NaN exponent")
		require.NotZero(t, v&0x03ff, "NaN mantissa")
	}

	// F64 and I32 are not read into half leaves.
	f64 := stBytes(`{"d":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, le64(0x3ff0000000000000))
	_, _, err := ReadSafetensors(bytes.NewReader(f64), int64(len(f64)), map[string]*tensor.Tensor{"d": tensor.Zeros(tensor.BFloat16, 1)})
	require.ErrorIs(t, err, ErrMismatch)
	require.ErrorContains(t, err, "file has f64[1], the tree to read into has bf16[1]: F64 elements cannot be read into bfloat16")
}

// TestExportHalf writes bf16 and f16 leaves natively (ExportFloatsAs does
// not touch them), compares the bytes with a file written by hand, and
// reads them back bit for bit, also transposed by MapNames.
func TestExportHalf(t *testing.T) {
	mesh := shard.NewMesh([]int{2}, []string{"dp"})
	tree := map[string]*tensor.Tensor{
		"w": shard.Put(tensor.FromBits16(tensor.BFloat16, []uint16{0x3f80, 0x7fc1, 0x0001, 0x8000}, 2, 2), shard.NewSharding(mesh, shard.P("dp"))),
		"h": tensor.FromBits16(tensor.Float16, []uint16{0x3c00, 0x7e01, 0xfc00}, 3),
		"f": tensor.FromFloat32([]float32{1}, 1),
	}
	for _, s := range []FloatStorage{AsFloat32, AsFloat64} {
		var out bytes.Buffer
		require.NoError(t, WriteSafetensors(&out, tree, nil, ExportFloatsAs(s)))
		fsize := s.size()
		header := `{"f":{"dtype":"` + s.String() + `","shape":[1],"data_offsets":[0,` + itoa(fsize) + `]},` +
			`"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[` + itoa(fsize) + `,` + itoa(fsize+8) + `]},` +
			`"h":{"dtype":"F16","shape":[3],"data_offsets":[` + itoa(fsize+8) + `,` + itoa(fsize+14) + `]}}`
		one := []byte{0, 0, 0x80, 0x3f}
		if s == AsFloat64 {
			one = le64(0x3ff0000000000000)
		}
		want := stBytes(header, append(append(one, le16(0x3f80, 0x7fc1, 0x0001, 0x8000)...), le16(0x3c00, 0x7e01, 0xfc00)...))
		require.Equal(t, string(want), out.String(), s.String())
	}
	path := filepath.Join(t.TempDir(), "half.safetensors")
	require.NoError(t, ExportSafetensors(path, tree, map[string]string{"format": "pt"}))
	like := map[string]*tensor.Tensor{"w": tensor.Zeros(tensor.BFloat16, 2, 2), "h": tensor.Zeros(tensor.Float16, 3), "f": tensor.Zeros(tensor.Float32, 1)}
	got, _, err := ImportSafetensors(path, like)
	require.NoError(t, err)
	requireBitExact(t, tree, got)

	got, _, err = ImportSafetensors(path, like, MapNames(Transpose(`^w$`)))
	require.NoError(t, err)
	require.Equal(t, []uint16{0x3f80, 0x0001, 0x7fc1, 0x8000}, got["w"].Bits16(), "transposed")
}
