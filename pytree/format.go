package pytree

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gonox/gonox/tensor"
)

// Format pretty-prints tree the way Equinox prints a module: tensors as
// their type (f32[32,128], or f32[1024@dp,4096] when sharded), structs as
// Name{Field: value, ...} with their exported fields, static ones with
// their values (numbers, quoted strings, funcs as "func", fmt.Stringers by
// their String method), slices and arrays as [a, b], maps as {"k": v} by
// sorted key, nil as nil. Pointers and interfaces are transparent. The
// result is one line when it fits in 80 columns, otherwise it is broken
// over lines indented by two spaces, Go style:
//
//	MLP{
//	  Layers: [
//	    Linear{W: f32[784,512], B: f32[512], Act: func},
//	    Linear{W: f32[512,10], B: f32[10], Act: func},
//	  ],
//	  Name: "mnist",
//	}
//
// Static slices and maps of more than 8 elements are summarized as
// []int(len=100), static data nested more than 3 levels as Name{...}.
// Format panics on the errors the other functions report (cycles, tensors
// in static fields).
func Format(tree any) string { return FormatWidth(tree, 80) }

// FormatWidth is Format with lines of at most width columns where possible.
func FormatWidth(tree any, width int) string {
	flattenAny(&tree, false) // validate: cycles, tensors in static data
	f := &formatter{}
	d := f.node(reflect.ValueOf(&tree).Elem(), anyPlan)
	var b strings.Builder
	r := renderer{b: &b, width: width}
	r.render(d, 0, 0, 0)
	return b.String()
}

// String prints the structure in one line, in the style of Format with
// every tensor shown as * and nil positions as nil; static data is left
// out and pointers are marked with &:
//
//	&MLP{Layers: [Linear{W: *, B: *}, Linear{W: *, B: nil}]}
func (s Structure) String() string {
	if s.s == nil {
		return "<invalid Structure>"
	}
	f := &formatter{structure: true, skel: true, nils: s.s.rec.nils}
	d := f.node(reflect.ValueOf(&s.s.skel).Elem(), anyPlan)
	return flat(d)
}

// structString prints the structure of a (validated) tree.
func structString(tree any) string {
	f := &formatter{structure: true}
	return flat(f.node(reflect.ValueOf(&tree).Elem(), anyPlan))
}

func flat(d *doc) string {
	var b strings.Builder
	r := renderer{b: &b, width: int(^uint(0) >> 1)}
	r.render(d, 0, 0, 0)
	return b.String()
}

// doc is a formatted node: a text, or a group of items between open and
// close that is printed on one line when it fits, else one item a line.
type doc struct {
	text        string
	group       bool
	open, close string
	items       []item
	flat        int // width on one line
}

type item struct {
	prefix string
	d      *doc
}

func text(s string) *doc { return &doc{text: s, flat: utf8.RuneCountInString(s)} }

func group(open, close string, items []item) *doc {
	d := &doc{group: true, open: open, close: close, items: items}
	d.flat = utf8.RuneCountInString(open) + utf8.RuneCountInString(close)
	for i, it := range items {
		if i > 0 {
			d.flat += 2
		}
		d.flat += utf8.RuneCountInString(it.prefix) + it.d.flat
	}
	return d
}

func prefixed(p string, d *doc) *doc {
	if d.group {
		return group(p+d.open, d.close, d.items)
	}
	return text(p + d.text)
}

type renderer struct {
	b     *strings.Builder
	width int
}

// render writes d starting at column col, inside a block indented by
// indent, followed by suffix columns of punctuation.
func (r *renderer) render(d *doc, col, indent, suffix int) {
	if !d.group {
		r.b.WriteString(d.text)
		return
	}
	if len(d.items) == 0 || col+d.flat+suffix <= r.width {
		r.flat(d)
		return
	}
	r.b.WriteString(d.open)
	r.b.WriteByte('\n')
	in := indent + 2
	for _, it := range d.items {
		r.b.WriteString(strings.Repeat(" ", in))
		r.b.WriteString(it.prefix)
		r.render(it.d, in+utf8.RuneCountInString(it.prefix), in, 1)
		r.b.WriteString(",\n")
	}
	r.b.WriteString(strings.Repeat(" ", indent))
	r.b.WriteString(d.close)
}

func (r *renderer) flat(d *doc) {
	if !d.group {
		r.b.WriteString(d.text)
		return
	}
	r.b.WriteString(d.open)
	for i, it := range d.items {
		if i > 0 {
			r.b.WriteString(", ")
		}
		r.b.WriteString(it.prefix)
		r.flat(it.d)
	}
	r.b.WriteString(d.close)
}

type formatter struct {
	structure bool    // Structure.String: leaves as *, no static data, & for pointers
	skel      bool    // a skeleton: nil-ness of positions comes from nils
	nils      []int32 // with skel
	ni, pos   int
}

func (f *formatter) leaf(x *tensor.Tensor) *doc {
	if !f.structure {
		if x == nil {
			return text("nil")
		}
		return text(x.String())
	}
	p := f.pos
	f.pos++
	isNil := x == nil
	if f.skel {
		isNil = f.ni < len(f.nils) && int(f.nils[f.ni]) == p
		if isNil {
			f.ni++
		}
	}
	if isNil {
		return text("nil")
	}
	return text("*")
}

// node formats a value of p.typ that may hold leaves.
func (f *formatter) node(v reflect.Value, p *plan) *doc {
	switch p.kind {
	case kLeaf:
		return f.leaf((*tensor.Tensor)(v.UnsafePointer()))
	case kStruct:
		var items []item
		for _, fd := range p.all {
			if !fd.exported {
				continue
			}
			switch {
			case !fd.static && fd.plan.dyn:
				items = append(items, item{fd.name + ": ", f.node(v.Field(fd.index), fd.plan)})
			case !f.structure:
				items = append(items, item{fd.name + ": ", f.static(v.Field(fd.index), 0)})
			}
		}
		return group(litName(p.typ)+"{", "}", items)
	case kPtr:
		if v.IsNil() {
			return text("nil")
		}
		d := f.node(v.Elem(), p.elem)
		if f.structure {
			d = prefixed("&", d)
		}
		return d
	case kSlice, kArray:
		if p.kind == kSlice && v.IsNil() && f.structure {
			return text("nil")
		}
		items := make([]item, v.Len())
		for i := range items {
			items[i] = item{"", f.node(v.Index(i), p.elem)}
		}
		return group("[", "]", items)
	case kMap:
		keys := sortedKeys(v)
		items := make([]item, len(keys))
		for i, k := range keys {
			items[i] = item{strconv.Quote(k.String()) + ": ", f.node(v.MapIndex(k), p.elem)}
		}
		return group("{", "}", items)
	case kIface:
		if v.IsNil() {
			return text("nil")
		}
		e := v.Elem()
		dp := planFor(e.Type())
		switch {
		case dp.dyn:
			return f.node(e, dp)
		case f.structure:
			return text(typeName(e.Type()))
		}
		return f.static(e, 0)
	case kCustom, kCustomAddr:
		names, children := nodeOf(v, p).PytreeChildren()
		items := make([]item, len(children))
		for i := range children {
			prefix := ""
			if names != nil {
				prefix = names[i] + ": "
			}
			items[i] = item{prefix, f.node(reflect.ValueOf(&children[i]).Elem(), anyPlan)}
		}
		return group(p.name+"{", "}", items)
	}
	if f.structure {
		return text("?")
	}
	return f.static(v, 0)
}

// nodeOf returns the Node held by v, a value of p.typ.
func nodeOf(v reflect.Value, p *plan) Node {
	if p.kind == kCustomAddr {
		if v.CanAddr() {
			return v.Addr().Interface().(Node)
		}
		c := reflect.New(p.typ)
		c.Elem().Set(v)
		return c.Interface().(Node)
	}
	return v.Interface().(Node)
}

const (
	staticMaxDepth = 3
	staticMaxLen   = 8
)

// static formats static data.
func (f *formatter) static(v reflect.Value, depth int) *doc {
	if !v.IsValid() {
		return text("nil")
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		if v.IsNil() {
			return text("nil")
		}
	}
	if v.CanInterface() && v.Kind() != reflect.Interface {
		if s, ok := stringer(v.Interface()); ok {
			return text(s)
		}
	}
	switch v.Kind() {
	case reflect.Bool:
		return text(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return text(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return text(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32:
		return text(strconv.FormatFloat(v.Float(), 'g', -1, 32))
	case reflect.Float64:
		return text(strconv.FormatFloat(v.Float(), 'g', -1, 64))
	case reflect.Complex64, reflect.Complex128:
		return text(fmt.Sprint(v.Complex()))
	case reflect.String:
		return text(strconv.Quote(v.String()))
	case reflect.Func:
		return text("func")
	case reflect.Chan:
		return text("chan")
	case reflect.UnsafePointer:
		return text("unsafe.Pointer")
	case reflect.Interface:
		return f.static(v.Elem(), depth)
	case reflect.Pointer:
		if depth >= staticMaxDepth {
			return text("&" + typeName(v.Type().Elem()) + "{...}")
		}
		return f.static(v.Elem(), depth+1)
	case reflect.Struct:
		name := litName(v.Type())
		if depth >= staticMaxDepth {
			return text(name + "{...}")
		}
		var items []item
		for i := range v.NumField() {
			if sf := v.Type().Field(i); sf.IsExported() {
				items = append(items, item{sf.Name + ": ", f.static(v.Field(i), depth+1)})
			}
		}
		return group(name+"{", "}", items)
	case reflect.Slice, reflect.Array:
		if v.Len() > staticMaxLen || (depth >= staticMaxDepth && v.Len() > 0) {
			return text(fmt.Sprintf("%s(len=%d)", typeName(v.Type()), v.Len()))
		}
		items := make([]item, v.Len())
		for i := range items {
			items[i] = item{"", f.static(v.Index(i), depth+1)}
		}
		return group("[", "]", items)
	case reflect.Map:
		if v.Len() > staticMaxLen || (depth >= staticMaxDepth && v.Len() > 0) {
			return text(fmt.Sprintf("%s(len=%d)", typeName(v.Type()), v.Len()))
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, compareKeys)
		items := make([]item, len(keys))
		for i, k := range keys {
			ks := keyString(k)
			if k.Kind() == reflect.String {
				ks = strconv.Quote(ks)
			}
			items[i] = item{ks + ": ", f.static(v.MapIndex(k), depth+1)}
		}
		return group("{", "}", items)
	}
	return text(v.Type().String())
}

// stringer calls the String or Error method of x, if it has one, as fmt
// does: a panic in the method is reported in the text.
func stringer(x any) (s string, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			s, ok = fmt.Sprintf("%%!v(PANIC=%v)", r), true
		}
	}()
	switch x := x.(type) {
	case error:
		return x.Error(), true
	case fmt.Stringer:
		return x.String(), true
	}
	return "", false
}

// litName is the name printed before a struct's braces: its type name, or
// nothing for a struct type literal.
func litName(t reflect.Type) string {
	if t.Name() == "" && t.Kind() == reflect.Struct {
		return ""
	}
	return typeName(t)
}

// compareKeys orders static map keys: numbers by value, others by text.
func compareKeys(a, b reflect.Value) int {
	switch a.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return cmp.Compare(a.Int(), b.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return cmp.Compare(a.Uint(), b.Uint())
	case reflect.Float32, reflect.Float64:
		return cmp.Compare(a.Float(), b.Float())
	}
	return strings.Compare(keyString(a), keyString(b))
}
