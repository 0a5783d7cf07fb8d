package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"

	"github.com/gonox/gonox/internal/filekind"
)

// UintType is the width of the unsigned integers of a token or image file.
// Its value is the size in bytes.
type UintType uint8

// The integer types of token and image files (little-endian).
const (
	Uint8  UintType = 1
	Uint16 UintType = 2
	Uint32 UintType = 4
)

// String returns "uint8", "uint16" or "uint32".
func (t UintType) String() string {
	switch t {
	case Uint8, Uint16, Uint32:
		return fmt.Sprintf("uint%d", 8*int(t))
	}
	return fmt.Sprintf("UintType(%d)", uint8(t))
}

// max returns the largest value of t.
func (t UintType) max() uint64 { return 1<<(8*uint(t)) - 1 }

// Errors of token and image files, wrapped in a *FileError naming the
// file, beside those of IDX files (ErrBadMagic, ErrUnsupportedType,
// ErrTruncated, ErrTrailingData, ErrTooLarge, ErrLabelRange); test for them
// with errors.Is.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTokenRange = errors.New("token id out of range")
)

// FileError is an error about a token or image file: File names it, Offset
// is the byte offset in it where the problem is (-1 when it is the file as
// a whole), and Err says what is wrong.
type FileError struct {
	File   string
	Offset int64
	Err    error
}

// Error says which file, at which byte offset where it applies, and what
// is wrong.
func (e *FileError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("data: %s: at byte %d: %v", e.File, e.Offset, e.Err)
	}
	return fmt.Sprintf("data: %s: %v", e.File, e.Err)
}

// Unwrap returns Err, for errors.Is (ErrTruncated, ErrBadMagic, ...) and
// errors.As.
func (e *FileError) Unwrap() error { return e.Err }

func fileErr(path string, off int64, format string, args ...any) error {
	return &FileError{File: path, Offset: off, Err: fmt.Errorf(format, args...)}
}

// openRegular opens path for reading after checking that it is a regular
// file: a directory, a FIFO (whose open would block until a writer came) or
// a device is refused before it is opened.
func openRegular(path string) (*os.File, int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, &FileError{File: path, Offset: -1, Err: fmt.Errorf("%w: it is %s", ErrNotRegular, filekind.Of(st.Mode()))}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	if st, err = f.Stat(); err != nil || !st.Mode().IsRegular() { // replaced in between
		f.Close()
		return nil, 0, &FileError{File: path, Offset: -1, Err: ErrNotRegular}
	}
	return f, st.Size(), nil
}

// The header of a token file: 32 bytes, little-endian.
//
//	[0:8]   magic "GONOXTOK"
//	[8:12]  version, 1
//	[12:16] bytes per token: 1, 2 or 4
//	[16:24] vocabulary size: every token id is below it
//	[24:32] number of tokens that follow the header
const (
	tokenMagic      = "GONOXTOK"
	tokenVersion    = 1
	tokenHeaderSize = 32
)

// TokenFile is a file of token ids opened by mapping it into memory (on
// systems without mmap, by reading with ReadAt): opening costs no memory
// for the tokens and reading a window touches only its pages, so files far
// larger than memory serve as datasets. Two layouts are read:
//
//   - gonox's token file (OpenTokens, written by CreateTokens and
//     WriteTokens): a 32-byte header naming the integer type, the
//     vocabulary size and the token count, then the tokens.
//   - a headerless file of little-endian integers (OpenRawTokens), such
//     as nanoGPT's train.bin (uint16), whose type and vocabulary the
//     caller gives.
//
// Token ids are checked against the vocabulary as they are read (a file is
// never scanned whole), so a corrupt token is an error from Read naming the
// file and the offset. A TokenFile is safe for concurrent reads.
type TokenFile struct {
	mappedFile
	typ   UintType
	vocab int
	n     int64 // tokens
	start int64 // byte offset of the first token
}

// OpenTokens opens a token file written by CreateTokens or WriteTokens.
// A file that is not a regular file, is shorter or longer than its header
// says, has a wrong magic number or version, or an integer type other than
// uint8, uint16 or uint32 is an error naming the file.
func OpenTokens(path string) (*TokenFile, error) {
	f, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	var h [tokenHeaderSize]byte
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), h[:]); err != nil {
		f.Close()
		return nil, fileErr(path, -1, "%w: %d bytes is shorter than the %d-byte header of a token file", ErrTruncated, size, tokenHeaderSize)
	}
	typ, vocab, n, err := parseTokenHeader(h[:], size)
	if err != nil {
		f.Close()
		return nil, &FileError{File: path, Offset: -1, Err: err}
	}
	return mapTokens(path, f, size, typ, vocab, n, tokenHeaderSize)
}

// parseTokenHeader checks a token file's header against the file size.
func parseTokenHeader(h []byte, size int64) (typ UintType, vocab int, n int64, err error) {
	if string(h[:8]) != tokenMagic {
		return 0, 0, 0, fmt.Errorf("%w %q: not a gonox token file (want %q; for a headerless file use OpenRawTokens)", ErrBadMagic, h[:8], tokenMagic)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != tokenVersion {
		return 0, 0, 0, fmt.Errorf("%w: version %d (this reader knows %d)", ErrBadMagic, v, tokenVersion)
	}
	typ = UintType(binary.LittleEndian.Uint32(h[12:]))
	if typ != Uint8 && typ != Uint16 && typ != Uint32 {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes per token", ErrUnsupportedType, binary.LittleEndian.Uint32(h[12:]))
	}
	v := binary.LittleEndian.Uint64(h[16:])
	if v == 0 || v > typ.max()+1 {
		return 0, 0, 0, fmt.Errorf("vocabulary of %d tokens does not fit %v", v, typ)
	}
	count := binary.LittleEndian.Uint64(h[24:])
	body := uint64(size - tokenHeaderSize)
	switch {
	case count > math.MaxInt64/uint64(typ) || count*uint64(typ) > body:
		return 0, 0, 0, fmt.Errorf("%w: the header declares %d tokens (%d bytes) but %d bytes follow it", ErrTruncated, count, count*uint64(typ), body)
	case count*uint64(typ) < body:
		return 0, 0, 0, fmt.Errorf("%w: %d bytes after the %d tokens the header declares", ErrTrailingData, body-count*uint64(typ), count)
	}
	return typ, int(v), int64(count), nil
}

// OpenRawTokens opens a headerless file of little-endian integers of type
// typ, such as nanoGPT's train.bin (Uint16), whose ids must be below
// vocab. A size that is not a whole number of tokens is an error naming the
// file.
func OpenRawTokens(path string, typ UintType, vocab int) (*TokenFile, error) {
	if typ != Uint8 && typ != Uint16 && typ != Uint32 {
		panic(fmt.Sprintf("data.OpenRawTokens: %v: want Uint8, Uint16 or Uint32", typ))
	}
	if vocab < 1 || uint64(vocab) > typ.max()+1 {
		panic(fmt.Sprintf("data.OpenRawTokens: vocabulary %d does not fit %v", vocab, typ))
	}
	f, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	if size%int64(typ) != 0 {
		f.Close()
		return nil, fileErr(path, -1, "%w: %d bytes is not a whole number of %v tokens", ErrTruncated, size, typ)
	}
	return mapTokens(path, f, size, typ, vocab, size/int64(typ), 0)
}

func mapTokens(path string, f *os.File, size int64, typ UintType, vocab int, n, start int64) (*TokenFile, error) {
	mf, err := mapOpen(path, f, size)
	if err != nil {
		return nil, err
	}
	return &TokenFile{mappedFile: mf, typ: typ, vocab: vocab, n: n, start: start}, nil
}

// Len returns the number of tokens.
func (t *TokenFile) Len() int64 { return t.n }

// Vocab returns the vocabulary size: every valid id is below it.
func (t *TokenFile) Vocab() int { return t.vocab }

// Type returns the integer type of the tokens.
func (t *TokenFile) Type() UintType { return t.typ }

// Read reads len(dst) tokens starting at token off into dst. A token not
// below the vocabulary size, or a file that shrank while mapped, is an
// error naming the file and the byte offset. It panics if [off,
// off+len(dst)) is not within [0, Len()).
func (t *TokenFile) Read(dst []int32, off int64) (err error) {
	if off < 0 || off+int64(len(dst)) > t.n {
		panic(fmt.Sprintf("data.TokenFile.Read: tokens [%d,%d) out of range [0,%d) of %s", off, off+int64(len(dst)), t.n, t.path))
	}
	w := int64(t.typ)
	at, n := t.start+off*w, int64(len(dst))*w
	// A mapped file truncated by another program faults on access: the
	// fault becomes an error rather than a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverFault(&err, t.path, &at)
	var scratch []byte
	src, err := t.bytes(&scratch, at, n)
	if err != nil {
		return err
	}
	decodeUints(dst, src, t.typ)
	for i, id := range dst {
		if id < 0 || int(id) >= t.vocab {
			return fileErr(t.path, at+int64(i)*w, "%w: token %d is %d, not below the vocabulary size %d", ErrTokenRange, off+int64(i), uint32(id), t.vocab)
		}
	}
	return nil
}

// decodeUints converts little-endian integers of type typ to int32 (a
// uint32 above MaxInt32 becomes negative, which the callers reject).
func decodeUints(dst []int32, src []byte, typ UintType) {
	switch typ {
	case Uint8:
		for i := range dst {
			dst[i] = int32(src[i])
		}
	case Uint16:
		for i := range dst {
			dst[i] = int32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Uint32:
		for i := range dst {
			dst[i] = int32(binary.LittleEndian.Uint32(src[4*i:]))
		}
	}
}
