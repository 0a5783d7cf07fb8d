package bpe

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gonox/gonox/internal/filekind"
)

// MaxFileBytes bounds the size of an encoder.json or a vocab.bpe that Read
// accepts (after decompression): GPT-2's are 1.0 MB and 0.46 MB.
const MaxFileBytes = 256 << 20

// Read reads a vocabulary in GPT-2's two files: encoder, the JSON object
// of encoder.json mapping each token (spelled with GPT-2's characters for
// bytes) to its id, and merges, the merges of vocab.bpe, one pair a line in
// rank order after an optional "#version" line. Either may be gzipped.
// Ids must be 0..n-1, each once; every byte must have a token; each merge
// must join two tokens into a third. An error names what is wrong.
func Read(encoder, merges io.Reader) (*Tokenizer, error) {
	tokens, err := readEncoder(encoder)
	if err != nil {
		return nil, fmt.Errorf("bpe: encoder: %w", err)
	}
	ids := make(map[string]int32, len(tokens))
	for id, tok := range tokens {
		ids[string(tok)] = int32(id)
	}
	ms, err := readMerges(merges, ids)
	if err != nil {
		return nil, fmt.Errorf("bpe: merges: %w", err)
	}
	return newTokenizer(tokens, ms)
}

// Load reads a vocabulary from the files encoder.json and vocab.bpe (or
// any names; gzipped or not), as Read. Errors name the file.
func Load(encoderPath, mergesPath string) (*Tokenizer, error) {
	ef, err := openRegular(encoderPath)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	mf, err := openRegular(mergesPath)
	if err != nil {
		return nil, err
	}
	defer mf.Close()
	tokens, err := readEncoder(ef)
	if err != nil {
		return nil, fmt.Errorf("bpe: %s: %w", encoderPath, err)
	}
	ids := make(map[string]int32, len(tokens))
	for id, tok := range tokens {
		ids[string(tok)] = int32(id)
	}
	ms, err := readMerges(mf, ids)
	if err != nil {
		return nil, fmt.Errorf("bpe: %s: %w", mergesPath, err)
	}
	t, err := newTokenizer(tokens, ms)
	if err != nil {
		return nil, fmt.Errorf("%w (%s, %s)", err, encoderPath, mergesPath)
	}
	return t, nil
}

// openRegular opens a regular file, refusing directories, FIFOs and
// devices before opening (opening a FIFO would block).
func openRegular(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("bpe: %s: not a regular file: it is %s", path, filekind.Of(st.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	return f, nil
}

// readAll reads r whole, gunzipping it if it is gzipped, up to MaxFileBytes.
func readAll(r io.Reader) ([]byte, error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	} else {
		r = br
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxFileBytes)
	}
	return b, nil
}

func readEncoder(r io.Reader) ([][]byte, error) {
	b, err := readAll(r)
	if err != nil {
		return nil, err
	}
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	tokens := make([][]byte, len(m))
	for s, id := range m {
		if id < 0 || id >= int64(len(m)) {
			return nil, fmt.Errorf("token %q has id %d outside [0,%d)", s, id, len(m))
		}
		if tokens[id] != nil {
			return nil, fmt.Errorf("tokens %q and %q both have id %d", printable(tokens[id]), s, id)
		}
		tok, ok := unprintable(s)
		if !ok || len(tok) == 0 {
			return nil, fmt.Errorf("token %q (id %d) is not spelled with GPT-2's byte characters", s, id)
		}
		tokens[id] = tok
	}
	return tokens, nil
}

func readMerges(r io.Reader, ids map[string]int32) ([]pair, error) {
	b, err := readAll(r)
	if err != nil {
		return nil, err
	}
	var ms []pair
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if (n == 0 && strings.HasPrefix(line, "#version")) || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want two tokens, got %q", n+1, line)
		}
		var p [2]int32
		for k, s := range f {
			tok, ok := unprintable(s)
			id, known := ids[string(tok)]
			if !ok || !known {
				return nil, fmt.Errorf("line %d: %q is not a token of the vocabulary", n+1, s)
			}
			p[k] = id
		}
		ms = append(ms, pair{p[0], p[1]})
	}
	return ms, nil
}

// Write writes the vocabulary in GPT-2's two formats: encoder.json to
// encoder (tokens in id order) and vocab.bpe to merges, which Read reads
// back.
func (t *Tokenizer) Write(encoder, merges io.Writer) error {
	var b bytes.Buffer
	b.WriteByte('{')
	for id, tok := range t.tokens {
		if id > 0 {
			b.WriteString(", ")
		}
		k, _ := json.Marshal(printable(tok))
		b.Write(k)
		b.WriteString(": ")
		b.WriteString(strconv.Itoa(id))
	}
	b.WriteString("}")
	if _, err := encoder.Write(b.Bytes()); err != nil {
		return err
	}
	b.Reset()
	b.WriteString("#version: 0.2\n")
	for _, m := range t.merges {
		b.WriteString(printable(t.tokens[m.a]))
		b.WriteByte(' ')
		b.WriteString(printable(t.tokens[m.b]))
		b.WriteByte('\n')
	}
	_, err := merges.Write(b.Bytes())
	return err
}

// Save writes the vocabulary to the files encoderPath and mergesPath as
// Write does. Each file is written under a temporary name beside it and
// renamed when complete, so an existing file is never left half-written.
func (t *Tokenizer) Save(encoderPath, mergesPath string) error {
	var eb, mb bytes.Buffer
	if err := t.Write(&eb, &mb); err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{encoderPath, eb.Bytes()}, {mergesPath, mb.Bytes()}} {
		if err := writeFileAtomic(f.path, f.data); err != nil {
			return fmt.Errorf("bpe: %w", err)
		}
	}
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
