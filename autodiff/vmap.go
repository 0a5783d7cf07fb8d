package autodiff

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Axis is the axis along which Vmap maps a tensor leaf (negative counts
// from the end of the leaf's shape), or None.
type Axis int

// None is the Axis of a leaf Vmap does not map: every example sees the
// same value (JAX's in_axes=None). As an out axis it says that a result
// is the same for every example, which Vmap checks.
const None Axis = math.MinInt32

// AxisSpec says along which axis Vmap maps each tensor leaf of a tree: an
// Axis (the same for every leaf) or an AxesFunc (chosen per leaf, the
// form of JAX's in_axes prefix trees).
type AxisSpec interface {
	axisOf(p pytree.Path, x *tensor.Tensor) Axis
}

func (a Axis) axisOf(pytree.Path, *tensor.Tensor) Axis { return a }

// AxesFunc chooses the axis of each leaf from its path in the tree and its
// value, returning None for a leaf that is not mapped:
//
//	// Map the batch's tensors over axis 0, broadcast its Mask.
//	autodiff.AxesFunc(func(p pytree.Path, _ *tensor.Tensor) autodiff.Axis {
//		if p.String() == "Mask" {
//			return autodiff.None
//		}
//		return 0
//	})
type AxesFunc func(p pytree.Path, x *tensor.Tensor) Axis

func (f AxesFunc) axisOf(p pytree.Path, x *tensor.Tensor) Axis { return f(p, x) }

// VmapOption changes how Vmap maps a function.
type VmapOption func(*vmapSettings)

type vmapSettings struct {
	in       []AxisSpec
	out      AxisSpec
	size     int
	strict   bool
	counts   map[string]int
	hasSize  bool
	hasIn    bool
	function string
}

// InAxes gives the axis spec of each argument of the function, in order
// (JAX's in_axes): Axis(0) maps every tensor leaf of an argument over its
// first axis, None broadcasts the whole argument, an AxesFunc decides
// leaf by leaf. The default maps every tensor leaf of every argument over
// axis 0, as eqx.filter_vmap does for arrays.
func InAxes(specs ...AxisSpec) VmapOption {
	return func(s *vmapSettings) { s.in, s.hasIn = specs, true }
}

// OutAxes gives the axis at which the batch dimension appears in each
// tensor leaf of the result (JAX's out_axes; default 0). None is allowed
// for results that do not depend on the batch.
func OutAxes(spec AxisSpec) VmapOption {
	return func(s *vmapSettings) { s.out = spec }
}

// AxisSize sets the number of examples (JAX's axis_size): required when no
// argument is mapped (a function of broadcast values only, say one that
// splits a key), checked against the mapped arguments otherwise.
func AxisSize(n int) VmapOption {
	return func(s *vmapSettings) { s.size, s.hasSize = n, true }
}

// Strict makes Vmap panic, naming the op, when an op without a batching
// rule would be computed example by example (every op of package tensor
// has a rule; an op of another package may not).
func Strict() VmapOption { return func(s *vmapSettings) { s.strict = true } }

// Fallbacks adds to counts, after each call of the vmapped function, how
// many times each op without a batching rule was computed example by
// example, by op name.
func Fallbacks(counts map[string]int) VmapOption {
	return func(s *vmapSettings) { s.counts = counts }
}

func vmapOptions(function string, nargs int, opts []VmapOption) vmapSettings {
	s := vmapSettings{out: Axis(0), function: function}
	for _, o := range opts {
		o(&s)
	}
	if s.hasIn && len(s.in) != nargs {
		panic(fmt.Sprintf("%s: InAxes gives %d axis specs for a function of %d arguments", function, len(s.in), nargs))
	}
	if !s.hasIn {
		s.in = make([]AxisSpec, nargs)
		for i := range s.in {
			s.in[i] = Axis(0)
		}
	}
	for i, sp := range s.in {
		if sp == nil {
			panic(fmt.Sprintf("%s: InAxes: axis spec of argument %d is nil (use autodiff.None)", function, i))
		}
	}
	if s.out == nil {
		panic(fmt.Sprintf("%s: OutAxes: nil axis spec (use autodiff.None)", function))
	}
	if s.hasSize && s.size < 0 {
		panic(fmt.Sprintf("%s: AxisSize(%d): negative", function, s.size))
	}
	return s
}

// Vmap returns f vectorised over a batch: called with arguments whose
// mapped tensor leaves have a batch axis, it returns f's result for every
// example, stacked along the out axis, as if f had been called once per
// example (jax.vmap, Equinox's filter_vmap). f is written for one example
// and sees one example's shapes; it runs once, on whole batches, every op
// through its batching rule: a loop over examples never runs.
//
//	// Per-example gradients of a model on a batch (DP-SGD's first step).
//	grad := autodiff.GradWith(loss)
//	perExample := autodiff.Vmap2(grad, autodiff.InAxes(autodiff.None, autodiff.Axis(0)))(model, batch)
//
// The arguments and the result are pytrees (see package pytree). Which
// leaves are mapped, and where the batch goes in the result, is set by
// InAxes and OutAxes; non-tensor data is passed through. Inside f a mapped
// leaf is a value that stands for the batch: ops on it work, reading its
// data (Float32s, Item) panics. Random keys map too: a stack of keys
// (tensor.StackKeys) gives each example its own key, and splitting it
// inside f splits every example's key.
//
// Vmap composes with every transform: Vmap of Grad gives per-example
// gradients, Grad of Vmap differentiates through the batch, Vmaps nest
// (map over two axes), Checkpoint inside Vmap recomputes batches, and the
// forward-mode transforms (JVP, Jacfwd, Hessian) are built on it. The
// mapped leaves may be placed tensors (shard.Put: the batches are placed
// and every op propagates), or blocks inside shard.Map.
func Vmap[X, Y any](f func(X) Y, opts ...VmapOption) func(X) Y {
	o := vmapOptions("autodiff.Vmap", 1, opts)
	return func(x X) Y {
		v := &vmapCall{s: o}
		b := batchTree(v, 0, x)
		v.trace()
		return finish(v, f(b))
	}
}

// Vmap2 is Vmap for a function of two arguments, each with its axis spec
// (InAxes takes two).
func Vmap2[X1, X2, Y any](f func(X1, X2) Y, opts ...VmapOption) func(X1, X2) Y {
	o := vmapOptions("autodiff.Vmap2", 2, opts)
	return func(x1 X1, x2 X2) Y {
		v := &vmapCall{s: o}
		b1 := batchTree(v, 0, x1)
		b2 := batchTree(v, 1, x2)
		v.trace()
		return finish(v, f(b1, b2))
	}
}

// Vmap3 is Vmap for a function of three arguments.
func Vmap3[X1, X2, X3, Y any](f func(X1, X2, X3) Y, opts ...VmapOption) func(X1, X2, X3) Y {
	o := vmapOptions("autodiff.Vmap3", 3, opts)
	return func(x1 X1, x2 X2, x3 X3) Y {
		v := &vmapCall{s: o}
		b1 := batchTree(v, 0, x1)
		b2 := batchTree(v, 1, x2)
		b3 := batchTree(v, 2, x3)
		v.trace()
		return finish(v, f(b1, b2, b3))
	}
}

// vmapCall is one call of a vmapped function. Its BatchTrace is made at
// the first mapped leaf, which gives the batch size (or, with no mapped
// leaf, by trace from AxisSize), so the arguments are walked once.
type vmapCall struct {
	s  vmapSettings
	bt *tensor.BatchTrace
	// The first mapped leaf: leaf k of argument arg, whose path pathOf
	// gives (for a panic's message).
	first struct {
		arg, k int
		leaf   *tensor.Tensor
		pathOf func(int) pytree.Path
	}
}

// batchOf returns the BatchTrace of the call for leaf x, leaf k of
// argument i, mapped along axis ax: it is made at the first mapped leaf,
// whose size the others must have.
func (v *vmapCall) batchOf(i int, pathOf func(int) pytree.Path, k int, x *tensor.Tensor, ax int) *tensor.BatchTrace {
	s, n := &v.s, x.Dim(ax)
	f := &v.first
	switch {
	case v.bt == nil && s.hasSize && s.size != n:
		panic(fmt.Sprintf("%s: AxisSize(%d) but %s has %d examples", s.function, s.size, argLeaf(i, pathOf(k), x), n))
	case v.bt == nil:
		v.bt = v.newTrace(n)
		f.arg, f.k, f.leaf, f.pathOf = i, k, x, pathOf
	case n != v.bt.Size():
		panic(fmt.Sprintf("%s: %s has %d examples along its mapped axis but %s has %d", s.function,
			argLeaf(i, pathOf(k), x), n, argLeaf(f.arg, f.pathOf(f.k), f.leaf), v.bt.Size()))
	}
	return v.bt
}

// trace returns the BatchTrace of the call once the arguments are
// batched: the one of their mapped leaves, or one of AxisSize examples.
func (v *vmapCall) trace() *tensor.BatchTrace {
	if v.bt == nil {
		if !v.s.hasSize {
			panic(fmt.Sprintf("%s: no argument leaf is mapped: give the number of examples with AxisSize", v.s.function))
		}
		v.bt = v.newTrace(v.s.size)
	}
	return v.bt
}

func (v *vmapCall) newTrace(n int) *tensor.BatchTrace {
	bt := tensor.NewBatchTrace(n)
	if v.s.strict {
		bt.Strict()
	}
	return bt
}

// unmapped reports whether spec maps no leaf: the argument is passed
// through as it is.
func unmapped(spec AxisSpec) bool {
	a, ok := spec.(Axis)
	return ok && a == None
}

// mapLeaves is pytree.MapWithPath, without the paths when spec is an
// Axis (the same for every leaf): f receives the index k of leaf x and
// pathOf, which returns the path of leaf k.
func mapLeaves[T any](spec AxisSpec, tree T, f func(pathOf func(int) pytree.Path, k int, x *tensor.Tensor) *tensor.Tensor) T {
	var paths []pytree.Path
	pathOf := func(k int) pytree.Path {
		if paths == nil {
			paths, _ = pytree.LeavesWithPath(tree)
		}
		return paths[k]
	}
	k := -1
	if _, ok := spec.(Axis); ok {
		return pytree.Map(tree, func(x *tensor.Tensor) *tensor.Tensor {
			k++
			return f(pathOf, k, x)
		})
	}
	return pytree.MapWithPath(tree, func(p pytree.Path, x *tensor.Tensor) *tensor.Tensor {
		k++
		paths = append(paths, p)
		return f(pathOf, k, x)
	})
}

// axis returns the axis of leaf x (leaf k of argument i, or of the result
// if in is false, at path pathOf(k)), normalised, and whether it is
// mapped.
func (s vmapSettings) axis(spec AxisSpec, i int, pathOf func(int) pytree.Path, k int, x *tensor.Tensor, in bool) (int, bool) {
	path := func() pytree.Path { return pathOf(k) }
	var a Axis
	if ax, ok := spec.(Axis); ok {
		a = ax
	} else {
		a = spec.axisOf(path(), x)
	}
	if a == None {
		return 0, false
	}
	r := x.Rank()
	if !in {
		r++ // an out axis indexes the result, which has the batch dimension
	}
	ax := int(a)
	if ax < 0 {
		ax += r
	}
	if ax < 0 || ax >= r {
		what := argLeaf(i, path(), x)
		if !in {
			what = fmt.Sprintf("result %s%v", pathPrefix(path()), x)
		}
		panic(fmt.Sprintf("%s: %s: axis %d out of range for rank %d", s.function, what, int(a), r))
	}
	return ax, true
}

// argLeaf names leaf x of argument i at path p, for messages.
func argLeaf(i int, p pytree.Path, x *tensor.Tensor) string {
	return fmt.Sprintf("argument %d %s%v", i, pathPrefix(p), x)
}

func pathPrefix(p pytree.Path) string {
	if len(p) == 0 {
		return ""
	}
	return p.String() + " "
}

// batchTree returns argument i with its mapped leaves replaced by the
// values that stand for their batches.
func batchTree[T any](v *vmapCall, i int, x T) T {
	if unmapped(v.s.in[i]) {
		return x // nothing to replace: no walk
	}
	return mapLeaves(v.s.in[i], x, func(pathOf func(int) pytree.Path, k int, leaf *tensor.Tensor) *tensor.Tensor {
		ax, mapped := v.s.axis(v.s.in[i], i, pathOf, k, leaf, true)
		if !mapped {
			return leaf
		}
		return v.batchOf(i, pathOf, k, leaf, ax).Batched(leaf, ax)
	})
}

// finish returns the batches the result y of the function stands for,
// each with the batch dimension at its out axis, and reports the call's
// fallbacks.
func finish[Y any](v *vmapCall, y Y) Y {
	defer func() {
		if v.s.counts != nil {
			for k, n := range v.bt.Fallbacks() {
				v.s.counts[k] += n
			}
		}
	}()
	return mapLeaves(v.s.out, y, func(pathOf func(int) pytree.Path, k int, leaf *tensor.Tensor) *tensor.Tensor {
		ax, mapped := v.s.axis(v.s.out, 0, pathOf, k, leaf, false)
		if !mapped {
			if v.bt.Batches(leaf) {
				panic(fmt.Sprintf("%s: result %s%v depends on the batch but its out axis is None", v.s.function, pathPrefix(pathOf(k)), leaf))
			}
			return leaf
		}
		return v.bt.Unbatched(leaf, ax)
	})
}
