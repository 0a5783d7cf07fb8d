package bpe

import (
	"bytes"
	"testing"
)

// FuzzEncode checks that any input round-trips (after Sanitize) and that
// the pre-tokens cover it exactly.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "Hello world", "it's  \n\n x", "\xe2\x82(\xff", "😀👍🏽 ½ \u00a0a", "\ufeff\U0002EBF0"} {
		f.Add([]byte(s))
	}
	tok := loadGPT2(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		clean := Sanitize(in)
		var joined []byte
		Words(in, func(w []byte) bool {
			if len(w) == 0 {
				t.Fatalf("empty pre-token in %q", in)
			}
			joined = append(joined, w...)
			return true
		})
		if !bytes.Equal(joined, clean) {
			t.Fatalf("pre-tokens of %q join to %q", in, joined)
		}
		ids, _ := tok.AppendEncode(nil, in)
		if got := tok.AppendDecode(nil, ids); !bytes.Equal(got, clean) {
			t.Fatalf("%q decodes to %q", in, got)
		}
	})
}

// FuzzRead feeds arbitrary vocabulary files to Read: an error or a
// consistent tokenizer, never a panic.
func FuzzRead(f *testing.F) {
	small := Train("aaab abab", 300)
	var eb, mb bytes.Buffer
	if err := small.Write(&eb, &mb); err != nil {
		f.Fatal(err)
	}
	f.Add(eb.Bytes(), mb.Bytes())
	f.Add([]byte(`{"a": 0}`), []byte("#version: 0.2\na a\n"))
	f.Add([]byte(`{"a": -1, "b": 99999999999}`), []byte(""))
	f.Add([]byte{0x1f, 0x8b, 0x08}, []byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, enc, merges []byte) {
		tok, err := Read(bytes.NewReader(enc), bytes.NewReader(merges))
		if err != nil {
			return
		}
		text := []byte("abc déf 123")
		ids, _ := tok.AppendEncode(nil, text)
		if got := tok.AppendDecode(nil, ids); !bytes.Equal(got, text) {
			t.Fatalf("%q decodes to %q", text, got)
		}
	})
}
