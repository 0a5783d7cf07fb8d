package shard

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseMesh checks that ParseMesh never panics, that every error
// names ParseMesh and the description it was given (and no other
// function), and that a mesh it returns has the
// axes and sizes the description lists, at least one device, as many as
// the sizes multiply to, and parses back from its own name=size form. The
// seed corpus is in testdata/fuzz/FuzzParseMesh.
func FuzzParseMesh(f *testing.F) {
	f.Fuzz(func(t *testing.T, desc string) {
		m, err := ParseMesh(desc)
		if err != nil {
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("shard.ParseMesh: %q: ", desc)) {
				t.Fatalf("error does not name the input %q: %v", desc, err)
			}
			if rest := strings.TrimPrefix(err.Error(), fmt.Sprintf("shard.ParseMesh: %q: ", desc)); strings.HasPrefix(rest, "shard.") {
				t.Fatalf("error names another function than ParseMesh: %v", err)
			}
			return
		}
		var parts []string
		n := 1
		for i, s := range m.Shape() {
			if s < 1 {
				t.Fatalf("%q: axis size %d", desc, s)
			}
			n *= s
			parts = append(parts, m.AxisNames()[i]+"="+strconv.Itoa(s))
		}
		if m.Size() < 1 || m.Size() != n || len(m.Devices()) != n {
			t.Fatalf("%q: %v has %d devices, its sizes multiply to %d", desc, m, m.Size(), n)
		}
		m2, err := ParseMesh(strings.Join(parts, ","))
		if err != nil || !m2.Equal(m) {
			t.Fatalf("%q: %v does not parse back from %q: %v, %v", desc, m, strings.Join(parts, ","), m2, err)
		}
	})
}
