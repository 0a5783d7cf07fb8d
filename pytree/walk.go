package pytree

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/gonox/gonox/tensor"
)

// maxDepth bounds the nesting of interfaces and custom nodes, the only
// places where a tree can recurse without going through a pointer (a Node
// returning a copy of itself as a child).
const maxDepth = 10000

// flattener is one read-only walk of a tree. It collects the positions
// (nil included) and a record of the tree's shape: container lengths,
// pointer nil-ness, map keys, dynamic types. Two trees with equal records
// have the same structure up to which positions are nil.
type flattener struct {
	pos []*tensor.Tensor // every position, nil where empty
	record

	stack  []frame          // pointers, slices and maps on the current path
	onPath map[frameKey]int // index of stack, once it is deep
	depth  int

	paths     bool       // track the current path (second attempt, or when asked for)
	leafPaths bool       // record the path of every position in ppos
	path      []PathElem // current path
	arena     []PathElem
	ppos      []Path // with leafPaths: the path of every position

	// Initial storage, to save allocations on small trees.
	stackBuf [8]frame
	shapeBuf [8]int
	typesBuf [4]reflect.Type
}

// record is what a walk learns of a tree's shape, which a Structure keeps
// and builders follow.
type record struct {
	npos  int            // len(pos), kept when pos is dropped
	nils  []int32        // indices of the nil positions
	shape []int          // slice/map lengths, pointer nil-ness, Node child counts
	keys  []string       // map keys and Node child names
	types []reflect.Type // dynamic types of interfaces and Node children
	root  reflect.Type   // for messages
}

type frameKey struct {
	addr unsafe.Pointer
	p    *plan
}

type frame struct {
	addr  unsafe.Pointer
	p     *plan
	depth int // len(path) when entered
}

// errRetry is panicked when an error is found on a walk that does not
// track paths; the walk is then repeated with paths to report it.
var errRetry = new(int)

// flatten walks the value of type p.typ at addr. With paths, it records
// the path of every position.
func flatten(p *plan, addr unsafe.Pointer, root reflect.Type, paths bool) *flattener {
	hp := p // the plan that remembers how many positions to expect
	if p.kind == kIface && root != nil {
		hp = planFor(root)
	}
	f := newFlattener(root, paths, hp)
	f.leafPaths = paths
	if paths {
		f.walk(p, addr)
	} else if !f.try(p, addr) {
		f = newFlattener(root, true, hp) // only to report the error with its path
		f.walk(p, addr)
	}
	f.npos = len(f.pos)
	hp.hint.Store(int32(min(f.npos, 1<<30)))
	return f
}

// flatteners recycles the walks of Leaves and Flatten (a training step
// makes a few): a flattener is some 600 bytes.
var flatteners = sync.Pool{New: func() any { return new(flattener) }}

func newFlattener(root reflect.Type, paths bool, hp *plan) *flattener {
	f := flatteners.Get().(*flattener) // zero (release)
	f.root, f.paths = root, paths
	f.stack = f.stackBuf[:0]
	f.shape = f.shapeBuf[:0]
	f.types = f.typesBuf[:0]
	if h := int(hp.hint.Load()); h > 0 {
		f.pos = make([]*tensor.Tensor, 0, h)
	}
	return f
}

// release returns f to the pool once its caller has taken what it keeps
// of it (the positions, nils and keys are theirs, not f's, from then on):
// f must not be used afterwards.
func (f *flattener) release() {
	*f = flattener{}
	flatteners.Put(f)
}

func (f *flattener) try(p *plan, addr unsafe.Pointer) (ok bool) {
	defer func() {
		if ok {
			return
		}
		if r := recover(); r != errRetry {
			panic(r)
		}
	}()
	f.walk(p, addr)
	return true
}

// fail reports an error found at the current path.
func (f *flattener) fail(msg func(where string) string) {
	if !f.paths {
		panic(errRetry)
	}
	panic(msg(f.where()))
}

func (f *flattener) where() string { return locate(rootName(f.root), f.path) }

func (f *flattener) push(e PathElem) {
	if f.paths {
		f.path = append(f.path, e)
	}
}

func (f *flattener) pop() {
	if f.paths {
		f.path = f.path[:len(f.path)-1]
	}
}

func (f *flattener) leaf(t *tensor.Tensor) {
	if t == nil {
		f.nils = append(f.nils, int32(len(f.pos)))
	}
	f.pos = append(f.pos, t)
	if f.leafPaths {
		start := len(f.arena)
		f.arena = append(f.arena, f.path...)
		f.ppos = append(f.ppos, f.arena[start:len(f.arena):len(f.arena)])
	}
}

// enter pushes a pointer, slice or map onto the current path, failing if
// it is already there (a cycle). Deep paths (linked lists) are indexed by a
// map so that the check stays cheap.
func (f *flattener) enter(addr unsafe.Pointer, p *plan) {
	i := -1
	if f.onPath != nil {
		if d, ok := f.onPath[frameKey{addr, p}]; ok {
			i = d
		}
	} else {
		for j, fr := range f.stack {
			if fr.addr == addr && fr.p == p {
				i = j
				break
			}
		}
	}
	if i >= 0 {
		fr := f.stack[i]
		f.fail(func(where string) string {
			return fmt.Sprintf("pytree: cycle: %s leads back to %s (the same %s is already on the path)",
				where, locate(rootName(f.root), f.path[:fr.depth]), typeName(p.typ))
		})
	}
	f.stack = append(f.stack, frame{addr, p, len(f.path)})
	switch {
	case f.onPath != nil:
		f.onPath[frameKey{addr, p}] = len(f.stack) - 1
	case len(f.stack) > 32:
		f.onPath = make(map[frameKey]int, 2*len(f.stack))
		for j, fr := range f.stack {
			f.onPath[frameKey{fr.addr, fr.p}] = j
		}
	}
}

func (f *flattener) leave() {
	if f.onPath != nil {
		fr := f.stack[len(f.stack)-1]
		delete(f.onPath, frameKey{fr.addr, fr.p})
	}
	f.stack = f.stack[:len(f.stack)-1]
}

func (f *flattener) walk(p *plan, addr unsafe.Pointer) {
	switch p.kind {
	case kLeaf:
		f.leaf(*(**tensor.Tensor)(addr))
	case kStruct:
		for i := range p.visit {
			fd := &p.visit[i]
			a := unsafe.Add(addr, fd.off)
			if fd.leaf && !f.paths {
				f.leaf(*(**tensor.Tensor)(a))
				continue
			}
			f.push(Field(fd.name))
			if fd.static {
				f.checkStatic(reflect.NewAt(fd.typ, a).Elem(), fd.why)
			} else {
				f.walk(fd.plan, a)
			}
			f.pop()
		}
	case kPtr:
		f.walkPtr(p, *(*unsafe.Pointer)(addr))
	case kSlice:
		h := (*sliceHeader)(addr)
		if p.elem.kind == kBad {
			f.failByValue(p)
		}
		if p.dyn {
			f.shape = append(f.shape, h.Len)
		}
		if h.Len == 0 {
			return
		}
		if !p.elem.flat {
			f.enter(h.Data, p)
		}
		es := p.elem.size
		for i := range h.Len {
			f.push(Index(i))
			f.walk(p.elem, unsafe.Add(h.Data, uintptr(i)*es))
			f.pop()
		}
		if !p.elem.flat {
			f.leave()
		}
	case kArray:
		if p.elem.kind == kBad {
			f.failByValue(p)
		}
		es := p.elem.size
		for i := range p.n {
			f.push(Index(i))
			f.walk(p.elem, unsafe.Add(addr, uintptr(i)*es))
			f.pop()
		}
	case kMap:
		if p.elem.kind == kBad {
			f.failByValue(p)
		}
		f.walkMap(p, addr)
	case kIface:
		f.walkDyn(reflect.NewAt(p.typ, addr).Elem(), addr)
	case kCustom, kCustomAddr:
		f.walkCustom(p, addr)
	case kBad:
		f.fail(func(where string) string {
			return fmt.Sprintf("pytree: %s is a tensor.Tensor stored by value; use *tensor.Tensor", where)
		})

	case kStatic:
		if p.check {
			f.checkStatic(reflect.NewAt(p.typ, addr).Elem(), p.why)
		}
	}
}

// failByValue reports a container of tensor.Tensor values.
func (f *flattener) failByValue(p *plan) {
	f.fail(func(where string) string {
		return fmt.Sprintf("pytree: %s is a %s: tensors stored by value; use *tensor.Tensor", where, p.typ)
	})
}

func (f *flattener) walkPtr(p *plan, ptr unsafe.Pointer) {
	if p.dyn {
		if ptr == nil {
			f.shape = append(f.shape, 0)
		} else {
			f.shape = append(f.shape, 1)
		}
	}
	if ptr == nil {
		return
	}
	if p.elem.flat {
		f.walk(p.elem, ptr)
		return
	}
	f.enter(ptr, p)
	f.walk(p.elem, ptr)
	f.leave()
}

func (f *flattener) walkMap(p *plan, addr unsafe.Pointer) {
	m := reflect.NewAt(p.typ, addr).Elem()
	n := m.Len()
	if p.dyn {
		f.shape = append(f.shape, n)
	}
	if n == 0 {
		return
	}
	keys := sortedKeys(m)
	f.enter(m.UnsafePointer(), p)
	tmp := reflect.New(p.elem.typ)
	for _, k := range keys {
		ks := k.String()
		if p.dyn {
			f.keys = append(f.keys, ks)
		}
		f.push(Key(ks))
		tmp.Elem().Set(m.MapIndex(k))
		f.walk(p.elem, tmp.UnsafePointer())
		f.pop()
	}
	f.leave()
}

func sortedKeys(m reflect.Value) []reflect.Value {
	keys := m.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(a.String(), b.String()) })
	return keys
}

// walkDyn walks the dynamic value of the interface value v, which lies at
// iface.
func (f *flattener) walkDyn(v reflect.Value, iface unsafe.Pointer) {
	if v.IsNil() {
		f.types = append(f.types, nil)
		return
	}
	e := v.Elem()
	t := e.Type()
	f.types = append(f.types, t)
	p := planFor(t)
	switch {
	case p.kind == kLeaf:
		f.leaf((*tensor.Tensor)(e.UnsafePointer()))
	case !p.walk:
	case p.kind == kPtr:
		f.walkPtr(p, e.UnsafePointer())
	default:
		f.depth++
		if f.depth > maxDepth {
			f.fail(func(where string) string {
				return fmt.Sprintf("pytree: %s: tree nested deeper than %d interfaces or Nodes (a Node that contains itself?)", where, maxDepth)
			})
		}
		f.walk(p, boxed(e, iface))
		f.depth--
	}
}

func (f *flattener) walkCustom(p *plan, addr unsafe.Pointer) {
	names, children := nodeAt(p, addr).PytreeChildren()
	if names != nil && len(names) != len(children) {
		f.fail(func(where string) string {
			return fmt.Sprintf("pytree: %s: %s.PytreeChildren returned %d names for %d children", where, p.name, len(names), len(children))
		})
	}
	f.shape = append(f.shape, len(children), b2i(names != nil))
	f.keys = append(f.keys, names...)
	f.depth++
	if f.depth > maxDepth {
		f.fail(func(where string) string {
			return fmt.Sprintf("pytree: %s: tree nested deeper than %d interfaces or Nodes (a Node that contains itself?)", where, maxDepth)
		})
	}
	for i := range children {
		f.push(elemForName(names, i))
		f.walkDyn(reflect.ValueOf(&children[i]).Elem(), unsafe.Pointer(&children[i]))
		f.pop()
	}
	f.depth--
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkStatic panics if the static value v holds a non-nil tensor.
func (f *flattener) checkStatic(v reflect.Value, why string) {
	if v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
		if v.Type() != tensorPtrType && v.Type() != tensorType && !holdsType(v.Type()) {
			return
		}
	}
	s := staticSearch{}
	t, sub := s.find(v)
	if t == nil {
		return
	}
	f.fail(func(where string) string {
		at := ""
		if len(sub) > 0 {
			at = " at " + where + Path(sub).String()
			if sub[0].Kind == FieldElem {
				at = " at " + where + "." + Path(sub).String()
			}
		}
		return fmt.Sprintf("pytree: static field %s holds a tensor %v%s (%s, so the tensor would be invisible to transforms)",
			where, t, at, why)
	})
}

// holdsType is mayHold for callers that do not hold planMu.
func holdsType(t reflect.Type) bool {
	if v, ok := holdsCache.Load(t); ok {
		return v.(bool)
	}
	planMu.Lock()
	defer planMu.Unlock()
	v := mayHold(t)
	holdsCache.Store(t, v)
	return v
}

var holdsCache sync.Map // reflect.Type -> bool

// staticSearch looks for a tensor inside static data, following the
// paths mayHold allows.
type staticSearch struct {
	seen map[unsafe.Pointer]bool
	path []PathElem
}

func (s *staticSearch) find(v reflect.Value) (*tensor.Tensor, []PathElem) {
	t := v.Type()
	switch {
	case t == tensorType:
		if v.CanAddr() {
			return (*tensor.Tensor)(v.Addr().UnsafePointer()), s.path
		}
		return new(tensor.Tensor), s.path // a tensor.Tensor value inside a map value

	case t.Kind() == reflect.Pointer && t.Elem() == tensorType:
		if v.IsNil() {
			return nil, nil
		}
		return (*tensor.Tensor)(v.UnsafePointer()), s.path
	case !holdsType(t):
		return nil, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() || s.visited(v.UnsafePointer()) {
			return nil, nil
		}
		return s.find(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			s.path = append(s.path, Field(t.Field(i).Name))
			if x, p := s.find(v.Field(i)); x != nil {
				return x, p
			}
			s.path = s.path[:len(s.path)-1]
		}
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && (v.Len() == 0 || s.visited(v.UnsafePointer())) {
			return nil, nil
		}
		for i := range v.Len() {
			s.path = append(s.path, Index(i))
			if x, p := s.find(v.Index(i)); x != nil {
				return x, p
			}
			s.path = s.path[:len(s.path)-1]
		}
	case reflect.Map:
		if v.Len() == 0 || s.visited(v.UnsafePointer()) {
			return nil, nil
		}
		it := v.MapRange()
		for it.Next() {
			s.path = append(s.path, keyElem(it.Key()))
			if x, p := s.find(it.Key()); x != nil {
				return x, p
			}
			if x, p := s.find(it.Value()); x != nil {
				return x, p
			}
			s.path = s.path[:len(s.path)-1]
		}
	}
	return nil, nil
}

func (s *staticSearch) visited(p unsafe.Pointer) bool {
	if s.seen == nil {
		s.seen = map[unsafe.Pointer]bool{}
	}
	if s.seen[p] {
		return true
	}
	s.seen[p] = true
	return false
}

// keyElem returns the path element of a key of a static map: an index
// for integer keys, else a key.
func keyElem(k reflect.Value) PathElem {
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return Index(int(k.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return Index(int(k.Uint()))
	}
	return Key(keyString(k))
}

// keyString renders a map key of any kind for a path.
func keyString(k reflect.Value) string {
	switch k.Kind() {
	case reflect.String:
		return k.String()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprint(k.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fmt.Sprint(k.Uint())
	case reflect.Bool:
		return fmt.Sprint(k.Bool())
	case reflect.Float32, reflect.Float64:
		return fmt.Sprint(k.Float())
	}
	return k.Type().String()
}

// boxed returns the address of e, the dynamic value of the interface at
// iface, for a walk that only reads it: the interface's data word when it
// points to the value (any value not of a pointer's size is stored so),
// else the address of a copy.
func boxed(e reflect.Value, iface unsafe.Pointer) unsafe.Pointer {
	if e.Type().Size() != ptrSize {
		return (*[2]unsafe.Pointer)(iface)[1]
	}
	tmp := reflect.New(e.Type())
	tmp.Elem().Set(e)
	return tmp.UnsafePointer()
}
