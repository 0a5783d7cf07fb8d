package pytree

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gonox/gonox/tensor"
)

type buildMode uint8

const (
	modeFill  buildMode = iota // positions take the given leaves (nil where listed in nils)
	modeKeep                   // positions keep their tensors (a spine copy)
	modeClear                  // positions become nil (a Structure's skeleton)
)

// builder makes a copy of a tree's spine: every struct, pointer, slice,
// array, map and interface that may hold leaves is copied, static data is
// shared, and the leaf positions are filled according to mode. It follows
// the shape record of a flattener taken from the same tree and panics if
// the tree no longer matches it.
type builder struct {
	mode   buildMode
	leaves []*tensor.Tensor
	li     int
	pos    int
	nils   []int32
	ni     int

	rec *record // the shape record to follow
	si  int
	ki  int
	ti  int

	op     string   // for messages
	blocks *[]block // when not nil: memory allocated for the copy
}

// block is a range of memory owned by a spine copy (see At).
type block struct{ start, end uintptr }

func newBuilder(op string, mode buildMode, rec *record) *builder {
	return &builder{op: op, mode: mode, rec: rec}
}

// run rebuilds the tree whose shallow copy is at addr and checks that the
// whole record was used. A root that cannot hold leaves ([]int, *Config) is
// static data: the walk records nothing for it, and it is shared as is.
func (b *builder) run(p *plan, addr unsafe.Pointer) {
	if p.dyn {
		b.fresh(p, addr)
	}
	r := b.rec
	if b.si != len(r.shape) || b.ki != len(r.keys) || b.ti != len(r.types) || b.pos != r.npos {
		b.changed()
	}
}

func (b *builder) changed() {
	panic(fmt.Sprintf("%s: the tree changed while it was being traversed (a tree must not be modified while it is walked, and a Node must list the same children every time)", b.op))
}

func (b *builder) expect(n int) {
	if b.si >= len(b.rec.shape) || b.rec.shape[b.si] != n {
		b.changed()
	}
	b.si++
}

func (b *builder) expectType(t reflect.Type) {
	if b.ti >= len(b.rec.types) || b.rec.types[b.ti] != t {
		b.changed()
	}
	b.ti++
}

func (b *builder) expectKey(k string) {
	if b.ki >= len(b.rec.keys) || b.rec.keys[b.ki] != k {
		b.changed()
	}
	b.ki++
}

// next returns the tensor for the next position.
func (b *builder) next(old *tensor.Tensor) *tensor.Tensor {
	p := b.pos
	b.pos++
	if b.mode == modeFill && b.ni == len(b.nils) {
		l := b.leaves[b.li]
		b.li++
		return l
	}
	switch b.mode {
	case modeKeep:
		return old
	case modeClear:
		return nil
	}
	if b.ni < len(b.nils) && int(b.nils[b.ni]) == p {
		b.ni++
		return nil
	}
	l := b.leaves[b.li]
	b.li++
	return l
}

func (b *builder) block(p unsafe.Pointer, size uintptr) {
	if b.blocks != nil && size > 0 {
		*b.blocks = append(*b.blocks, block{uintptr(p), uintptr(p) + size})
	}
}

// fresh turns the shallow copy of a node at addr into a spine copy.
func (b *builder) fresh(p *plan, addr unsafe.Pointer) {
	switch p.kind {
	case kLeaf:
		slot := (**tensor.Tensor)(addr)
		if l := b.next(*slot); l != *slot {
			*slot = l
		}
	case kStruct:
		for i := range p.rebuild {
			fd := &p.rebuild[i]
			a := unsafe.Add(addr, fd.off)
			if fd.leaf {
				slot := (**tensor.Tensor)(a)
				if l := b.next(*slot); l != *slot {
					*slot = l
				}
				continue
			}
			b.fresh(fd.plan, a)
		}
	case kPtr:
		slot := (*unsafe.Pointer)(addr)
		*slot = b.freshPtr(p, *slot)
	case kSlice:
		h := (*sliceHeader)(addr)
		b.expect(h.Len)
		if h.Len == 0 {
			h.Cap = 0 // never share spare capacity with the original
			return
		}
		src := h.Data
		el, es := p.elem, p.elem.size
		data := el.newArray(h.Len)
		b.block(data, uintptr(h.Len)*es)
		if el.sliceType != nil {
			b.freshPtrs(el, src, data, h.Len)
		} else if segs := b.segs(el); segs == nil {
			ns := reflect.NewAt(p.typ, unsafe.Pointer(&sliceHeader{Data: data, Len: h.Len, Cap: h.Len})).Elem()
			reflect.Copy(ns, reflect.NewAt(p.typ, addr).Elem())
			for i := range h.Len {
				b.fresh(el, unsafe.Add(data, uintptr(i)*es))
			}
		} else {
			for i := range h.Len {
				d := unsafe.Add(data, uintptr(i)*es)
				copyMem(d, unsafe.Add(src, uintptr(i)*es), el, segs)
				b.fresh(el, d)
			}
		}
		h.Data, h.Cap = data, h.Len
	case kArray:
		es := p.elem.size
		for i := range p.n {
			b.fresh(p.elem, unsafe.Add(addr, uintptr(i)*es))
		}
	case kMap:
		b.freshMap(p, addr)
	case kIface:
		b.freshIface(reflect.NewAt(p.typ, addr).Elem())
	case kCustom, kCustomAddr:
		b.freshCustom(p, addr)
	}
}

func (b *builder) freshPtr(p *plan, old unsafe.Pointer) unsafe.Pointer {
	if old == nil {
		b.expect(0)
		return nil
	}
	b.expect(1)
	np := reflect.New(p.elem.typ).UnsafePointer()
	copyMem(np, old, p.elem, b.segs(p.elem))
	b.block(np, p.elem.size)
	b.fresh(p.elem, np)
	return np
}

// freshPtrs sets the n pointers (of plan p) at dst, which is zeroed, to
// copies of the pointees of the n pointers at src, allocating the copies
// in one array.
func (b *builder) freshPtrs(p *plan, src, dst unsafe.Pointer, n int) {
	cnt := 0
	for i := range n {
		if *(*unsafe.Pointer)(unsafe.Add(src, uintptr(i)*ptrSize)) != nil {
			cnt++
		}
	}
	var arr unsafe.Pointer
	if cnt > 0 {
		arr = p.elem.newArray(cnt)
		b.block(arr, uintptr(cnt)*p.elem.size)
	}
	segs := b.segs(p.elem)
	k := uintptr(0)
	for i := range n {
		old := *(*unsafe.Pointer)(unsafe.Add(src, uintptr(i)*ptrSize))
		if old == nil {
			b.expect(0)
			continue
		}
		b.expect(1)
		np := unsafe.Add(arr, k*p.elem.size)
		k++
		copyMem(np, old, p.elem, segs)
		b.fresh(p.elem, np)
		*(*unsafe.Pointer)(unsafe.Add(dst, uintptr(i)*ptrSize)) = np
	}
}

// segs returns the copy program for a node of plan p: leaf positions are
// left zero unless the mode keeps them.
func (b *builder) segs(p *plan) []seg {
	if b.mode == modeKeep {
		return p.segs
	}
	return p.segsFresh
}

func (b *builder) freshMap(p *plan, addr unsafe.Pointer) {
	m := reflect.NewAt(p.typ, addr).Elem()
	n := m.Len()
	b.expect(n)
	if m.IsNil() {
		return
	}
	nm := reflect.MakeMapWithSize(p.typ, n)
	kt := p.typ.Key()
	tmp := reflect.New(p.elem.typ)
	for range n {
		if b.ki >= len(b.rec.keys) {
			b.changed()
		}
		k := b.rec.keys[b.ki]
		b.ki++
		kv := reflect.ValueOf(k)
		if kt != stringType {
			kv = kv.Convert(kt)
		}
		v := m.MapIndex(kv)
		if !v.IsValid() {
			b.changed()
		}
		tmp.Elem().Set(v)
		b.fresh(p.elem, tmp.UnsafePointer())
		nm.SetMapIndex(kv, tmp.Elem())
	}
	m.Set(nm)
}

// freshIface rebuilds the dynamic value of the addressable interface v.
func (b *builder) freshIface(v reflect.Value) {
	if v.IsNil() {
		b.expectType(nil)
		return
	}
	e := v.Elem()
	t := e.Type()
	b.expectType(t)
	p := planFor(t)
	switch {
	case p.kind == kLeaf:
		old := (*tensor.Tensor)(e.UnsafePointer())
		l := b.next(old)
		if l != old || b.mode == modeClear {
			v.Set(leafValue(l, t))
		}
	case !p.dyn:
	case p.kind == kPtr:
		np := b.freshPtr(p, e.UnsafePointer())
		nv := reflect.NewAt(p.elem.typ, np)
		if nv.Type() != t {
			nv = nv.Convert(t)
		}
		v.Set(nv)
	default:
		tmp := reflect.New(t)
		tmp.Elem().Set(e)
		b.fresh(p, tmp.UnsafePointer())
		if t.Size() == ptrSize {
			v.Set(tmp.Elem())
			return
		}
		// The interface's data word points to its value (see boxed):
		// point it at the copy, which nothing else references, rather
		// than boxing a second copy (a model flattened as an any).
		(*[2]unsafe.Pointer)(v.Addr().UnsafePointer())[1] = tmp.UnsafePointer()
	}
}

func leafValue(l *tensor.Tensor, t reflect.Type) reflect.Value {
	v := reflect.ValueOf(l)
	if t != tensorPtrType {
		v = v.Convert(t)
	}
	return v
}

func (b *builder) freshCustom(p *plan, addr unsafe.Pointer) {
	node := nodeAt(p, addr)
	names, children := node.PytreeChildren()
	b.expect(len(children))
	b.expect(b2i(names != nil))
	for _, n := range names {
		b.expectKey(n)
	}
	nc := make([]any, len(children))
	copy(nc, children)
	for i := range nc {
		b.freshIface(reflect.ValueOf(&nc[i]).Elem())
	}
	r := node.PytreeRebuild(nc)
	rv := reflect.ValueOf(r)
	switch {
	case !rv.IsValid():
		panic(fmt.Sprintf("%s: %s.PytreeRebuild returned nil", b.op, p.name))
	case rv.Type() == p.typ:
	case rv.Type() == reflect.PointerTo(p.typ) && !rv.IsNil():
		rv = rv.Elem()
	default:
		panic(fmt.Sprintf("%s: %s.PytreeRebuild returned a %s, want a %s", b.op, p.name, typeName(rv.Type()), p.name))
	}
	reflect.NewAt(p.typ, addr).Elem().Set(rv)
}
