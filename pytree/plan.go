package pytree

import (
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gonox/gonox/tensor"
)

// Node is implemented by types that define their own children instead of
// being walked field by field, like a custom pytree node registered with
// jax.tree_util.register_pytree_node.
//
// PytreeChildren returns the children in a fixed order. Each child is any
// Go value and is itself walked as a tree (a *tensor.Tensor child is a
// leaf). names, when not nil, has one name per child and feeds Paths: a
// name that is a Go identifier becomes a field element (".name"), any
// other name a key element (`["name"]`). With nil names the children are
// indexed ("[0]", "[1]", ...).
//
// PytreeRebuild returns a new node of the same type (or a pointer to
// one) holding the given children, in the order PytreeChildren returned
// them, with any other data copied from the receiver. It is called on the
// original node, must not modify it, and must only store the children: a
// child tensor may be nil (a position emptied by Filter or Partition, or a
// Structure's placeholder) and a child subtree may hold nil tensors.
//
// The methods may have value or pointer receivers. Both must be free of
// side effects: traversals call them more than once.
type Node interface {
	PytreeChildren() (names []string, children []any)
	PytreeRebuild(children []any) any
}

var (
	tensorType    = reflect.TypeFor[tensor.Tensor]()
	tensorPtrType = reflect.TypeFor[*tensor.Tensor]()
	nodeType      = reflect.TypeFor[Node]()
	anyType       = reflect.TypeFor[any]()
	stringType    = reflect.TypeFor[string]()
)

type kind uint8

const (
	kStatic     kind = iota // no leaves: carried by reference
	kLeaf                   // *tensor.Tensor
	kBad                    // tensor.Tensor stored by value: an error when reached
	kStruct                 // exported fields, in order
	kPtr                    // pointer to a node
	kSlice                  // elements
	kArray                  // elements
	kMap                    // string keys, sorted
	kIface                  // the dynamic value
	kCustom                 // the type implements Node
	kCustomAddr             // *T implements Node; called through the node's address
)

// plan is the precomputed walk of one reflect.Type. Plans are built once,
// under planMu, and immutable afterwards (except the hint).
type plan struct {
	typ  reflect.Type
	kind kind
	size uintptr
	name string // short type name for messages

	elem *plan // kPtr, kSlice, kArray, kMap
	n    int   // kArray length

	all     []field // kStruct: every field
	visit   []field // kStruct: fields the flatten walk visits (dynamic or checked)
	rebuild []field // kStruct: fields that may hold leaves

	flat  bool   // values hold no pointer, slice, map, interface or Node that the walk follows (so no cycle)
	dyn   bool   // values may contain leaves
	walk  bool   // values must be visited (dyn, or static data to check)
	check bool   // kStatic: values may hold a tensor, which is an error
	why   string // kStatic: why the type is static

	segs      []seg        // copy program for copyMem; nil: use reflect
	segsFresh []seg        // the same, leaving leaf positions zero
	sliceType reflect.Type // []typ, for allocating pointees in batches

	hint atomic.Int32 // positions seen by the last walk rooted here

	arrays atomic.Pointer[arrayType] // [n]typ of the last short array newArray made
}

// arrayType is an array type [n]T and its length.
type arrayType struct {
	n   int
	typ reflect.Type
}

// maxArrayTypes bounds the lengths for which newArray makes array types
// (reflect keeps every type it makes): longer arrays are allocated as
// slices.
const maxArrayTypes = 64

// newArray returns zeroed memory for n values of p's type in one
// allocation: reflect.MakeSlice allocates a slice header besides, which
// a spine copy (every step's Flatten and Unflatten of a model) does not
// need. The array type of the last short length asked for stays in p.
func (p *plan) newArray(n int) unsafe.Pointer {
	if n > maxArrayTypes {
		return reflect.MakeSlice(reflect.SliceOf(p.typ), n, n).UnsafePointer()
	}
	a := p.arrays.Load()
	if a == nil || a.n != n {
		a = &arrayType{n: n, typ: reflect.ArrayOf(n, p.typ)}
		p.arrays.Store(a)
	}
	return reflect.New(a.typ).UnsafePointer()
}

// seg is a step of a copy program: a pointer word, or a run of bytes
// holding no pointers.
type seg struct {
	off, n uintptr
	ptr    bool
}

type field struct {
	name     string
	index    int
	off      uintptr
	typ      reflect.Type
	plan     *plan // nil for static fields
	leaf     bool  // plan.kind == kLeaf (saves a load in the hot loops)
	exported bool
	static   bool   // unexported or tagged pytree:"static"
	why      string // why static
	check    bool   // static field whose value may hold a tensor
}

var (
	plans  sync.Map // reflect.Type -> *plan
	planMu sync.Mutex
	holds  = map[reflect.Type]bool{} // mayHold results, guarded by planMu
)

// planFor returns the plan of t, building and caching it on first use.
func planFor(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	planMu.Lock()
	defer planMu.Unlock()
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	b := &planBuilder{m: map[reflect.Type]*plan{}}
	p := b.build(t)
	b.finish()
	for t, p := range b.m {
		plans.Store(t, p)
	}
	return p
}

type planBuilder struct {
	m     map[reflect.Type]*plan
	order []*plan
}

func (b *planBuilder) build(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	if p, ok := b.m[t]; ok {
		return p
	}
	p := &plan{typ: t, size: t.Size(), name: typeName(t)}
	b.m[t] = p
	b.order = append(b.order, p)
	switch {
	case t == tensorType:
		p.kind = kBad
		return p
	case t.Kind() == reflect.Pointer && t.Elem() == tensorType:
		p.kind = kLeaf
		return p
	case t.Kind() == reflect.Pointer:
		p.kind = kPtr
		p.elem = b.build(t.Elem())
		return p
	case t.Kind() != reflect.Interface && t.Implements(nodeType):
		p.kind = kCustom
		return p
	case t.Kind() != reflect.Interface && reflect.PointerTo(t).Implements(nodeType):
		p.kind = kCustomAddr
		return p
	}
	switch t.Kind() {
	case reflect.Struct:
		p.kind = kStruct
		for i := range t.NumField() {
			sf := t.Field(i)
			f := field{name: sf.Name, index: i, off: sf.Offset, typ: sf.Type, exported: sf.IsExported()}
			switch {
			case !sf.IsExported():
				f.static, f.why = true, "unexported fields are static"
			case hasStaticTag(sf.Tag):
				f.static, f.why = true, `the field is tagged pytree:"static"`
			default:
				f.plan = b.build(sf.Type)
			}
			if f.static {
				f.check = sf.Type.Kind() == reflect.Interface || mayHold(sf.Type)
			}
			p.all = append(p.all, f)
		}
	case reflect.Slice:
		p.kind = kSlice
		p.elem = b.build(t.Elem())
	case reflect.Array:
		p.kind = kArray
		p.n = t.Len()
		p.elem = b.build(t.Elem())
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			p.kind = kMap
			p.elem = b.build(t.Elem())
		} else {
			p.kind = kStatic
			p.why = "maps with non-string keys are static"
			p.check = mayHold(t)
		}
	case reflect.Interface:
		p.kind = kIface
	default:
		p.kind = kStatic
	}
	return p
}

func hasStaticTag(tag reflect.StructTag) bool {
	v, ok := tag.Lookup("pytree")
	if !ok {
		return false
	}
	for _, opt := range strings.Split(v, ",") {
		if strings.TrimSpace(opt) == "static" {
			return true
		}
	}
	return false
}

// finish computes the dyn and walk flags of the new plans by iterating to
// a fixed point (recursive types refer to plans still being built), then
// the field lists.
func (b *planBuilder) finish() {
	for _, p := range b.order {
		switch p.kind {
		case kLeaf, kBad, kIface, kCustom, kCustomAddr:
			p.dyn, p.walk = true, true
		case kStatic:
			p.walk = p.check
		}
	}
	for changed := true; changed; {
		changed = false
		for _, p := range b.order {
			dyn, walk := p.dyn, p.walk
			switch p.kind {
			case kStruct:
				for _, f := range p.all {
					if f.static {
						walk = walk || f.check
					} else {
						dyn = dyn || f.plan.dyn
						walk = walk || f.plan.walk
					}
				}
			case kPtr, kSlice, kMap:
				dyn, walk = p.elem.dyn, p.elem.walk
			case kArray:
				dyn, walk = p.n > 0 && p.elem.dyn, p.n > 0 && p.elem.walk
			}
			if dyn != p.dyn || walk != p.walk {
				p.dyn, p.walk, changed = dyn, walk, true
			}
		}
	}
	for _, p := range b.order {
		switch p.kind {
		case kPtr, kSlice, kMap, kIface, kCustom, kCustomAddr:
		default:
			p.flat = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, p := range b.order {
			if !p.flat {
				continue
			}
			switch p.kind {
			case kStruct:
				for _, f := range p.all {
					if !f.static && !f.plan.flat {
						p.flat, changed = false, true
						break
					}
				}
			case kArray:
				if !p.elem.flat {
					p.flat, changed = false, true
				}
			}
		}
	}
	for _, p := range b.order {
		p.segs = copyProgram(p, false)
		p.segsFresh = copyProgram(p, true)
		if p.kind == kPtr && p.elem.size > 0 && p.elem.size <= maxBatchSize {
			p.sliceType = reflect.SliceOf(p.elem.typ)
		}
		if p.kind != kStruct {
			continue
		}
		for _, f := range p.all {
			if f.static {
				if f.check {
					p.visit = append(p.visit, f)
				}
				continue
			}
			f.leaf = f.plan.kind == kLeaf
			if f.plan.walk {
				p.visit = append(p.visit, f)
			}
			if f.plan.dyn {
				p.rebuild = append(p.rebuild, f)
			}
		}
	}
}

// mayHold reports whether a value of type t can reach a tensor through
// pointers, structs (exported or not), slices, arrays and maps. Interfaces,
// funcs and channels are opaque. Called with planMu held.
func mayHold(t reflect.Type) bool {
	if v, ok := holds[t]; ok {
		return v
	}
	// Collect the types reachable from t that are not yet known, then
	// iterate to a fixed point (types may be recursive).
	var todo []reflect.Type
	seen := map[reflect.Type]bool{}
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		if _, ok := holds[t]; ok || seen[t] {
			return
		}
		seen[t] = true
		todo = append(todo, t)
		if t == tensorType || t == tensorPtrType {
			return
		}
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			collect(t.Elem())
		case reflect.Map:
			collect(t.Key())
			collect(t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				collect(t.Field(i).Type)
			}
		}
	}
	collect(t)
	val := map[reflect.Type]bool{}
	get := func(t reflect.Type) bool {
		if v, ok := holds[t]; ok {
			return v
		}
		return val[t]
	}
	for changed := true; changed; {
		changed = false
		for _, t := range todo {
			if val[t] {
				continue
			}
			v := false
			switch {
			case t == tensorType || (t.Kind() == reflect.Pointer && t.Elem() == tensorType):
				v = true
			case t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice:
				v = get(t.Elem())
			case t.Kind() == reflect.Array:
				v = t.Len() > 0 && get(t.Elem())
			case t.Kind() == reflect.Map:
				v = get(t.Key()) || get(t.Elem())
			case t.Kind() == reflect.Struct:
				for i := range t.NumField() {
					v = v || get(t.Field(i).Type)
				}
			}
			if v {
				val[t], changed = true, true
			}
		}
	}
	for _, t := range todo {
		holds[t] = val[t]
	}
	return holds[t]
}

var pkgPathRE = regexp.MustCompile(`(?:[\w.\-~]+/)*[\w\-~]+\.`)

// typeName returns the unqualified name of t for messages and Format:
// "MLP", "Pair[float32]", "[]Linear", "map[string]*Expert".
func typeName(t reflect.Type) string {
	if t == tensorType {
		return "tensor.Tensor"
	}
	if t.Name() != "" {
		n := t.Name()
		if strings.IndexByte(n, '[') >= 0 {
			n = pkgPathRE.ReplaceAllString(n, "")
		}
		return n
	}
	switch t.Kind() {
	case reflect.Interface:
		if t.NumMethod() == 0 {
			return "any"
		}
	case reflect.Pointer:
		return "*" + typeName(t.Elem())
	case reflect.Slice:
		return "[]" + typeName(t.Elem())
	case reflect.Map:
		return "map[" + typeName(t.Key()) + "]" + typeName(t.Elem())
	}
	return pkgPathRE.ReplaceAllString(t.String(), "")
}

// rootName is the name used as the first component of paths in messages:
// the type of the root with pointers removed.
func rootName(t reflect.Type) string {
	if t == nil {
		return "nil"
	}
	for t.Kind() == reflect.Pointer && t.Elem() != tensorType {
		t = t.Elem()
	}
	return typeName(t)
}

// nodeAt returns the Node stored at addr (a value of p.typ).
func nodeAt(p *plan, addr unsafe.Pointer) Node {
	if p.kind == kCustomAddr {
		return reflect.NewAt(p.typ, addr).Interface().(Node)
	}
	return reflect.NewAt(p.typ, addr).Elem().Interface().(Node)
}

// sliceHeader is the memory layout of a Go slice.
type sliceHeader struct {
	Data unsafe.Pointer
	Len  int
	Cap  int
}

// maxBatchSize is the largest pointee that is allocated in batches when a
// slice of pointers is copied.
const maxBatchSize = 1024

// copyProgram returns the steps that copy a value of p.typ with typed
// pointer stores (so the garbage collector's write barriers see them) and
// plain byte copies for the rest, or nil if the type has too many
// pointers. With skipLeaves, the leaf positions of p are not copied (left
// zero): the builder fills them, and each pointer store costs a write
// barrier while the collector runs.
func copyProgram(p *plan, skipLeaves bool) []seg {
	var words []word
	if !planWords(p, 0, skipLeaves, &words) || len(words) > maxWords {
		return nil
	}
	var segs []seg
	at := uintptr(0)
	for _, w := range words {
		if w.off > at {
			segs = append(segs, seg{off: at, n: w.off - at})
		}
		if !w.skip {
			segs = append(segs, seg{off: w.off, n: ptrSize, ptr: true})
		}
		at = w.off + ptrSize
	}
	if p.size > at {
		segs = append(segs, seg{off: at, n: p.size - at})
	}
	if segs == nil {
		segs = []seg{} // nothing to copy
	}
	return segs
}

const (
	ptrSize  = unsafe.Sizeof(uintptr(0))
	maxWords = 16
)

// word is a pointer word of a type: copied with a typed store, or skipped.
type word struct {
	off  uintptr
	skip bool
}

// planWords appends the pointer words of a value of p.typ at off, in
// order, marking leaf positions as skipped when skipLeaves.
func planWords(p *plan, off uintptr, skipLeaves bool, words *[]word) bool {
	switch {
	case p.kind == kLeaf && skipLeaves:
		*words = append(*words, word{off, true})
	case p.kind == kStruct:
		for _, f := range p.all {
			var ok bool
			if f.plan != nil {
				ok = planWords(f.plan, off+f.off, skipLeaves, words)
			} else {
				ok = typeWords(f.typ, off+f.off, words)
			}
			if !ok {
				return false
			}
		}
	case p.kind == kArray && !p.elem.dyn:
		return typeWords(p.typ, off, words)
	case p.kind == kArray:
		for i := range p.n {
			if !planWords(p.elem, off+uintptr(i)*p.elem.size, skipLeaves, words) {
				return false
			}
		}
	default:
		return typeWords(p.typ, off, words)
	}
	return len(*words) <= maxWords
}

// typeWords appends the offsets of the pointer words of t, in order.
func typeWords(t reflect.Type, off uintptr, words *[]word) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer, reflect.String, reflect.Slice:
		*words = append(*words, word{off: off})
	case reflect.Interface:
		*words = append(*words, word{off: off}, word{off: off + ptrSize})
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !typeWords(f.Type, off+f.Offset, words) {
				return false
			}
		}
	case reflect.Array:
		es := t.Elem().Size()
		for i := range t.Len() {
			n := len(*words)
			if !typeWords(t.Elem(), off+uintptr(i)*es, words) {
				return false
			}
			if len(*words) == n {
				break // no pointers in the elements
			}
		}
	}
	return len(*words) <= maxWords
}

// copyMem copies a value of p.typ from src to dst, which is zeroed
// memory, following the copy program segs (nil: copy everything with
// reflect).
func copyMem(dst, src unsafe.Pointer, p *plan, segs []seg) {
	if segs == nil {
		reflect.NewAt(p.typ, dst).Elem().Set(reflect.NewAt(p.typ, src).Elem())
		return
	}
	for _, s := range segs {
		d, r := unsafe.Add(dst, s.off), unsafe.Add(src, s.off)
		if s.ptr {
			*(*unsafe.Pointer)(d) = *(*unsafe.Pointer)(r)
		} else {
			copy(unsafe.Slice((*byte)(d), s.n), unsafe.Slice((*byte)(r), s.n))
		}
	}
}
