package tensor

import (
	"fmt"
	"slices"
)

// JVPTrace is one forward-mode differentiation in progress, as JAX's
// JVPTrace: a value inside it carries a primal and a tangent (Dual). An op
// on such values computes its result from the primals and the tangent of
// the result from the tangents with the op's JVP rule (Op.JVP); an op
// without one derives it by transposing its VJP. The primal of a value
// can be read (Float32s, Item, ... read it); its tangent is Tangent's.
//
// Package autodiff's JVP, Linearize, Jacfwd and Hessian are the interface
// for users:
//
//	jt := tensor.NewJVPTrace()
//	x := jt.Dual(x0, t0)        // x0 with tangent t0
//	y := tensor.Sin(x)          // any function of x
//	dy := jt.Tangent(y)         // cos(x0)·t0
//
// JVPTraces nest, and compose with reverse-mode traces (forward over
// reverse gives Hessian-vector products), with Vmap (BatchTrace) and with
// Remat.
type JVPTrace struct {
	id uint64
}

// NewJVPTrace returns a new JVPTrace, inner to every trace and level that
// exists already.
func NewJVPTrace() *JVPTrace { return &JVPTrace{id: newLevelID()} }

func (jt *JVPTrace) levelID() uint64 { return jt.id }

func (jt *JVPTrace) noData(op string, x *Tensor) {
	panic(fmt.Sprintf("%s: internal error: %v has no primal", op, x))
}

// Dual returns x with tangent t inside jt. t must have x's shape and
// dtype; a nil t (or a non-float x) makes no dual: x itself is returned,
// with a tangent of zero.
func (jt *JVPTrace) Dual(x, t *Tensor) *Tensor {
	checkNil("tensor.JVPTrace.Dual", "x", x)
	checkNesting("tensor.JVPTrace.Dual", x, jt.id)
	if t == nil || !x.dtype.IsFloat() {
		return x
	}
	checkNesting("tensor.JVPTrace.Dual", t, jt.id)
	if t.dtype != x.dtype || !sameShape(t.shape, x.shape) {
		panic(fmt.Sprintf("tensor.JVPTrace.Dual: tangent %v for primal %v: want the primal's shape and dtype", t, x))
	}
	return jt.wrap(x, t)
}

// Primal returns the primal value of y inside jt (y itself if it is not a
// value of jt).
func (jt *JVPTrace) Primal(y *Tensor) *Tensor {
	if p, _ := jt.split(y); p != nil {
		return p
	}
	return y
}

// Tangent returns the tangent of y inside jt: zeros like y if y does not
// depend on the tangents, nil if y is not a float tensor.
func (jt *JVPTrace) Tangent(y *Tensor) *Tensor {
	checkNil("tensor.JVPTrace.Tangent", "y", y)
	if levelIDOf(y) > jt.id {
		panic(fmt.Sprintf("tensor.JVPTrace.Tangent: %v belongs to a transformation started inside this one (a trace: take its primal value)", y))
	}
	if _, t := jt.split(y); t != nil {
		return t
	}
	if !y.dtype.IsFloat() {
		return nil
	}
	return ZerosLike(y)
}

// split returns the primal and tangent of x if x is a value of jt.
func (jt *JVPTrace) split(x *Tensor) (p, t *Tensor) {
	if x.node == nil && x.xv() != nil && x.xv().lvl == jt {
		return x.xv().val, x.xv().tan
	}
	return nil, nil
}

func (jt *JVPTrace) wrap(p, t *Tensor) *Tensor {
	loc := p.local()
	if t.local() != nil {
		loc = unionLocal("tensor.JVPTrace", loc, t.local())
	}
	return newXValue(p.dtype, p.shape, loc, jt, p, t)
}

// apply computes op on operands some of which are values of jt.
func (jt *JVPTrace) apply(op *Op, params any, in []*Tensor, wantState bool) ([]*Tensor, any) {
	if op.Traits.Through.Has(ThroughJVP) && (wantState || op.JVP == nil) {
		return passThrough(op, params, in, wantState)
	}
	prim := make([]*Tensor, len(in))
	tan := make([]*Tensor, len(in))
	anyTan := false
	for i, x := range in {
		if p, t := jt.split(x); p != nil {
			prim[i], tan[i], anyTan = p, t, true
		} else {
			prim[i] = x
		}
	}
	var outs []*Tensor
	var state any
	if wantState || (op.JVP == nil && op.VJPN != nil) {
		outs, state = applyCore(op, params, prim)
	} else {
		outs = applyAll(op, params, prim)
	}
	if !anyTan || !op.differentiable() || !slices.ContainsFunc(outs, func(o *Tensor) bool { return o.dtype.IsFloat() }) {
		return outs, state
	}
	touts := callJVP(op, params, state, prim, tan, outs)
	if len(touts) != len(outs) {
		panic(fmt.Sprintf("tensor: the JVP rule of op %q returned %d tangents for %d outputs", op.Name, len(touts), len(outs)))
	}
	res := make([]*Tensor, len(outs))
	for i, o := range outs {
		t := touts[i]
		if t == nil || !o.dtype.IsFloat() {
			res[i] = o
			continue
		}
		if t.dtype != o.dtype || !sameShape(t.shape, o.shape) {
			panic(fmt.Sprintf("tensor: the JVP rule of op %q returned tangent %v for output %v", op.Name, t, o))
		}
		res[i] = jt.wrap(o, t)
	}
	return res, state
}

// callJVP runs the JVP rule of op (or the transpose of its VJP). If op
// widens half operands and any primal, tangent or output is half, the
// rule runs on float32 values and each tangent is rounded to its output's
// dtype, as callVJP does around the VJP.
func callJVP(op *Op, params, state any, prim, tan, outs []*Tensor) []*Tensor {
	rule := func(prim, tan, outs []*Tensor) []*Tensor {
		if op.JVP != nil {
			return op.JVP(prim, tan, outs, params)
		}
		return jvpByTranspose(op, params, state, prim, tan, outs)
	}
	if !op.widensHalf() || !anyHalf(prim, tan, outs) {
		return rule(prim, tan, outs)
	}
	res := rule(widenVJPArgs(prim), widenVJPArgs(tan), widenVJPArgs(outs))
	for i, t := range res {
		if t != nil && i < len(outs) && t.dtype != outs[i].dtype && outs[i].dtype.IsFloat() {
			res[i] = Convert(t, outs[i].dtype)
		}
	}
	return res
}

// jvpByTranspose is the JVP of an op without a JVP rule: the transpose of
// its VJP, which is linear in the cotangent. The VJP is applied to
// cotangents u traced by a new trace; the backward pass of that trace,
// seeded with the tangents of the inputs, gives the tangents of the
// outputs (Jᵀ transposed: J·t). It costs about two VJPs.
func jvpByTranspose(op *Op, params, state any, prim, tan, outs []*Tensor) []*Tensor {
	tr := NewTrace()
	us := make([]*Tensor, len(outs))
	var wrt []*Tensor
	for k, o := range outs {
		if o.dtype.IsFloat() {
			us[k] = tr.Leaf(ZerosLike(o))
			wrt = append(wrt, us[k])
		}
	}
	var need uint64
	for i, t := range tan {
		if t != nil {
			need |= needBit(i)
		}
	}
	cots := callVJP(op, params, state, us, prim, outs, need)
	var ys, seeds []*Tensor
	for i, c := range cots {
		if c != nil && tan[i] != nil && c.TracedBy(tr) {
			ys, seeds = append(ys, c), append(seeds, tan[i])
		}
	}
	res := make([]*Tensor, len(outs))
	if len(ys) == 0 {
		return res
	}
	ts := Backward(tr, ys, seeds, wrt, false)
	j := 0
	for k, u := range us {
		if u != nil {
			res[k] = ts[j]
			j++
		}
	}
	return res
}

// Helpers for JVP rules (Op.JVP).

// linearJVP returns the JVP rule of an op that is linear in its float
// operands (jointly): the op applied to their tangents (zeros for inputs
// without one), with its other operands (indices) as they are.
func linearJVP(op **Op) func(prim, tan, outs []*Tensor, p any) []*Tensor {
	return func(prim, tan, outs []*Tensor, p any) []*Tensor {
		args := make([]*Tensor, len(prim))
		for i, x := range prim {
			switch {
			case !x.dtype.IsFloat():
				args[i] = x
			case tan[i] != nil:
				args[i] = tan[i]
			default:
				args[i] = zerosOf(x)
			}
		}
		return applyAll(*op, p, args)
	}
}

// symmetricJVP returns the JVP rule of an op whose operands all have the
// output's shape and whose Jacobian with respect to each is symmetric
// (elementwise functions without broadcasting: diagonal; softmax): each
// is its own transpose, so the JVP is the sum over inputs of the VJP's
// cotangent for that input with the input's tangent as the output
// cotangent.
func symmetricJVP(op **Op) func(prim, tan, outs []*Tensor, p any) []*Tensor {
	return func(prim, tan, outs []*Tensor, p any) []*Tensor {
		var sum *Tensor
		for i, t := range tan {
			if t == nil {
				continue
			}
			r := vjpForm(*op, p, nil, []*Tensor{t}, prim, outs, needBit(i))[i]
			if r == nil {
				continue
			}
			if sum == nil {
				sum = r
			} else {
				sum = Add(sum, r)
			}
		}
		return []*Tensor{sum}
	}
}

// zerosOf returns a tangent of zero for x (zeros of its dtype and shape,
// placed and marked like it).
func zerosOf(x *Tensor) *Tensor { return ZerosLike(x) }

// addTangents returns a + b where either may be nil (zero).
func addTangents(a, b *Tensor) *Tensor {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return Add(a, b)
}
