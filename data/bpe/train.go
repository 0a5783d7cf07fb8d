package bpe

import (
	"bytes"
	"container/heap"
	"fmt"
)

// Train learns a byte-level BPE vocabulary of at most size tokens from
// corpus, the way GPT-2's was made: the corpus is cut into pre-tokens (see
// Words), and starting from the 256 single bytes, the most frequent
// adjacent pair of tokens within pre-tokens is merged into a new token,
// again and again, until the vocabulary has size-1 tokens; EndOfText is the
// last. Ties go to the pair whose tokens' bytes sort first, so the same
// corpus always gives the same vocabulary. When no pair is left to merge
// the vocabulary is smaller than size. Ids 0..255 are the bytes in the
// order of GPT-2's, merges follow in the order they were learnt.
//
// It panics if size < 257 (the bytes and EndOfText).
func Train(corpus string, size int) *Tokenizer {
	if size < 257 {
		panic(fmt.Sprintf("bpe.Train: vocabulary size %d is less than 257 (256 bytes and %s)", size, EndOfText))
	}
	tokens := make([][]byte, 0, size)
	var byteID [256]int32
	for _, printableFirst := range []bool{true, false} {
		for b := range 256 {
			if (byteChars[b] == rune(b)) == printableFirst {
				byteID[b] = int32(len(tokens))
				tokens = append(tokens, []byte{byte(b)})
			}
		}
	}

	tr := trainer{tokens: tokens, counts: map[pair]int{}, where: map[pair][]int32{}}
	freq := map[string]int{}
	Words([]byte(corpus), func(w []byte) bool {
		freq[string(w)]++
		return true
	})
	for w, f := range freq {
		syms := make([]int32, len(w))
		for i := range len(w) {
			syms[i] = byteID[w[i]]
		}
		tr.words = append(tr.words, word{syms: syms, freq: f})
	}
	for wi, w := range tr.words {
		for k := 0; k+1 < len(w.syms); k++ {
			p := pair{w.syms[k], w.syms[k+1]}
			tr.counts[p] += w.freq
			tr.where[p] = append(tr.where[p], int32(wi))
		}
	}
	tr.h = pairHeap{tokens: &tr.tokens}
	for p, c := range tr.counts {
		tr.h.items = append(tr.h.items, pairCount{p, c})
	}
	heap.Init(&tr.h)
	tr.stamp = make([]int, len(tr.words))

	var merges []pair
	for len(tr.tokens) < size-1 {
		p, ok := tr.best()
		if !ok {
			break
		}
		merges = append(merges, p)
		tr.merge(p, len(merges))
	}
	tokens = append(tr.tokens, []byte(EndOfText))
	t, err := newTokenizer(tokens, merges)
	if err != nil {
		panic("bpe.Train: " + err.Error()) // a bug: training builds a consistent vocabulary
	}
	return t
}

type word struct {
	syms []int32
	freq int
}

// trainer holds the state of training: the distinct pre-tokens as token
// sequences, the count of each adjacent pair over the corpus, the words
// each pair occurs in (possibly listed more than once, or no longer
// there), and a heap of counts whose stale entries are skipped.
type trainer struct {
	tokens [][]byte
	words  []word
	counts map[pair]int
	where  map[pair][]int32
	h      pairHeap
	stamp  []int // the merge that last rewrote each word
}

// best pops the most frequent pair (ties: smallest bytes first).
func (tr *trainer) best() (pair, bool) {
	for tr.h.Len() > 0 {
		e := heap.Pop(&tr.h).(pairCount)
		if c := tr.counts[e.p]; c == e.count && c > 0 {
			return e.p, true
		}
	}
	return pair{}, false
}

// merge makes the token of p and rewrites every word holding p, updating
// the pair counts; n numbers the merge.
func (tr *trainer) merge(p pair, n int) {
	id := int32(len(tr.tokens))
	tr.tokens = append(tr.tokens, append(append([]byte(nil), tr.tokens[p.a]...), tr.tokens[p.b]...))
	changed := map[pair]bool{}
	for _, wi := range tr.where[p] {
		if tr.stamp[wi] == n {
			continue
		}
		tr.stamp[wi] = n
		w := &tr.words[wi]
		for k := 0; k+1 < len(w.syms); k++ {
			q := pair{w.syms[k], w.syms[k+1]}
			tr.counts[q] -= w.freq
			changed[q] = true
		}
		out := w.syms[:0]
		for k := 0; k < len(w.syms); k++ {
			if k+1 < len(w.syms) && w.syms[k] == p.a && w.syms[k+1] == p.b {
				out = append(out, id)
				k++
			} else {
				out = append(out, w.syms[k])
			}
		}
		w.syms = out
		for k := 0; k+1 < len(w.syms); k++ {
			q := pair{w.syms[k], w.syms[k+1]}
			tr.counts[q] += w.freq
			changed[q] = true
			if q.a == id || q.b == id {
				tr.where[q] = append(tr.where[q], wi)
			}
		}
	}
	delete(tr.where, p)
	delete(tr.counts, p)
	for q := range changed {
		if c := tr.counts[q]; c > 0 {
			heap.Push(&tr.h, pairCount{q, c})
		} else {
			delete(tr.counts, q)
		}
	}
}

type pairCount struct {
	p     pair
	count int
}

// pairHeap is a max-heap of pair counts; ties go to the pair whose tokens'
// bytes sort first.
type pairHeap struct {
	items  []pairCount
	tokens *[][]byte
}

func (h *pairHeap) Len() int { return len(h.items) }
func (h *pairHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.count != b.count {
		return a.count > b.count
	}
	t := *h.tokens
	if c := bytes.Compare(t[a.p.a], t[b.p.a]); c != 0 {
		return c < 0
	}
	return bytes.Compare(t[a.p.b], t[b.p.b]) < 0
}
func (h *pairHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *pairHeap) Push(x any)    { h.items = append(h.items, x.(pairCount)) }
func (h *pairHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
