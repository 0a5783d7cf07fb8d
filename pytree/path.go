package pytree

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ElemKind says what a PathElem selects.
type ElemKind uint8

const (
	// FieldElem selects a struct field (or a named child of a Node) by name.
	FieldElem ElemKind = iota + 1
	// IndexElem selects an element of a slice or array (or an unnamed
	// child of a Node) by position.
	IndexElem
	// KeyElem selects a map entry (or a child of a Node whose name is not
	// a Go identifier) by key.
	KeyElem
)

// PathElem is one step of a Path: a field, an index or a map key.
type PathElem struct {
	Kind  ElemKind
	Name  string // the field name (FieldElem) or the map key (KeyElem)
	Index int    // the index (IndexElem)
}

// Field returns the path element selecting the struct field name.
func Field(name string) PathElem { return PathElem{Kind: FieldElem, Name: name} }

// Index returns the path element selecting element i of a slice or array.
func Index(i int) PathElem { return PathElem{Kind: IndexElem, Index: i} }

// Key returns the path element selecting the map entry with key k.
func Key(k string) PathElem { return PathElem{Kind: KeyElem, Name: k} }

// String returns the element as it appears in a path: ".W", "[2]" or
// `["up"]`.
func (e PathElem) String() string {
	return string(e.appendTo(nil, false))
}

func (e PathElem) appendTo(b []byte, first bool) []byte {
	switch e.Kind {
	case FieldElem:
		if !first {
			b = append(b, '.')
		}
		return append(b, e.Name...)
	case IndexElem:
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(e.Index), 10)
		return append(b, ']')
	case KeyElem:
		b = append(b, '[')
		b = strconv.AppendQuote(b, e.Name)
		return append(b, ']')
	default:
		return append(b, "<invalid>"...)
	}
}

// Path locates a node inside a tree, from the root down. The root itself
// has the empty path. Pointers and interfaces are transparent: they add no
// element.
type Path []PathElem

// String returns the path in Go selector syntax, without a leading dot:
//
//	Layers[2].W        field Layers, element 2, field W
//	Experts["up"].B    map entry "up" of field Experts
//	[0].W              field W of element 0 of a root slice
//	""                 the root
//
// Map keys are quoted with strconv.Quote. ParsePath reverses String.
func (p Path) String() string {
	if len(p) == 0 {
		return ""
	}
	return string(p.AppendString(nil))
}

// AppendString appends p.String() to b and returns the extended slice (as
// strconv's Append functions do): a caller looking a path up in a map
// keyed by its string can do so without building one, since
// m[string(p.AppendString(buf[:0]))] does not allocate.
func (p Path) AppendString(b []byte) []byte {
	for i, e := range p {
		b = e.appendTo(b, i == 0)
	}
	return b
}

// Equal reports whether p and q select the same node.
func (p Path) Equal(q Path) bool {
	if len(p) != len(q) {
		return false
	}
	for i := range p {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

// ParsePath parses the syntax produced by Path.String. A leading dot is
// accepted (".W" is "W"); the empty string is the root.
func ParsePath(s string) (Path, error) {
	var p Path
	i := 0
	for i < len(s) {
		switch c := s[i]; {
		case c == '.' || (i == 0 && c != '['):
			if c == '.' {
				i++
			}
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' && s[j] != ']' {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("pytree: bad path %q: empty field name at offset %d", s, i)
			}
			p = append(p, Field(s[i:j]))
			i = j
		case c == '[':
			if i+1 < len(s) && s[i+1] == '"' {
				q, err := strconv.QuotedPrefix(s[i+1:])
				if err != nil {
					return nil, fmt.Errorf("pytree: bad path %q: unterminated map key at offset %d", s, i)
				}
				k, _ := strconv.Unquote(q)
				j := i + 1 + len(q)
				if j >= len(s) || s[j] != ']' {
					return nil, fmt.Errorf("pytree: bad path %q: missing ] at offset %d", s, j)
				}
				p = append(p, Key(k))
				i = j + 1
				continue
			}
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("pytree: bad path %q: missing ] after offset %d", s, i)
			}
			n, err := strconv.Atoi(s[i+1 : i+j])
			if err != nil || n < 0 || strings.HasPrefix(s[i+1:i+j], "+") {
				return nil, fmt.Errorf("pytree: bad path %q: bad index %q", s, s[i+1:i+j])
			}
			p = append(p, Index(n))
			i += j + 1
		default:
			return nil, fmt.Errorf("pytree: bad path %q: unexpected %q at offset %d", s, c, i)
		}
	}
	return p, nil
}

// MustParsePath is ParsePath that panics on a syntax error.
func MustParsePath(s string) Path {
	p, err := ParsePath(s)
	if err != nil {
		panic(err.Error())
	}
	return p
}

// elemForName turns a Node child name into a path element: a Go
// identifier is a field, anything else a key.
func elemForName(names []string, i int) PathElem {
	if names == nil {
		return Index(i)
	}
	if isIdent(names[i]) {
		return Field(names[i])
	}
	return Key(names[i])
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == utf8.RuneError {
			return false
		}
		if !(unicode.IsLetter(r) || r == '_' || (i > 0 && unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// locate renders a path for messages, prefixed by the root's type name:
// "MLP.Layers[2].W", "MLP" for the root.
func locate(root string, p Path) string {
	if len(p) == 0 {
		return root
	}
	if p[0].Kind == FieldElem {
		return root + "." + p.String()
	}
	return root + p.String()
}
