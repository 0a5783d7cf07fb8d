package pytree

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/gonox/gonox/tensor"
)

// PathGlob returns a predicate that is true for leaves whose path, written
// as Path.String writes it, matches pattern as a whole. In a pattern:
//
//	"*"     matches any run of characters except '.', so it stays within
//	        one dotted segment: "Layers[*].W" matches Layers[0].W and
//	        Layers[12].W; "*.B" matches Layers[3].B but not Enc.Layers[3].B.
//	"**"    matches any run of characters, '.' included, possibly empty.
//	        Standing for a whole segment it may also match no segment:
//	        "**.W" matches W, Layers[0].W and Enc.Attn.W; "Enc.**" matches
//	        Enc and everything under it; "A.**.W" matches A.W and A.B[2].W.
//	"?"     matches any one character except '.'.
//	"\c"    matches the character c itself (a literal *, ? or \).
//
// Every other character matches itself: letters, digits, '.', '[', ']'
// and '"' (brackets are literal, not character classes). A pattern must
// have balanced brackets and quotes and no run of three or more stars;
// PathGlob panics on an invalid pattern.
func PathGlob(pattern string) Predicate {
	re, err := compileGlob(pattern)
	if err != nil {
		panic(err.Error())
	}
	return func(p Path, _ *tensor.Tensor) bool { return re.MatchString(p.String()) }
}

func compileGlob(pattern string) (*regexp.Regexp, error) {
	bad := func(why string) error { return fmt.Errorf("pytree.PathGlob(%q): %s", pattern, why) }
	if !utf8.ValidString(pattern) {
		return nil, bad("not valid UTF-8")
	}
	// Validate brackets and quotes.
	depth, inQuote := 0, false
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\':
			if i+1 == len(pattern) {
				return nil, bad("trailing backslash")
			}
			i++
		case inQuote:
			if c == '"' {
				inQuote = false
			}
		case c == '"':
			inQuote = true
		case c == '[':
			depth++
			if depth > 1 {
				return nil, bad("nested [")
			}
		case c == ']':
			depth--
			if depth < 0 {
				return nil, bad("unbalanced ]")
			}
		}
	}
	if inQuote {
		return nil, bad("unterminated quote")
	}
	if depth != 0 {
		return nil, bad("unbalanced [")
	}
	var b strings.Builder
	b.WriteString("^")
	n := len(pattern)
	for i := 0; i < n; i++ {
		c := pattern[i]
		switch c {
		case '\\':
			i++
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		case '?':
			b.WriteString(`[^.]`)
		case '*':
			j := i
			for j < n && pattern[j] == '*' {
				j++
			}
			switch j - i {
			case 1:
				b.WriteString(`[^.]*`)
			case 2:
				startSeg := i == 0
				endSeg := j == n
				afterDot := i > 0 && pattern[i-1] == '.'
				beforeDot := j < n && pattern[j] == '.'
				switch {
				case startSeg && beforeDot: // "**.rest": any leading segments, or none
					b.WriteString(`(?:.*\.)?`)
					j++ // the dot is consumed
				case afterDot && endSeg: // "prefix.**": the prefix itself or anything under it
					// The '.' before was already written; make it optional
					// together with what follows.
					s := b.String()
					b.Reset()
					b.WriteString(strings.TrimSuffix(s, `\.`))
					b.WriteString(`(?:[.\[].*)?`)
				case afterDot && beforeDot: // "a.**.b": a.b, a.x.b, a[0].b, ...
					s := b.String()
					b.Reset()
					b.WriteString(strings.TrimSuffix(s, `\.`))
					b.WriteString(`(?:[.\[].*)?\.`)
					j++
				default:
					b.WriteString(`.*`)
				}
			default:
				return nil, bad("*** is not a valid wildcard")
			}
			i = j - 1
		default:
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, bad(err.Error()) // not expected: the pattern was checked
	}
	return re, nil
}
