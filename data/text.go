package data

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/gonox/gonox/tensor"
)

// Vocab is a character vocabulary: it numbers the distinct characters
// (Unicode code points) of a text 0, 1, ..., Size()-1 in code point order,
// so the same text always gives the same ids. Invalid UTF-8 reads as
// U+FFFD, the way ranging over a Go string does.
type Vocab struct {
	chars []rune
	ids   map[rune]int32
}

// NewVocab returns the vocabulary of the characters of text.
func NewVocab(text string) *Vocab {
	seen := map[rune]bool{}
	for _, r := range text {
		seen[r] = true
	}
	chars := make([]rune, 0, len(seen))
	for r := range seen {
		chars = append(chars, r)
	}
	slices.Sort(chars)
	ids := make(map[rune]int32, len(chars))
	for i, r := range chars {
		ids[r] = int32(i)
	}
	return &Vocab{chars: chars, ids: ids}
}

// Size returns the number of characters.
func (v *Vocab) Size() int { return len(v.chars) }

// Chars returns the characters in id order.
func (v *Vocab) Chars() []rune { return slices.Clone(v.chars) }

// ID returns the id of r and whether r is in the vocabulary.
func (v *Vocab) ID(r rune) (int32, bool) {
	id, ok := v.ids[r]
	return id, ok
}

// Encode returns the ids of the characters of s. A character not in the
// vocabulary is an error naming it and its byte offset in s.
func (v *Vocab) Encode(s string) ([]int32, error) {
	ids := make([]int32, 0, utf8.RuneCountInString(s))
	for off, r := range s {
		id, ok := v.ids[r]
		if !ok {
			return nil, fmt.Errorf("data: Vocab.Encode: character %q (U+%04X) at byte %d is not in the vocabulary of %d characters", r, r, off, len(v.chars))
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Decode returns the text of ids. It panics on an id outside [0, Size()).
func (v *Vocab) Decode(ids []int32) string {
	b := make([]byte, 0, len(ids))
	for i, id := range ids {
		if id < 0 || int(id) >= len(v.chars) {
			panic(fmt.Sprintf("data.Vocab.Decode: id %d (position %d) out of range [0,%d)", id, i, len(v.chars)))
		}
		b = utf8.AppendRune(b, v.chars[id])
	}
	return string(b)
}

// Text is a dataset of fixed-length windows of a token sequence, for
// next-token models: example i is the window of Window() ids starting at
// i*stride as input X and the same window shifted one position later as
// target Y. A batch of B examples is X i32[B,window] and Y i32[B,window],
// with Y[b,t] the token that follows X[b,t].
//
//	vocab := data.NewVocab(corpus)
//	ids, _ := vocab.Encode(corpus)
//	cut := len(ids) * 9 / 10 // hold out the end of the text
//	train := data.NewText(ids[:cut], 64, 1)
//	test := data.NewText(ids[cut:], 64, 64)
type Text struct {
	ids            []int32
	window, stride int
}

// NewText returns the dataset of windows of ids (which it copies) of length
// window, starting every stride tokens. A sequence shorter than window+1
// tokens gives an empty dataset. It panics if window or stride is not
// positive.
func NewText(ids []int32, window, stride int) *Text {
	if window < 1 || stride < 1 {
		panic(fmt.Sprintf("data.NewText: window %d and stride %d must be positive", window, stride))
	}
	return &Text{ids: slices.Clone(ids), window: window, stride: stride}
}

// Len returns the number of windows: every start s = i*stride with
// s+window+1 <= len(ids).
func (t *Text) Len() int {
	if len(t.ids) < t.window+1 {
		return 0
	}
	return (len(t.ids)-t.window-1)/t.stride + 1
}

// Window returns the length of each window.
func (t *Text) Window() int { return t.window }

// Batch returns the windows at indices as X and Y, both i32[len(indices),
// window]. It panics, naming the index, if one is outside [0, Len()).
func (t *Text) Batch(indices []int) (Batch, error) {
	n, w := t.Len(), t.window
	x := make([]int32, len(indices)*w)
	y := make([]int32, len(indices)*w)
	for i, ix := range indices {
		if ix < 0 || ix >= n {
			panic(fmt.Sprintf("data.Text.Batch: index %d (position %d) out of range [0,%d)", ix, i, n))
		}
		s := ix * t.stride
		copy(x[i*w:(i+1)*w], t.ids[s:s+w])
		copy(y[i*w:(i+1)*w], t.ids[s+1:s+w+1])
	}
	return Batch{X: tensor.WrapInt32(x, len(indices), w), Y: tensor.WrapInt32(y, len(indices), w), Indices: indices}, nil
}
