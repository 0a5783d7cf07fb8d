package data

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// IDXType is the element type code of an IDX file, its third byte.
type IDXType byte

// The element types of the IDX format. Multi-byte values are big-endian.
const (
	IDXUint8   IDXType = 0x08
	IDXInt8    IDXType = 0x09
	IDXInt16   IDXType = 0x0B
	IDXInt32   IDXType = 0x0C
	IDXFloat32 IDXType = 0x0D
	IDXFloat64 IDXType = 0x0E
)

// Size returns the size of one element in bytes, or 0 for an unknown code.
func (t IDXType) Size() int {
	switch t {
	case IDXUint8, IDXInt8:
		return 1
	case IDXInt16:
		return 2
	case IDXInt32, IDXFloat32:
		return 4
	case IDXFloat64:
		return 8
	}
	return 0
}

// String returns the code and a short name, such as "0x08 (u8)".
func (t IDXType) String() string {
	names := map[IDXType]string{IDXUint8: "u8", IDXInt8: "i8", IDXInt16: "i16", IDXInt32: "i32", IDXFloat32: "f32", IDXFloat64: "f64"}
	if n, ok := names[t]; ok {
		return fmt.Sprintf("0x%02X (%s)", byte(t), n)
	}
	return fmt.Sprintf("0x%02X", byte(t))
}

// Limits on what an IDX header may claim, so that a corrupt header cannot
// make the reader allocate without bound. Data is also read in growing
// chunks, so a truncated file only costs memory for what it really holds.
const (
	// MaxIDXElements is the largest number of elements ReadIDX accepts:
	// 2^30, a 4 GiB tensor.
	MaxIDXElements = 1 << 30
	// MaxIDXRank is the largest number of dimensions ReadIDX accepts.
	MaxIDXRank = 16
)

// Errors returned by the IDX functions, wrapped in an *IDXError that names
// the file; test for them with errors.Is.
var (
	ErrBadMagic        = errors.New("bad magic number")
	ErrUnsupportedType = errors.New("unsupported type code")
	ErrDims            = errors.New("wrong dimension count")
	ErrTruncated       = errors.New("truncated")
	ErrTrailingData    = errors.New("trailing data")
	ErrTooLarge        = errors.New("too large")
	ErrCountMismatch   = errors.New("image/label count mismatch")
	ErrLabelRange      = errors.New("label out of range")
)

// IDXError is an error about an IDX file: File names it (a path, or "input"
// for ReadIDX) and Err says what is wrong; Err wraps one of the Err*
// variables or the error of the underlying reader (a gzip checksum, an I/O
// error).
type IDXError struct {
	File string
	Err  error
}

// Error returns "data: IDX file <File>: <Err>".
func (e *IDXError) Error() string { return "data: IDX file " + e.File + ": " + e.Err.Error() }

// Unwrap returns e.Err.
func (e *IDXError) Unwrap() error { return e.Err }

func idxErr(file string, sentinel error, format string, args ...any) error {
	return &IDXError{File: file, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
}

// idx is a decoded IDX file: its element type, dimensions and raw
// big-endian data.
type idx struct {
	typ  IDXType
	dims []int
	data []byte
}

// ReadIDX reads an IDX file (the format of MNIST and Fashion-MNIST) from r,
// gzip-compressed or not (told apart by the first bytes), and returns its
// contents as a tensor of the file's shape: int32 for the integer types
// (u8, i8, i16, i32) and float32 for the float types (f64 is rounded to
// float32). It reads r to its end, so a gzip stream's checksum is verified
// and data after the last element is an error.
//
// It never panics on bad input: every error is an *IDXError naming the file
// ("input" here; see ReadIDXFile) and wrapping ErrBadMagic,
// ErrUnsupportedType, ErrDims, ErrTruncated, ErrTrailingData or ErrTooLarge,
// or the reader's own error.
func ReadIDX(r io.Reader) (*tensor.Tensor, error) {
	d, err := decodeIDX(r, "input")
	if err != nil {
		return nil, err
	}
	return d.tensor(), nil
}

// ReadIDXFile is ReadIDX on the file at path; errors name the path.
func ReadIDXFile(path string) (*tensor.Tensor, error) {
	d, err := decodeIDXFile(path)
	if err != nil {
		return nil, err
	}
	return d.tensor(), nil
}

func decodeIDXFile(path string) (*idx, error) {
	// A FIFO's open would block until a writer came: refuse anything but
	// a regular file before opening it.
	f, _, err := openRegular(path)
	if err != nil {
		var fe *FileError
		if errors.As(err, &fe) {
			err = fe.Err
		}
		return nil, &IDXError{File: path, Err: err}
	}
	defer f.Close()
	return decodeIDX(f, path)
}

// decodeIDX reads and checks one IDX file from r; name is used in errors.
func decodeIDX(r io.Reader, name string) (*idx, error) {
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &IDXError{File: name, Err: fmt.Errorf("gzip: %w", err)}
		}
		defer zr.Close()
		return decodeRaw(zr, name, true)
	}
	return decodeRaw(br, name, false)
}

// decodeRaw decodes an uncompressed IDX stream.
func decodeRaw(r io.Reader, name string, gz bool) (*idx, error) {
	var head [4]byte
	if n, err := io.ReadFull(r, head[:]); err != nil {
		if isEOF(err) {
			if n == 0 {
				return nil, idxErr(name, ErrTruncated, "empty, no header")
			}
			return nil, idxErr(name, ErrTruncated, "header has %d of its 4 bytes", n)
		}
		return nil, readErr(name, gz, err)
	}
	magic := binary.BigEndian.Uint32(head[:])
	if head[0] != 0 || head[1] != 0 {
		return nil, idxErr(name, ErrBadMagic, "0x%08X: an IDX file starts with two zero bytes, a type code and a dimension count", magic)
	}
	typ, rank := IDXType(head[2]), int(head[3])
	if typ.Size() == 0 {
		return nil, idxErr(name, ErrUnsupportedType, "%s in magic number 0x%08X (supported: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64)", typ, magic)
	}
	if rank == 0 || rank > MaxIDXRank {
		return nil, idxErr(name, ErrDims, "magic number 0x%08X gives %d dimensions, want 1 to %d", magic, rank, MaxIDXRank)
	}
	dimBytes := make([]byte, 4*rank)
	if n, err := io.ReadFull(r, dimBytes); err != nil {
		if isEOF(err) {
			return nil, idxErr(name, ErrTruncated, "header ends after %d of its %d dimension sizes", n/4, rank)
		}
		return nil, readErr(name, gz, err)
	}
	dims := make([]int, rank)
	elems := uint64(1)
	for i := range dims {
		v := binary.BigEndian.Uint32(dimBytes[4*i:])
		dims[i] = int(v)
		// Saturating product: any zero dimension still makes it zero.
		if hi, lo := bits.Mul64(elems, uint64(v)); hi != 0 || lo > MaxIDXElements {
			elems = MaxIDXElements + 1
		} else {
			elems = lo
		}
	}
	if elems > MaxIDXElements {
		return nil, idxErr(name, ErrTooLarge, "shape %v has more than the %d elements allowed", dims, MaxIDXElements)
	}
	need := elems * uint64(typ.Size())
	data, err := readN(r, int(need))
	if err != nil {
		if isEOF(err) {
			return nil, idxErr(name, ErrTruncated, "shape %v of %s needs %d bytes of data, only %d follow the header", dims, typ, need, len(data))
		}
		return nil, readErr(name, gz, err)
	}
	// Read to the end: this verifies a gzip checksum, and anything left over
	// means the header does not describe the file.
	var extra [1]byte
	n, err := io.ReadFull(r, extra[:])
	if n > 0 {
		rest, _ := io.Copy(io.Discard, io.LimitReader(r, 1<<20))
		more := ""
		if rest == 1<<20 {
			more = " or more"
		}
		return nil, idxErr(name, ErrTrailingData, "%d byte(s)%s after the %d bytes of data that shape %v of %s needs", 1+rest, more, need, dims, typ)
	}
	if err != nil && !isEOF(err) {
		return nil, readErr(name, gz, err)
	}
	return &idx{typ: typ, dims: dims, data: data}, nil
}

// readN reads exactly n bytes from r, growing its buffer as data arrives so
// that a header promising more than the stream holds does not allocate it.
// On a short stream it returns what it read and io.ErrUnexpectedEOF.
func readN(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, 64<<10))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(n-len(buf), cap(buf))) // doubles
		}
		m, err := io.ReadFull(r, buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

func isEOF(err error) bool { return err == io.EOF || err == io.ErrUnexpectedEOF }

// readErr wraps an error of the underlying reader.
func readErr(name string, gz bool, err error) error {
	if gz {
		err = fmt.Errorf("gzip: %w", err)
	}
	return &IDXError{File: name, Err: err}
}

// tensor converts the data to an int32 or float32 tensor.
func (d *idx) tensor() *tensor.Tensor {
	b := d.data
	switch d.typ {
	case IDXUint8:
		out := make([]int32, len(b))
		for i, v := range b {
			out[i] = int32(v)
		}
		return tensor.WrapInt32(out, d.dims...)
	case IDXInt8:
		out := make([]int32, len(b))
		for i, v := range b {
			out[i] = int32(int8(v))
		}
		return tensor.WrapInt32(out, d.dims...)
	case IDXInt16:
		out := make([]int32, len(b)/2)
		for i := range out {
			out[i] = int32(int16(binary.BigEndian.Uint16(b[2*i:])))
		}
		return tensor.WrapInt32(out, d.dims...)
	case IDXInt32:
		out := make([]int32, len(b)/4)
		for i := range out {
			out[i] = int32(binary.BigEndian.Uint32(b[4*i:]))
		}
		return tensor.WrapInt32(out, d.dims...)
	case IDXFloat32:
		out := make([]float32, len(b)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.BigEndian.Uint32(b[4*i:]))
		}
		return tensor.WrapFloat32(out, d.dims...)
	case IDXFloat64:
		out := make([]float32, len(b)/8)
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.BigEndian.Uint64(b[8*i:])))
		}
		return tensor.WrapFloat32(out, d.dims...)
	}
	panic("unreachable: type checked by decodeRaw")
}

// WriteIDX writes x to w as an uncompressed IDX file with element type typ
// (wrap w in a gzip.Writer for a .gz file). The integer types take an int32
// tensor and the float types a float32 tensor; an element that does not fit
// typ (300 as u8) is an error naming it. It panics if x is a scalar, typ is
// unknown, or x's dtype does not go with typ.
func WriteIDX(w io.Writer, x *tensor.Tensor, typ IDXType) error {
	if x.Rank() == 0 || x.Rank() > MaxIDXRank {
		panic(fmt.Sprintf("data.WriteIDX: %s: IDX holds 1 to %d dimensions", x, MaxIDXRank))
	}
	isFloat := typ == IDXFloat32 || typ == IDXFloat64
	switch {
	case typ.Size() == 0:
		panic(fmt.Sprintf("data.WriteIDX: %s: unknown IDX type %s", x, typ))
	case isFloat && x.DType() != tensor.Float32, !isFloat && x.DType() != tensor.Int32:
		panic(fmt.Sprintf("data.WriteIDX: %s: IDX type %s needs a %s tensor", x, typ, map[bool]string{true: "float32", false: "int32"}[isFloat]))
	}
	shape := x.Shape()
	head := []byte{0, 0, byte(typ), byte(len(shape))}
	for _, d := range shape {
		if uint64(d) > math.MaxUint32 {
			return fmt.Errorf("data.WriteIDX: %s: dimension %d does not fit in 32 bits", x, d)
		}
		head = binary.BigEndian.AppendUint32(head, uint32(d))
	}
	var body []byte
	if isFloat {
		vals := x.Float32s()
		body = make([]byte, 0, len(vals)*typ.Size())
		for _, v := range vals {
			if typ == IDXFloat32 {
				body = binary.BigEndian.AppendUint32(body, math.Float32bits(v))
			} else {
				body = binary.BigEndian.AppendUint64(body, math.Float64bits(float64(v)))
			}
		}
	} else {
		rng := map[IDXType][2]int64{
			IDXUint8: {0, math.MaxUint8}, IDXInt8: {math.MinInt8, math.MaxInt8},
			IDXInt16: {math.MinInt16, math.MaxInt16}, IDXInt32: {math.MinInt32, math.MaxInt32},
		}[typ]
		lo, hi := rng[0], rng[1]
		vals := x.Int32s()
		body = make([]byte, 0, len(vals)*typ.Size())
		for i, v := range vals {
			if int64(v) < lo || int64(v) > hi {
				return fmt.Errorf("data.WriteIDX: %s: element %d is %d, outside the range [%d,%d] of %s", x, i, v, lo, hi, typ)
			}
			switch typ.Size() {
			case 1:
				body = append(body, byte(v))
			case 2:
				body = binary.BigEndian.AppendUint16(body, uint16(v))
			case 4:
				body = binary.BigEndian.AppendUint32(body, uint32(v))
			}
		}
	}
	if _, err := w.Write(head); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}
