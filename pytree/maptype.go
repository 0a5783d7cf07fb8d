package pytree

import (
	"fmt"
	"reflect"
)

// MapType returns a copy of tree in which every value of type V that the
// walk reaches is replaced by f of it. It is for the nodes of a tree that
// are not tensors, such as the layers of a model: Equinox's tree_at over
// the nodes a filter selects. nn.InferenceMode is
//
//	pytree.MapType(model, func(d nn.Dropout) nn.Dropout {
//		d.Inference = true
//		return d
//	})
//
// The walk goes where every function of this package goes (exported fields
// not tagged static, pointers, slices, arrays, maps with string keys,
// interfaces, Node children), whether or not the values hold tensors; it
// does not look inside a V it replaces. Only the containers on the way to
// a replaced V are copied: everything else, tensors included, is shared
// with tree, which is not changed; if f replaces nothing, tree itself is
// returned. It panics on a cycle, naming the path.
func MapType[V, T any](tree T, f func(V) V) T {
	w := typeMapper{target: reflect.TypeFor[V](), root: reflect.TypeFor[T](), onPath: map[uintptr]bool{},
		f: func(v reflect.Value) reflect.Value { return reflect.ValueOf(f(v.Interface().(V))) }}
	v, changed := w.walk(reflect.ValueOf(&tree).Elem())
	if !changed {
		return tree
	}
	return v.Interface().(T)
}

type typeMapper struct {
	target, root reflect.Type
	f            func(reflect.Value) reflect.Value
	path         Path
	onPath       map[uintptr]bool // pointers on the current path
}

func (w *typeMapper) push(e PathElem) { w.path = append(w.path, e) }
func (w *typeMapper) pop()            { w.path = w.path[:len(w.path)-1] }

// walk returns v with its V values replaced, and whether anything was; the
// result is a fresh value only when something was.
func (w *typeMapper) walk(v reflect.Value) (reflect.Value, bool) {
	t := v.Type()
	switch {
	case t == w.target:
		out := reflect.New(t).Elem()
		out.Set(w.f(v))
		return out, true
	case t == tensorPtrType:
		return v, false
	case t.Kind() == reflect.Pointer:
		if v.IsNil() {
			return v, false
		}
		p := v.Pointer()
		if w.onPath[p] {
			panic(fmt.Sprintf("pytree.MapType: cycle: %s leads back to a %s already on the path", locate(rootName(w.root), w.path), typeName(t.Elem())))
		}
		w.onPath[p] = true
		e, ch := w.walk(v.Elem())
		delete(w.onPath, p)
		if !ch {
			return v, false
		}
		np := reflect.New(t.Elem())
		np.Elem().Set(e)
		return np, true
	case t.Kind() != reflect.Interface && (t.Implements(nodeType) || reflect.PointerTo(t).Implements(nodeType)):
		return w.node(v)
	}
	switch t.Kind() {
	case reflect.Struct:
		var out reflect.Value
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() || hasStaticTag(sf.Tag) {
				continue
			}
			w.push(Field(sf.Name))
			e, ch := w.walk(v.Field(i))
			w.pop()
			if !ch {
				continue
			}
			if !out.IsValid() {
				out = reflect.New(t).Elem()
				out.Set(v)
			}
			out.Field(i).Set(e)
		}
		if out.IsValid() {
			return out, true
		}
	case reflect.Interface:
		if v.IsNil() {
			break
		}
		if e, ch := w.walk(v.Elem()); ch {
			out := reflect.New(t).Elem()
			out.Set(e)
			return out, true
		}
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && v.IsNil() {
			break
		}
		var out reflect.Value
		for i := range v.Len() {
			w.push(Index(i))
			e, ch := w.walk(v.Index(i))
			w.pop()
			if !ch {
				continue
			}
			if !out.IsValid() {
				if t.Kind() == reflect.Slice {
					out = reflect.MakeSlice(t, v.Len(), v.Len())
					reflect.Copy(out, v)
				} else {
					out = reflect.New(t).Elem()
					out.Set(v)
				}
			}
			out.Index(i).Set(e)
		}
		if out.IsValid() {
			return out, true
		}
	case reflect.Map:
		if v.IsNil() || t.Key().Kind() != reflect.String {
			break // maps with non-string keys are static
		}
		var changed []reflect.Value // key, value pairs
		it := v.MapRange()
		for it.Next() {
			w.push(Key(it.Key().String()))
			e, ch := w.walk(it.Value())
			w.pop()
			if ch {
				changed = append(changed, it.Key(), e)
			}
		}
		if len(changed) > 0 {
			out := reflect.MakeMapWithSize(t, v.Len())
			it := v.MapRange()
			for it.Next() {
				out.SetMapIndex(it.Key(), it.Value())
			}
			for i := 0; i < len(changed); i += 2 {
				out.SetMapIndex(changed[i], changed[i+1])
			}
			return out, true
		}
	}
	return v, false
}

// node walks the children of a Node and rebuilds it if one changed.
func (w *typeMapper) node(v reflect.Value) (reflect.Value, bool) {
	var n Node
	if v.Type().Implements(nodeType) {
		n = v.Interface().(Node)
	} else {
		c := reflect.New(v.Type())
		c.Elem().Set(v)
		n = c.Interface().(Node)
	}
	names, children := n.PytreeChildren()
	var out []any
	for i, c := range children {
		if c == nil {
			continue
		}
		if names != nil {
			w.push(Field(names[i]))
		} else {
			w.push(Index(i))
		}
		e, ch := w.walk(reflect.ValueOf(c))
		w.pop()
		if ch {
			if out == nil {
				out = append([]any(nil), children...)
			}
			out[i] = e.Interface()
		}
	}
	if out == nil {
		return v, false
	}
	r := reflect.ValueOf(n.PytreeRebuild(out))
	if r.Type() != v.Type() && r.Kind() == reflect.Pointer && r.Type().Elem() == v.Type() {
		r = r.Elem()
	}
	return r, true
}
