package autodiff

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// ValueAndGrad returns a function that evaluates f at m and differentiates
// it with respect to every floating-point tensor leaf of m, a model or any
// other pytree (Equinox's filter_value_and_grad). The gradient has the type
// of m: a leaf for each float leaf of m (zeros where f does not depend on
// it, carrying the leaf's logical axes and sharding), nil for the other
// leaves, and m's non-tensor fields.
//
// f must return a float32 or float64 scalar (a shape [] tensor, or one
// element); a float64 model (tensor.Float64 leaves) gets float64 gradients.
// ValueAndGrad calls may nest (the gradient of a gradient) and may run in
// several goroutines at once.
//
// Options change how the backward pass treats memory: see
// RecycleIntermediates.
func ValueAndGrad[M any](f func(M) *tensor.Tensor, opts ...Option) func(M) (*tensor.Tensor, M) {
	o := options(opts)
	return func(m M) (*tensor.Tensor, M) {
		v, _, g := valueAndGrad(o, m, func(mt M) (*tensor.Tensor, struct{}) { return f(mt), struct{}{} })
		return v, g
	}
}

// ValueAndGradAux is ValueAndGrad for an f that also returns auxiliary data
// (metrics, new state), which is passed through and not differentiated.
func ValueAndGradAux[M, A any](f func(M) (*tensor.Tensor, A), opts ...Option) func(M) (*tensor.Tensor, A, M) {
	o := options(opts)
	return func(m M) (*tensor.Tensor, A, M) { return valueAndGrad(o, m, f) }
}

// ValueAndGradWith is ValueAndGrad for an f with a second argument (a
// batch, say) that is not differentiated.
func ValueAndGradWith[M, X any](f func(M, X) *tensor.Tensor, opts ...Option) func(M, X) (*tensor.Tensor, M) {
	o := options(opts)
	return func(m M, x X) (*tensor.Tensor, M) {
		v, _, g := valueAndGrad(o, m, func(mt M) (*tensor.Tensor, struct{}) { return f(mt, x), struct{}{} })
		return v, g
	}
}

// ValueAndGradWithAux combines ValueAndGradWith and ValueAndGradAux.
func ValueAndGradWithAux[M, X, A any](f func(M, X) (*tensor.Tensor, A), opts ...Option) func(M, X) (*tensor.Tensor, A, M) {
	o := options(opts)
	return func(m M, x X) (*tensor.Tensor, A, M) {
		return valueAndGrad(o, m, func(mt M) (*tensor.Tensor, A) { return f(mt, x) })
	}
}

// Grad returns a function computing only the gradient of f (see
// ValueAndGrad).
func Grad[M any](f func(M) *tensor.Tensor, opts ...Option) func(M) M {
	vg := ValueAndGrad(f, opts...)
	return func(m M) M {
		_, g := vg(m)
		return g
	}
}

// GradWith is Grad for an f with a second, non-differentiated argument.
func GradWith[M, X any](f func(M, X) *tensor.Tensor, opts ...Option) func(M, X) M {
	vg := ValueAndGradWith(f, opts...)
	return func(m M, x X) M {
		_, g := vg(m, x)
		return g
	}
}

// Option changes how ValueAndGrad and its variants run.
type Option func(*settings)

type settings struct {
	recycle bool
	final   func(leaf int, g *tensor.Tensor)
}

func options(opts []Option) settings {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	return s
}

// RecycleIntermediates makes the backward pass donate the intermediate
// values it kept from the forward pass (activations, the inputs of each
// matmul) once it no longer needs them, so that the next step's
// allocations reuse their storage (see tensor.Donate and
// tensor.Trace.RecycleIntermediates). The value f returns, its auxiliary
// outputs and the model are spared.
//
// It is an opt-in: an intermediate f let escape (into a variable of the
// caller, say) is donated too, and any use of it after the call panics
// naming the op ("tensor.Relu: operand x f32[16,128] was donated"),
// never reading recycled memory. Return such a value as auxiliary output
// instead.
func RecycleIntermediates() Option { return func(s *settings) { s.recycle = true } }

// OnGradient makes the backward pass of ValueAndGrad and its variants
// call f(leaf, g) as soon as the gradient g of the model's leaf number
// leaf (in pytree.Flatten's order) is final, while the backward pass
// still computes the gradients of the leaves used before it (see
// tensor.Trace.OnFinalCotangent). A data-parallel step starts the
// reduction of each gradient there (parallel.Trainer does), as PyTorch
// DDP's gradient hooks do. f is called once per float leaf the value
// depends on, on the caller's goroutine, with the tensor the call then
// returns for that leaf (or a header over its storage); f must not
// modify it.
func OnGradient(f func(leaf int, g *tensor.Tensor)) Option {
	return func(s *settings) { s.final = f }
}

// DonateTree donates every tensor leaf of tree (see tensor.Donate): a
// training loop donates the previous step's gradients once the optimizer
// has used them, so that the next backward pass writes into their storage.
// Using a leaf afterwards panics.
func DonateTree(tree any) { tensor.Donate(pytree.Leaves(tree)...) }

// trace makes a traced copy of m: its float leaves become leaves of tr.
func trace[M any](tr *tensor.Trace, m M) (M, []*tensor.Tensor, []*tensor.Tensor, pytree.Structure) {
	leaves, st := pytree.Flatten(m)
	if !slices.ContainsFunc(leaves, func(x *tensor.Tensor) bool { return !x.DType().IsFloat() }) {
		traced := tr.Leaves(leaves...) // one allocation for every leaf
		return pytree.Unflatten[M](st, traced), leaves, traced, st
	}
	traced := make([]*tensor.Tensor, len(leaves))
	for i, x := range leaves {
		if x.DType().IsFloat() {
			traced[i] = tr.Leaf(x)
		} else {
			traced[i] = x
		}
	}
	return pytree.Unflatten[M](st, traced), leaves, traced, st
}

// gradTree assembles cotangents of the float leaves into a tree like m,
// in cots itself (the slice tensor.Backward returned for this call).
func gradTree[M any](st pytree.Structure, leaves, cots []*tensor.Tensor) M {
	for i, x := range leaves {
		if !x.DType().IsFloat() {
			cots[i] = nil
			continue
		}
		if cots[i] == nil { // taken by its products (tensor.ProductCotangentTaker)
			continue
		}
		if axes := x.BorrowLogicalAxes(); axes != nil && !slices.Equal(cots[i].BorrowLogicalAxes(), axes) {
			cots[i] = tensor.WithLogicalAxes(cots[i], axes...)
		}
	}
	return pytree.Unflatten[M](st, cots)
}

func valueAndGrad[M, A any](o settings, m M, f func(M) (*tensor.Tensor, A)) (*tensor.Tensor, A, M) {
	tr := tensor.NewTrace()
	if o.recycle {
		tr.RecycleIntermediates()
	}
	if o.final != nil {
		tr.OnFinalCotangent(o.final)
	}
	mt, leaves, traced, st := trace(tr, m)
	y, aux := f(mt)
	if y == nil || (y.DType() != tensor.Float32 && y.DType() != tensor.Float64) || y.Size() != 1 {
		panic(fmt.Sprintf("autodiff.ValueAndGrad: f returned %v; want a float32 or float64 scalar", y))
	}
	ys, seeds := []*tensor.Tensor{y}, []*tensor.Tensor{tensor.OnesLike(y)}
	if o.recycle {
		// The auxiliary outputs are outputs too: spared, not recycled.
		for _, a := range pytree.Leaves(aux) {
			if a != nil {
				ys, seeds = append(ys, a), append(seeds, nil)
			}
		}
	}
	cots := tensor.Backward(tr, ys, seeds, traced, false)
	return tr.Primal(y), aux, gradTree[M](st, leaves, cots)
}

// VJP evaluates f at m and returns its output and a function that maps a
// cotangent of the output (a tree like it) to the cotangent of m: the
// vector-Jacobian product (jax.vjp). The function may be called several
// times.
func VJP[M, Y any](f func(M) Y, m M) (Y, func(ct Y) M) {
	tr := tensor.NewTrace()
	mt, leaves, traced, st := trace(tr, m)
	y := f(mt)
	ys, yst := pytree.Flatten(y)
	prim := make([]*tensor.Tensor, len(ys))
	for i, v := range ys {
		prim[i] = tr.Primal(v)
	}
	back := func(ct Y) M {
		cs, cst := pytree.Flatten(ct)
		if !cst.Equal(yst) {
			panic(fmt.Sprintf("autodiff.VJP: cotangent %v does not match output %v", cst, yst))
		}
		for i, c := range cs {
			if c.DType() != ys[i].DType() || !slices.Equal(c.Shape(), ys[i].Shape()) {
				panic(fmt.Sprintf("autodiff.VJP: cotangent %d is %v, output is %v", i, c, ys[i]))
			}
		}
		cots := tensor.Backward(tr, ys, cs, traced, true)
		return gradTree[M](st, leaves, cots)
	}
	return pytree.Unflatten[Y](yst, prim), back
}
