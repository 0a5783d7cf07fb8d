package autodiff_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// twoLeaves is a small tree argument: a matrix and a vector.
type twoLeaves struct{ A, B *tensor.Tensor }

// treeFn maps the tree to a tree of two results of different shapes.
func treeFn(x twoLeaves) twoLeaves {
	h := tensor.Tanh(tensor.Add(tensor.MatMul(x.A, x.B), tensor.Sum(x.B)))
	return twoLeaves{A: tensor.Mul(h, h), B: tensor.Sum(tensor.Exp(x.A), 0)}
}

// dotTrees returns Σ a·b over the leaves of two trees, in float64.
func dotTrees(a, b any) float64 {
	al, bl := pytree.Leaves(a), pytree.Leaves(b)
	s := 0.0
	for i := range al {
		x, y := al[i].Float64s(), bl[i].Float64s()
		for k := range x {
			s += x[k] * y[k]
		}
	}
	return s
}

func randTree(r *rand.Rand) twoLeaves { return twoLeaves{randT(r, 3, 2), randT(r, 2)} }

// TestJVPTree: the tangent of a function of trees equals finite
// differences, and the transpose of the VJP: <J·t, u> = <t, Jᵀ·u>.
func TestJVPTree(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	x, tan := randTree(r), randTree(r)
	y, ty := autodiff.JVP(treeFn, x, tan)
	requireTreesEqual(t, treeFn(x), y, 0, "primal")

	// Central differences, float32 with h = 1e-3.
	const h = 1e-3
	step := func(s float32) twoLeaves {
		return pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
			return tensor.Add(xs[0], tensor.MulScalar(xs[1], s))
		}, x, tan)
	}
	fp, fm := treeFn(step(h)), treeFn(step(-h))
	fd := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.MulScalar(tensor.Sub(xs[0], xs[1]), 1/(2*h))
	}, fp, fm)
	requireTreesEqual(t, fd, ty, 2e-2, "finite differences")

	u := twoLeaves{randT(r, 3), randT(r, 2)}
	_, back := autodiff.VJP(treeFn, x)
	require.InDelta(t, dotTrees(tan, back(u)), dotTrees(ty, u), 1e-5*(1+abs(dotTrees(ty, u))))

	// Linearize gives the same tangents, for several directions.
	y2, lin := autodiff.Linearize(treeFn, x)
	requireTreesEqual(t, y, y2, 0, "linearize primal")
	requireTreesEqual(t, ty, lin(tan), 1e-5, "linearize")
	tan2 := randTree(r)
	_, ty2 := autodiff.JVP(treeFn, x, tan2)
	requireTreesEqual(t, ty2, lin(tan2), 1e-5, "linearize, second tangent")
}

// TestJacobians: Jacfwd and Jacrev give the same blocks, each the
// derivative of one result leaf with respect to one argument leaf: block
// column k is the JVP along unit vector k.
func TestJacobians(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	x := randTree(r)
	jf := autodiff.Jacfwd(treeFn)(x)
	jr := autodiff.Jacrev(treeFn)(x)
	require.Len(t, jf, 2)
	require.Equal(t, []int{3, 3, 2}, jf[0].A.Shape()) // d y.A / d x.A
	require.Equal(t, []int{3, 2}, jf[0].B.Shape())
	require.Equal(t, []int{2, 3, 2}, jf[1].A.Shape())
	require.Equal(t, []int{2, 2}, jf[1].B.Shape())
	for i := range jf {
		requireTreesEqual(t, jf[i], jr[i], 1e-5, "jacfwd vs jacrev")
	}
	// Element (1, 0) of x.A: the JVP along that unit vector.
	unit := twoLeaves{tensor.Zeros(tensor.Float32, 3, 2), tensor.Zeros(tensor.Float32, 2)}
	d := make([]float32, 6)
	d[2] = 1
	unit.A = tensor.FromFloat32(d, 3, 2)
	_, ty := autodiff.JVP(treeFn, x, unit)
	col := tensor.Squeeze(tensor.Slice(jf[0].A, []int{0, 1, 0}, []int{3, 2, 1}))
	require.InDeltaSlice(t, ty.A.Float32s(), col.Float32s(), 1e-6)

	// A network's output with respect to its input.
	mlp := nn.NewMLP(tensor.NewKey(1), []int{4, 6, 3}, nn.MLPOptions{Activation: nn.Tanh})
	in := randT(r, 4)
	jac := autodiff.Jacfwd(mlp.Forward)(in)[0]
	require.Equal(t, []int{3, 4}, jac.Shape())
	require.InDeltaSlice(t, autodiff.Jacrev(mlp.Forward)(in)[0].Float32s(), jac.Float32s(), 1e-6)
}

// TestHessian: the Hessian of a scalar function of a tree is symmetric
// and its products with vectors are JVPs of the gradient.
func TestHessian(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	x := randTree(r)
	loss := func(x twoLeaves) *tensor.Tensor {
		y := treeFn(x)
		return tensor.Add(tensor.Sum(tensor.Square(y.A)), tensor.Sum(tensor.Mul(y.B, y.B)))
	}
	hs := autodiff.Hessian(loss)(x)
	require.Len(t, hs, 2)
	require.Equal(t, []int{3, 2, 3, 2}, hs[0].A.Shape())
	require.Equal(t, []int{3, 2, 2}, hs[0].B.Shape())
	require.Equal(t, []int{2, 3, 2}, hs[1].A.Shape())
	// Symmetric: H_AB = H_BAᵀ.
	require.InDeltaSlice(t, tensor.Transpose(hs[1].A, 1, 2, 0).Float32s(), hs[0].B.Float32s(), 1e-4)
	// Hessian-vector product: JVP of the gradient along v.
	v := randTree(r)
	_, hv := autodiff.JVP(autodiff.Grad(loss), x, v)
	want := tensor.Add(tensor.Sum(tensor.Mul(hs[0].A, v.A), 2, 3), tensor.Sum(tensor.Mul(hs[0].B, v.B), 2))
	require.InDeltaSlice(t, want.Float32s(), hv.A.Float32s(), 1e-4)
}

// TestCustomJVP: the hand-written rule is the derivative in forward mode,
// in reverse mode (its transpose) and under Vmap.
func TestCustomJVP(t *testing.T) {
	// f(x) = x³ with a deliberately scaled rule 2·3x²·t, to see it used.
	f := autodiff.CustomJVP("scaled_cube",
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.Mul(tensor.Square(x), x) },
		func(x, t *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
			return tensor.Mul(tensor.Square(x), x), tensor.Mul(tensor.MulScalar(tensor.Square(x), 6), t)
		})
	x := tensor.FromFloat32([]float32{1, 2, -1})
	y, ty := autodiff.JVP(f, x, tensor.FromFloat32([]float32{1, 0.5, 2}))
	require.Equal(t, []float32{1, 8, -1}, y.Float32s())
	require.Equal(t, []float32{6, 12, 12}, ty.Float32s())
	g := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(f(x)) })(x)
	require.Equal(t, []float32{6, 24, 6}, g.Float32s())
	per := autodiff.Vmap(autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(f(x)) }))(tensor.Reshape(x, 3, 1))
	require.Equal(t, []float32{6, 24, 6}, per.Float32s())
	gv := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(autodiff.Vmap(f)(x)) })(tensor.Reshape(x, 3, 1))
	require.Equal(t, []float32{6, 24, 6}, gv.Float32s())
}

// TestCustomVJPTree: a custom rule over trees, with a residual tree; under
// Vmap (per-example gradients, and gradients of the batch) and in forward
// mode (the transpose of bwd).
func TestCustomVJPTree(t *testing.T) {
	type in struct{ X, W *tensor.Tensor }
	type res struct {
		X, W *tensor.Tensor
		K    int
	}
	// y = x·w with the cotangent of w scaled by K = 2.
	f := autodiff.CustomVJP("scaled_dot",
		func(a in) (*tensor.Tensor, res) { return tensor.Sum(tensor.Mul(a.X, a.W)), res{a.X, a.W, 2} },
		func(r res, g *tensor.Tensor) in {
			return in{X: tensor.Mul(g, r.W), W: tensor.MulScalar(tensor.Mul(g, r.X), float32(r.K))}
		})
	a := in{tensor.FromFloat32([]float32{1, 2}), tensor.FromFloat32([]float32{3, 4})}
	g := autodiff.Grad(f)(a)
	require.Equal(t, []float32{3, 4}, g.X.Float32s())
	require.Equal(t, []float32{2, 4}, g.W.Float32s())

	xs := tensor.FromFloat32([]float32{1, 2, 3, 5}, 2, 2)
	per := autodiff.Vmap2(func(x, w *tensor.Tensor) in { return autodiff.Grad(f)(in{x, w}) },
		autodiff.InAxes(autodiff.Axis(0), autodiff.None))(xs, a.W)
	require.Equal(t, []float32{3, 4, 3, 4}, per.X.Float32s())
	require.Equal(t, []float32{2, 4, 6, 10}, per.W.Float32s())
	gw := autodiff.Grad(func(w *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(autodiff.Vmap2(func(x, w *tensor.Tensor) *tensor.Tensor { return f(in{x, w}) },
			autodiff.InAxes(autodiff.Axis(0), autodiff.None))(xs, w))
	})(a.W)
	require.Equal(t, []float32{8, 14}, gw.Float32s())
	// Forward mode: the tangent is bwd transposed: x·tw·... with K.
	_, ty := autodiff.JVP(f, a, in{tensor.FromFloat32([]float32{1, 0}), tensor.FromFloat32([]float32{0, 1})})
	require.Equal(t, []float32{3 + 2*2}, []float32{float32(ty.Item())}) // w₀·1 + K·x₁·1
}
