package data_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/data/bpe"
)

func gpt2(t *testing.T) *bpe.Tokenizer {
	t.Helper()
	tok, err := bpe.Load(filepath.Join("bpe", "testdata", "gpt2-encoder.json.gz"), filepath.Join("bpe", "testdata", "gpt2-vocab.bpe.gz"))
	require.NoError(t, err)
	return tok
}

func readAll(t *testing.T, path string) []int32 {
	t.Helper()
	f, err := data.OpenTokens(path)
	require.NoError(t, err)
	defer f.Close()
	ids := make([]int32, f.Len())
	require.NoError(t, f.Read(ids, 0))
	return ids
}

// TestWriteTokens: the text read and encoded piece by piece (pieces of 4
// KiB, read a few bytes at a time) gives the tokens of the whole text
// encoded at once, for GPT-2's BPE and a character vocabulary.
func TestWriteTokens(t *testing.T) {
	defer data.SetTextChunk(4096)()
	text := data.Opticks()[:200000] + "\n\n  tail   with\t\tspaces  \n"
	char := data.NewVocab(text)
	for _, tok := range []data.Tokenizer{gpt2(t), char} {
		want, err := tok.AppendEncode(nil, []byte(text))
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "text.tok")
		n, err := data.WriteTokens(path, iotest.HalfReader(strings.NewReader(text)), tok)
		require.NoError(t, err)
		assert.Equal(t, int64(len(want)), n)
		assert.Equal(t, want, readAll(t, path))
		f, err := data.OpenTokens(path)
		require.NoError(t, err)
		assert.Equal(t, tok.Size(), f.Vocab())
		want16 := data.Uint16
		assert.Equal(t, want16, f.Type())
		f.Close()
	}
}

// TestWriteTokensLongLine: a text without a place to cut grows its piece,
// and past MaxTextChunk would cut at a character boundary; a line of
// letters far longer than the piece still encodes as a whole.
func TestWriteTokensLongLine(t *testing.T) {
	defer data.SetTextChunk(64)()
	text := strings.Repeat("é", 1000) + " and more"
	v := data.NewVocab(text)
	path := filepath.Join(t.TempDir(), "long.tok")
	_, err := data.WriteTokens(path, strings.NewReader(text), v)
	require.NoError(t, err)
	want, _ := v.Encode(text)
	assert.Equal(t, want, readAll(t, path))
}

func TestWriteTokensErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keep.tok")
	require.NoError(t, os.WriteFile(path, []byte("safe"), 0o644))
	boom := errors.New("disk on fire")
	_, err := data.WriteTokens(path, io.MultiReader(strings.NewReader("some text"), iotest.ErrReader(boom)), data.NewVocab("some text"))
	assert.ErrorIs(t, err, boom)
	_, err = data.WriteTokens(path, strings.NewReader("abc"), data.NewVocab("ab"))
	assert.ErrorContains(t, err, "'c' (U+0063) at byte 2")
	b, _ := os.ReadFile(path)
	assert.Equal(t, "safe", string(b), "a failed write leaves the file as it was")
	left, _ := filepath.Glob(filepath.Join(dir, "*.tmp*"))
	assert.Empty(t, left)
}
