package data

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTokens writes ids as a token file and returns its path.
func writeTokens(t testing.TB, dir, name string, typ UintType, vocab int, ids []int32) string {
	t.Helper()
	path := filepath.Join(dir, name)
	w, err := CreateTokens(path, typ, vocab)
	require.NoError(t, err)
	for len(ids) > 0 { // several writes
		n := min(len(ids), 7)
		require.NoError(t, w.Write(ids[:n]))
		ids = ids[n:]
	}
	require.NoError(t, w.Close())
	return path
}

func TestTokenFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		typ   UintType
		vocab int
	}{{Uint8, 256}, {Uint16, 50257}, {Uint16, 1 << 16}, {Uint32, 100000}} {
		ids := make([]int32, 1000)
		for i := range ids {
			ids[i] = int32((i * 7919) % c.vocab)
		}
		ids[3] = int32(c.vocab - 1)
		path := writeTokens(t, dir, c.typ.String()+".tok", c.typ, c.vocab, ids)
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, int64(32+len(ids)*int(c.typ)), st.Size(), "%v", c.typ)
		f, err := OpenTokens(path)
		require.NoError(t, err)
		assert.Equal(t, int64(len(ids)), f.Len())
		assert.Equal(t, c.vocab, f.Vocab())
		assert.Equal(t, c.typ, f.Type())
		got := make([]int32, len(ids))
		require.NoError(t, f.Read(got, 0))
		assert.Equal(t, ids, got)
		part := make([]int32, 10)
		require.NoError(t, f.Read(part, 990))
		assert.Equal(t, ids[990:], part)
		assert.Panics(t, func() { _ = f.Read(part, 991) })
		require.NoError(t, f.Close())
		assert.Error(t, f.Read(part, 0))
		require.NoError(t, f.Close())
	}
	// No temporary file is left behind.
	left, _ := filepath.Glob(filepath.Join(dir, "*.tmp*"))
	assert.Empty(t, left)
}

// TestRawTokens reads nanoGPT's layout: bare little-endian uint16.
func TestRawTokens(t *testing.T) {
	dir := t.TempDir()
	raw := []uint16{50256, 0, 1, 65535, 300}
	b := make([]byte, 0, 10)
	for _, v := range raw {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	path := filepath.Join(dir, "train.bin")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	f, err := OpenRawTokens(path, Uint16, 1<<16)
	require.NoError(t, err)
	got := make([]int32, 5)
	require.NoError(t, f.Read(got, 0))
	assert.Equal(t, []int32{50256, 0, 1, 65535, 300}, got)
	require.NoError(t, f.Close())

	// GPT-2's vocabulary: 65535 is not a token.
	f, err = OpenRawTokens(path, Uint16, 50257)
	require.NoError(t, err)
	defer f.Close()
	err = f.Read(got, 0)
	assert.ErrorIs(t, err, ErrTokenRange)
	var fe *FileError
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, path, fe.File)
	assert.Equal(t, int64(6), fe.Offset)
	assert.Contains(t, err.Error(), "token 3 is 65535, not below the vocabulary size 50257")
	require.NoError(t, f.Read(got[:3], 0))

	require.NoError(t, os.WriteFile(path, b[:9], 0o644))
	_, err = OpenRawTokens(path, Uint16, 50257)
	assert.ErrorIs(t, err, ErrTruncated)
	assert.ErrorContains(t, err, path)
	assert.Panics(t, func() { _, _ = OpenRawTokens(path, Uint16, 70000) })
}

// tokenFileBytes is a token file's bytes with the given header fields.
func tokenFileBytes(magic string, version, width uint32, vocab, count uint64, body int) []byte {
	b := make([]byte, 32+body)
	copy(b, magic)
	binary.LittleEndian.PutUint32(b[8:], version)
	binary.LittleEndian.PutUint32(b[12:], width)
	binary.LittleEndian.PutUint64(b[16:], vocab)
	binary.LittleEndian.PutUint64(b[24:], count)
	return b
}

func TestTokenFileHostile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		data []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrTruncated, "shorter than the 32-byte header"},
		{"short header", []byte("GONOXTOK"), ErrTruncated, "shorter than the 32-byte header"},
		{"wrong magic", tokenFileBytes("NOTATOKF", 1, 2, 10, 4, 8), ErrBadMagic, "not a gonox token file"},
		{"nanoGPT file", make([]byte, 64), ErrBadMagic, "OpenRawTokens"},
		{"version", tokenFileBytes(tokenMagic, 2, 2, 10, 4, 8), ErrBadMagic, "version 2"},
		{"width", tokenFileBytes(tokenMagic, 1, 3, 10, 4, 12), ErrUnsupportedType, "3 bytes per token"},
		{"vocab zero", tokenFileBytes(tokenMagic, 1, 2, 0, 4, 8), nil, "vocabulary of 0 tokens"},
		{"vocab too big", tokenFileBytes(tokenMagic, 1, 2, 70000, 4, 8), nil, "does not fit uint16"},
		{"truncated", tokenFileBytes(tokenMagic, 1, 2, 10, 5, 8), ErrTruncated, "declares 5 tokens (10 bytes) but 8 bytes follow"},
		{"trailing", tokenFileBytes(tokenMagic, 1, 2, 10, 3, 8), ErrTrailingData, "2 bytes after the 3 tokens"},
		{"huge declared size", tokenFileBytes(tokenMagic, 1, 4, 10, 1<<62, 8), ErrTruncated, "declares 4611686018427387904 tokens"},
		{"overflowing size", tokenFileBytes(tokenMagic, 1, 4, 10, 1<<63+5, 8), ErrTruncated, "declares"},
	} {
		path := filepath.Join(dir, "hostile.tok")
		require.NoError(t, os.WriteFile(path, c.data, 0o644))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f, err := OpenTokens(path)
		runtime.ReadMemStats(&after)
		if !assert.Error(t, err, c.name) {
			f.Close()
			continue
		}
		if c.want != nil {
			assert.ErrorIs(t, err, c.want, c.name)
		}
		assert.Contains(t, err.Error(), path, c.name)
		assert.Contains(t, err.Error(), c.msg, c.name)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<16), "%s: opening allocated too much", c.name)
	}

	// Token ids at or above the vocabulary: an error at Read, naming the
	// file and the byte offset of the bad token.
	b := tokenFileBytes(tokenMagic, 1, 2, 10, 4, 8)
	binary.LittleEndian.PutUint16(b[32+4:], 10)
	path := filepath.Join(dir, "ids.tok")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	f, err := OpenTokens(path)
	require.NoError(t, err)
	defer f.Close()
	err = f.Read(make([]int32, 4), 0)
	assert.ErrorIs(t, err, ErrTokenRange)
	assert.EqualError(t, err, "data: "+path+": at byte 36: token id out of range: token 2 is 10, not below the vocabulary size 10")

	// A directory, a missing file.
	_, err = OpenTokens(dir)
	assert.ErrorIs(t, err, ErrNotRegular)
	assert.EqualError(t, err, "data: "+dir+": not a regular file: it is a directory") // not "(d---------)"
	_, err = OpenTokens(filepath.Join(dir, "missing.tok"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.ErrorContains(t, err, "missing.tok")
}

func TestTokenWriterErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.tok")
	require.NoError(t, os.WriteFile(path, []byte("precious"), 0o644))
	w, err := CreateTokens(path, Uint16, 100)
	require.NoError(t, err)
	require.NoError(t, w.Write([]int32{1, 2}))
	assert.ErrorContains(t, w.Write([]int32{3, 100}), "id 100 (token 3) outside the vocabulary [0,100)")
	assert.Equal(t, int64(2), w.Len())
	w.Discard()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(b), "the existing file is untouched")
	left, _ := filepath.Glob(filepath.Join(dir, "*.tmp*"))
	assert.Empty(t, left)
	assert.Panics(t, func() { _, _ = CreateTokens(path, Uint8, 257) })
	assert.Panics(t, func() { _, _ = CreateTokens(path, UintType(3), 10) })
	_, err = CreateTokens(filepath.Join(dir, "no", "such", "dir.tok"), Uint16, 10)
	assert.ErrorContains(t, err, "dir.tok")
}
