package checkpoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// The safetensors format (Hugging Face), as this file writes and checks it:
//
//	8 bytes   N, the header length, unsigned little-endian
//	N bytes   a JSON object, UTF-8, starting with '{' and padded with spaces
//	          to a multiple of 8 bytes:
//	            {"__metadata__":{"k":"v",...},          optional, strings only
//	             "name":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},...}
//	rest      the data: each tensor's elements, row-major, little-endian,
//	          at [begin, end) relative to the start of the data; the ranges
//	          tile the data exactly, without holes or overlaps.
//
// Names are tree paths ("Layers[0].W"). Writers order tensors by dtype
// alignment, largest first, then by name, as the reference implementation
// does, so that every tensor is aligned to its element size.

const maxSafetensorsHeader = 100_000_000 // the reference implementation's limit

// safetensorsDTypes maps the format's dtype names to element sizes. All
// are recognised, so that their sizes are checked; converter says which
// can be read into which leaves.
var safetensorsDTypes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "F4": 1, "F6_E2M3": 1, "F6_E3M2": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8, "C64": 8,
}

// safetensorsOrder ranks the dtypes this package writes as the reference
// implementation orders them (its Dtype enum, largest first) between
// tensors of one element size.
var safetensorsOrder = map[string]int{"I64": 7, "F64": 6, "F32": 5, "I32": 4, "BF16": 3, "F16": 2, "U8": 1, "BOOL": 0}

func safetensorsName(dt tensor.DType, floats FloatStorage) string {
	switch dt {
	case tensor.Float32:
		return floats.String()
	case tensor.BFloat16:
		return "BF16"
	case tensor.Float16:
		return "F16"
	case tensor.Int32:
		return "I32"
	case tensor.Float64:
		return "F64"
	case tensor.Int64:
		return "I64"
	case tensor.Uint8:
		return "U8"
	}
	return "BOOL"
}

// ExportOption configures ExportSafetensors and WriteSafetensors.
type ExportOption func(*exportConfig)

type exportConfig struct {
	floats FloatStorage
}

// ExportFloatsAs stores the float32 leaves as s (BF16, F16 or F64;
// AsFloat32 is the default), rounding as FloatStorage says. Hugging Face
// models are mostly published in BF16. Leaves of dtype bfloat16 and
// float16 are stored as they are (BF16, F16) whatever s.
func ExportFloatsAs(s FloatStorage) ExportOption { return func(c *exportConfig) { c.floats = s } }

// stEntry is one tensor of a safetensors header.
type stEntry struct {
	Name       string // the tree path it goes to (after MapNames)
	DType      string
	Shape      []int // the shape in the tree (transposed if transpose)
	Begin, End int64

	File      string // the name in the file, when MapNames renamed it
	transpose bool   // stored transposed (MapNames' Transpose)
}

// ExportSafetensors writes the tensor leaves of tree to a .safetensors file
// that PyTorch (safetensors.torch.load_file), JAX/Flax
// (safetensors.flax.load_file) and NumPy load: each leaf under its tree
// path, sharded leaves gathered one at a time. metadata, if not nil, goes
// into the header's "__metadata__". The file is written to a temporary
// name and renamed, so it appears complete or not at all.
//
// By default float32 leaves are stored as F32; ExportFloatsAs stores them
// as BF16, F16 or F64. Bfloat16 and float16 leaves are stored as BF16 and
// F16, bit for bit; int32 as I32, bool as BOOL.
func ExportSafetensors(path string, tree any, metadata map[string]string, opts ...ExportOption) (err error) {
	fail := func(e error) error { return &Error{Op: "export", Step: -1, File: path, Err: e} }
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return fail(notRegular(fi.Mode()))
	}
	tmp, err := createTemp(path)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := WriteSafetensors(bw, tree, metadata, opts...); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fail(err)
	}
	return nil
}

// createTemp creates a new file next to path, under a hidden random name,
// with mode 0644 less the umask, as Save's files (os.CreateTemp would
// make it 0600, and the rename would keep that).
func createTemp(path string) (*os.File, error) {
	dir, base := filepath.Split(path)
	for range 100 {
		name := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("no free temporary name next to %s", path)
}

// WriteSafetensors writes tree in the safetensors format to w (see
// ExportSafetensors).
func WriteSafetensors(w io.Writer, tree any, metadata map[string]string, opts ...ExportOption) error {
	var cfg exportConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.floats.size() == 0 {
		return &Error{Op: "export", Step: -1, Err: fmt.Errorf("unknown %v", cfg.floats)}
	}
	paths, leaves := pytree.LeavesWithPath(tree)
	type item struct {
		name  string
		dtype string
		x     *tensor.Tensor
	}
	items := make([]item, len(leaves))
	for i, x := range leaves {
		if x.Local() != nil {
			return &Error{Op: "export", Step: -1, Path: paths[i].String(), Err: fmt.Errorf("%v is a block inside shard.Map", x)}
		}
		items[i] = item{tensorName(paths[i]), safetensorsName(x.DType(), cfg.floats), x}
	}
	sort.SliceStable(items, func(a, b int) bool {
		sa, sb := safetensorsDTypes[items[a].dtype], safetensorsDTypes[items[b].dtype]
		if sa != sb {
			return sa > sb
		}
		if items[a].dtype != items[b].dtype {
			return safetensorsOrder[items[a].dtype] > safetensorsOrder[items[b].dtype] // F32 before I32, as in the reference
		}
		return items[a].name < items[b].name
	})
	entries := make([]stEntry, len(items))
	var off int64
	for i, it := range items {
		n := int64(it.x.Size() * safetensorsDTypes[it.dtype])
		entries[i] = stEntry{Name: it.name, DType: it.dtype, Shape: it.x.Shape(), Begin: off, End: off + n}
		off += n
	}
	header := encodeSafetensorsHeader(entries, metadata)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return &Error{Op: "export", Step: -1, Err: err}
	}
	if _, err := w.Write(header); err != nil {
		return &Error{Op: "export", Step: -1, Err: err}
	}
	buf := make([]byte, 0, 1<<20)
	const run = 1 << 17 // elements converted per write: at most 1 MiB as F64
	for _, it := range items {
		x := shard.Gather(it.x)
		if isHalf(x.DType()) {
			h := halves(x)
			for k := 0; k < len(h); k += run {
				buf = buf[:0]
				for _, v := range h[k:min(len(h), k+run)] {
					buf = binary.LittleEndian.AppendUint16(buf, v)
				}
				if _, err := w.Write(buf); err != nil {
					return &Error{Op: "export", Step: -1, Path: it.name, Err: err}
				}
			}
			continue
		}
		if isWide(x.DType()) {
			n := x.Size()
			for k := 0; k < n; k += run {
				buf = appendWide(buf[:0], x, k, min(n, k+run))
				if _, err := w.Write(buf); err != nil {
					return &Error{Op: "export", Step: -1, Path: it.name, Err: err}
				}
			}
			continue
		}
		ws, bs := words(x)
		if ws == nil {
			if _, err := w.Write(bs); err != nil {
				return &Error{Op: "export", Step: -1, Path: it.name, Err: err}
			}
			continue
		}
		floats := AsFloat32
		if x.DType() == tensor.Float32 {
			floats = cfg.floats
		}
		for k := 0; k < len(ws); k += run {
			buf = appendStored(buf[:0], floats, ws[k:min(len(ws), k+run)])
			if _, err := w.Write(buf); err != nil {
				return &Error{Op: "export", Step: -1, Path: it.name, Err: err}
			}
		}
	}
	return nil
}

// encodeSafetensorsHeader writes the JSON header as serde_json does
// (compact, metadata first, keys in the given order, sorted metadata keys)
// padded with spaces to a multiple of 8.
func encodeSafetensorsHeader(entries []stEntry, metadata map[string]string) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	if metadata != nil {
		b.WriteString(`"__metadata__":{`)
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, k)
			b.WriteByte(':')
			writeJSONString(&b, metadata[k])
		}
		b.WriteByte('}')
		first = false
	}
	for _, e := range entries {
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSONString(&b, e.Name)
		b.WriteString(`:{"dtype":"`)
		b.WriteString(e.DType)
		b.WriteString(`","shape":[`)
		for i, d := range e.Shape {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		b.WriteString(`],"data_offsets":[`)
		b.WriteString(strconv.FormatInt(e.Begin, 10))
		b.WriteByte(',')
		b.WriteString(strconv.FormatInt(e.End, 10))
		b.WriteString("]}")
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes()
}

// writeJSONString writes s as a JSON string the way serde_json does:
// only '"', '\\' and control characters are escaped.
func writeJSONString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[r>>4])
			b.WriteByte(hex[r&0xf])
		case r == utf8.RuneError:
			b.WriteString("\ufffd")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// parseSafetensorsHeader reads and checks the header of a safetensors file
// of size bytes: the header length against the file, the JSON (an object,
// no duplicate names, metadata of strings), every dtype, shape and offset
// pair, and that the ranges tile the data exactly. It returns the entries
// ordered by offset and the position where the data starts.
func parseSafetensorsHeader(r io.ReaderAt, size int64) ([]stEntry, map[string]string, int64, error) {
	bad := func(name, format string, args ...any) error {
		return &Error{Op: "import", Step: -1, Path: name, Err: errf(ErrCorrupt, format, args...)}
	}
	if size < 8 {
		return nil, nil, 0, bad("", "file of %d bytes is shorter than the 8-byte header length", size)
	}
	var lenBuf [8]byte
	if err := readAtFull(r, lenBuf[:], 0); err != nil {
		return nil, nil, 0, bad("", "reading the header length: %v", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > maxSafetensorsHeader {
		return nil, nil, 0, bad("", "header length %d exceeds the limit of %d", n, maxSafetensorsHeader)
	}
	if int64(n) > size-8 {
		return nil, nil, 0, bad("", "header length %d is larger than the file (%d bytes after the length)", n, size-8)
	}
	hdr := make([]byte, n)
	if err := readAtFull(r, hdr, 8); err != nil {
		return nil, nil, 0, bad("", "reading the header: %v", err)
	}
	if !utf8.Valid(hdr) {
		return nil, nil, 0, bad("", "header is not UTF-8")
	}
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, nil, 0, bad("", "header does not start with '{'")
	}
	entries, meta, err := decodeSafetensorsJSON(hdr)
	if err != nil {
		return nil, nil, 0, bad("", "%v", err)
	}
	dataLen := size - 8 - int64(n)
	sort.SliceStable(entries, func(a, b int) bool {
		if entries[a].Begin != entries[b].Begin {
			return entries[a].Begin < entries[b].Begin
		}
		return entries[a].End < entries[b].End
	})
	var pos int64
	for _, e := range entries {
		esize, ok := safetensorsDTypes[e.DType]
		if !ok {
			return nil, nil, 0, bad(e.Name, "unknown dtype %q", e.DType)
		}
		if e.Begin < pos {
			return nil, nil, 0, bad(e.Name, "data_offsets [%d, %d) overlap the previous tensor, which ends at %d", e.Begin, e.End, pos)
		}
		if e.Begin > pos {
			return nil, nil, 0, bad(e.Name, "hole in the data: bytes [%d, %d) belong to no tensor", pos, e.Begin)
		}
		if e.End < e.Begin {
			return nil, nil, 0, bad(e.Name, "data_offsets [%d, %d) end before they begin", e.Begin, e.End)
		}
		elems := uint64(1)
		for _, d := range e.Shape {
			hi, lo := bits.Mul64(elems, uint64(d))
			if hi != 0 || lo > 1<<62 {
				return nil, nil, 0, bad(e.Name, "shape %v is too large", e.Shape)
			}
			elems = lo
		}
		hi, want := bits.Mul64(elems, uint64(esize))
		if hi != 0 || want > 1<<62 || int64(want) != e.End-e.Begin {
			return nil, nil, 0, bad(e.Name, "%s needs %d bytes, data_offsets [%d, %d) hold %d", typeString(strings.ToLower(e.DType), e.Shape), elems*uint64(esize), e.Begin, e.End, e.End-e.Begin)
		}
		if e.End > dataLen {
			return nil, nil, 0, bad(e.Name, "data_offsets [%d, %d) run past the end of the data (%d bytes)", e.Begin, e.End, dataLen)
		}
		pos = e.End
	}
	if pos != dataLen {
		return nil, nil, 0, bad("", "the tensors cover %d bytes of data, the file has %d", pos, dataLen)
	}
	return entries, meta, 8 + int64(n), nil
}

// decodeSafetensorsJSON parses the header object token by token, so that
// duplicate names are caught (encoding/json into a map keeps the last).
// The reference implementation (the safetensors crate, serde_json) refuses
// a tensor entry with a field twice, as this does. It keeps the last of
// two tensors of one name, and of two __metadata__ keys, where this
// refuses the header: no writer produces one, and which one was meant
// cannot be known.
func decodeSafetensorsJSON(hdr []byte) ([]stEntry, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, nil, fmt.Errorf("header is not a JSON object")
	}
	var entries []stEntry
	var meta map[string]string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("header: %v", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, nil, fmt.Errorf("header: key %v is not a string", tok)
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("header: name %q appears twice", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			var obj json.RawMessage
			if err := dec.Decode(&obj); err != nil {
				return nil, nil, fmt.Errorf("__metadata__: %v", err)
			}
			if err := checkJSONObject(obj); err != nil {
				return nil, nil, fmt.Errorf("__metadata__: %v", err)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(obj, &raw); err != nil {
				return nil, nil, fmt.Errorf("__metadata__: %v", err)
			}
			meta = make(map[string]string, len(raw))
			for k, v := range raw {
				var s string
				if err := json.Unmarshal(v, &s); err != nil {
					return nil, nil, fmt.Errorf("__metadata__ value of %q is not a string", k)
				}
				meta[k] = s
			}
			continue
		}
		var info struct {
			DType       *string   `json:"dtype"`
			Shape       *[]uint64 `json:"shape"`
			DataOffsets *[]uint64 `json:"data_offsets"`
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %v", name, err)
		}
		// A field twice ("dtype" twice) is refused, as the reference's
		// serde-derived TensorInfo does; encoding/json keeps the last.
		if err := checkJSONObject(raw); err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %v", name, err)
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&info); err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %v", name, err)
		}
		if info.DType == nil || info.Shape == nil || info.DataOffsets == nil {
			return nil, nil, fmt.Errorf("tensor %q: needs dtype, shape and data_offsets", name)
		}
		if len(*info.DataOffsets) != 2 {
			return nil, nil, fmt.Errorf("tensor %q: data_offsets has %d numbers, want 2", name, len(*info.DataOffsets))
		}
		b, e := (*info.DataOffsets)[0], (*info.DataOffsets)[1]
		if b > 1<<62 || e > 1<<62 {
			return nil, nil, fmt.Errorf("tensor %q: data_offsets [%d, %d) out of range", name, b, e)
		}
		if len(*info.Shape) > maxRank {
			return nil, nil, fmt.Errorf("tensor %q: rank %d is too large", name, len(*info.Shape))
		}
		shape := make([]int, len(*info.Shape))
		for i, v := range *info.Shape {
			if v > 1<<62 {
				return nil, nil, fmt.Errorf("tensor %q: shape %v out of range", name, *info.Shape)
			}
			shape[i] = int(v)
		}
		entries = append(entries, stEntry{Name: name, DType: *info.DType, Shape: shape, Begin: int64(b), End: int64(e)})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, nil, fmt.Errorf("header object is not closed")
	}
	// Only the padding may follow: spaces (JSON whitespace is accepted,
	// as the reference reader does).
	for _, c := range hdr[dec.InputOffset():] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return nil, nil, fmt.Errorf("header: %q after the JSON object", c)
		}
	}
	return entries, meta, nil
}

// ImportSafetensors reads a .safetensors file into a tree of like's type:
// each leaf is the tensor named by its tree path, which must have the
// leaf's shape and a dtype that converts to the leaf's:
//
//   - F32, BF16 and F16 into float32, exactly (widening);
//   - F64 into float32, rounded to nearest, ties to even: magnitudes from
//     0x1.ffffffp127 (halfway between the largest float32 and 2^128) up
//     become ±Inf, tiny ones float32 subnormals or ±0, NaN stays NaN (sign
//     and top payload bits kept, quieted);
//   - BF16 into bfloat16 and F16 into float16, bit for bit;
//   - F32 into bfloat16 or float16, rounded to nearest, ties to even (NaN
//     stays NaN, ±Inf stays ±Inf; float16 overflows to ±Inf beyond 65504
//     and keeps small values as subnormals);
//   - F16 into bfloat16 and BF16 into float16 through float32: widened
//     exactly, then rounded once as from F32 (BF16 values beyond the
//     float16 range become ±Inf, tiny ones float16 subnormals or ±0);
//   - I32 into int32 and BOOL into bool.
//
// Any other pairing is an error wrapping ErrMismatch that says so. Subtree and Partial select
// part of the file as they do for Restore. It returns the tree and the
// header's metadata. The leaves are host tensors; place them with
// shard.FilterShard.
func ImportSafetensors[T any](path string, like T, opts ...RestoreOption) (T, map[string]string, error) {
	var zero T
	f, err := openRegularPath(path)
	if err != nil {
		return zero, nil, &Error{Op: "import", Step: -1, File: path, Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return zero, nil, &Error{Op: "import", Step: -1, File: path, Err: err}
	}
	out, meta, err := ReadSafetensors(f, fi.Size(), like, opts...)
	var e *Error
	if errors.As(err, &e) && e.File == "" {
		e.File = path
	}
	return out, meta, err
}

// ReadSafetensors is ImportSafetensors reading from r, of size bytes.
func ReadSafetensors[T any](r io.ReaderAt, size int64, like T, opts ...RestoreOption) (T, map[string]string, error) {
	var zero T
	var cfg restoreConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.meta != nil || cfg.skip {
		return zero, nil, &Error{Op: "import", Step: -1, Err: errors.New("CheckMetadata and SkipCorrupt apply to checkpoints, not to safetensors files")}
	}
	entries, meta, dataStart, err := parseSafetensorsHeader(r, size)
	if err != nil {
		return zero, nil, err
	}
	if entries, err = applyRules(entries, cfg.rules); err != nil {
		return zero, nil, err
	}
	leaves, st := pytree.Flatten(like)
	paths := pytree.Paths(like)
	match, err := matchNames(entries, paths, cfg)
	if err != nil {
		return zero, nil, err
	}
	out := make([]*tensor.Tensor, len(leaves))
	buf := make([]byte, 1<<20)
	for i, e := range match {
		x := leaves[i]
		fail := func(kind error, format string, args ...any) error {
			if e.File != "" && e.File != e.Name {
				format = "file tensor %q: " + format
				args = append([]any{e.File}, args...)
			}
			return &Error{Op: "import", Step: -1, Path: e.Name, Err: errf(kind, format, args...)}
		}
		has := typeString(strings.ToLower(e.DType), e.Shape)
		if e.transpose {
			has = "transposed " + has
		}
		want := typeString(x.DType().Abbrev(), x.Shape())
		size, conv, ok := converter(e.DType, x.DType())
		if !ok {
			return zero, nil, fail(ErrMismatch, "file has %s, the tree to read into has %s: %s elements cannot be read into %s (%s)", has, want, e.DType, x.DType(), supportedConversions)
		}
		if !slices.Equal(e.Shape, x.Shape()) {
			return zero, nil, fail(ErrMismatch, "file has %s, the tree to read into has %s", has, want)
		}
		y := tensor.Zeros(x.DType(), x.Shape()...)
		dst := y
		if e.transpose {
			dst = tensor.Zeros(x.DType(), e.Shape[1], e.Shape[0]) // as stored
		}
		pos := dataStart + e.Begin
		n := y.Size()
		per := len(buf) / size
		for k := 0; k < n; k += per {
			m := min(n-k, per)
			if err := readAtFull(r, buf[:size*m], pos+int64(size*k)); err != nil {
				return zero, nil, fail(ErrCorrupt, "%v", err)
			}
			if err := conv(dst, k, buf[:size*m]); err != nil {
				return zero, nil, fail(ErrCorrupt, "%v", err)
			}
		}
		if e.transpose {
			transposeInto(y, dst)
		}
		if axes := x.LogicalAxes(); len(axes) > 0 {
			y = tensor.WithLogicalAxes(y, axes...)
		}
		out[i] = y
	}
	return pytree.Unflatten[T](st, out), meta, nil
}

// transposeInto writes the transpose of the rank-2 host tensor src into
// dst, of the transposed shape and the same dtype.
func transposeInto(dst, src *tensor.Tensor) {
	r, c := src.Dim(0), src.Dim(1)
	if isHalf(src.DType()) {
		sh, dh := halves(src), halves(dst)
		for i := range r {
			for j := range c {
				dh[j*r+i] = sh[i*c+j]
			}
		}
		return
	}
	switch src.DType() {
	case tensor.Float64:
		transpose2(dst.RawFloat64(), src.RawFloat64(), r, c)
		return
	case tensor.Int64:
		transpose2(dst.RawInt64(), src.RawInt64(), r, c)
		return
	case tensor.Uint8:
		transpose2(dst.RawUint8(), src.RawUint8(), r, c)
		return
	}
	sw, sb := words(src)
	dw, db := words(dst)
	for i := range r {
		for j := range c {
			if sw != nil {
				dw[j*r+i] = sw[i*c+j]
			} else {
				db[j*r+i] = sb[i*c+j]
			}
		}
	}
}

// readAtFull fills buf from r at off. io.ReaderAt allows a read that fills
// buf and ends at the end of the input to return io.EOF; that is not an
// error here.
func readAtFull(r io.ReaderAt, buf []byte, off int64) error {
	if len(buf) == 0 {
		return nil
	}
	n, err := r.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// tensorName is the safetensors name of the leaf at path: the path as
// Path.String writes it ("Layers[0].W"), except that a leaf directly under
// a root map is named by its bare key, so that a map[string]*tensor.Tensor
// reads and writes the names of a PyTorch state dict ("model.embed.weight").
func tensorName(p pytree.Path) string {
	if len(p) == 1 && p[0].Kind == pytree.KeyElem {
		return p[0].Name
	}
	return p.String()
}

// unreadHint names a few of the file's tensors under the prefix that no
// leaf of the tree reads, for the error of a leaf the file lacks: most often
// the file names its tensors otherwise (a PyTorch state dict), and seeing
// its names says which rules to write.
func unreadHint(under map[string]bool, likePaths []pytree.Path, prefix pytree.Path, mapped bool) string {
	want := make(map[string]bool, len(likePaths))
	for _, lp := range likePaths {
		want[tensorName(append(slices.Clone(prefix), lp...))] = true
	}
	var unread []string
	for name := range under {
		if !want[name] {
			unread = append(unread, name)
		}
	}
	if len(unread) == 0 {
		return ""
	}
	sort.Strings(unread)
	n := len(unread)
	for i := range unread {
		unread[i] = strconv.Quote(unread[i])
	}
	if len(unread) > 3 {
		unread = append(unread[:3], "...")
	}
	names := "names"
	if mapped {
		names = "names (after MapNames)"
	}
	return fmt.Sprintf("; the file's %d %s that no leaf reads are %s: MapNames renames them (TorchMLP, TorchRNN and TorchTransformer map PyTorch's state dicts)",
		n, names, strings.Join(unread, ", "))
}

// matchNames finds the file entry of each like path (under the Subtree
// prefix), by name.
func matchNames(entries []stEntry, likePaths []pytree.Path, cfg restoreConfig) ([]*stEntry, error) {
	fail := func(name string, format string, args ...any) error {
		return &Error{Op: "import", Step: -1, Path: name, Err: errf(ErrMismatch, format, args...)}
	}
	prefix, err := pytree.ParsePath(cfg.prefix)
	if err != nil {
		return nil, &Error{Op: "import", Step: -1, Err: fmt.Errorf("Subtree(%q): %v", cfg.prefix, err)}
	}
	byName := map[string]*stEntry{}
	under := map[string]bool{} // names under the prefix
	for i := range entries {
		e := &entries[i]
		byName[e.Name] = e
		if len(prefix) == 0 {
			under[e.Name] = true
		} else if p, err := pytree.ParsePath(e.Name); err == nil && len(p) >= len(prefix) && p[:len(prefix)].Equal(prefix) {
			under[e.Name] = true
		}
	}
	if len(prefix) > 0 && len(under) == 0 {
		return nil, fail("", "nothing under %q", cfg.prefix)
	}
	out := make([]*stEntry, len(likePaths))
	used := map[string]bool{}
	for i, lp := range likePaths {
		name := tensorName(append(slices.Clone(prefix), lp...))
		e, ok := byName[name]
		if !ok {
			return nil, fail(name, "the tree to read into has a tensor here, the file does not%s", unreadHint(under, likePaths, prefix, len(cfg.rules) > 0))
		}
		out[i] = e
		used[name] = true
	}
	if !cfg.partial {
		var extra []string
		for name := range under {
			if !used[name] {
				extra = append(extra, name)
			}
		}
		if len(extra) > 0 {
			sort.Strings(extra)
			return nil, fail(extra[0], "the file has a tensor here, the tree to read into does not (%d such; use Partial to skip them)", len(extra))
		}
	}
	return out, nil
}
