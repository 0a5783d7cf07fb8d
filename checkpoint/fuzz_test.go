package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
	"github.com/klauspost/compress/huff0"
	"github.com/stretchr/testify/require"
)

// fuzzFixture saves a small sharded state (frames of 64 bytes) into dir
// and returns its manifest.
func fuzzFixture(t testing.TB, dir string) []byte {
	mesh := shard.NewMesh([]int{2, 2}, []string{"dp", "tp"})
	st := tinyAt(1)
	st.W = shard.Put(st.W, shard.NewSharding(mesh, shard.P("dp", "tp")))
	if err := Save(dir, 1, st, withChunkBytes(64), Overwrite()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(stepDir(dir, 1), manifestName))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzManifest feeds arbitrary manifests to the parser and, when one
// parses, to Restore over real data files: neither may panic, and a
// manifest that parses must survive encoding and parsing again.
func FuzzManifest(f *testing.F) {
	dir := f.TempDir()
	good := fuzzFixture(f, dir)
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"format":"gonox-checkpoint","version":1,"step":1,"codec":"shuffle+zstd","chunk_bytes":64,"tensors":[]}`))
	// The same state with W stored as bfloat16 (its data files are the
	// float32 ones, so restoring it fails on sizes or checksums).
	bf, err := parseManifest(good)
	if err != nil {
		f.Fatal(err)
	}
	bf.Version = formatVersionStorage
	for _, e := range bf.Tensors {
		if e.Path == "W" {
			e.Storage = "bfloat16"
			for _, s := range e.Shards {
				s.Raw /= 2
			}
		}
	}
	if b, err := bf.encode(); err == nil {
		f.Add(b)
	}
	// With a metadata record (format version 3), and one whose value has
	// a key twice.
	withMeta := func(value string) []byte {
		m, err := parseManifest(good)
		if err != nil {
			f.Fatal(err)
		}
		m.Version = formatVersionMetadata
		m.Metadata = &metadataRecord{Kind: "test-run", Version: 2, Gonox: "v1.2.3", Value: []byte(value)}
		b, err := json.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add(withMeta(`{"Model":{"Dim":64,"Heads":4},"Vocab":"ab","Mesh":[2,4]}`))
	f.Add(withMeta(`{"Model":{"Dim":64,"Dim":4}}`))
	manifestPath := filepath.Join(stepDir(dir, 1), manifestName)
	like := tinyAt(0)
	mesh := shard.NewMesh([]int{3}, []string{"dp"})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseManifest(data)
		if err != nil {
			return
		}
		again, err := m.encode()
		require.NoError(t, err)
		_, err = parseManifest(again)
		require.NoError(t, err, "a parsed manifest must encode to one that parses")
		require.NoError(t, os.WriteFile(manifestPath, data, 0o644))
		// Host and a 3-device mesh (rows of W split differently than saved).
		_, _ = Restore(dir, 1, like, nil)
		_, _ = Restore(dir, 1, like, OnMesh(mesh, fitSpec(mesh, shard.P(nil, "dp"))))
	})
}

// FuzzSafetensors feeds arbitrary files to the safetensors reader: it may
// refuse them but never panic, and a header it accepts tiles the data.
func FuzzSafetensors(f *testing.F) {
	var good bytes.Buffer
	tree := small{W: tensor.FromFloat32([]float32{1, -2, 0.5}, 3), Ids: tensor.FromInt32([]int32{7, -1}, 1, 2), Mask: tensor.FromBool([]bool{true, false}, 2)}
	if err := WriteSafetensors(&good, tree, map[string]string{"format": "pt"}); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add(stFile(`{}`, 0))
	f.Add(stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8))
	for _, s := range []FloatStorage{AsBFloat16, AsFloat16, AsFloat64} {
		var b bytes.Buffer
		if err := WriteSafetensors(&b, tree, nil, ExportFloatsAs(s)); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add(torchMLPFile("BF16"))
	f.Add(stFile(`{"W":{"dtype":"F32","dtype":"I32","shape":[3],"data_offsets":[0,12]}}`, 12))
	f.Add(stFile(`{"__metadata__":{"format":"pt","format":"np"},"W":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}`, 12))
	like := zerosLike(tree)
	mlp := zerosLike(nn.NewMLP(tensor.NewKey(0), []int{3, 4, 2}, nn.MLPOptions{}))
	// The same tree with bfloat16 and float16 float leaves: every file
	// dtype's conversion into half leaves is fuzzed too.
	likeBF := pytree.Map(like, func(x *tensor.Tensor) *tensor.Tensor {
		if x.DType() == tensor.Float32 {
			return tensor.Zeros(tensor.BFloat16, x.Shape()...)
		}
		return x
	})
	mlpF16 := nn.CastTo(mlp, tensor.Float16)
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, _, start, err := parseSafetensorsHeader(bytes.NewReader(data), int64(len(data)))
		if err == nil {
			var pos int64
			for _, e := range entries {
				require.Equal(t, pos, e.Begin)
				pos = e.End
			}
			require.Equal(t, int64(len(data))-start, pos)
		}
		_, _, _ = ReadSafetensors(bytes.NewReader(data), int64(len(data)), like)
		_, _, _ = ReadSafetensors(bytes.NewReader(data), int64(len(data)), like, Partial())
		_, _, _ = ReadSafetensors(bytes.NewReader(data), int64(len(data)), mlp, MapNames(TorchMLP(0, 2)...))
		_, _, _ = ReadSafetensors(bytes.NewReader(data), int64(len(data)), likeBF, Partial())
		_, _, _ = ReadSafetensors(bytes.NewReader(data), int64(len(data)), mlpF16, MapNames(TorchMLP(0, 2)...))
	})
}

// TestWriteFuzzSeeds regenerates the seed corpora in testdata/fuzz when
// GONOX_WRITE_FUZZ_SEEDS is set.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("GONOX_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set GONOX_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz")
	}
	good := fuzzFixture(t, t.TempDir())
	variant := func(edit func(m *manifest)) []byte {
		c, err := parseManifest(good)
		require.NoError(t, err)
		edit(c)
		b, err := c.encode()
		require.NoError(t, err)
		return b
	}
	seeds := map[string][]byte{
		"good":          good,
		"truncated":     good[:len(good)/2],
		"dotdot":        variant(func(m *manifest) { m.Tensors[0].Shards[0].File = "../x.bin" }),
		"bad-version":   variant(func(m *manifest) { m.Version = 9 }),
		"big-pos":       variant(func(m *manifest) { m.Tensors[0].Shards[1].Pos = 1 << 40 }),
		"swapped-files": variant(func(m *manifest) { s := m.Tensors[0].Shards; s[0].File, s[1].File = s[1].File, s[0].File }),
		"host-only":     variant(func(m *manifest) { m.Tensors = m.Tensors[1:] }),
		"metadata": variant(func(m *manifest) {
			m.Version = formatVersionMetadata
			m.Metadata = &metadataRecord{Kind: "test-run", Version: 2, Gonox: "v1.2.3", Value: []byte(`{"Model":{"Dim":64,"Heads":4,"TopK":2},"Vocab":"abcz","LR":0.003,"Steps":500,"Mesh":[2,4]}`)}
		}),
		"metadata-version-2": variant(func(m *manifest) {
			m.Metadata = &metadataRecord{Kind: "test-run", Version: 1, Value: []byte(`{}`)}
		}),
	}
	writeSeeds(t, "FuzzManifest", seeds)

	var st bytes.Buffer
	require.NoError(t, WriteSafetensors(&st, small{W: tensor.FromFloat32([]float32{1, -2, 0.5}, 3), Ids: tensor.FromInt32([]int32{7, -1}, 1, 2), Mask: tensor.FromBool([]bool{true, false}, 2)}, map[string]string{"format": "pt"}))
	writeSeeds(t, "FuzzSafetensors", map[string][]byte{
		"good":                   st.Bytes(),
		"empty":                  stFile(`{}`, 0),
		"hole":                   stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[12,16]}}`, 16),
		"overlap":                stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}}`, 8),
		"long":                   append([]byte{0xe8, 3, 0, 0, 0, 0, 0, 0}, `{}`...),
		"duplicate":              stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8),
		"duplicate-field":        stFile(`{"a":{"dtype":"F32","shape":[2],"dtype":"I32","data_offsets":[0,8]}}`, 8),
		"duplicate-metadata-key": stFile(`{"__metadata__":{"format":"pt","format":"np"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8),
	})
}

func writeSeeds(t *testing.T, fuzz string, seeds map[string][]byte) {
	dir := filepath.Join("testdata", "fuzz", fuzz)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, b := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
}

// FuzzMetadata feeds arbitrary record values to the checks a manifest's
// record goes through and to the strict decoding into a program's type:
// nothing may panic, a value the checks accept is one JSON object, and a
// record that decodes re-encodes to one that decodes to the same value,
// which DiffMetadata finds equal to itself.
func FuzzMetadata(f *testing.F) {
	for _, v := range []string{
		`{"Model":{"Dim":64,"Heads":4,"TopK":2},"Vocab":"abcz","LR":0.003,"Steps":500,"Mesh":[2,4]}`,
		`{"Model":{"Dim":64,"Dim":4}}`, `{"Vocab":"a\u00e9\u20ac","Mesh":null}`, `{"Extra":1}`,
		`{"LR":"fast"}`, `[]`, `{}`, `{"Model":{"Heads":1e400}}`, `{"Mesh":[1,[2]]}`,
	} {
		f.Add([]byte(v), uint8(2))
	}
	f.Fuzz(func(t *testing.T, value []byte, version uint8) {
		r := &metadataRecord{Kind: "test-run", Version: int(version), Value: value}
		if r.validate() != nil {
			return
		}
		require.Equal(t, byte('{'), bytes.TrimSpace(value)[0])
		m := &manifest{Step: 1, Metadata: r}
		var got runConfig
		if _, err := decodeMetadata(m, runSchema, &got); err != nil {
			require.ErrorIs(t, err, ErrMismatch)
			return
		}
		require.Empty(t, DiffMetadata(got, got))
		again, err := newRecord(runSchema, got)
		require.NoError(t, err)
		m.Metadata = again
		var back runConfig
		_, err = decodeMetadata(m, runSchema, &back)
		require.NoError(t, err)
		require.Empty(t, DiffMetadata(got, back))
	})
}

// FuzzChunkRoundTrip encodes arbitrary bytes as a chunk of float32 words,
// int32 words, bools, float32 stored as 16 bits, or bfloat16/float16
// elements and decodes them again: the result must be the
// input, whatever its compressibility (nearly incompressible planes once
// produced Huffman blocks larger than the frame, which no decoder reads).
func FuzzChunkRoundTrip(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add(bytes.Repeat([]byte{7}, 1024), uint8(0))
	f.Add([]byte("gonox checkpoints are shuffled and entropy-coded planes"), uint8(1))
	f.Add(bytes.Repeat([]byte{0, 1, 1, 0, 1}, 300), uint8(2))
	// Planes of nearly random bytes with a slight excess of zeros: huff0
	// codes them into more bytes than they hold.
	barely := make([]byte, 4*8192)
	r := rand.New(rand.NewPCG(8192, 34))
	for i := 0; i < 8192; i++ {
		if r.Float64() >= 0.017 {
			v := byte(r.IntN(256))
			barely[4*i], barely[4*i+1], barely[4*i+2], barely[4*i+3] = v, v, v, v
		}
	}
	f.Add(barely, uint8(0))
	f.Add(barely, uint8(3))
	f.Add(barely, uint8(4))
	f.Add(barely, uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		var hs huff0.Scratch
		switch kind % 6 {
		case 5: // bfloat16 or float16 leaves, stored as they are
			h := make([]uint16, len(data)/2)
			for i := range h {
				h[i] = binary.LittleEndian.Uint16(data[2*i:])
			}
			frame := encodeChunk16(nil, make([]byte, 2*len(h)), &hs, h)
			got := make([]uint16, len(h))
			_, err := decodeChunk16(frame, nil, got)
			require.NoError(t, err)
			require.Equal(t, h, got)
			if len(h) > 0 {
				_, err = decodeChunk16(frame, nil, got[1:])
				require.ErrorContains(t, err, "want")
			}
		case 3, 4: // float32 words stored as bfloat16 or float16
			st := AsBFloat16
			if kind%6 == 4 {
				st = AsFloat16
			}
			w := make([]uint32, len(data)/4)
			want := make([]uint32, len(w))
			for i := range w {
				w[i] = binary.LittleEndian.Uint32(data[4*i:])
				want[i] = widen16(st, widen16Inverse(st, w[i]))
			}
			frame := encodeChunkHalf(nil, make([]byte, 2*len(w)), &hs, st, w)
			got := make([]uint32, len(w))
			_, err := decodeChunk(frame, nil, st, got, nil)
			require.NoError(t, err)
			require.Equal(t, want, got)
		case 0, 1: // float32 or int32 words
			w := make([]uint32, len(data)/4)
			for i := range w {
				w[i] = binary.LittleEndian.Uint32(data[4*i:])
			}
			frame := encodeChunk(nil, make([]byte, 4*len(w)), &hs, kind%6 == 0, w, nil)
			got := make([]uint32, len(w))
			_, err := decodeChunk(frame, nil, AsFloat32, got, nil)
			require.NoError(t, err)
			require.Equal(t, w, got)
		case 2: // bools
			b := make([]byte, len(data))
			for i, v := range data {
				b[i] = v & 1
			}
			frame := encodeChunk(nil, nil, &hs, false, nil, b)
			got := make([]byte, len(b))
			_, err := decodeChunk(frame, nil, AsFloat32, nil, got)
			require.NoError(t, err)
			require.Equal(t, b, got)
		}
	})
}

// FuzzStepName checks the parser of step directory names: it never
// panics, accepts exactly the names stepName writes (so a directory
// Steps lists is the one Restore opens), and every accepted name stands
// for a step of at least 0. The seed corpus is in
// testdata/fuzz/FuzzStepName.
func FuzzStepName(f *testing.F) {
	f.Fuzz(func(t *testing.T, name string) {
		n, ok := parseStepName(name)
		if !ok {
			if n != 0 {
				t.Fatalf("%q refused but gave %d", name, n)
			}
			return
		}
		if n < 0 || stepName(n) != name {
			t.Fatalf("%q parsed as step %d, whose name is %q", name, n, stepName(n))
		}
		if got, ok := parseStepName(stepName(n)); !ok || got != n {
			t.Fatalf("stepName(%d) = %q parses as %d, %v", n, stepName(n), got, ok)
		}
	})
}
