package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"
)

// TokenWriter writes a token file (see TokenFile) in bounded memory: the
// tokens go through a buffer to a temporary file beside the destination,
// which Close completes (the header gets the final count) and renames into
// place, so an existing file of that name is replaced only by a complete
// one. Make one with CreateTokens.
type TokenWriter struct {
	w     *fileWriter
	typ   UintType
	vocab int
	n     int64
	buf   []byte
}

// CreateTokens starts a token file at path of integers of type typ for a
// vocabulary of vocab tokens. It panics if vocab does not fit typ.
func CreateTokens(path string, typ UintType, vocab int) (*TokenWriter, error) {
	if typ != Uint8 && typ != Uint16 && typ != Uint32 {
		panic(fmt.Sprintf("data.CreateTokens: %v: want Uint8, Uint16 or Uint32", typ))
	}
	if vocab < 1 || uint64(vocab) > typ.max()+1 {
		panic(fmt.Sprintf("data.CreateTokens: vocabulary %d does not fit %v", vocab, typ))
	}
	fw, err := createFile(path, tokenHeader(typ, vocab, 0)) // the count is set by Close
	if err != nil {
		return nil, err
	}
	return &TokenWriter{w: fw, typ: typ, vocab: vocab}, nil
}

func tokenHeader(typ UintType, vocab int, n int64) []byte {
	h := make([]byte, tokenHeaderSize)
	copy(h, tokenMagic)
	binary.LittleEndian.PutUint32(h[8:], tokenVersion)
	binary.LittleEndian.PutUint32(h[12:], uint32(typ))
	binary.LittleEndian.PutUint64(h[16:], uint64(vocab))
	binary.LittleEndian.PutUint64(h[24:], uint64(n))
	return h
}

// Len returns the number of tokens written so far.
func (w *TokenWriter) Len() int64 { return w.n }

// Write appends ids. An id outside [0, vocab) is an error naming it and its
// position, and nothing of ids is written; after an error of the file
// system every call fails.
func (w *TokenWriter) Write(ids []int32) error {
	for i, id := range ids {
		if id < 0 || int(id) >= w.vocab {
			return fmt.Errorf("data: TokenWriter.Write: %s: id %d (token %d) outside the vocabulary [0,%d)", w.w.path, id, w.n+int64(i), w.vocab)
		}
	}
	w.buf = appendUints(w.buf[:0], ids, w.typ)
	if err := w.w.write(w.buf); err != nil {
		return err
	}
	w.n += int64(len(ids))
	return nil
}

// appendUints appends vs as little-endian integers of type typ.
func appendUints[T int32 | uint16 | uint8](dst []byte, vs []T, typ UintType) []byte {
	for _, v := range vs {
		switch typ {
		case Uint8:
			dst = append(dst, byte(v))
		case Uint16:
			dst = binary.LittleEndian.AppendUint16(dst, uint16(v))
		default:
			dst = binary.LittleEndian.AppendUint32(dst, uint32(v))
		}
	}
	return dst
}

// Close completes the file: it writes the count into the header, syncs the
// file and renames it to its path. After an earlier error it removes the
// temporary file and returns that error.
func (w *TokenWriter) Close() error { return w.w.close(tokenHeader(w.typ, w.vocab, w.n)) }

// Discard abandons the file: the temporary file is removed and the path
// is left as it was.
func (w *TokenWriter) Discard() { w.w.discard() }

// MaxTextChunk bounds the text WriteTokens holds at once.
const MaxTextChunk = 64 << 20

// textChunk is the size of text WriteTokens reads before looking for a
// place to cut it.
var textChunk = 1 << 20

// WriteTokens tokenises the text read from r with tok and writes the tokens
// to a token file at path (uint16 when the vocabulary fits, else uint32),
// in bounded memory: the text is encoded a piece at a time, and returns the
// number of tokens. Pieces are cut before a space that follows a printable
// ASCII character, or after a newline followed by one: places where GPT-2's
// pre-tokenisation (data/bpe) and a character Vocab cut the text anyway, so
// the tokens equal those of encoding the whole text at once. Only a text
// with no such place in MaxTextChunk bytes is cut elsewhere (at a
// character boundary). On error the file is not created (an existing file
// at path is left as it was).
func WriteTokens(path string, r io.Reader, tok Tokenizer) (int64, error) {
	typ := Uint16
	if tok.Size() > 1<<16 {
		typ = Uint32
	}
	w, err := CreateTokens(path, typ, tok.Size())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 0, textChunk)
	var ids []int32
	eof := false
	for !eof {
		for len(buf) < cap(buf) && !eof {
			n, err := r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if errors.Is(err, io.EOF) {
				eof = true
			} else if err != nil {
				w.Discard()
				return 0, fmt.Errorf("data: WriteTokens %s: reading the text: %w", path, err)
			}
		}
		cut := len(buf)
		if !eof {
			if cut = safeCut(buf); cut == 0 {
				if len(buf) < MaxTextChunk {
					buf = slices.Grow(buf, len(buf)) // read on into twice the room
					continue
				}
				cut = runeCut(buf)
			}
		}
		if ids, err = tok.AppendEncode(ids[:0], buf[:cut]); err == nil {
			err = w.Write(ids)
		}
		if err != nil {
			w.Discard()
			return 0, fmt.Errorf("data: WriteTokens %s: %w", path, err)
		}
		buf = buf[:copy(buf, buf[cut:])]
	}
	return w.n, w.Close()
}

// safeCut returns the last place in b to cut text without changing its
// tokens (see WriteTokens), or 0.
func safeCut(b []byte) int {
	printable := func(c byte) bool { return c > ' ' && c < utf8.RuneSelf }
	for p := len(b) - 1; p > 0; p-- {
		if (b[p] == ' ' && printable(b[p-1])) || (b[p-1] == '\n' && printable(b[p])) {
			return p
		}
	}
	return 0
}

// runeCut returns the last character boundary of b after its start.
func runeCut(b []byte) int {
	for p := len(b) - 1; p > 0; p-- {
		if utf8.RuneStart(b[p]) {
			return p
		}
	}
	return len(b)
}
