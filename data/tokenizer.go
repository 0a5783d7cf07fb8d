package data

import (
	"fmt"
	"unicode/utf8"
)

// Tokenizer turns text into token ids below Size(). Vocab (characters) and
// bpe.Tokenizer (GPT-2's byte-level BPE, package data/bpe) are
// tokenizers; WriteTokens uses one to turn a text stream into a token file.
type Tokenizer interface {
	// Size returns the number of tokens: every id is in [0, Size()).
	Size() int
	// AppendEncode appends the ids of text to dst and returns the
	// extended slice.
	AppendEncode(dst []int32, text []byte) ([]int32, error)
}

// AppendEncode appends the ids of the characters of text to dst, as
// Encode. Invalid UTF-8 reads as U+FFFD.
func (v *Vocab) AppendEncode(dst []int32, text []byte) ([]int32, error) {
	for off := 0; off < len(text); {
		r, n := utf8.DecodeRune(text[off:])
		id, ok := v.ids[r]
		if !ok {
			return dst, fmt.Errorf("data: Vocab.AppendEncode: character %q (U+%04X) at byte %d is not in the vocabulary of %d characters", r, r, off, len(v.chars))
		}
		dst = append(dst, id)
		off += n
	}
	return dst, nil
}
