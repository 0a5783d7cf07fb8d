package shard

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// FuzzSpecsKey checks the Specs key patterns: parsing never panics and
// errors name the key; every path written by pytree.Path.String, used as
// a key, parses and selects that path (and its subtree) exactly; and
// looking a key up never panics. The seed corpus is in
// testdata/fuzz/FuzzSpecsKey.
func FuzzSpecsKey(f *testing.F) {
	x := tensor.Zeros(tensor.Float32, 2)
	probes := []pytree.Path{
		nil,
		{pytree.Field("Layers"), pytree.Index(0), pytree.Field("W")},
		{pytree.Field("Experts"), pytree.Key("up"), pytree.Field("B")},
		{pytree.Index(3)},
		{pytree.Key("a]b"), pytree.Key(`"`)},
	}
	f.Fuzz(func(t *testing.T, key string) {
		pat, err := parsePattern(key)
		if err != nil {
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("shard.Specs: bad key %q: ", key)) {
				t.Fatalf("error does not name the key %q: %v", key, err)
			}
		} else {
			for _, p := range probes {
				_, _ = Specs{key: P(), "": P("dp")}.SpecFor(p, x)
				if len(pat) <= len(p) {
					matchPrefix(pat, p)
				}
			}
		}
		p, err := pytree.ParsePath(key)
		if err != nil {
			return
		}
		canon := p.String()
		pat, err = parsePattern(canon)
		if err != nil {
			t.Fatalf("path %q (from %q) is not a valid key: %v", canon, key, err)
		}
		if len(pat) != len(p) {
			t.Fatalf("key %q has %d elements, the path %d", canon, len(pat), len(p))
		}
		wild := false
		for _, e := range pat {
			wild = wild || e.kind == 0 || e.name == "*"
		}
		if !matchPrefix(pat, p) {
			t.Fatalf("key %q does not select its own path %v", canon, p)
		}
		child := append(p[:len(p):len(p)], pytree.Field("W"))
		if !matchPrefix(pat, child) {
			t.Fatalf("key %q does not select the subtree %v", canon, child)
		}
		if !wild && len(p) > 0 {
			other := append(p[:len(p)-1:len(p)-1], pytree.Key("\x00other"))
			if matchPrefix(pat, other) {
				t.Fatalf("key %q selects %v too", canon, other)
			}
		}
	})
}
