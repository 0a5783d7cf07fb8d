package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"path/filepath"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/data/bpe"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/tensor"
)

// Bounds of the word-piece and token-file inputs.
const (
	// maxTokenVocab bounds the vocabulary of -data and of a BPE (GPT-2's
	// is 50,257).
	maxTokenVocab = 1 << 17
	// minBPE is the smallest BPE vocabulary: the 256 bytes and
	// <|endoftext|>.
	minBPE = 257
)

// tokenizer turns the prompt into ids and ids into text: a character
// vocabulary (data.Vocab) or GPT-2's byte-level BPE.
type tokenizer interface {
	Size() int
	Encode(s string) ([]int32, error)
	Decode(ids []int32) string
}

// bpeTokenizer is a bpe.Tokenizer as a tokenizer.
type bpeTokenizer struct{ *bpe.Tokenizer }

func (t bpeTokenizer) Encode(s string) ([]int32, error) { return t.Tokenizer.Encode(s), nil }

// newTokenizer makes the tokenizer of -tokenizer for text: its characters,
// or a BPE loaded from -bpe-vocab or trained on text (-bpe-size tokens).
func newTokenizer(cfg config, text string) (tokenizer, error) {
	if cfg.tokenizer != "bpe" {
		v := data.NewVocab(text)
		if v.Size() > maxVocab {
			return nil, fmt.Errorf("-text %s: %d distinct characters, more than the %d this example's vocabulary takes", cfg.text, v.Size(), maxVocab)
		}
		return v, nil
	}
	if cfg.bpeVocab == "" {
		return bpeTokenizer{bpe.Train(text, cfg.bpeSize)}, nil
	}
	t, err := bpe.Load(filepath.Join(cfg.bpeVocab, "encoder.json"), filepath.Join(cfg.bpeVocab, "vocab.bpe"))
	if err != nil {
		return nil, fmt.Errorf("-bpe-vocab: %w", err)
	}
	if t.Size() > maxTokenVocab {
		return nil, fmt.Errorf("-bpe-vocab %s: %d tokens, more than the %d this example takes", cfg.bpeVocab, t.Size(), maxTokenVocab)
	}
	return bpeTokenizer{t}, nil
}

// openTokenFile opens -data as windows of -context tokens at every
// offset: the first 90% of them train, the last 10% validate.
func openTokenFile(cfg config, c *corpus) error {
	w, err := data.OpenTokenWindows([]string{cfg.data}, cfg.context, 1)
	if err != nil {
		return fmt.Errorf("-data: %w", err)
	}
	if w.Vocab() > maxTokenVocab {
		w.Close()
		return fmt.Errorf("-data %s: a vocabulary of %d tokens, more than the %d this example takes", cfg.data, w.Vocab(), maxTokenVocab)
	}
	cut := w.Len() * 9 / 10
	c.windows, c.trainSet, c.valSet = w, data.Slice(w, 0, cut), data.Slice(w, cut, w.Len())
	c.size, c.name, c.unit = w.Vocab(), filepath.Base(cfg.data), "tokens"
	return nil
}

// batchSource gives the training batches of a run from a step on.
type batchSource interface {
	next() (x, y *tensor.Tensor, err error)
	close()
}

// streamBatches reads -data's training windows through a shuffled,
// prefetching data.Stream from the step a run resumes at: batch p is the
// same whether the run was interrupted or not.
type streamBatches struct{ r *data.Reader }

func newStreamBatches(cfg config, c *corpus, first int) *streamBatches {
	s := &data.Stream{Dataset: c.trainSet, BatchSize: cfg.batch, Shuffle: true,
		Key: tensor.FoldIn(tensor.NewKey(cfg.seed), 0x6d6f65), Prefetch: 2}
	return &streamBatches{r: s.Open(context.Background(), int64(first))}
}

func (s *streamBatches) next() (x, y *tensor.Tensor, err error) {
	b, err := s.r.Next()
	if err != nil {
		return nil, nil, err
	}
	return b.X, b.Y, nil
}

func (s *streamBatches) close() { s.r.Close() }

// checkTokenFile checks the flags that depend on -data: a batch of
// training windows and an evaluation's worth of validation windows.
func checkTokenFile(cfg config, c *corpus) error {
	if c.trainSet.Len() < cfg.batch || c.valSet.Len() < 1 {
		return cli.Usagef("-context %d, -batch %d: %s has %d windows of %d tokens, too few for a batch in the first 90%% and a window in the last 10%%",
			cfg.context, cfg.batch, c.name, c.windows.Len(), cfg.context+1)
	}
	return nil
}

// textBatches draws training windows at random offsets of the text: step
// p's windows are the p-th batch of draws of a generator seeded by -seed,
// so a run resumed from a checkpoint draws on where it stopped.
type textBatches struct {
	rng     *rand.Rand
	c       *corpus
	starts  []int
	context int
}

func (t *textBatches) next() (x, y *tensor.Tensor, err error) {
	for i := range t.starts {
		t.starts[i] = t.rng.IntN(len(t.c.train) - t.context)
	}
	x, y = windows(t.c.train, t.starts, t.context)
	return x, y, nil
}

func (t *textBatches) close() {}

// newBatches returns the training batches of the run from step first on.
func newBatches(cfg config, c *corpus, first int) batchSource {
	if c.windows != nil {
		return newStreamBatches(cfg, c, first)
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 0x6d6f65))
	for range first * cfg.batch { // the windows the restored steps used
		rng.IntN(len(c.train) - cfg.context)
	}
	return &textBatches{rng: rng, c: c, starts: make([]int, cfg.batch), context: cfg.context}
}

// windowsAt returns the validation windows starting at starts (offsets
// into the held-out text, or indices of held-out windows of the file).
func (c *corpus) windowsAt(starts []int, context int) (x, y *tensor.Tensor, err error) {
	if c.windows == nil {
		x, y = windows(c.val, starts, context)
		return x, y, nil
	}
	b, err := c.valSet.Batch(starts)
	if err != nil {
		return nil, nil, err
	}
	return b.X, b.Y, nil
}

// prompt returns the ids of -prompt and whether the sample can be decoded:
// the tokenizer's vocabulary is the model's. An empty prompt (or one the
// tokenizer cannot serve) starts from the first token of the data.
func (c *corpus) prompt(cfg config) ([]int32, bool, error) {
	decode := c.tok.Size() == c.size
	var ids []int32
	if decode {
		var err error
		if ids, err = c.tok.Encode(cfg.prompt); err != nil {
			return nil, false, fmt.Errorf("-prompt: %w", err) // checked by checkCorpus
		}
	}
	if len(ids) > 0 {
		return ids, decode, nil
	}
	if c.windows == nil {
		return c.train[:1], decode, nil
	}
	b, err := c.trainSet.Batch([]int{0})
	if err != nil {
		return nil, false, err
	}
	return b.X.RawInt32()[:1], decode, nil
}

// compareBatch is the batch -strategy compare steps on: random windows of
// the text, or the first batch of the token file's stream.
func (c *corpus) compareBatch(cfg config) (x, y *tensor.Tensor, err error) {
	if c.windows != nil {
		src := newStreamBatches(cfg, c, 0)
		defer src.close()
		return src.next()
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 1))
	starts := make([]int, cfg.batch)
	for i := range starts {
		starts[i] = rng.IntN(len(c.train) - cfg.context)
	}
	x, y = windows(c.train, starts, cfg.context)
	return x, y, nil
}

// bitsPer names the unit of the validation loss in bits: "char" or
// "token".
func (c *corpus) bitsPer() string {
	if c.unit == "characters" {
		return "char"
	}
	return "token"
}

// identity returns what a checkpoint records of the data (compared on
// resume): the text's length and digest, or the token file's size; and the
// vocabulary: the characters, a digest of the BPE, or the file's
// vocabulary size.
func (c *corpus) identity() (text, vocab string) {
	if c.windows != nil {
		f := c.windows.Files()[0]
		return fmt.Sprintf("token file of %d tokens", f.Len()), fmt.Sprintf("token ids below %d", c.size)
	}
	text = fmt.Sprintf("%d %s, sha256 %s", len(c.train)+len(c.val), c.unit, c.digest)
	switch t := c.tok.(type) {
	case *data.Vocab:
		return text, string(t.Chars())
	case bpeTokenizer:
		h := sha256.New()
		if err := t.Write(h, h); err != nil {
			panic(err) // a hash does not fail
		}
		return text, fmt.Sprintf("byte-level BPE of %d tokens, sha256 %s", t.Size(), hex.EncodeToString(h.Sum(nil)[:8]))
	}
	return text, ""
}
