package optim

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// gradFits panics unless the gradient g has the dtype and shape of ref:
// the parameter g is for, or, for an update that is given no parameters,
// a state leaf Init made in the parameter's image (a moment, a trace).
// The panic names op, the parameter's path (ref's in tree, walked only
// then) and both operands: "optim.Adam: gradient of Layers[1].W is
// f32[3,4], parameter f32[4,3]", where the kernel behind op would have
// named itself, or broadcast the two. The check is two comparisons per
// leaf and allocates nothing.
func gradFits(op string, g, ref *tensor.Tensor, tree any) {
	if g.DType() == ref.DType() && slices.Equal(g.BorrowShape(), ref.BorrowShape()) {
		return
	}
	panic(fmt.Sprintf("%s: %s is %v, parameter %v", op, leafOf("gradient", tree, ref), g, ref))
}

// gradsFit panics unless grads has the structure of params and each
// gradient the dtype and shape of its parameter, naming op: a wrapper
// (ScheduleFree, Lookahead) checks there before its inner transform runs,
// whose panic would name the inner transform alone or, where the inner
// transform keeps no state to compare with (plain SGD), come from the
// wrapper's own arithmetic (tensor.Add), naming no optimizer.
func gradsFit(op string, grads, params any) {
	defer func() { sameStructure(op, recover(), gradParamRoles) }()
	pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		if g, p := xs[0], xs[1]; g != nil && p != nil {
			gradFits(op, g, p, params)
		}
		return nil
	}, grads, params)
}

// leafOf returns what followed by " of " and the path of x in tree, or
// what alone when x is the root (or not found: a tensor at two positions
// is found at its first).
func leafOf(what string, tree any, x *tensor.Tensor) string {
	paths, leaves := pytree.LeavesWithPath(tree)
	for i, l := range leaves {
		if l == x {
			if s := paths[i].String(); s != "" {
				return what + " of " + s
			}
			break
		}
	}
	return what
}

// sameStructure is called by a deferred function of op with the value r
// recover() returned: it re-panics pytree's report of trees of different
// structures (*pytree.StructureError) as op's, naming the trees by
// role(i), what tree i holds ("parameters", "gradients", ...), and any
// other panic as it was.
func sameStructure(op string, r any, role func(i int) string) {
	if r == nil {
		return
	}
	e, ok := r.(*pytree.StructureError)
	if !ok {
		panic(r)
	}
	panic(fmt.Sprintf("%s: %s and %s differ in structure: %s (%s vs %s)\n  %s: %s\n  %s: %s",
		op, role(0), role(e.Tree), e.Where, role(0), role(e.Tree),
		role(0), e.Structures[0], role(e.Tree), e.Structures[1]))
}

// gradParamRoles names the trees of a walk over gradients and parameters.
var gradParamRoles = roles("gradients", "parameters")

// roles returns a role function for sameStructure over trees holding
// names[i] (and "tree i" past the end).
func roles(names ...string) func(int) string {
	return func(i int) string {
		if i < len(names) {
			return names[i]
		}
		return "tree " + strconv.Itoa(i)
	}
}
