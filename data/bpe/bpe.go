package bpe

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// EndOfText is the special token GPT-2 puts between documents. Encode never
// produces it from text (the string "<|endoftext|>" encodes as ordinary
// text, as in the reference); look its id up with Tokenizer.ID.
const EndOfText = "<|endoftext|>"

// Tokenizer is a byte-level BPE tokenizer: a vocabulary of byte strings
// numbered 0..Size()-1 and an ordered list of merges. The zero value is not
// usable; make one with Read, Load, GPT2 files or Train.
//
// A Tokenizer is safe for use by several goroutines at once.
type Tokenizer struct {
	tokens  [][]byte         // id -> bytes
	ids     map[string]int32 // bytes -> id
	byteIDs [256]int32       // the id of each single byte
	merges  []pair           // in rank order
	ranks   map[pair]merge

	mu    sync.Mutex
	cache map[string][]int32 // word -> ids, cleared when full
}

// pair is two adjacent token ids.
type pair struct{ a, b int32 }

// merge is the rank of a merge and the id of the token it makes.
type merge struct{ rank, id int32 }

// maxCache bounds the number of words whose encoding is remembered.
const maxCache = 1 << 16

// newTokenizer checks a vocabulary and its merges and builds the tables.
// merges are pairs of token ids in rank order.
func newTokenizer(tokens [][]byte, merges []pair) (*Tokenizer, error) {
	t := &Tokenizer{tokens: tokens, ids: make(map[string]int32, len(tokens)), merges: merges,
		ranks: make(map[pair]merge, len(merges)), cache: map[string][]int32{}}
	for id, tok := range tokens {
		if len(tok) == 0 {
			return nil, fmt.Errorf("bpe: token %d is empty", id)
		}
		if prev, dup := t.ids[string(tok)]; dup {
			return nil, fmt.Errorf("bpe: tokens %d and %d are both %q", prev, id, tok)
		}
		t.ids[string(tok)] = int32(id)
	}
	for b := range 256 {
		id, ok := t.ids[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("bpe: the vocabulary has no token for the byte 0x%02x", b)
		}
		t.byteIDs[b] = id
	}
	for rank, m := range merges {
		if _, dup := t.ranks[m]; dup {
			return nil, fmt.Errorf("bpe: merge %d (%q %q) is listed twice", rank, tokens[m.a], tokens[m.b])
		}
		joined := string(tokens[m.a]) + string(tokens[m.b])
		id, ok := t.ids[joined]
		if !ok {
			return nil, fmt.Errorf("bpe: merge %d (%q %q) makes %q, which is not in the vocabulary", rank, tokens[m.a], tokens[m.b], joined)
		}
		t.ranks[m] = merge{rank: int32(rank), id: id}
	}
	return t, nil
}

// Size returns the number of tokens in the vocabulary.
func (t *Tokenizer) Size() int { return len(t.tokens) }

// NumMerges returns the number of merges.
func (t *Tokenizer) NumMerges() int { return len(t.merges) }

// ID returns the id of the token whose bytes are tok, and whether there is
// one.
func (t *Tokenizer) ID(tok string) (int32, bool) {
	id, ok := t.ids[tok]
	return id, ok
}

// Token returns the bytes of token id. It panics if id is outside
// [0, Size()).
func (t *Tokenizer) Token(id int32) []byte {
	t.checkID("Token", id, 0)
	return t.tokens[id]
}

func (t *Tokenizer) checkID(what string, id int32, pos int) {
	if id < 0 || int(id) >= len(t.tokens) {
		panic(fmt.Sprintf("bpe.Tokenizer.%s: id %d (position %d) out of range [0,%d)", what, id, pos, len(t.tokens)))
	}
}

// Encode returns the token ids of text, as GPT-2's encoder gives them:
// text is cut into pre-tokens by GPT-2's pattern (see Words) and the bytes
// of each are merged pair by pair, the pair of lowest rank first. Invalid
// UTF-8 is replaced as Sanitize does before encoding.
func (t *Tokenizer) Encode(text string) []int32 {
	ids, _ := t.AppendEncode(nil, []byte(text))
	return ids
}

// AppendEncode appends the token ids of text to dst and returns the
// extended slice, as Encode. The error is always nil (it satisfies
// data.Tokenizer).
func (t *Tokenizer) AppendEncode(dst []int32, text []byte) ([]int32, error) {
	text = Sanitize(text)
	var scratch []int32
	for i := 0; i < len(text); {
		end := nextWord(text, i)
		word := text[i:end]
		i = end
		if len(word) == 1 {
			dst = append(dst, t.byteIDs[word[0]])
			continue
		}
		t.mu.Lock()
		ids, ok := t.cache[string(word)]
		t.mu.Unlock()
		if ok {
			dst = append(dst, ids...)
			continue
		}
		scratch = t.bpe(scratch[:0], word)
		dst = append(dst, scratch...)
		t.mu.Lock()
		if len(t.cache) >= maxCache {
			clear(t.cache)
		}
		t.cache[string(word)] = append([]int32(nil), scratch...)
		t.mu.Unlock()
	}
	return dst, nil
}

// bpe appends to dst the ids of word after merging: while some adjacent
// pair is a merge, every occurrence of the pair of lowest rank, left to
// right, becomes one token.
func (t *Tokenizer) bpe(dst []int32, word []byte) []int32 {
	syms := dst
	for _, c := range word {
		syms = append(syms, t.byteIDs[c])
	}
	for len(syms) > 1 {
		best := merge{rank: -1}
		var bp pair
		for k := 0; k+1 < len(syms); k++ {
			p := pair{syms[k], syms[k+1]}
			if m, ok := t.ranks[p]; ok && (best.rank < 0 || m.rank < best.rank) {
				best, bp = m, p
			}
		}
		if best.rank < 0 {
			break
		}
		w := 0
		for k := 0; k < len(syms); k++ {
			if k+1 < len(syms) && syms[k] == bp.a && syms[k+1] == bp.b {
				syms[w] = best.id
				k++
			} else {
				syms[w] = syms[k]
			}
			w++
		}
		syms = syms[:w]
	}
	return syms
}

// Decode returns the text of ids: the bytes of their tokens, concatenated.
// Decoding a prefix of an encoding may end inside a character, so the
// result is not always valid UTF-8. It panics, naming the id, if one is
// outside [0, Size()).
func (t *Tokenizer) Decode(ids []int32) string {
	return string(t.AppendDecode(nil, ids))
}

// AppendDecode appends the bytes of the tokens ids to dst, as Decode.
func (t *Tokenizer) AppendDecode(dst []byte, ids []int32) []byte {
	for i, id := range ids {
		t.checkID("Decode", id, i)
		dst = append(dst, t.tokens[id]...)
	}
	return dst
}

// byteChars is GPT-2's table of printable characters standing for bytes
// (bytes_to_unicode in encoder.py): the printable Latin-1 bytes stand for
// themselves, the others for U+0100 onwards in byte order.
var byteChars, charBytes = func() (enc [256]rune, dec map[rune]byte) {
	dec = make(map[rune]byte, 256)
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			enc[b] = rune(b)
		} else {
			enc[b] = rune(256 + n)
			n++
		}
		dec[enc[b]] = byte(b)
	}
	return enc, dec
}()

// printable returns tok spelled with GPT-2's byte characters, as
// encoder.json and vocab.bpe spell tokens.
func printable(tok []byte) string {
	s := make([]byte, 0, 2*len(tok))
	for _, b := range tok {
		s = utf8.AppendRune(s, byteChars[b])
	}
	return string(s)
}

// unprintable is the inverse of printable; ok is false if s has a character
// that stands for no byte.
func unprintable(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := charBytes[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}
