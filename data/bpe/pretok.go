package bpe

import (
	"unicode"
	"unicode/utf8"
)

//go:generate node gen_tables.js
//go:generate gofmt -w tables.go

// Character classes of GPT-2's pre-tokenisation pattern
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// with \p{L}, \p{N} and \s as the reference's JavaScript engine has them
// (tables.go).
const (
	classOther byte = iota
	classLetter
	classNumber
	classSpace
)

// asciiClass is the class of each ASCII character.
var asciiClass = func() (c [utf8.RuneSelf]byte) {
	for r := range rune(utf8.RuneSelf) {
		c[r] = slowClass(r)
	}
	return c
}()

func slowClass(r rune) byte {
	switch {
	case unicode.Is(letters, r):
		return classLetter
	case unicode.Is(numbers, r):
		return classNumber
	case unicode.Is(spaces, r):
		return classSpace
	}
	return classOther
}

// classAt returns the class of the character at text[i] and its length in
// bytes. text must be valid UTF-8.
func classAt(text []byte, i int) (byte, int) {
	if c := text[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRune(text[i:])
	return slowClass(r), n
}

// run returns the end of the run of characters of class c starting at i.
func run(text []byte, i int, c byte) int {
	for i < len(text) {
		ci, n := classAt(text, i)
		if ci != c {
			break
		}
		i += n
	}
	return i
}

// contraction returns the length of the contraction ('s, 't, 're, 've,
// 'm, 'll, 'd) at text[i], which is an apostrophe, or 0.
func contraction(text []byte, i int) int {
	if i+1 >= len(text) {
		return 0
	}
	switch text[i+1] {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(text) && text[i+2] == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(text) && text[i+2] == 'l' {
			return 3
		}
	}
	return 0
}

// nextWord returns the end of the pre-token starting at i < len(text): the
// match of GPT-2's pattern there, found as the pattern's backtracking
// matcher finds it (the first alternative that matches, each greedy).
// text must be valid UTF-8.
func nextWord(text []byte, i int) int {
	if text[i] == '\'' {
		if n := contraction(text, i); n > 0 {
			return i + n
		}
	}
	c, n := classAt(text, i)
	if text[i] == ' ' && i+1 < len(text) {
		// " ?X+": the optional space is taken when X follows it.
		if c1, n1 := classAt(text, i+1); c1 != classSpace {
			return run(text, i+1+n1, c1)
		}
	}
	if c != classSpace {
		return run(text, i+n, c)
	}
	// \s+(?!\S) and then \s+: a whitespace run followed by the end of the
	// text is taken whole; one followed by another character gives up its
	// last character (which the next word may take as its optional space),
	// unless it is a single character.
	end := run(text, i+n, classSpace)
	if end == len(text) {
		return end
	}
	_, last := utf8.DecodeLastRune(text[i:end])
	if end-last > i {
		return end - last
	}
	return end
}

// Words calls yield with each pre-token of text in order (the pieces GPT-2's
// pattern cuts text into before byte-pair merging), until yield returns
// false. The pieces concatenate to text. Invalid UTF-8 is first replaced as
// Sanitize does, so the pieces then concatenate to Sanitize(text).
func Words(text []byte, yield func(word []byte) bool) {
	text = Sanitize(text)
	for i := 0; i < len(text); {
		end := nextWord(text, i)
		if !yield(text[i:end]) {
			return
		}
		i = end
	}
}

// Sanitize returns text with each maximal invalid subsequence of UTF-8
// replaced by U+FFFD, as WHATWG's UTF-8 decoder (JavaScript's TextDecoder)
// replaces it, and text itself when it is valid. (Go's range over a string
// replaces each invalid byte instead: "\xe2\x82" is one U+FFFD here, two
// there.)
func Sanitize(text []byte) []byte {
	if utf8.Valid(text) {
		return text
	}
	out := make([]byte, 0, len(text)+8)
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRune(text[i:])
		if r != utf8.RuneError || n > 1 {
			out = append(out, text[i:i+n]...)
			i += n
			continue
		}
		out = utf8.AppendRune(out, utf8.RuneError)
		i += invalidLength(text[i:])
	}
	return out
}

// invalidLength returns the length of the maximal subpart of an invalid
// UTF-8 sequence at the start of b: its first byte and the continuation
// bytes that could still have made it valid.
func invalidLength(b []byte) int {
	need, lo, hi := 0, byte(0x80), byte(0xBF)
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	}
	n := 1
	for ; need > 0 && n < len(b); need-- {
		if b[n] < lo || b[n] > hi {
			break
		}
		n++
		lo, hi = 0x80, 0xBF
	}
	return n
}
