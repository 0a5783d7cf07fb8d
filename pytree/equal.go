package pytree

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gonox/gonox/tensor"
)

// Equal reports whether a and b have the same structure, the same static
// values and close leaves: see Diff, which says where they differ.
func Equal(a, b any, rtol, atol float64) bool { return Diff(a, b, rtol, atol) == nil }

// Diff returns nil if a and b are equal trees, else a *DiffError naming
// the first difference in traversal order. Trees are equal when they have
// the same types and structure (container lengths, map keys, nil pointers
// and nil positions), the same static values of basic kinds (bools,
// numbers and strings in exported fields, including inside static structs
// and arrays; other static data such as funcs, pointers, slices and maps
// is not compared), and every pair of leaves has the same dtype and shape
// and is close elementwise, as in numpy.allclose:
//
//	|x - y| <= atol + rtol*|y|
//
// With rtol = atol = 0 the values must be exactly equal. NaN is never
// equal to anything, NaN included; infinities equal infinities of the
// same sign only. Sharded tensors are gathered to compare them.
func Diff(a, b any, rtol, atol float64) error {
	flattenAny(&a, false) // validate: cycles, tensors in static data
	flattenAny(&b, false)
	d := &differ{rtol: rtol, atol: atol, root: rootName(reflect.TypeOf(a))}
	if e := d.diffValues(reflect.ValueOf(&a).Elem(), reflect.ValueOf(&b).Elem(), anyPlan); e != nil {
		return e
	}
	return nil
}

// DiffError is the first difference between two trees found by Diff.
type DiffError struct {
	Root   string // the type name of the first tree, without pointers
	Path   Path   // where the trees differ
	Reason string // how they differ: "f32[3] vs f32[4]", "length 2 vs 3", ...
}

// Error returns "pytree: Root.Path: Reason".
func (e *DiffError) Error() string { return "pytree: " + locate(e.Root, e.Path) + ": " + e.Reason }

type differ struct {
	rtol, atol float64
	shapeOnly  bool // compare structure only: ignore leaf values, nil-ness and static data
	root       string
	path       []PathElem
}

func (d *differ) fail(format string, args ...any) *DiffError {
	return &DiffError{Root: d.root, Path: slices.Clone(Path(d.path)), Reason: fmt.Sprintf(format, args...)}
}

func (d *differ) push(e PathElem) { d.path = append(d.path, e) }
func (d *differ) pop()            { d.path = d.path[:len(d.path)-1] }

func describe(v reflect.Value) string {
	if !v.IsValid() || (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && v.IsNil() {
		return "nil"
	}
	if v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if v.Kind() == reflect.Pointer {
		return "*" + typeName(v.Type().Elem())
	}
	return typeName(v.Type())
}

func leafString(x *tensor.Tensor) string {
	if x == nil {
		return "nil"
	}
	return x.String()
}

// diffValues compares two values of p.typ.
func (d *differ) diffValues(a, b reflect.Value, p *plan) *DiffError {
	switch p.kind {
	case kLeaf:
		return d.leaves((*tensor.Tensor)(a.UnsafePointer()), (*tensor.Tensor)(b.UnsafePointer()))
	case kStruct:
		for _, fd := range p.all {
			if !fd.exported {
				continue
			}
			d.push(Field(fd.name))
			var e *DiffError
			switch {
			case !fd.static && fd.plan.dyn:
				e = d.diffValues(a.Field(fd.index), b.Field(fd.index), fd.plan)
			case !d.shapeOnly:
				e = d.static(a.Field(fd.index), b.Field(fd.index), 0)
			}
			if e != nil {
				return e
			}
			d.pop()
		}
	case kPtr:
		if a.IsNil() != b.IsNil() {
			return d.fail("%s vs %s", describe(a), describe(b))
		}
		if !a.IsNil() {
			return d.diffValues(a.Elem(), b.Elem(), p.elem)
		}
	case kSlice, kArray:
		if a.Len() != b.Len() {
			return d.fail("length %d vs %d", a.Len(), b.Len())
		}
		for i := range a.Len() {
			d.push(Index(i))
			if e := d.diffValues(a.Index(i), b.Index(i), p.elem); e != nil {
				return e
			}
			d.pop()
		}
	case kMap:
		ka, kb := sortedKeys(a), sortedKeys(b)
		if !slices.EqualFunc(ka, kb, func(x, y reflect.Value) bool { return x.String() == y.String() }) {
			return d.fail("keys %s vs %s", keyList(ka), keyList(kb))
		}
		for _, k := range ka {
			d.push(Key(k.String()))
			if e := d.diffValues(a.MapIndex(k), b.MapIndex(k), p.elem); e != nil {
				return e
			}
			d.pop()
		}
	case kIface:
		if a.IsNil() || b.IsNil() || a.Elem().Type() != b.Elem().Type() {
			if a.IsNil() && b.IsNil() {
				return nil
			}
			return d.fail("%s vs %s", describe(a), describe(b))
		}
		dp := planFor(a.Elem().Type())
		if dp.dyn {
			return d.diffValues(a.Elem(), b.Elem(), dp)
		}
		if !d.shapeOnly {
			return d.static(a.Elem(), b.Elem(), 0)
		}
	case kCustom, kCustomAddr:
		na, ca := nodeOf(a, p).PytreeChildren()
		nb, cb := nodeOf(b, p).PytreeChildren()
		if len(ca) != len(cb) {
			return d.fail("%d children vs %d", len(ca), len(cb))
		}
		if (na == nil) != (nb == nil) || !slices.Equal(na, nb) {
			return d.fail("children %q vs %q", na, nb)
		}
		for i := range ca {
			d.push(elemForName(na, i))
			if e := d.diffValues(reflect.ValueOf(&ca[i]).Elem(), reflect.ValueOf(&cb[i]).Elem(), anyPlan); e != nil {
				return e
			}
			d.pop()
		}
	default:
		if !d.shapeOnly {
			return d.static(a, b, 0)
		}
	}
	return nil
}

func keyList(keys []reflect.Value) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = strconv.Quote(k.String())
	}
	return "[" + strings.Join(s, " ") + "]"
}

func (d *differ) leaves(x, y *tensor.Tensor) *DiffError {
	if d.shapeOnly || x == y {
		return nil
	}
	if x == nil || y == nil || x.DType() != y.DType() || !slices.Equal(x.Shape(), y.Shape()) {
		return d.fail("%s vs %s", leafString(x), leafString(y))
	}
	var n, first int
	var fx, fy float64
	note := func(i int, a, b float64) {
		if n == 0 {
			first, fx, fy = i, a, b
		}
		n++
	}
	if x.DType() == tensor.Int64 {
		// Exactly: int64 beyond 2^53 is not a float64.
		xs, ys := x.Int64s(), y.Int64s()
		for i := range xs {
			if xs[i] != ys[i] {
				return d.fail("values differ at %s: %d vs %d (%s)", unravel(i, x.Shape()), xs[i], ys[i], x)
			}
		}
		return nil
	}
	if x.DType() == tensor.Float32 && x.Layout() == nil && y.Layout() == nil {
		xs, ys := x.RawFloat32(), y.RawFloat32()
		for i := range xs {
			if a, b := float64(xs[i]), float64(ys[i]); !d.close(a, b) {
				note(i, a, b)
			}
		}
	} else {
		xs, ys := x.Float64s(), y.Float64s()
		for i := range xs {
			if !d.close(xs[i], ys[i]) {
				note(i, xs[i], ys[i])
			}
		}
	}
	if n == 0 {
		return nil
	}
	num := func(v float64) string {
		if x.DType() == tensor.Float32 {
			return strconv.FormatFloat(v, 'g', -1, 32)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return d.fail("values differ at %s: %s vs %s (%d of %d elements of %s; rtol=%g, atol=%g)",
		unravel(first, x.Shape()), num(fx), num(fy), n, x.Size(), x, d.rtol, d.atol)
}

func (d *differ) close(a, b float64) bool {
	if a == b {
		return true
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return false // infinities are only close to themselves, as in numpy
	}
	return math.Abs(a-b) <= d.atol+d.rtol*math.Abs(b)
}

// unravel renders flat index i of shape as "[i,j,k]".
func unravel(i int, shape []int) string {
	idx := make([]string, len(shape))
	for k := len(shape) - 1; k >= 0; k-- {
		idx[k] = strconv.Itoa(i % shape[k])
		i /= shape[k]
	}
	return "[" + strings.Join(idx, ",") + "]"
}

// static compares static data: basic values with ==, exported fields of
// structs and elements of arrays recursively; everything else is equal.
func (d *differ) static(a, b reflect.Value, depth int) *DiffError {
	if depth > staticMaxDepth {
		return nil
	}
	switch a.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		if !a.Equal(b) {
			f := &formatter{}
			return d.fail("static value %s vs %s", flat(f.static(a, 0)), flat(f.static(b, 0)))
		}
	case reflect.Struct:
		for i := range a.NumField() {
			sf := a.Type().Field(i)
			if !sf.IsExported() {
				continue
			}
			d.push(Field(sf.Name))
			if e := d.static(a.Field(i), b.Field(i), depth+1); e != nil {
				return e
			}
			d.pop()
		}
	case reflect.Array:
		for i := range a.Len() {
			d.push(Index(i))
			if e := d.static(a.Index(i), b.Index(i), depth+1); e != nil {
				return e
			}
			d.pop()
		}
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return d.fail("static value %s vs %s", describe(a), describe(b))
			}
			return nil
		}
		if a.Elem().Type() != b.Elem().Type() {
			return d.fail("static value of type %s vs %s", describe(a), describe(b))
		}
		return d.static(a.Elem(), b.Elem(), depth+1)
	}
	return nil
}
