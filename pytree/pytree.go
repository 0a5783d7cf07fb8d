package pytree

import (
	"fmt"
	"reflect"
	"slices"
	"unsafe"

	"github.com/gonox/gonox/tensor"
)

var anyPlan = planFor(anyType)

// flattenAny walks tree (passed as an interface) and returns its record.
func flattenAny(tree *any, paths bool) *flattener {
	return flatten(anyPlan, unsafe.Pointer(tree), reflect.TypeOf(*tree), paths)
}

// flattenT walks the tree *tree of static type T.
func flattenT[T any](tree *T, paths bool) (*plan, *flattener) {
	t := reflect.TypeFor[T]()
	p := planFor(t)
	root := t
	if t.Kind() == reflect.Interface {
		root = reflect.TypeOf(any(*tree))
	}
	return p, flatten(p, unsafe.Pointer(tree), root, paths)
}

// rebuildT returns a spine copy of tree with the positions set to pos.
func rebuildT[T any](op string, p *plan, tree T, rec *flattener, pos []*tensor.Tensor) T {
	out := tree
	b := newBuilder(op, modeFill, &rec.record)
	b.leaves = pos
	b.run(p, unsafe.Pointer(&out))
	return out
}

// compact removes the nil entries of pos (in place) and returns the rest.
func compact(pos []*tensor.Tensor, nils []int32) []*tensor.Tensor {
	if len(nils) == 0 {
		return pos // no pointer writes: they cost write barriers during GC
	}
	out := pos[:0]
	for _, x := range pos {
		if x != nil {
			out = append(out, x)
		}
	}
	clear(pos[len(out):])
	return out
}

// Leaves returns the non-nil tensors of tree in traversal order: struct
// fields in declaration order, slice and array elements by index, map
// entries by sorted key.
func Leaves(tree any) []*tensor.Tensor {
	t := reflect.TypeOf(tree)
	if t == nil || !planFor(t).walk {
		return nil // nothing to walk (an empty aux output): no walk to allocate
	}
	var f *flattener
	if t.Size() != ptrSize {
		// The dynamic value where the interface's data word points (see
		// boxed), walked as an interface's walk walks it: no copy of
		// tree on the heap.
		f = flatten(planFor(t), (*[2]unsafe.Pointer)(unsafe.Pointer(&tree))[1], t, false)
	} else {
		root := tree // tree itself stays on the stack on the paths above
		f = flattenAny(&root, false)
	}
	leaves := compact(f.pos, f.nils)
	f.release()
	return leaves
}

// LeavesWithPath returns the non-nil tensors of tree, as Leaves does, and
// the path of each.
func LeavesWithPath(tree any) ([]Path, []*tensor.Tensor) {
	f := flattenAny(&tree, true)
	paths := f.ppos[:0]
	leaves := f.pos[:0]
	for i, x := range f.pos {
		if x != nil {
			paths = append(paths, f.ppos[i])
			leaves = append(leaves, x)
		}
	}
	return paths, leaves
}

// Paths returns the paths of the non-nil tensors of tree, in the order of
// Leaves.
func Paths(tree any) []Path {
	p, _ := LeavesWithPath(tree)
	return p
}

// Structure is the shape of a tree without its leaves, as returned by
// Flatten: JAX's PyTreeDef. It holds a copy of the tree's spine with every
// tensor removed, so it keeps no tensor alive; static data is shared with
// the tree it was taken from. A Structure is immutable and may be used by
// several goroutines at once. The zero Structure is invalid.
type Structure struct{ s *structure }

type structure struct {
	rec  record // the shape record
	skel any    // the skeleton: the tree with every position nil; never written after Flatten
	n    int    // number of non-nil leaves
	// Storage for short records' shape and types (one allocation for
	// the structure of a small tree).
	shapeBuf [8]int
	typesBuf [4]reflect.Type
}

// Flatten returns the non-nil tensors of tree, as Leaves does, and its
// Structure, from which Unflatten rebuilds a tree of the same shape.
func Flatten(tree any) ([]*tensor.Tensor, Structure) {
	s := &structure{skel: tree}
	f := flattenAny(&s.skel, false) // walked in s: tree itself stays on the stack
	b := newBuilder("pytree.Flatten", modeClear, &f.record)
	b.run(anyPlan, unsafe.Pointer(&s.skel))
	leaves := compact(f.pos, f.nils)
	// Keep only the record: the walk's buffers point into the tree, and a
	// Structure must not keep the tree's tensors alive.
	s.rec = f.record
	s.rec.shape = slices.Clip(append(s.shapeBuf[:0:min(len(f.shape), len(s.shapeBuf))], f.shape...))
	s.rec.types = slices.Clip(append(s.typesBuf[:0:min(len(f.types), len(s.typesBuf))], f.types...))
	s.n = len(leaves)
	f.release()
	return leaves, Structure{s}
}

// NumLeaves returns the number of tensors Unflatten expects.
func (s Structure) NumLeaves() int {
	if s.s == nil {
		return 0
	}
	return s.s.n
}

// NumPositions returns the number of leaf positions, nil ones included.
func (s Structure) NumPositions() int {
	if s.s == nil {
		return 0
	}
	return s.s.rec.npos
}

// Equal reports whether s and o describe the same structure: the same
// types, container lengths, map keys, nil pointers and nil leaf positions.
// Static data (numbers, strings, funcs) is not compared: it is carried by
// reference from the tree a Structure was taken from. (JAX compares the
// static data of custom nodes; Go's types already fix where static data
// is, and funcs cannot be compared.)
func (s Structure) Equal(o Structure) bool {
	if s.s == nil || o.s == nil {
		return s.s == o.s
	}
	a, b := &s.s.rec, &o.s.rec
	return sameShape(a, b) && slices.Equal(a.nils, b.nils)
}

// sameShape reports whether two records have the same structure, ignoring
// which positions are nil.
func sameShape(a, b *record) bool {
	return a.npos == b.npos && slices.Equal(a.shape, b.shape) &&
		slices.Equal(a.keys, b.keys) && slices.Equal(a.types, b.types)
}

// Unflatten builds a tree of structure s holding leaves, which must have
// s.NumLeaves() tensors in the order Flatten returned them. A nil entry in
// leaves leaves its position empty. T must be the type of the tree that
// was flattened (or an interface it implements). Unflatten panics if the
// counts or the type do not match.
func Unflatten[T any](s Structure, leaves []*tensor.Tensor) T {
	if s.s == nil {
		panic("pytree.Unflatten: zero Structure")
	}
	if len(leaves) != s.s.n {
		panic(fmt.Sprintf("pytree.Unflatten: %d leaves for a structure with %d leaves: %s",
			len(leaves), s.s.n, truncate(s.String())))
	}
	t := reflect.TypeFor[T]()
	if rt := reflect.TypeOf(s.s.skel); rt == nil {
		switch t.Kind() {
		case reflect.Interface, reflect.Pointer, reflect.Slice, reflect.Map:
		default:
			panic(fmt.Sprintf("pytree.Unflatten: the structure is of a nil tree, not a %s", typeName(t)))
		}
		var zero T
		return zero
	} else if !rt.AssignableTo(t) {
		panic(fmt.Sprintf("pytree.Unflatten: the structure is of a %s, not a %s", typeName(rt), typeName(t)))
	}
	b := newBuilder("pytree.Unflatten", modeFill, &s.s.rec)
	b.leaves, b.nils = leaves, s.s.rec.nils
	if rt := reflect.TypeOf(s.s.skel); rt == t {
		// The tree's own type: built in a T rather than in an interface
		// (whose dynamic value would be allocated twice), after the root's
		// type in the record, as the interface's walk reads it.
		out := (s.s.skel).(T)
		b.expectType(t)
		b.run(planFor(t), unsafe.Pointer(&out))
		return out
	}
	out := s.s.skel
	b.run(anyPlan, unsafe.Pointer(&out))
	return out.(T)
}

// keepAxes gives out the logical axes of in when out has none and the
// same rank.
func keepAxes(in, out *tensor.Tensor) *tensor.Tensor {
	if in == nil || out == nil || in == out {
		return out
	}
	ax := in.BorrowLogicalAxes() // WithLogicalAxes copies it
	if ax == nil || out.Rank() != in.Rank() || out.BorrowLogicalAxes() != nil {
		return out
	}
	return tensor.WithLogicalAxes(out, ax...)
}

// Map returns a tree of the same structure as tree with every non-nil leaf
// x replaced by f(x). Nil positions stay nil and f is not called for them;
// f returning nil empties the position. If x has logical axes (see
// tensor.WithLogicalAxes) and f's result has none and the same rank, the
// result gets x's axes. The spine of tree is copied, so tree is not
// changed; static data is shared.
func Map[T any](tree T, f func(*tensor.Tensor) *tensor.Tensor) T {
	p, fl := flattenT(&tree, false)
	for i, x := range fl.pos {
		if x != nil {
			fl.pos[i] = keepAxes(x, f(x))
		}
	}
	out := rebuildT("pytree.Map", p, tree, fl, fl.pos)
	fl.release()
	return out
}

// MapWithPath is Map with the path of each leaf passed to f.
func MapWithPath[T any](tree T, f func(Path, *tensor.Tensor) *tensor.Tensor) T {
	p, fl := flattenT(&tree, true)
	for i, x := range fl.pos {
		if x != nil {
			fl.pos[i] = keepAxes(x, f(fl.ppos[i], x))
		}
	}
	return rebuildT("pytree.MapWithPath", p, tree, fl, fl.pos)
}

// MapN maps f over the leaves of several trees of the same structure at
// once (parameters, gradients and optimizer moments, say): the result has
// the structure of trees[0], and at each position the tensor f(xs), where
// xs[i] is the tensor of trees[i] at that position. Trees may differ in
// which positions are nil; nil tensors are passed as nil, and positions
// nil in every tree stay nil without calling f. xs is only valid during
// the call. Logical axes are kept as in Map, taken from the first non-nil
// input. MapN panics, printing both structures and naming the first
// differing path, if a tree's structure differs from the first's.
func MapN[T any](f func(xs []*tensor.Tensor) *tensor.Tensor, trees ...T) T {
	if len(trees) == 0 {
		panic("pytree.MapN: no trees")
	}
	var one [1]*tensor.Tensor
	return mapNOut("pytree.MapN", 1, func(xs []*tensor.Tensor) []*tensor.Tensor {
		one[0] = f(xs)
		return one[:]
	}, trees)[0]
}

// MapNOut is MapN for a function with several results, as an optimizer
// step computes new parameters and moments from parameters, gradients
// and moments (optax's tree map to tuples then tree transpose): f returns
// nOut tensors for each position (nil where a result has none), and
// MapNOut returns nOut trees of the structure of trees[0], tree k holding
// the k-th results. Each tree is walked once. Nil positions, logical axes
// and mismatched structures are as in MapN; f's result slice is only read
// during the call.
func MapNOut[T any](nOut int, f func(xs []*tensor.Tensor) []*tensor.Tensor, trees ...T) []T {
	if len(trees) == 0 {
		panic("pytree.MapNOut: no trees")
	}
	return mapNOut("pytree.MapNOut", nOut, f, trees)
}

// MapNOutAll is MapNOut with f called once for every position at once:
// pos[i][j] is tree j's tensor at the i-th position that is not nil in
// every tree, and f returns the nOut results of each such position
// (len(pos) slices, index for index). An update that groups positions (an
// optimizer's step that updates runs of parameters in one parallel
// region) sees every operand before it computes a result, and walks each
// tree once rather than once for the operands and again for the results.
// Nil positions, logical axes and mismatched structures are as in MapN;
// pos and f's results are only read during the call.
func MapNOutAll[T any](nOut int, f func(pos [][]*tensor.Tensor) [][]*tensor.Tensor, trees ...T) []T {
	const op = "pytree.MapNOutAll"
	if len(trees) == 0 {
		panic(op + ": no trees")
	}
	return mapCore(op, nOut, trees, func(recs []*flattener, res []*tensor.Tensor) {
		npos, w := len(recs[0].pos), len(recs)
		flat := make([]*tensor.Tensor, 0, npos*w)
		pos := make([][]*tensor.Tensor, 0, npos)
		at := make([]int, 0, npos) // the position of each of pos
		for i := range npos {
			for _, r := range recs {
				flat = append(flat, r.pos[i])
			}
			xs := flat[len(flat)-w : len(flat) : len(flat)]
			if firstOf(xs) == nil {
				flat = flat[:len(flat)-w]
				continue
			}
			pos, at = append(pos, xs), append(at, i)
		}
		rs := f(pos)
		if len(rs) != len(pos) {
			panic(fmt.Sprintf("%s: f returned results for %d positions, want %d", op, len(rs), len(pos)))
		}
		for j, r := range rs {
			setResults(op, res, npos, at[j], firstOf(pos[j]), r)
		}
	})
}

// mapNOut is MapNOut for the op named op (MapN and MapNOut name
// themselves in panics).
func mapNOut[T any](op string, nOut int, f func(xs []*tensor.Tensor) []*tensor.Tensor, trees []T) []T {
	return mapCore(op, nOut, trees, func(recs []*flattener, res []*tensor.Tensor) {
		npos := len(recs[0].pos)
		xs := make([]*tensor.Tensor, len(recs))
		for i := range npos {
			for j, r := range recs {
				xs[j] = r.pos[i]
			}
			if first := firstOf(xs); first != nil {
				setResults(op, res, npos, i, first, f(xs))
			}
		}
	})
}

// mapCore flattens trees, has fill set the results (result k of
// position i at k*npos+i) from the walks, and returns the nOut trees of
// the structure of trees[0] holding them.
func mapCore[T any](op string, nOut int, trees []T, fill func(recs []*flattener, res []*tensor.Tensor)) []T {
	p, recs := flattenAll(op, trees)
	npos := len(recs[0].pos)
	res := make([]*tensor.Tensor, nOut*npos)
	fill(recs, res)
	out := make([]T, nOut)
	for k := range out {
		out[k] = rebuildT(op, p, trees[0], recs[0], res[k*npos:(k+1)*npos])
	}
	releaseAll(recs)
	return out
}

// firstOf returns the first non-nil tensor of xs, or nil.
func firstOf(xs []*tensor.Tensor) *tensor.Tensor {
	for _, x := range xs {
		if x != nil {
			return x
		}
	}
	return nil
}

// setResults puts the results r of position i (whose first operand is
// first, for its logical axes) into res, checking their number.
func setResults(op string, res []*tensor.Tensor, npos, i int, first *tensor.Tensor, r []*tensor.Tensor) {
	if len(r)*npos != len(res) {
		panic(fmt.Sprintf("%s: f returned %d tensors, want %d", op, len(r), len(res)/max(npos, 1)))
	}
	for k, y := range r {
		res[k*npos+i] = keepAxes(first, y)
	}
}

// flattenAll flattens trees and panics if their structures differ.
func flattenAll[T any](op string, trees []T) (*plan, []*flattener) {
	recs := make([]*flattener, len(trees))
	var p *plan
	for i := range trees {
		p, recs[i] = flattenT(&trees[i], false)
	}
	for i := 1; i < len(trees); i++ {
		if !sameShape(&recs[0].record, &recs[i].record) {
			mismatch(op, trees[0], trees[i], i)
		}
	}
	return p, recs
}

// releaseAll returns the walks of flattenAll to their pool (see
// flattener.release).
func releaseAll(recs []*flattener) {
	for _, f := range recs {
		f.release()
	}
}

// A StructureError is the value the functions that walk several trees at
// once (MapN, MapNOut, Combine, ...) panic with when tree Tree does not
// have the structure of tree 0. Its Error names the function, the first
// difference and both structures; a caller that recovers it can say the
// same in its own terms (package optim names the trees "gradients",
// "parameters").
type StructureError struct {
	Op         string    // the function: "pytree.MapN"
	Tree       int       // the index of the tree that differs from tree 0
	Where      string    // the first difference: "MLP.Layers: length 2 vs 1"
	Structures [2]string // the structures of tree 0 and of tree Tree, shortened
}

// Error returns "<Op>: tree <Tree> does not have the structure of tree 0:
// <Where>", then the two structures on lines of their own.
func (e *StructureError) Error() string {
	return fmt.Sprintf("%s: tree %d does not have the structure of tree 0: %s\n  tree 0: %s\n  tree %d: %s",
		e.Op, e.Tree, e.Where, e.Structures[0], e.Tree, e.Structures[1])
}

// mismatch panics with a *StructureError describing how tree i differs
// from tree 0.
func mismatch(op string, a, b any, i int) {
	d := &differ{shapeOnly: true, root: rootName(reflect.TypeOf(a))}
	e := d.diffValues(reflect.ValueOf(&a).Elem(), reflect.ValueOf(&b).Elem(), anyPlan)
	where := "somewhere"
	if e != nil {
		where = e.Error()
	}
	panic(&StructureError{Op: op, Tree: i, Where: trimPrefix(where),
		Structures: [2]string{truncate(structString(a)), truncate(structString(b))}})
}

func trimPrefix(s string) string {
	const p = "pytree: "
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// truncate shortens long structure strings in messages.
func truncate(s string) string {
	const max = 1000
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// Predicate selects leaves by path and value. Predicates are only called
// for non-nil tensors.
type Predicate func(p Path, x *tensor.Tensor) bool

// IsTensor is true for every leaf: Partition(tree, IsTensor) puts every
// tensor on the left.
func IsTensor(_ Path, x *tensor.Tensor) bool { return x != nil }

// IsInexact is true for floating-point tensors, the ones that carry
// gradients (Equinox's is_inexact_array).
func IsInexact(_ Path, x *tensor.Tensor) bool { return x != nil && x.DType().IsFloat() }

// And is true when every predicate is (true for none).
func And(preds ...Predicate) Predicate {
	return func(p Path, x *tensor.Tensor) bool {
		for _, f := range preds {
			if !f(p, x) {
				return false
			}
		}
		return true
	}
}

// Or is true when some predicate is (false for none).
func Or(preds ...Predicate) Predicate {
	return func(p Path, x *tensor.Tensor) bool {
		for _, f := range preds {
			if f(p, x) {
				return true
			}
		}
		return false
	}
}

// Not negates a predicate.
func Not(pred Predicate) Predicate {
	return func(p Path, x *tensor.Tensor) bool { return !pred(p, x) }
}

// Filter returns a copy of tree keeping the leaves for which keep is
// true; the others become nil (Equinox's eqx.filter).
func Filter[T any](tree T, keep Predicate) T {
	p, fl := flattenT(&tree, true)
	for i, x := range fl.pos {
		if x != nil && !keep(fl.ppos[i], x) {
			fl.pos[i] = nil
		}
	}
	return rebuildT("pytree.Filter", p, tree, fl, fl.pos)
}

// Partition splits tree into two trees of the same type and structure
// (Equinox's eqx.partition): the first holds the leaves for which pred is
// true, the second the others, each nil where the leaf went to the other
// side. Static data is shared by both. Combine(a, b) undoes it.
//
//	params, rest := pytree.Partition(model, pytree.IsInexact)
//	// ... differentiate or update params ...
//	model = pytree.Combine(params, rest)
func Partition[T any](tree T, pred Predicate) (T, T) {
	p, fl := flattenT(&tree, true)
	left := make([]*tensor.Tensor, len(fl.pos))
	right := make([]*tensor.Tensor, len(fl.pos))
	for i, x := range fl.pos {
		if x == nil {
			continue
		}
		if pred(fl.ppos[i], x) {
			left[i] = x
		} else {
			right[i] = x
		}
	}
	return rebuildT("pytree.Partition", p, tree, fl, left), rebuildT("pytree.Partition", p, tree, fl, right)
}

// Combine merges trees of the same structure, taking at each position the
// first non-nil tensor (Equinox's eqx.combine). Static data comes from
// trees[0]. It panics if the structures differ, naming the first
// difference.
func Combine[T any](trees ...T) T {
	if len(trees) == 0 {
		panic("pytree.Combine: no trees")
	}
	p, recs := flattenAll("pytree.Combine", trees)
	out := make([]*tensor.Tensor, len(recs[0].pos))
	for i := range out {
		for _, r := range recs {
			if x := r.pos[i]; x != nil {
				out[i] = x
				break
			}
		}
	}
	c := rebuildT("pytree.Combine", p, trees[0], recs[0], out)
	releaseAll(recs)
	return c
}
