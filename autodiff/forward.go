package autodiff

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// JVP evaluates f at primals and returns its result and the
// Jacobian-vector product along tangents: the derivative of f at primals
// in the direction tangents (jax.jvp). tangents is a tree like primals
// with a tangent of its leaf's shape and dtype for each float leaf (nil
// for a zero tangent, and for integer leaves). The tangent of the result
// is a tree like it: zeros for float leaves that do not depend on the
// tangents, nil for integer leaves.
//
// Forward mode costs about one more evaluation of f, whatever the size of
// the result, and works through every op (each has a JVP rule), Vmap,
// Checkpoint and custom rules. JVP of a gradient gives Hessian-vector
// products:
//
//	hvp := func(x, v *tensor.Tensor) *tensor.Tensor {
//		_, t := autodiff.JVP(autodiff.Grad(loss), x, v)
//		return t
//	}
func JVP[X, Y any](f func(X) Y, primals, tangents X) (Y, Y) {
	jt := tensor.NewJVPTrace()
	y := f(dualTree(jt, primals, tangents))
	return primalTree(jt, y), tangentTree(jt, y)
}

// dualTree returns primals with each leaf carrying its tangent inside jt.
func dualTree[X any](jt *tensor.JVPTrace, primals, tangents X) X {
	return pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		p, t := xs[0], xs[1]
		switch {
		case p == nil && t != nil:
			panic(fmt.Sprintf("autodiff.JVP: tangent %v for an empty position of the primals", t))
		case p == nil:
			return nil
		case t != nil && p.DType().IsFloat() && (t.DType() != p.DType() || !slices.Equal(t.Shape(), p.Shape())):
			panic(fmt.Sprintf("autodiff.JVP: tangent %v for primal %v: want the primal's shape and dtype", t, p))
		}
		return jt.Dual(p, t)
	}, primals, tangents)
}

// primalTree returns y's leaves' primal values inside jt.
func primalTree[Y any](jt *tensor.JVPTrace, y Y) Y {
	return pytree.Map(y, jt.Primal)
}

// tangentTree returns the tangents of y's leaves inside jt (nil for
// integer leaves).
func tangentTree[Y any](jt *tensor.JVPTrace, y Y) Y {
	return pytree.Map(y, jt.Tangent)
}

// Linearize evaluates f at primals and returns its result and the linear
// function mapping tangents to the Jacobian-vector product at primals
// (jax.linearize): JVP along any number of tangents without evaluating f
// again. It keeps f's graph (as VJP does) and computes each product as
// the transpose of the vector-Jacobian product, which is linear in the
// cotangent: about two backward passes per call.
func Linearize[X, Y any](f func(X) Y, primals X) (Y, func(tangents X) Y) {
	y, back := VJP(f, primals)
	ys, yst := pytree.Flatten(y)
	fjvp := func(tangents X) Y {
		ts := alignLeaves(primals, tangents)
		tr := tensor.NewTrace()
		us := make([]*tensor.Tensor, len(ys))
		var wrt []*tensor.Tensor
		for i, v := range ys {
			us[i] = tensor.ZerosLike(v)
			if v.DType().IsFloat() {
				us[i] = tr.Leaf(us[i])
				wrt = append(wrt, us[i])
			}
		}
		gs := alignLeaves(primals, back(pytree.Unflatten[Y](yst, us)))
		var outs, seeds []*tensor.Tensor
		for i, g := range gs {
			if g != nil && ts[i] != nil && g.TracedBy(tr) {
				outs, seeds = append(outs, g), append(seeds, ts[i])
			}
		}
		res := make([]*tensor.Tensor, len(ys))
		var cots []*tensor.Tensor
		if len(outs) > 0 {
			cots = tensor.Backward(tr, outs, seeds, wrt, false)
		}
		j := 0
		for i, v := range ys {
			if !v.DType().IsFloat() {
				continue
			}
			if cots != nil {
				res[i] = cots[j]
			} else {
				res[i] = tensor.ZerosLike(v)
			}
			j++
		}
		return pytree.Unflatten[Y](yst, res)
	}
	return y, fjvp
}

// Jacfwd returns a function computing the Jacobian of f by forward mode
// (jax.jacfwd): one JVP per input element, all at once under Vmap. The
// Jacobian of a function of trees is a block per pair of leaves: J[i] is a
// tree like the argument whose leaf j holds the derivative of result leaf
// i (in the result's flatten order, pytree.Leaves) with respect to
// argument leaf j, of shape result_i.shape + argument_j.shape (nil for
// integer leaves). For f from a tensor to a tensor, J[0] is the Jacobian
// matrix (tensor): Jacfwd(f)(x)[0] has shape f(x).shape + x.shape.
//
// Jacfwd suits functions with fewer inputs than outputs; Jacrev the
// reverse. Both give the same blocks.
func Jacfwd[X, Y any](f func(X) Y) func(X) []X {
	return func(x X) []X {
		leaves, st := pytree.Flatten(x)
		sizes, n := floatSizes(leaves)
		bt := tensor.NewBatchTrace(n)
		jt := tensor.NewJVPTrace()
		duals := make([]*tensor.Tensor, len(leaves))
		off := 0
		for j, l := range leaves {
			duals[j] = l
			if sizes[j] < 0 {
				continue
			}
			// Row k of the basis is unit vector k; leaf j gets its columns.
			basis := tensor.Reshape(tensor.SliceAxis(eye(n, l.DType()), 1, off, off+sizes[j]), append([]int{n}, l.Shape()...)...)
			duals[j] = jt.Dual(l, bt.Batched(basis, 0))
			off += sizes[j]
		}
		ys, _ := pytree.Flatten(f(pytree.Unflatten[X](st, duals)))
		out := make([]X, len(ys))
		for i, y := range ys {
			t := jt.Tangent(y)
			blocks := make([]*tensor.Tensor, len(leaves))
			if t != nil {
				// f32[out..., n]: column k is the tangent along basis k.
				jm := bt.Unbatched(t, -1)
				off := 0
				for j, l := range leaves {
					if sizes[j] < 0 {
						continue
					}
					blocks[j] = tensor.Reshape(tensor.SliceAxis(jm, -1, off, off+sizes[j]), slices.Concat(y.Shape(), l.Shape())...)
					off += sizes[j]
				}
			}
			out[i] = pytree.Unflatten[X](st, blocks)
		}
		return out
	}
}

// Jacrev returns a function computing the Jacobian of f by reverse mode
// (jax.jacrev): one VJP per result element, all at once under Vmap. The
// blocks are laid out as Jacfwd's.
func Jacrev[X, Y any](f func(X) Y) func(X) []X {
	return func(x X) []X {
		tr := tensor.NewTrace()
		mt, leaves, traced, st := trace(tr, x)
		ys, _ := pytree.Flatten(f(mt))
		sizes, m := floatSizes(ys)
		bt := tensor.NewBatchTrace(m)
		var outs, cots []*tensor.Tensor
		off := 0
		for i, y := range ys {
			if sizes[i] < 0 || !y.TracedBy(tr) {
				off += max(sizes[i], 0)
				continue
			}
			basis := tensor.Reshape(tensor.SliceAxis(eye(m, y.DType()), 1, off, off+sizes[i]), append([]int{m}, y.Shape()...)...)
			outs, cots = append(outs, y), append(cots, bt.Batched(basis, 0))
			off += sizes[i]
		}
		var wrt []*tensor.Tensor
		for j, l := range leaves {
			if l.DType().IsFloat() {
				wrt = append(wrt, traced[j])
			}
		}
		gs := tensor.Backward(tr, outs, cots, wrt, false)
		rows := make([]*tensor.Tensor, len(leaves)) // f32[m, x_j...]
		k := 0
		for j, l := range leaves {
			if l.DType().IsFloat() {
				rows[j] = bt.Unbatched(gs[k], 0)
				k++
			}
		}
		out := make([]X, len(ys))
		off = 0
		for i, y := range ys {
			blocks := make([]*tensor.Tensor, len(leaves))
			if sizes[i] >= 0 {
				for j, r := range rows {
					if r != nil {
						blocks[j] = tensor.Reshape(tensor.SliceAxis(r, 0, off, off+sizes[i]), slices.Concat(y.Shape(), leaves[j].Shape())...)
					}
				}
				off += sizes[i]
			}
			out[i] = pytree.Unflatten[X](st, blocks)
		}
		return out
	}
}

// Hessian returns a function computing the Hessian of the scalar f
// (jax.hessian): forward mode over reverse mode, Jacfwd of Grad. H[i] is
// a tree like the argument whose leaf j is the second derivative with
// respect to leaves i and j, of shape x_i.shape + x_j.shape; for f of one
// tensor, H[0] is the Hessian matrix of shape x.shape + x.shape.
func Hessian[X any](f func(X) *tensor.Tensor) func(X) []X {
	return Jacfwd(Grad(f))
}

// floatSizes returns the element count of each float leaf (-1 for the
// others) and their total.
func floatSizes(leaves []*tensor.Tensor) ([]int, int) {
	sizes := make([]int, len(leaves))
	n := 0
	for i, l := range leaves {
		sizes[i] = -1
		if l.DType().IsFloat() {
			sizes[i] = l.Size()
			n += sizes[i]
		}
	}
	return sizes, n
}

// eye returns the n×n identity matrix of dtype dt.
func eye(n int, dt tensor.DType) *tensor.Tensor {
	d := make([]float32, n*n)
	for i := range n {
		d[i*n+i] = 1
	}
	e := tensor.FromFloat32(d, n, n)
	if dt != tensor.Float32 {
		e = tensor.Convert(e, dt)
	}
	return e
}
