package bpe

import (
	"testing"

	"github.com/gonox/gonox/data"
)

// paragraphs cuts text after every blank line, where two newlines end
// (as bench/bpe_node.js does with split(/(?<=\n\n)/)).
func paragraphs(text string) [][]byte {
	var ps [][]byte
	start := 0
	for i := 2; i <= len(text); i++ {
		if (text[i-2:i] == "\n\n" && i < len(text)) || i == len(text) {
			ps = append(ps, []byte(text[start:i]))
			start = i
		}
	}
	return ps
}

// encodeAll encodes each paragraph and returns the number of tokens.
func encodeAll(tok *Tokenizer, ps [][]byte, ids []int32) int {
	n := 0
	for _, p := range ps {
		ids, _ = tok.AppendEncode(ids[:0], p)
		n += len(ids)
	}
	return n
}

// BenchmarkBPEEncode encodes Newton's Opticks, paragraph by paragraph,
// with GPT-2's vocabulary, in the steady state of a long run (the cache of
// word encodings warm, as the reference JavaScript encoder's is after its
// first pass). bench/compare.sh (through bench/bpe.sh) sets it beside the
// reference under node:
//
//	go test ./data/bpe -run '^$' -bench BPEEncode
func BenchmarkBPEEncode(b *testing.B) {
	tok := loadGPT2(b)
	text := data.Opticks()
	ps := paragraphs(text)
	ids := make([]int32, 0, len(text))
	n := encodeAll(tok, ps, ids)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		encodeAll(tok, ps, ids)
	}
	b.ReportMetric(float64(len(text))/float64(n), "bytes/token")
}

// BenchmarkBPEEncodeCold is BenchmarkBPEEncode with an empty cache each
// time: every distinct word is merged from its bytes once.
func BenchmarkBPEEncodeCold(b *testing.B) {
	tok := loadGPT2(b)
	text := data.Opticks()
	ps := paragraphs(text)
	ids := make([]int32, 0, len(text))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.mu.Lock()
		clear(tok.cache)
		tok.mu.Unlock()
		encodeAll(tok, ps, ids)
	}
}

// BenchmarkTrain learns a 2,000-token vocabulary from the Opticks.
func BenchmarkTrain(b *testing.B) {
	text := data.Opticks()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Train(text, 2000)
	}
}
