package shard

import (
	"fmt"
	"slices"
	"strings"
)

// Spec is a PartitionSpec: for each dimension of a tensor, the mesh axes it
// is split over (major to minor), or none for a replicated dimension.
// Dimensions past the end of the spec are replicated, and mesh axes the
// spec does not mention replicate the whole tensor along them. An axis may
// appear at most once.
type Spec []DimSpec

// DimSpec lists the mesh axes one dimension is split over, major to minor.
// An empty DimSpec replicates the dimension.
type DimSpec []string

// P builds a Spec the way JAX's PartitionSpec is written: one argument per
// dimension, each nil (replicated), a string (one mesh axis) or a []string
// (several axes, major to minor):
//
//	shard.P("dp", nil)              // P('dp', None)
//	shard.P([]string{"dp", "tp"})   // P(('dp', 'tp'),)
//	shard.P()                       // fully replicated
//
// Any other argument panics.
func P(dims ...any) Spec {
	s := make(Spec, len(dims))
	for i, d := range dims {
		switch v := d.(type) {
		case nil:
		case string:
			s[i] = DimSpec{v}
		case []string:
			s[i] = DimSpec(slices.Clone(v))
		case DimSpec:
			s[i] = slices.Clone(v)
		default:
			panic(fmt.Sprintf("shard.P: argument %d is %T; want nil, a string or a []string", i, d))
		}
	}
	return s
}

// String returns the spec as JAX prints it: PartitionSpec('dp', None).
func (s Spec) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		switch len(d) {
		case 0:
			parts[i] = "None"
		case 1:
			parts[i] = "'" + d[0] + "'"
		default:
			q := make([]string, len(d))
			for k, a := range d {
				q[k] = "'" + a + "'"
			}
			parts[i] = "(" + strings.Join(q, ", ") + ")"
		}
	}
	out := "PartitionSpec(" + strings.Join(parts, ", ")
	if len(s) == 1 {
		out += ","
	}
	return out + ")"
}

// Equal reports whether two specs place tensors the same way (trailing
// replicated dimensions do not matter).
func (s Spec) Equal(o Spec) bool {
	n := max(len(s), len(o))
	for i := 0; i < n; i++ {
		var a, b DimSpec
		if i < len(s) {
			a = s[i]
		}
		if i < len(o) {
			b = o[i]
		}
		if !slices.Equal(a, b) {
			return false
		}
	}
	return true
}

// Axes returns every mesh axis the spec uses, in spec order.
func (s Spec) Axes() []string {
	var out []string
	for _, d := range s {
		out = append(out, d...)
	}
	return out
}

// usesBefore reports whether axis a appears in s before axis j of
// dimension i.
func (s Spec) usesBefore(a string, i, j int) bool {
	for k, d := range s[:i+1] {
		if k == i {
			d = d[:j]
		}
		if slices.Contains(d, a) {
			return true
		}
	}
	return false
}

// dim returns the axes of dimension i (nil beyond the spec).
func (s Spec) dim(i int) DimSpec {
	if i < len(s) {
		return s[i]
	}
	return nil
}

// check validates s for a tensor of the given shape on mesh m and returns
// a description of the first problem, or "".
func (s Spec) check(m *Mesh, shape []int) string {
	if len(s) > len(shape) {
		return fmt.Sprintf("spec %v has %d entries for a rank-%d tensor", s, len(s), len(shape))
	}
	seen := map[string]bool{}
	for i, d := range s {
		n := 1
		for _, a := range d {
			k := slices.Index(m.names, a)
			if k < 0 {
				return fmt.Sprintf("spec %v: mesh %v has no axis %q", s, m, a)
			}
			if seen[a] {
				return fmt.Sprintf("spec %v uses mesh axis %q twice", s, a)
			}
			seen[a] = true
			n *= m.sizes[k]
		}
		if shape[i]%n != 0 {
			return fmt.Sprintf("dim %d (%d) is not divisible by %s=%d", i, shape[i], axesLabel(d), n)
		}
	}
	return ""
}

// axesLabel prints axes as in type notation: "dp" or "(dp,tp)".
func axesLabel(d DimSpec) string {
	if len(d) == 1 {
		return d[0]
	}
	return "(" + strings.Join(d, ",") + ")"
}
