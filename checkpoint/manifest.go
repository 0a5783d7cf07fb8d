package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"path/filepath"
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

const (
	formatName = "gonox-checkpoint"
	// formatVersion is the version Save writes: the lowest that
	// describes the step, so that older readers read what they can. 1;
	// 2 when a tensor has 16-bit elements, a storage field
	// (StoreFloatsAs) or a bfloat16 or float16 dtype, which readers of
	// version 1 would not understand; 3 when the manifest has a metadata
	// record (WithMetadata); 4 when a tensor is float64, int64 or uint8
	// (8-byte elements stored as two little-endian words). Restore reads
	// all four.
	formatVersion         = 1
	formatVersionStorage  = 2
	formatVersionMetadata = 3
	formatVersionWide     = 4
	codecName             = "shuffle+zstd"
	manifestName          = "manifest.json"

	// maxManifestBytes bounds the manifest a restore reads: an indented
	// chunk record takes about 70 bytes, so 256 MiB describes some 3.8
	// million chunks, 3.8 TiB of tensors in the default 1 MiB chunks.
	// Save refuses to write a larger one.
	maxManifestBytes = 256 << 20
	maxElements      = 1 << 48 // per tensor
	maxMeshDevices   = 1 << 16
	maxRank          = 64
)

// manifest is the JSON document that describes one step. See doc.go for
// the layout; parseManifest checks every field before anything uses it.
type manifest struct {
	Format     string             `json:"format"`
	Version    int                `json:"version"`
	Step       int                `json:"step"`
	Time       string             `json:"time,omitempty"`
	Metrics    map[string]float64 `json:"metrics,omitempty"`
	Codec      string             `json:"codec"`
	ChunkBytes int                `json:"chunk_bytes"`
	Metadata   *metadataRecord    `json:"metadata,omitempty"` // version 3
	Tensors    []*tensorEntry     `json:"tensors"`
}

// tensorEntry describes one leaf.
type tensorEntry struct {
	Path   string        `json:"path"`
	DType  string        `json:"dtype"`
	Shape  []int         `json:"shape"`
	Mesh   *meshEntry    `json:"mesh,omitempty"` // nil for a host tensor
	Spec   [][]string    `json:"spec,omitempty"`
	Shards []*shardEntry `json:"shards"`
	// Storage is how float32 elements are stored when not as they are:
	// "bfloat16" or "float16" (version 2).
	Storage string `json:"storage,omitempty"`

	path    pytree.Path  // parsed Path
	dtype   tensor.DType // parsed DType
	storage FloatStorage // parsed Storage
}

// storedSize returns the bytes of one stored element.
func (t *tensorEntry) storedSize() int {
	if t.storage != AsFloat32 {
		return t.storage.size()
	}
	return t.dtype.Size()
}

// meshEntry records the mesh a tensor was sharded over at save time.
type meshEntry struct {
	Axes    []string `json:"axes"`
	Shape   []int    `json:"shape"`
	Devices []int    `json:"devices,omitempty"` // pool IDs, for information
}

// shardEntry is one distinct block of a tensor and where its bytes are.
type shardEntry struct {
	Offset []int          `json:"offset"` // global index of the block's first element
	Shape  []int          `json:"shape"`  // the block's shape
	Device int            `json:"device"` // pool ID of the device that wrote it; -1 for host
	File   string         `json:"file"`   // data file in the step directory
	Pos    int64          `json:"pos"`    // byte position of the first chunk in File
	Size   int64          `json:"size"`   // stored (compressed) bytes, all chunks
	Raw    int64          `json:"raw"`    // raw bytes of the block
	Chunks []*chunkRecord `json:"chunks"` // one per chunk, in order
}

// chunkRecord is one compressed chunk.
type chunkRecord struct {
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

var dtypeNames = map[string]tensor.DType{
	"float32": tensor.Float32, "int32": tensor.Int32, "bool": tensor.Bool,
	"bfloat16": tensor.BFloat16, "float16": tensor.Float16, // version 2
	"float64": tensor.Float64, "int64": tensor.Int64, "uint8": tensor.Uint8, // version 4
}

func dtypeName(dt tensor.DType) string {
	switch dt {
	case tensor.Float32:
		return "float32"
	case tensor.Int32:
		return "int32"
	case tensor.Bool:
		return "bool"
	case tensor.BFloat16:
		return "bfloat16"
	case tensor.Float16:
		return "float16"
	}
	return dt.String()
}

// parseManifest decodes and validates a manifest: every number is checked
// before it is used, so a hostile manifest yields an error, never a panic,
// an out-of-range read or a huge allocation. Errors wrap ErrCorrupt, or
// ErrUnsafePath for file names that would leave the step directory.
func parseManifest(data []byte) (*manifest, error) {
	if len(data) > maxManifestBytes {
		return nil, &Error{Op: "manifest", Step: -1, File: manifestName, Err: errf(ErrCorrupt, "%d bytes is too large for a manifest (limit %d)", len(data), maxManifestBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m manifest
	if err := dec.Decode(&m); err != nil {
		return nil, &Error{Op: "manifest", Step: -1, File: manifestName, Err: errf(ErrCorrupt, "%v", err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Op: "manifest", Step: -1, File: manifestName, Err: errf(ErrCorrupt, "data after the manifest")}
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *manifest) validate() error {
	bad := func(path, file, format string, args ...any) error {
		kind := ErrCorrupt
		if file != "" && !validFileName(file) {
			kind = ErrUnsafePath
		}
		return &Error{Op: "manifest", Step: m.Step, Path: path, File: file, Err: errf(kind, format, args...)}
	}
	if m.Format != formatName {
		return bad("", manifestName, "format %q, want %q", m.Format, formatName)
	}
	if m.Version < formatVersion || m.Version > formatVersionWide {
		return bad("", manifestName, "format version %d, this package reads versions %d to %d (a newer gonox wrote it?)", m.Version, formatVersion, formatVersionWide)
	}
	if m.Step < 0 {
		return bad("", manifestName, "negative step %d", m.Step)
	}
	if m.Codec != codecName {
		return bad("", manifestName, "codec %q, want %q", m.Codec, codecName)
	}
	if m.ChunkBytes <= 0 || m.ChunkBytes > maxChunkBytes || m.ChunkBytes%8 != 0 {
		return bad("", manifestName, "chunk_bytes %d is not a positive multiple of 8 up to %d", m.ChunkBytes, maxChunkBytes)
	}
	if m.Metadata != nil {
		if m.Version < formatVersionMetadata {
			return bad("", manifestName, "a metadata record needs format version %d, the manifest has %d", formatVersionMetadata, m.Version)
		}
		if err := m.Metadata.validate(); err != nil {
			return bad("", manifestName, "%v", err)
		}
	}
	seen := map[string]bool{}
	for i, t := range m.Tensors {
		if t == nil {
			return bad("", manifestName, "tensor %d is null", i)
		}
		p, err := pytree.ParsePath(t.Path)
		if err != nil {
			return bad("", manifestName, "tensor %d: bad path %q: %v", i, t.Path, err)
		}
		t.path = p
		// Compare canonical spellings, so "W" and ".W" are one path.
		key := p.String()
		if seen[key] {
			return bad(t.Path, manifestName, "path appears twice")
		}
		seen[key] = true
		if err := m.validateTensor(t); err != nil {
			return err
		}
	}
	return nil
}

func (m *manifest) validateTensor(t *tensorEntry) error {
	// Errors here are about the manifest, which is what names a wrong
	// shape or offset: the data file a shard entry points to is named in
	// the message, not blamed as the file at fault.
	bad := func(format string, args ...any) error {
		return &Error{Op: "manifest", Step: m.Step, Path: t.Path, File: manifestName, Err: errf(ErrCorrupt, format, args...)}
	}
	sbad := func(k int, s *shardEntry, format string, args ...any) error {
		kind := ErrCorrupt
		if !validFileName(s.File) {
			kind = ErrUnsafePath
		}
		return &Error{Op: "manifest", Step: m.Step, Path: t.Path, File: manifestName, Err: errf(kind, "shard %d (data file %q): %s", k, s.File, fmt.Sprintf(format, args...))}
	}
	dt, ok := dtypeNames[t.DType]
	if !ok {
		return bad("unknown dtype %q", t.DType)
	}
	t.dtype = dt
	if (dt == tensor.BFloat16 || dt == tensor.Float16) && m.Version < formatVersionStorage {
		return bad("dtype %q needs format version %d, the manifest has %d", t.DType, formatVersionStorage, m.Version)
	}
	if isWide(dt) && m.Version < formatVersionWide {
		return bad("dtype %q needs format version %d, the manifest has %d", t.DType, formatVersionWide, m.Version)
	}
	if t.Storage != "" {
		st, ok := storageNames[t.Storage]
		if !ok || dt != tensor.Float32 || m.Version < formatVersionStorage {
			return bad("storage %q is not a storage of %s in format version %d", t.Storage, t.DType, m.Version)
		}
		t.storage = st
	}
	if len(t.Shape) > maxRank {
		return bad("rank %d is too large", len(t.Shape))
	}
	n, ok := numel(t.Shape)
	if !ok {
		return bad("shape %v is negative or too large", t.Shape)
	}
	rank := len(t.Shape)
	parts := make([]int, rank)
	for i := range parts {
		parts[i] = 1
	}
	if t.Mesh == nil {
		if len(t.Spec) != 0 {
			return bad("a spec without a mesh")
		}
	} else {
		mesh := t.Mesh
		if len(mesh.Axes) == 0 || len(mesh.Axes) != len(mesh.Shape) {
			return bad("mesh has %d axis names and %d sizes", len(mesh.Axes), len(mesh.Shape))
		}
		size := 1
		for i, a := range mesh.Axes {
			if a == "" || slices.Index(mesh.Axes, a) != i {
				return bad("mesh axis names %q are empty or repeated", mesh.Axes)
			}
			s := mesh.Shape[i]
			if s < 1 || s > maxMeshDevices || size*s > maxMeshDevices {
				return bad("mesh shape %v is invalid", mesh.Shape)
			}
			size *= s
		}
		if len(t.Spec) > rank {
			return bad("spec %v has more entries than the %d dimensions", t.Spec, rank)
		}
		used := map[string]bool{}
		for d, axes := range t.Spec {
			for _, a := range axes {
				k := slices.Index(mesh.Axes, a)
				if k < 0 || used[a] {
					return bad("spec %v names axis %q that the mesh lacks or uses it twice", t.Spec, a)
				}
				used[a] = true
				parts[d] *= mesh.Shape[k]
			}
			if t.Shape[d]%parts[d] != 0 {
				return bad("dimension %d (%d) is not divisible into %d blocks", d, t.Shape[d], parts[d])
			}
		}
	}
	block := make([]int, rank)
	nblocks := 1
	for i := range block {
		block[i] = t.Shape[i] / parts[i]
		nblocks *= parts[i]
	}
	if len(t.Shards) != nblocks {
		return bad("%d shards, the spec makes %d blocks", len(t.Shards), nblocks)
	}
	esize := int64(t.storedSize())
	blockElems, _ := numel(block)
	raw := int64(blockElems) * esize
	nchunks := (raw + int64(m.ChunkBytes) - 1) / int64(m.ChunkBytes)
	maxFrame := int64(m.ChunkBytes) + int64(m.ChunkBytes)/64 + 1024 // zstd's worst case stays well below
	seen := map[string]bool{}
	for si, s := range t.Shards {
		if s == nil {
			return bad("shard %d is null", si)
		}
		if !validFileName(s.File) {
			return sbad(si, s, "the file name would leave the step directory or is not a plain name")
		}
		if !slices.Equal(s.Shape, block) {
			return sbad(si, s, "shape %v, the spec makes blocks of %v", s.Shape, block)
		}
		if len(s.Offset) != rank {
			return sbad(si, s, "offset %v has rank %d, want %d", s.Offset, len(s.Offset), rank)
		}
		for i, o := range s.Offset {
			if block[i] == 0 {
				if o != 0 {
					return sbad(si, s, "offset %v: dimension %d has empty blocks", s.Offset, i)
				}
			} else if o < 0 || o >= t.Shape[i] || o%block[i] != 0 {
				return sbad(si, s, "offset %v is not a block of shape %v in %v", s.Offset, block, t.Shape)
			}
		}
		if n > 0 {
			key := fmt.Sprint(s.Offset)
			if seen[key] {
				return sbad(si, s, "two shards at offset %v", s.Offset)
			}
			seen[key] = true
		}
		if s.Raw != raw {
			return sbad(si, s, "raw size %d, want %d", s.Raw, raw)
		}
		if int64(len(s.Chunks)) != nchunks {
			return sbad(si, s, "%d chunks, want %d for %d bytes in chunks of %d", len(s.Chunks), nchunks, raw, m.ChunkBytes)
		}
		if s.Pos < 0 || s.Size < 0 || s.Pos > 1<<62 || s.Size > 1<<62 {
			return sbad(si, s, "byte range pos %d size %d is invalid", s.Pos, s.Size)
		}
		var sum int64
		for k, f := range s.Chunks {
			if f == nil || f.Size <= 0 || f.Size > maxFrame {
				return sbad(si, s, "chunk %d has an invalid size", k)
			}
			sum += f.Size
		}
		if sum != s.Size {
			return sbad(si, s, "chunks add up to %d bytes, shard size is %d", sum, s.Size)
		}
	}
	return nil
}

// numel returns the number of elements of shape, and false if a dimension
// is negative or the count exceeds maxElements.
func numel(shape []int) (int, bool) {
	n := uint64(1)
	zero := false
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d == 0 {
			zero = true
			continue
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > maxElements {
			return 0, false
		}
		n = lo
	}
	if zero {
		return 0, true
	}
	return int(n), true
}

// validFileName reports whether name is a plain file name this package
// could have written: letters, digits, '.', '_' and '-', not starting with
// a dot, no separators. Anything else (.., absolute paths, subdirectories)
// is refused before a file is opened; symlinks are caught when opening, by
// os.Root.
func validFileName(name string) bool {
	if name == "" || len(name) > 128 || name[0] == '.' || !filepath.IsLocal(name) {
		return false
	}
	for _, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// encode returns the manifest as indented JSON.
func (m *manifest) encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
