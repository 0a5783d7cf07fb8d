package pytree

import (
	"fmt"
	"reflect"
	"slices"
	"unsafe"
)

// At returns a copy of tree in which the node selected by where is
// replaced by replace: Equinox's eqx.tree_at, out of place.
//
//	m2 := pytree.At(m, func(m *MLP) **tensor.Tensor { return &m.Layers[1].W }, w)
//	m3 := pytree.At(m, func(m *MLP) *Linear { return &m.Layers[0] }, NewLinear(...))
//
// At first copies the spine of tree: every struct, pointer, slice, array,
// map and interface that may hold tensors (not the tensors, not static
// data). where receives a pointer to the copy and returns a pointer to the
// field or element to replace; At stores replace there and returns the
// copy. tree itself is never modified. where must return a pointer into
// the copied spine: a pointer into a tensor, into static data reached
// through a pointer, slice or map, or to memory outside the tree makes At
// panic instead of modifying something shared with tree.
func At[T, V any](tree T, where func(*T) *V, replace V) T {
	p, fl := flattenT(&tree, false)
	out := new(T)
	*out = tree
	blocks := []block{{uintptr(unsafe.Pointer(out)), uintptr(unsafe.Pointer(out)) + unsafe.Sizeof(*out)}}
	b := newBuilder("pytree.At", modeKeep, &fl.record)
	b.blocks = &blocks
	b.run(p, unsafe.Pointer(out))
	ptr := where(out)
	if ptr == nil {
		panic("pytree.At: where returned nil")
	}
	start := uintptr(unsafe.Pointer(ptr))
	end := start + unsafe.Sizeof(*ptr)
	inside := false
	for _, bl := range blocks {
		if start >= bl.start && end <= bl.end {
			inside = true
			break
		}
	}
	if !inside {
		panic(fmt.Sprintf("pytree.At: where returned a *%s that does not point into the copy of the %s it was given "+
			"(it points into a tensor, into static data shared with the original, or outside the tree); "+
			"select a field or element of the tree's structs, slices, arrays or pointers",
			typeName(reflect.TypeFor[V]()), rootName(reflect.TypeFor[T]())))
	}
	*ptr = replace
	return *out
}

// AtPath returns a copy of tree in which the node at path (in the syntax
// of Path.String, e.g. "Layers[2].W" or `Experts["up"]`) is replaced by
// replace, which must be assignable to the node's type (nil is accepted
// for pointers, interfaces, slices, maps and funcs). The node may be a
// leaf, a subtree or an exported static field. Only the containers on the
// way to the node are copied; tree is not modified. AtPath panics naming
// the path if it does not exist (a missing field, key or index, a nil
// pointer on the way) or replace does not fit.
func AtPath[T any](tree T, path string, replace any) T {
	elems, err := ParsePath(path)
	if err != nil {
		panic(fmt.Sprintf("pytree.AtPath(%q): %v", path, trimPrefix(err.Error())))
	}
	flattenT(&tree, false) // validate
	t := reflect.TypeFor[T]()
	root := t
	if t.Kind() == reflect.Interface {
		root = reflect.TypeOf(any(tree))
	}
	a := &atPath{raw: path, elems: elems, root: rootName(root)}
	nv := a.set(reflect.ValueOf(&tree).Elem(), planFor(t), 0, replace)
	var out T
	reflect.ValueOf(&out).Elem().Set(nv)
	return out
}

type atPath struct {
	raw   string
	elems Path
	root  string
}

func (a *atPath) fail(format string, args ...any) {
	panic(fmt.Sprintf("pytree.AtPath(%q): %s", a.raw, fmt.Sprintf(format, args...)))
}

func (a *atPath) at(i int) string { return locate(a.root, a.elems[:i]) }

// set returns a copy of v (a value of p.typ) with the node at elems[i:]
// replaced.
func (a *atPath) set(v reflect.Value, p *plan, i int, replace any) reflect.Value {
	if i == len(a.elems) {
		return a.convert(v.Type(), replace, i)
	}
	el := a.elems[i]
	switch p.kind {
	case kPtr:
		if v.IsNil() {
			a.fail("%s is nil", a.at(i))
		}
		nv := reflect.New(p.elem.typ)
		nv.Elem().Set(a.set(v.Elem(), p.elem, i, replace))
		if nv.Type() != v.Type() {
			nv = nv.Convert(v.Type())
		}
		return nv
	case kIface:
		if v.IsNil() {
			a.fail("%s is nil", a.at(i))
		}
		e := v.Elem()
		out := reflect.New(v.Type()).Elem()
		out.Set(a.set(e, planFor(e.Type()), i, replace))
		return out
	case kStruct:
		if el.Kind != FieldElem {
			a.fail("%s is a %s; cannot select %s", a.at(i), p.name, el)
		}
		j := slices.IndexFunc(p.all, func(f field) bool { return f.name == el.Name })
		if j < 0 {
			a.fail("%s (a %s) has no field %s", a.at(i), p.name, el.Name)
		}
		fd := p.all[j]
		if !fd.exported {
			a.fail("%s is unexported", a.at(i+1))
		}
		fp := fd.plan
		if fp == nil {
			fp = planFor(fd.typ)
		}
		out := reflect.New(p.typ).Elem()
		out.Set(v)
		fv := out.Field(fd.index)
		fv.Set(a.set(fv, fp, i+1, replace))
		return out
	case kSlice, kArray:
		if el.Kind != IndexElem {
			a.fail("%s is a %s; cannot select %s", a.at(i), p.name, el)
		}
		if el.Index >= v.Len() {
			a.fail("%s has %d elements; no index %d", a.at(i), v.Len(), el.Index)
		}
		var out reflect.Value
		if p.kind == kSlice {
			out = reflect.MakeSlice(p.typ, v.Len(), v.Len())
			reflect.Copy(out, v)
		} else {
			out = reflect.New(p.typ).Elem()
			out.Set(v)
		}
		ev := out.Index(el.Index)
		ev.Set(a.set(ev, p.elem, i+1, replace))
		return out
	case kMap:
		if el.Kind != KeyElem {
			a.fail("%s is a %s; cannot select %s", a.at(i), p.name, el)
		}
		kv := reflect.ValueOf(el.Name).Convert(p.typ.Key())
		old := v.MapIndex(kv)
		if !old.IsValid() {
			a.fail("%s has no key %q", a.at(i), el.Name)
		}
		out := reflect.MakeMapWithSize(p.typ, v.Len())
		it := v.MapRange()
		for it.Next() {
			out.SetMapIndex(it.Key(), it.Value())
		}
		out.SetMapIndex(kv, a.set(old, p.elem, i+1, replace))
		return out
	case kCustom, kCustomAddr:
		node := nodeOf(v, p)
		names, children := node.PytreeChildren()
		j := -1
		for k := range children {
			if elemForName(names, k) == el {
				j = k
				break
			}
		}
		if j < 0 {
			a.fail("%s (a %s) has no child %s", a.at(i), p.name, el)
		}
		nc := slices.Clone(children)
		if i+1 == len(a.elems) && nc[j] != nil && replace != nil &&
			!reflect.TypeOf(replace).AssignableTo(reflect.TypeOf(nc[j])) {
			a.fail("cannot replace %s (a %s) with a %s", a.at(i+1), typeName(reflect.TypeOf(nc[j])), typeName(reflect.TypeOf(replace)))
		}
		nc[j] = a.set(reflect.ValueOf(&nc[j]).Elem(), anyPlan, i+1, replace).Interface()
		rv := reflect.ValueOf(node.PytreeRebuild(nc))
		switch {
		case rv.IsValid() && rv.Type() == p.typ:
		case rv.IsValid() && rv.Type() == reflect.PointerTo(p.typ) && !rv.IsNil():
			rv = rv.Elem()
		default:
			a.fail("%s.PytreeRebuild returned a %s, want a %s", p.name, describe(rv), p.name)
		}
		return rv
	case kLeaf:
		a.fail("%s is a tensor; cannot select %s", a.at(i), el)
	}
	a.fail("%s is a %s; cannot select %s", a.at(i), typeName(v.Type()), el)
	return reflect.Value{}
}

func (a *atPath) convert(t reflect.Type, replace any, i int) reflect.Value {
	if replace == nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map, reflect.Func, reflect.Chan:
			return reflect.Zero(t)
		}
		a.fail("cannot set %s (a %s) to nil", a.at(i), typeName(t))
	}
	rv := reflect.ValueOf(replace)
	if !rv.Type().AssignableTo(t) {
		a.fail("cannot replace %s (a %s) with a %s", a.at(i), typeName(t), typeName(rv.Type()))
	}
	nv := reflect.New(t).Elem()
	nv.Set(rv)
	return nv
}
