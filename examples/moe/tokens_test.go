package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/data"
)

// opticksTokens writes the Opticks as a token file of its characters.
func opticksTokens(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "opticks.tok")
	_, err := data.WriteTokens(path, strings.NewReader(data.Opticks()), data.NewVocab(data.Opticks()))
	require.NoError(t, err)
	return path
}

func runArgs(t *testing.T, a ...string) string {
	t.Helper()
	cfg, err := parseFlags(args(a...), io.Discard)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, runConfig(cfg, &out, io.Discard))
	return out.String()
}

// TestTrainOnTokenFile: -data trains on the windows of a token file and
// decodes the sample with the text's characters (the same vocabulary).
func TestTrainOnTokenFile(t *testing.T) {
	path := opticksTokens(t)
	out := runArgs(t, "-data", path, "-steps", "4", "-eval-every", "2", "-plot", "")
	assert.Contains(t, out, "gonox moe: opticks.tok, 510319 train / 56703 validation windows of 17 tokens, vocabulary 91")
	assert.Regexp(t, `step     4  loss \d+\.\d+  val loss \d+\.\d+ \(\d+\.\d+ bits/token\)`, out)
	assert.Contains(t, out, "sample:\nLight is ")
}

var lossLine = regexp.MustCompile(`(?m)^step +(\d+)  loss (\S+)  val loss (\S+)`)

// TestTokenFileResume: a run resumed mid-epoch from a checkpoint reads the
// batches the uninterrupted run read (the stream resumes at the saved
// step), so their losses agree to the last digit.
func TestTokenFileResume(t *testing.T) {
	path := opticksTokens(t)
	dir := t.TempDir()
	flags := []string{"-data", path, "-strategy", "single", "-eval-every", "2", "-plot", "", "-sample", "0", "-steps", "6", "-ckpt", dir}
	whole := runArgs(t, flags...)
	// As if the run had stopped after step 4.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "00000006")))
	resumed := runArgs(t, flags...)
	assert.Contains(t, resumed, "resumed from "+dir+" after step 4")
	w, r := lossLine.FindAllStringSubmatch(whole, -1), lossLine.FindAllStringSubmatch(resumed, -1)
	require.Len(t, w, 3, whole)
	require.Len(t, r, 1, resumed)
	assert.Equal(t, w[2], r[0])
}

// TestBPETokenizer: word pieces learnt from the text, or GPT-2's own.
func TestBPETokenizer(t *testing.T) {
	out := runArgs(t, "-tokenizer", "bpe", "-bpe-size", "400", "-steps", "2", "-eval-every", "2", "-plot", "")
	assert.Contains(t, out, "validation tokens, vocabulary 400")
	assert.Contains(t, out, "bits/token")
	assert.Contains(t, out, "batch 16×16 tokens")
	assert.Contains(t, out, "sample:\nLight is ")

	dir := t.TempDir()
	for src, dst := range map[string]string{"gpt2-encoder.json.gz": "encoder.json", "gpt2-vocab.bpe.gz": "vocab.bpe"} {
		f, err := os.Open(filepath.Join("..", "..", "data", "bpe", "testdata", src))
		require.NoError(t, err)
		zr, err := gzip.NewReader(f)
		require.NoError(t, err)
		b, err := io.ReadAll(zr)
		require.NoError(t, err)
		f.Close()
		require.NoError(t, os.WriteFile(filepath.Join(dir, dst), b, 0o644))
	}
	out = runArgs(t, "-tokenizer", "bpe", "-bpe-vocab", dir, "-steps", "1", "-eval-every", "1", "-plot", "", "-sample", "5")
	assert.Contains(t, out, "vocabulary 50257")
}

func TestTokenFlagsRejected(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-tokenizer", "word"}, `-tokenizer "word": want char or bpe`},
		{[]string{"-bpe-size", "500"}, "-bpe-vocab and -bpe-size go with -tokenizer bpe"},
		{[]string{"-tokenizer", "bpe", "-bpe-size", "100"}, "-bpe-size 100: want an integer from 257"},
		{[]string{"-tokenizer", "bpe", "-bpe-vocab", "x", "-bpe-size", "300"}, "a vocabulary loaded from -bpe-vocab has its own size"},
	} {
		_, err := parseFlags(args(c.args...), io.Discard)
		require.Error(t, err, "%q", c.args)
		assert.Contains(t, err.Error(), c.msg)
	}
	var errOut bytes.Buffer
	missing := filepath.Join(t.TempDir(), "missing.tok")
	assert.Equal(t, 1, mainExit(args("-data", missing, "-plot", ""), io.Discard, &errOut))
	assert.Contains(t, errOut.String(), "missing.tok")
	errOut.Reset()
	assert.Equal(t, 1, mainExit(args("-tokenizer", "bpe", "-bpe-vocab", t.TempDir(), "-plot", ""), io.Discard, &errOut))
	assert.Contains(t, errOut.String(), "encoder.json")
}

// TestStreamBatchesResume: the batches from step 4 on are those an
// uninterrupted run reads after its first 4.
func TestStreamBatchesResume(t *testing.T) {
	cfg, err := parseFlags(args("-data", opticksTokens(t)), io.Discard)
	require.NoError(t, err)
	c, err := openCorpus(cfg)
	require.NoError(t, err)
	defer c.windows.Close()
	whole, from4 := newBatches(cfg, c, 0), newBatches(cfg, c, 4)
	defer whole.close()
	defer from4.close()
	for step := range 8 {
		x, y, err := whole.next()
		require.NoError(t, err)
		if step < 4 {
			continue
		}
		x4, y4, err := from4.next()
		require.NoError(t, err)
		assert.Equal(t, x.Ints(), x4.Ints(), "step %d", step)
		assert.Equal(t, y.Ints(), y4.Ints(), "step %d", step)
	}
}

// TestResumeRefusesAnotherTokenizer: a checkpoint of word pieces does not
// resume on characters; the message names both vocabularies.
func TestResumeRefusesAnotherTokenizer(t *testing.T) {
	dir := t.TempDir()
	runArgs(t, "-tokenizer", "bpe", "-bpe-size", "300", "-steps", "2", "-eval-every", "2", "-plot", "", "-sample", "0", "-ckpt", dir)
	cfg, err := parseFlags(args("-steps", "4", "-eval-every", "2", "-plot", "", "-ckpt", dir), io.Discard)
	require.NoError(t, err)
	err = runConfig(cfg, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "byte-level BPE of 300 tokens")
}
