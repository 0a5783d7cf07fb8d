package autodiff

import (
	"fmt"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// CustomVJP returns a differentiable function with a hand-written
// vector-Jacobian product (jax.custom_vjp, eqx.filter_custom_vjp). X, Y
// and R are pytrees: fwd computes the result from the arguments and the
// residuals bwd will need; bwd maps the residuals and the result's
// cotangent (a tree like the result, zeros where nothing flows back) to
// the arguments' cotangent, a tree like the arguments with nil for leaves
// that get none (integer ones). name labels the op in residual reports
// and remat policies.
//
//	// Gradient clipping in the backward pass only.
//	clip := autodiff.CustomVJP("clip_grad",
//		func(x *tensor.Tensor) (*tensor.Tensor, struct{}) { return x, struct{}{} },
//		func(_ struct{}, g *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(g, -1, 1) })
//
// fwd and bwd must be built from ops. Under Vmap both run on whole
// batches; forward mode (JVP, Jacfwd) uses the transpose of bwd, so the
// custom rule is the function's derivative there too; gradients of
// gradients differentiate bwd.
func CustomVJP[X, Y, R any](name string, fwd func(X) (Y, R), bwd func(res R, ct Y) X) func(X) Y {
	return func(x X) Y {
		leaves, st := pytree.Flatten(x)
		c := &customCall{name: name}
		c.fwd = func(in []*tensor.Tensor) ([]*tensor.Tensor, []*tensor.Tensor) {
			y, r := fwd(pytree.Unflatten[X](st, in))
			var outs, res []*tensor.Tensor
			outs, c.yst = pytree.Flatten(y)
			res, c.rst = pytree.Flatten(r)
			return outs, res
		}
		c.bwd = func(res, gs []*tensor.Tensor) []*tensor.Tensor {
			ct := bwd(pytree.Unflatten[R](c.rst, res), pytree.Unflatten[Y](c.yst, gs))
			return alignLeaves(x, ct)
		}
		outs := tensor.ApplyN(c.vjpOp(), nil, leaves...)
		return pytree.Unflatten[Y](c.yst, outs)
	}
}

// customCall is one call of a custom-rule function, on flattened leaves:
// fwd (CustomVJP's, with residuals) or f and jvp (CustomJVP's), and the
// structures of the result and residuals the last call of f or fwd had.
type customCall struct {
	name     string
	fwd      func(in []*tensor.Tensor) (outs, res []*tensor.Tensor)
	bwd      func(res, gs []*tensor.Tensor) []*tensor.Tensor
	f        func(in []*tensor.Tensor) []*tensor.Tensor
	jvp      func(prim, tan []*tensor.Tensor) []*tensor.Tensor
	yst, rst pytree.Structure
}

// vjpOp returns the op of a CustomVJP call.
func (c *customCall) vjpOp() *tensor.Op {
	return &tensor.Op{
		Name: c.name,
		ImplN: func(in []*tensor.Tensor, _ any) ([]*tensor.Tensor, any) {
			outs, res := c.fwd(in)
			return outs, customState(res)
		},
		VJPN: func(gs, in, outs []*tensor.Tensor, _ any, st any) []*tensor.Tensor {
			g := c.bwd(st.(customState), zerosFor(gs, outs))
			if len(g) != len(in) {
				panic(fmt.Sprintf("autodiff.CustomVJP %q: bwd returned %d cotangents for %d inputs", c.name, len(g), len(in)))
			}
			return g
		},
		// The tangents: bwd transposed (it is linear in the cotangent).
		JVP: func(prim, tan, outs []*tensor.Tensor, _ any) []*tensor.Tensor {
			_, res := c.fwd(prim)
			return transposeLinear(outs, tan, func(us []*tensor.Tensor) []*tensor.Tensor { return c.bwd(res, us) })
		},
		Batch: func(in []*tensor.Tensor, batched []bool, _ any) []*tensor.Tensor {
			n, xs := materialize(in, batched)
			b := &customCall{name: c.name}
			b.fwd = func(in []*tensor.Tensor) ([]*tensor.Tensor, []*tensor.Tensor) {
				bt := tensor.NewBatchTrace(n)
				outs, res := c.fwd(batchAll(bt, in))
				return unbatchAll(bt, outs), unbatchAll(bt, res)
			}
			b.bwd = func(res, gs []*tensor.Tensor) []*tensor.Tensor {
				bt := tensor.NewBatchTrace(n)
				return unbatchAll(bt, c.bwd(batchAll(bt, res), batchAll(bt, gs)))
			}
			return tensor.ApplyN(b.vjpOp(), nil, xs...)
		},
		Traits: tensor.Traits{
			// fwd and bwd see the operands' dtypes as they are.
			Half: tensor.NativeHalf,
			// Under a gradient taken inside Vmap or forward mode, fwd and
			// bwd run on the batched or primal-and-tangent values.
			Through: tensor.ThroughVmap | tensor.ThroughJVP,
			// and whatever their dtype: fwd and bwd compute with ops.
			Types: tensor.TypesAll,
		},
	}
}

// CustomJVP returns a function with a hand-written Jacobian-vector product
// (jax.custom_jvp): jvp maps the arguments and their tangents (a tree like
// the arguments, zeros for float leaves without one) to the result and its
// tangent, linear in the tangents. Reverse mode (Grad, VJP) uses the
// transpose of jvp, so the custom rule is the function's derivative
// everywhere; Vmap runs f and jvp on whole batches. f and jvp must be
// built from ops; name labels the op.
//
//	// log(1 + eˣ) with the derivative sigmoid(x), also where eˣ overflows.
//	softplus := autodiff.CustomJVP("softplus", f,
//		func(x, t *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
//			return f(x), tensor.Mul(tensor.Sigmoid(x), t)
//		})
func CustomJVP[X, Y any](name string, f func(X) Y, jvp func(primals, tangents X) (Y, Y)) func(X) Y {
	return func(x X) Y {
		leaves, st := pytree.Flatten(x)
		c := &customCall{name: name}
		var y Y // the last result of f: the reference for the tangents' leaves
		c.f = func(in []*tensor.Tensor) []*tensor.Tensor {
			var outs []*tensor.Tensor
			y = f(pytree.Unflatten[X](st, in))
			outs, c.yst = pytree.Flatten(y)
			return outs
		}
		c.jvp = func(prim, tan []*tensor.Tensor) []*tensor.Tensor {
			_, ty := jvp(pytree.Unflatten[X](st, prim), pytree.Unflatten[X](st, zerosFor(tan, prim)))
			return alignLeaves(y, ty)
		}
		outs := tensor.ApplyN(c.jvpOp(), nil, leaves...)
		return pytree.Unflatten[Y](c.yst, outs)
	}
}

// jvpOp returns the op of a CustomJVP call.
func (c *customCall) jvpOp() *tensor.Op {
	return &tensor.Op{
		Name: c.name,
		ImplN: func(in []*tensor.Tensor, _ any) ([]*tensor.Tensor, any) {
			return c.f(in), nil
		},
		JVP: func(prim, tan, _ []*tensor.Tensor, _ any) []*tensor.Tensor {
			return c.jvp(prim, tan)
		},
		// The cotangents: jvp transposed (it is linear in the tangents).
		VJPN: func(gs, in, _ []*tensor.Tensor, _ any, _ any) []*tensor.Tensor {
			return transposeLinear(in, gs, func(ts []*tensor.Tensor) []*tensor.Tensor { return c.jvp(in, ts) })
		},
		Save: tensor.SaveAllInputs,
		Batch: func(in []*tensor.Tensor, batched []bool, _ any) []*tensor.Tensor {
			n, xs := materialize(in, batched)
			b := &customCall{name: c.name}
			b.f = func(in []*tensor.Tensor) []*tensor.Tensor {
				bt := tensor.NewBatchTrace(n)
				return unbatchAll(bt, c.f(batchAll(bt, in)))
			}
			b.jvp = func(prim, tan []*tensor.Tensor) []*tensor.Tensor {
				bt := tensor.NewBatchTrace(n)
				return unbatchAll(bt, c.jvp(batchAll(bt, prim), batchAll(bt, tan)))
			}
			return tensor.ApplyN(b.jvpOp(), nil, xs...)
		},
		Traits: tensor.Traits{Half: tensor.NativeHalf, Through: tensor.ThroughVmap, Types: tensor.TypesAll},
	}
}

// transposeLinear applies the transpose of lin, a function linear in its
// argument (values like xs), to gs, cotangents of its results: lin is
// applied to leaves of a new trace, whose backward pass seeded with gs
// gives the cotangent of each x (nil for non-float xs).
func transposeLinear(xs, gs []*tensor.Tensor, lin func([]*tensor.Tensor) []*tensor.Tensor) []*tensor.Tensor {
	tr := tensor.NewTrace()
	leaves := make([]*tensor.Tensor, len(xs))
	var wrt []*tensor.Tensor
	for i, x := range xs {
		if x != nil && x.DType().IsFloat() {
			leaves[i] = tr.Leaf(tensor.ZerosLike(x))
			wrt = append(wrt, leaves[i])
		}
	}
	ys := lin(leaves)
	var outs, seeds []*tensor.Tensor
	for i, y := range ys {
		if y != nil && i < len(gs) && gs[i] != nil && y.TracedBy(tr) {
			outs, seeds = append(outs, y), append(seeds, gs[i])
		}
	}
	res := make([]*tensor.Tensor, len(xs))
	if len(outs) == 0 {
		return res
	}
	cots := tensor.Backward(tr, outs, seeds, wrt, false)
	j := 0
	for i, l := range leaves {
		if l != nil {
			res[i] = cots[j]
			j++
		}
	}
	return res
}

// zerosFor returns ts with each nil float entry replaced by zeros like the
// matching value of like.
func zerosFor(ts, like []*tensor.Tensor) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(like))
	for i, x := range like {
		switch {
		case i < len(ts) && ts[i] != nil:
			out[i] = ts[i]
		case x != nil && x.DType().IsFloat():
			out[i] = tensor.ZerosLike(x)
		}
	}
	return out
}

// alignLeaves returns the leaves of tree, a tree like ref that may leave
// positions empty (nil), in the order of ref's leaves: nil where tree has
// none.
func alignLeaves[T any](ref, tree T) []*tensor.Tensor {
	var out []*tensor.Tensor
	pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		if xs[0] != nil {
			out = append(out, xs[1])
		}
		return xs[0]
	}, ref, tree)
	return out
}

// materialize gives every operand a batch of n examples first (a rule's
// unbatched operands broadcast) and returns n.
func materialize(in []*tensor.Tensor, batched []bool) (int, []*tensor.Tensor) {
	n := -1
	for i, b := range batched {
		if b {
			n = in[i].Dim(0)
			break
		}
	}
	out := make([]*tensor.Tensor, len(in))
	for i, x := range in {
		out[i] = x
		if !batched[i] {
			out[i] = tensor.BroadcastTo(tensor.ExpandDims(x, 0), append([]int{n}, x.Shape()...)...)
		}
	}
	return n, out
}

// batchAll returns the values of bt for batches xs (batch first; nil
// stays nil).
func batchAll(bt *tensor.BatchTrace, xs []*tensor.Tensor) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(xs))
	for i, x := range xs {
		if x != nil {
			out[i] = bt.Batched(x, 0)
		}
	}
	return out
}

// unbatchAll returns the batches values ys of bt stand for (batch first;
// nil stays nil).
func unbatchAll(bt *tensor.BatchTrace, ys []*tensor.Tensor) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(ys))
	for i, y := range ys {
		if y != nil {
			out[i] = bt.Unbatched(y, 0)
		}
	}
	return out
}

// customState holds a custom VJP's residuals.
type customState []*tensor.Tensor

// Residuals implements tensor.ResidualHolder.
func (s customState) Residuals() []tensor.Residual {
	out := make([]tensor.Residual, len(s))
	for i, t := range s {
		out[i] = tensor.Residual{Tensor: t, Label: "custom_vjp", Device: -1}
	}
	return out
}
