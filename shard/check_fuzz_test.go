package shard

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gonox/gonox/tensor"
)

var offsetRE = regexp.MustCompile(`^shard\.Check: bad spec ".*": offset (\d+): `)

// FuzzCheckSpec checks that the spec parser never panics, that errors name
// an offset inside the spec, that the canonical form of a parsed spec
// parses to the same spec, and that checking tensors against any spec
// returns an error or nil without panicking. The seed corpus is in
// testdata/fuzz/FuzzCheckSpec.
func FuzzCheckSpec(f *testing.F) {
	m := NewMesh([]int{4, 2}, []string{"dp", "tp"})
	tensors := []*tensor.Tensor{
		tensor.Scalar(1),
		tensor.Zeros(tensor.Float32, 2, 3, 4),
		Put(tensor.Zeros(tensor.Float32, 8, 4), NewSharding(m, P("dp", "tp"))),
		Put(tensor.Zeros(tensor.Float32, 8, 2, 6), NewSharding(m, P([]string{"dp", "tp"}))),
	}
	f.Fuzz(func(t *testing.T, spec string) {
		cs, err := parseCheckSpec(spec)
		if err != nil {
			m := offsetRE.FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("error without an offset: %v", err)
			}
			if off, _ := strconv.Atoi(m[1]); off < 0 || off > len(spec) {
				t.Fatalf("offset %d outside the spec (%d bytes): %v", off, len(spec), err)
			}
			return
		}
		canon := cs.String()
		cs2, err := parseCheckSpec(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, spec, err)
		}
		if !sameCheckSpec(cs, cs2) || cs2.String() != canon {
			t.Fatalf("%q -> %q -> %q: parses differently", spec, canon, cs2.String())
		}
		var s Scope
		for _, x := range tensors {
			if err := s.Check(x, spec); err != nil && !strings.HasPrefix(err.Error(), "shard.Check: "+x.Type()+" against ") {
				t.Fatalf("unexpected error form: %v", err)
			}
		}
	})
}

func sameCheckSpec(a, b *checkSpec) bool {
	if a.variadic != b.variadic || len(a.dims) != len(b.dims) {
		return false
	}
	for i, d := range a.dims {
		e := b.dims[i]
		if d.kind != e.kind || d.name != e.name || d.label != e.label || d.size != e.size || d.text != e.text || !slices.Equal(d.axes, e.axes) {
			return false
		}
	}
	return true
}

func TestCheckSpecCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"  batch@dp   seq\theads@( tp ) d ", "batch@dp seq heads@tp d"},
		{"b@( dp ,tp )", "b@(dp,tp)"},
		{"rows=1_024 _ _x *lead", "rows=1_024 _ _x *lead"},
		{"", ""},
	} {
		cs, err := parseCheckSpec(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if cs.String() != tc.want {
			t.Errorf("%q: canonical %q, want %q", tc.in, cs.String(), tc.want)
		}
	}
}
