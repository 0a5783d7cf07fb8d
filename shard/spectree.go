package shard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// SpecTree gives a partition spec to each tensor leaf of a tree: it is how
// FilterShard and Map learn where the leaves of a model, a batch or an
// optimizer state go. Implementations:
//
//   - a Spec: the same spec for every leaf;
//   - Specs: specs for subtrees, keyed by path prefix (Equinox's "prefix
//     tree" of specs);
//   - SpecFunc: any function of the path and the leaf;
//   - Rules: logical axis names on the leaves mapped to mesh axes (Flax).
type SpecTree interface {
	// SpecFor returns the spec of the leaf x at path, or an error saying
	// why there is none.
	SpecFor(path pytree.Path, x *tensor.Tensor) (Spec, error)
}

// SpecFor implements SpecTree: every leaf gets s.
func (s Spec) SpecFor(pytree.Path, *tensor.Tensor) (Spec, error) { return s, nil }

// SpecFunc adapts a function to SpecTree.
type SpecFunc func(path pytree.Path, x *tensor.Tensor) Spec

// SpecFor implements SpecTree.
func (f SpecFunc) SpecFor(p pytree.Path, x *tensor.Tensor) (Spec, error) { return f(p, x), nil }

// Specs gives specs to subtrees by path prefix: a leaf gets the spec of the
// longest key that is a prefix of its path (between keys of equal length,
// the one with fewer wildcards). Keys use pytree path syntax
// ("Model", "Batch.Inputs", "Layers[0].W", `Experts["up"]`); "*" matches
// any field name and "[*]" any index or map key ("Layers[*].W"). The empty
// key matches every leaf. A leaf no key matches is an error.
//
//	shard.Specs{
//		"Model": shard.P(),               // replicate the model
//		"Batch": shard.P("dp", nil),      // split the batch rows over dp
//	}
type Specs map[string]Spec

// SpecFor implements SpecTree.
func (s Specs) SpecFor(path pytree.Path, _ *tensor.Tensor) (Spec, error) {
	// The longest matching key wins; between keys of one length, the one
	// with fewer wildcards.
	best, bestLen, bestLit, tie := "", -1, -1, false
	for key := range s {
		pat, err := parsePattern(key)
		if err != nil {
			return nil, err
		}
		if len(pat) > len(path) || !matchPrefix(pat, path) {
			continue
		}
		lit := 0
		for _, e := range pat {
			if e.kind != 0 && e.name != "*" {
				lit++
			}
		}
		switch {
		case len(pat) > bestLen || (len(pat) == bestLen && lit > bestLit):
			best, bestLen, bestLit, tie = key, len(pat), lit, false
		case len(pat) == bestLen && lit == bestLit:
			tie = true
		}
	}
	if bestLen < 0 {
		return nil, fmt.Errorf("no spec for %q (keys: %s)", path, strings.Join(s.keys(), ", "))
	}
	if tie {
		return nil, fmt.Errorf("several keys of equal length match %q", path)
	}
	return s[best], nil
}

func (s Specs) keys() []string {
	var out []string
	for k := range s {
		out = append(out, strconv.Quote(k))
	}
	slices.Sort(out)
	return out
}

// patElem is one element of a Specs key: a field name ("*" for any), an
// index, a map key, or "[*]" for any index or key.
type patElem struct {
	kind  pytree.ElemKind // 0 for "[*]"
	name  string
	index int
}

func parsePattern(key string) ([]patElem, error) {
	var out []patElem
	i := 0
	bad := func(why string) error { return fmt.Errorf("shard.Specs: bad key %q: %s", key, why) }
	for i < len(key) {
		c := key[i]
		switch {
		case c == '[' && strings.HasPrefix(key[i+1:], `"`):
			// A quoted map key may hold ']' (pytree.Path.String writes
			// strconv.Quote): find its end as pytree.ParsePath does.
			q, err := strconv.QuotedPrefix(key[i+1:])
			j := i + 1 + len(q)
			if err != nil || j >= len(key) || key[j] != ']' {
				return nil, bad("bad map key")
			}
			k, _ := strconv.Unquote(q)
			out = append(out, patElem{kind: pytree.KeyElem, name: k})
			i = j + 1
		case c == '[':
			j := strings.IndexByte(key[i:], ']')
			if j < 0 {
				return nil, bad("unclosed [")
			}
			inner := key[i+1 : i+j]
			switch {
			case inner == "*":
				out = append(out, patElem{})
			case strings.HasPrefix(inner, `"`):
				k, err := strconv.Unquote(inner)
				if err != nil {
					return nil, bad("bad map key")
				}
				out = append(out, patElem{kind: pytree.KeyElem, name: k})
			default:
				n, err := strconv.Atoi(inner)
				if err != nil || n < 0 {
					return nil, bad("bad index " + inner)
				}
				out = append(out, patElem{kind: pytree.IndexElem, index: n})
			}
			i += j + 1
		default:
			if c == '.' {
				i++
			}
			j := i
			for j < len(key) && key[j] != '.' && key[j] != '[' {
				j++
			}
			if j == i {
				return nil, bad("empty field name")
			}
			out = append(out, patElem{kind: pytree.FieldElem, name: key[i:j]})
			i = j
		}
	}
	return out, nil
}

func matchPrefix(pat []patElem, path pytree.Path) bool {
	for i, p := range pat {
		e := path[i]
		switch p.kind {
		case 0:
			if e.Kind != pytree.IndexElem && e.Kind != pytree.KeyElem {
				return false
			}
		case pytree.FieldElem:
			if e.Kind != pytree.FieldElem || (p.name != "*" && p.name != e.Name) {
				return false
			}
		case pytree.IndexElem:
			if e.Kind != pytree.IndexElem || e.Index != p.index {
				return false
			}
		case pytree.KeyElem:
			if e.Kind != pytree.KeyElem || e.Name != p.name {
				return false
			}
		}
	}
	return true
}

// specsOf returns the spec of every leaf, panicking with the op name and
// the leaf's path on any problem (no spec, or a spec that does not fit).
func specsOf(op string, m *Mesh, t SpecTree, paths []pytree.Path, leaves []*tensor.Tensor) []Spec {
	out := make([]Spec, len(leaves))
	for i, x := range leaves {
		s, err := t.SpecFor(paths[i], x)
		if err != nil {
			panic(fmt.Sprintf("%s: %v", op, err))
		}
		if msg := s.check(m, x.BorrowShape()); msg != "" {
			panic(fmt.Sprintf("%s: %s %v: %s", op, leafName(paths[i]), x, msg))
		}
		out[i] = s
	}
	return out
}

func leafName(p pytree.Path) string {
	if len(p) == 0 {
		return "(root)"
	}
	return p.String()
}

// FilterShard places every tensor leaf of tree on mesh as specs says and
// leaves everything else untouched: Equinox's filter_shard. Leaves already
// placed that way are kept as they are.
//
//	model = shard.FilterShard(model, mesh, shard.P())              // replicate
//	model = shard.FilterShard(model, mesh, rules)                  // by logical axes
//	model = shard.FilterShard(model, mesh, shard.Specs{"Layers[*].W": shard.P("dp", nil), "": shard.P()})
//
// It panics if a leaf gets no spec or one that does not divide its shape,
// naming the leaf's path.
func FilterShard[T any](tree T, mesh *Mesh, specs SpecTree) T {
	if mesh == nil {
		panic("shard.FilterShard: mesh is nil")
	}
	return pytree.MapWithPath(tree, func(p pytree.Path, x *tensor.Tensor) *tensor.Tensor {
		s := specsOf("shard.FilterShard", mesh, specs, []pytree.Path{p}, []*tensor.Tensor{x})[0]
		return Put(x, NewSharding(mesh, s))
	})
}
