package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// These tests prove the recipe of "How to write an op" (doc.go): the toy
// ops Softsign and SoftsignParts (op_recipe_internal_test.go) are declared
// in one file and known nowhere else, and yet work as every op of the
// package does.

// recipeInputs are values around the kinks and tails of softsign.
var recipeInputs = []float32{-1e6, -3.5, -1, -0.25, 0, 0.5, 1, 2, 7.25, 1e6}

// refSoftsign returns x/(1+|x|) and 1/(1+|x|) in float64.
func refSoftsign(xs []float32) (y, r []float64) {
	for _, v := range xs {
		d := 1 + math.Abs(float64(v))
		y = append(y, float64(v)/d)
		r = append(r, 1/d)
	}
	return y, r
}

// TestRecipeForward: both toy ops against a float64 loop, traced and
// untraced.
func TestRecipeForward(t *testing.T) {
	x := tensor.FromFloat32(recipeInputs, 2, 5)
	wantY, wantR := refSoftsign(recipeInputs)
	requireClose(t, wantY, tensor.Softsign(x), 0, 2e-7)
	y, r := tensor.SoftsignParts(x)
	requireClose(t, wantY, y, 0, 2e-7)
	requireClose(t, wantR, r, 0, 2e-7)
	require.Equal(t, []int{2, 5}, y.Shape())

	// Traced, the values are those of the untraced call, bit for bit.
	tr := tensor.NewTrace()
	lx := tr.Leaf(x)
	ty := tensor.Softsign(lx)
	require.True(t, ty.TracedBy(tr))
	require.Equal(t, tensor.Softsign(x).Float32s(), ty.Float32s())
	ty2, tr2 := tensor.SoftsignParts(lx)
	require.True(t, ty2.TracedBy(tr) && tr2.TracedBy(tr))
	require.Equal(t, y.Float32s(), ty2.Float32s())
	require.Equal(t, r.Float32s(), tr2.Float32s())
}

// TestRecipeGradients: the VJPs against finite differences, first and
// second order, for every combination of SoftsignParts' results.
func TestRecipeGradients(t *testing.T) {
	rng := newRNG(27)
	x := randRange(rng, -3, 3, 3, 4)
	w := randF32(rng, 3, 4)
	fns := map[string]func(xs []*tensor.Tensor) *tensor.Tensor{
		"softsign": func(xs []*tensor.Tensor) *tensor.Tensor {
			return tensor.Sum(tensor.Mul(tensor.Softsign(xs[0]), xs[1]))
		},
		"parts y": func(xs []*tensor.Tensor) *tensor.Tensor {
			y, _ := tensor.SoftsignParts(xs[0])
			return tensor.Sum(tensor.Mul(y, xs[1]))
		},
		"parts r": func(xs []*tensor.Tensor) *tensor.Tensor {
			_, r := tensor.SoftsignParts(xs[0])
			return tensor.Sum(tensor.Mul(r, xs[1]))
		},
		"parts both": func(xs []*tensor.Tensor) *tensor.Tensor {
			y, r := tensor.SoftsignParts(xs[0])
			return tensor.Sum(tensor.Mul(tensor.Sub(y, r), xs[1]))
		},
	}
	for name, f := range fns {
		t.Run(name, func(t *testing.T) {
			checkGrad(t, f, ts(x, w))
			// The VJP is built from ops: its own gradient is checked too.
			second := func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Square(gradOf(f, 0)(xs)))
			}
			checkGrad(t, second, ts(x, w))
		})
	}
	// The analytic gradient, by hand: d/dx Σ softsign(x)·w = w/(1+|x|)².
	g := grad(fns["softsign"], ts(x, w))[0]
	var want []float64
	for i, v := range x.Float64s() {
		d := 1 + math.Abs(v)
		want = append(want, w.Float64s()[i]/(d*d))
	}
	requireClose(t, want, g, 0, 1e-6)
}

// TestRecipeHalf: declared with no half trait, both ops widen bfloat16 and
// float16 operands and round each result once, and their cotangents have
// the operands' dtype: the float32 values (from the saved, rounded
// residuals) rounded once.
func TestRecipeHalf(t *testing.T) {
	x32 := tensor.FromFloat32(recipeInputs, 10)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		x := tensor.Convert(x32, dt)
		wide := tensor.Convert(x, tensor.Float32)
		y := tensor.Softsign(x)
		require.Equal(t, dt, y.DType())
		require.Equal(t, tensor.Convert(tensor.Softsign(wide), dt).Bits16(), y.Bits16(), "%v softsign", dt)
		py, pr := tensor.SoftsignParts(x)
		wy, wr := tensor.SoftsignParts(wide)
		require.Equal(t, dt, py.DType())
		require.Equal(t, dt, pr.DType())
		require.Equal(t, tensor.Convert(wy, dt).Bits16(), py.Bits16(), "%v softsign_parts y", dt)
		require.Equal(t, tensor.Convert(wr, dt).Bits16(), pr.Bits16(), "%v softsign_parts r", dt)

		sum := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Softsign(xs[0])) }
		gh, g32 := grad(sum, ts(x))[0], grad(sum, ts(wide))[0]
		require.Equal(t, dt, gh.DType())
		require.Equal(t, tensor.Convert(g32, dt).Bits16(), gh.Bits16(), "%v softsign cotangent", dt)
		parts := func(xs []*tensor.Tensor) *tensor.Tensor {
			y, r := tensor.SoftsignParts(xs[0])
			return tensor.Sum(tensor.Add(y, r))
		}
		gh = grad(parts, ts(x))[0]
		require.Equal(t, dt, gh.DType())
		// The VJP reads the saved result r as it was stored, rounded:
		// r²·(1 - sign x) from the widened half r, rounded once.
		rh := tensor.Convert(pr, tensor.Float32)
		r2 := tensor.Mul(rh, rh)
		want := tensor.Sub(r2, tensor.Mul(tensor.Sign(wide), r2))
		require.Equal(t, tensor.Convert(want, dt).Bits16(), gh.Bits16(), "%v softsign_parts cotangent", dt)
	}
}

// TestRecipeReuse: Softsign's FreshVJP lets the backward pass add a second
// cotangent into the first in place, with the gradient bit for bit that
// of a pass that allocates every cotangent; SoftsignParts, declaring no
// reuse trait, gets none.
func TestRecipeReuse(t *testing.T) {
	rng := newRNG(3)
	x := randF32(rng, 64)
	twice := func(f func(*tensor.Tensor) *tensor.Tensor) func(xs []*tensor.Tensor) *tensor.Tensor {
		return func(xs []*tensor.Tensor) *tensor.Tensor {
			return tensor.Sum(tensor.Add(f(xs[0]), f(xs[0])))
		}
	}
	parts := func(x *tensor.Tensor) *tensor.Tensor { y, _ := tensor.SoftsignParts(x); return y }
	for _, c := range []struct {
		name  string
		f     func(xs []*tensor.Tensor) *tensor.Tensor
		reuse bool
	}{
		{"softsign", twice(tensor.Softsign), true},
		{"softsign_parts", twice(parts), false},
	} {
		restore := tensor.SetCotangentReuse(false)
		want := grad(c.f, ts(x))[0].Float32s()
		restore()
		before := tensor.CotangentReuses()
		got := grad(c.f, ts(x))[0].Float32s()
		require.Equal(t, want, got, c.name)
		require.Equal(t, c.reuse, tensor.CotangentReuses() > before, c.name)
	}
}

// TestRecipeThroughAutodiff: the toy op under autodiff's transforms, as a
// user meets it: ValueAndGrad and a checkpoint that recomputes it.
func TestRecipeThroughAutodiff(t *testing.T) {
	x := tensor.FromFloat32(recipeInputs, 10)
	loss := func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Softsign(x)) }
	v, g := autodiff.ValueAndGrad(loss)(x)
	remat := autodiff.Checkpoint(loss, autodiff.NothingSaveable)
	rv, rg := autodiff.ValueAndGrad(remat)(x)
	require.Equal(t, v.Float32s(), rv.Float32s())
	require.Equal(t, g.Float32s(), rg.Float32s())
	_, r := refSoftsign(recipeInputs)
	want := make([]float64, len(r))
	for i, ri := range r {
		want[i] = ri * ri
	}
	requireClose(t, want, g, 0, 1e-6)
}

// TestRecipePanics: the public functions name the op and the operand.
func TestRecipePanics(t *testing.T) {
	requirePanic(t, "tensor.Softsign: operand x is nil", func() { tensor.Softsign(nil) })
	requirePanic(t, "tensor.Softsign: i32[3]: not defined for int32", func() { tensor.Softsign(tensor.FromInt32([]int32{1, 2, 3})) })
	requirePanic(t, "tensor.SoftsignParts: bool[2]: not defined for bool", func() { tensor.SoftsignParts(tensor.FromBool([]bool{true, false})) })
	x := tensor.FromFloat32([]float32{1, 2})
	tensor.Donate(x)
	require.Panics(t, func() { tensor.Softsign(x) })
}

// TestRecipePlaced: declaring the elementwise sharding family makes both
// toy ops compute blockwise on placed operands, their results and
// gradients sharded like the operand, with no collective and none of the
// gathering that Strict forbids.
func TestRecipePlaced(t *testing.T) {
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	rng := newRNG(30)
	xh := randRange(rng, -3, 3, 8, 6)
	x := shard.Put(xh, shard.NewSharding(mesh, shard.P("dp", "tp")))
	defer shard.Strict(mesh)()
	var comm shard.Comm
	stop := shard.Record(mesh, &comm)
	y := tensor.Softsign(x)
	py, pr := tensor.SoftsignParts(x)
	loss := func(x *tensor.Tensor) *tensor.Tensor {
		y, r := tensor.SoftsignParts(x)
		return tensor.Sum(tensor.Mul(tensor.Softsign(x), tensor.Add(y, r)))
	}
	v, g := autodiff.ValueAndGrad(loss)(x)
	stop()
	for _, r := range []*tensor.Tensor{y, py, pr, g} {
		require.Equal(t, "float32[8@dp,6@tp]", r.Type())
	}
	require.Equal(t, tensor.Softsign(xh).Float32s(), y.Float32s())
	hy, hr := tensor.SoftsignParts(xh)
	require.Equal(t, hy.Float32s(), py.Float32s())
	require.Equal(t, hr.Float32s(), pr.Float32s())
	hv, hg := autodiff.ValueAndGrad(loss)(xh)
	requireClose(t, hv.Float64s(), v, 1e-6, 1e-5)
	requireClose(t, hg.Float64s(), g, 0, 1e-6)
	for _, k := range comm.Kinds() {
		require.NotEqual(t, "all_gather", k, "nothing gathered")
	}
}
