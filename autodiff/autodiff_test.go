package autodiff_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func randT(r *rand.Rand, shape ...int) *tensor.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	d := make([]float32, n)
	for i := range d {
		d[i] = float32(r.NormFloat64())
	}
	return tensor.FromFloat32(d, shape...)
}

type linear struct {
	W, B *tensor.Tensor
}

type model struct {
	Layers []linear
	Steps  *tensor.Tensor // int32: not differentiated
	Unused *tensor.Tensor // float32, not used by the loss
	Name   string
}

func (m model) forward(x *tensor.Tensor) *tensor.Tensor {
	for i, l := range m.Layers {
		x = tensor.Add(tensor.MatMul(x, l.W), l.B)
		if i+1 < len(m.Layers) {
			x = tensor.Tanh(x)
		}
	}
	return x
}

func newModel(r *rand.Rand, sizes ...int) model {
	m := model{Steps: tensor.ScalarInt(7), Unused: randT(r, 3), Name: "mlp"}
	for i := 0; i+1 < len(sizes); i++ {
		m.Layers = append(m.Layers, linear{
			W: tensor.WithLogicalAxes(tensor.MulScalar(randT(r, sizes[i], sizes[i+1]), 0.5), "in", "out"),
			B: randT(r, sizes[i+1]),
		})
	}
	return m
}

func mse(m model, x, y *tensor.Tensor) *tensor.Tensor {
	return tensor.Mean(tensor.Square(tensor.Sub(m.forward(x), y)))
}

func TestValueAndGradOnAStructModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	m := newModel(r, 4, 8, 3)
	x, y := randT(r, 5, 4), randT(r, 5, 3)
	v, g := autodiff.ValueAndGrad(func(m model) *tensor.Tensor { return mse(m, x, y) })(m)

	assert.InDelta(t, mse(m, x, y).Item(), v.Item(), 1e-7)
	assert.False(t, v.IsTraced())
	assert.Nil(t, g.Steps, "int leaves get no gradient")
	assert.Equal(t, []float32{0, 0, 0}, g.Unused.Float32s(), "unused float leaves get zeros")
	assert.Equal(t, "mlp", g.Name, "static fields are carried over")
	assert.Equal(t, []string{"in", "out"}, g.Layers[0].W.LogicalAxes(), "gradients carry the params' logical axes")

	// The gradient of every parameter matches finite differences.
	leaves := pytree.Leaves(m)
	_, st := pytree.Flatten(m)
	err := autodiff.CheckGrad(func(ls []*tensor.Tensor) *tensor.Tensor {
		return mse(pytree.Unflatten[model](st, ls), x, y)
	}, leaves, autodiff.CheckOptions{})
	require.NoError(t, err)
	// And ValueAndGrad agrees with the tensor-level backward pass.
	tr := tensor.NewTrace()
	traced := pytree.Map(m, func(x *tensor.Tensor) *tensor.Tensor {
		if x.DType().IsFloat() {
			return tr.Leaf(x)
		}
		return x
	})
	tl := pytree.Leaves(traced)
	out := tensor.Backward(tr, []*tensor.Tensor{mse(traced, x, y)}, []*tensor.Tensor{tensor.Scalar(1)}, tl, false)
	gl := pytree.Leaves(g)
	k := 0
	for i, l := range tl {
		if !l.DType().IsFloat() {
			continue
		}
		assert.Equal(t, out[i].Float32s(), gl[k].Float32s())
		k++
	}
}

func TestVariants(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	m := newModel(r, 3, 2)
	x, y := randT(r, 4, 3), randT(r, 4, 2)
	want := autodiff.Grad(func(m model) *tensor.Tensor { return mse(m, x, y) })(m)

	_, g := autodiff.ValueAndGradWith(func(m model, x *tensor.Tensor) *tensor.Tensor { return mse(m, x, y) })(m, x)
	assert.True(t, pytree.Equal(want, g, 0, 0))

	v, aux, g2 := autodiff.ValueAndGradAux(func(m model) (*tensor.Tensor, string) { return mse(m, x, y), "aux" })(m)
	assert.Equal(t, "aux", aux)
	assert.InDelta(t, mse(m, x, y).Item(), v.Item(), 1e-7)
	assert.True(t, pytree.Equal(want, g2, 0, 0))

	_, n, g3 := autodiff.ValueAndGradWithAux(func(m model, x *tensor.Tensor) (*tensor.Tensor, int) { return mse(m, x, y), x.Dim(0) })(m, x)
	assert.Equal(t, 4, n)
	assert.True(t, pytree.Equal(want, g3, 0, 0))

	g4 := autodiff.GradWith(func(m model, x *tensor.Tensor) *tensor.Tensor { return mse(m, x, y) })(m, x)
	assert.True(t, pytree.Equal(want, g4, 0, 0))

	assert.PanicsWithValue(t, "autodiff.ValueAndGrad: f returned f32[4,2]; want a float32 or float64 scalar", func() {
		autodiff.Grad(func(m model) *tensor.Tensor { return m.forward(x) })(m)
	})
}

func TestSecondDerivatives(t *testing.T) {
	// f(x) = Σ x³ ⇒ ∂f/∂x = 3x², and d/dx Σ ∂f/∂x = 6x.
	x := tensor.FromFloat32([]float32{-1, 0.5, 2})
	gradSum := func(x *tensor.Tensor) *tensor.Tensor {
		g := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Mul(x, tensor.Square(x))) })(x)
		return tensor.Sum(g)
	}
	assert.InDeltaSlice(t, []float64{3, 0.75, 12}, autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Mul(x, tensor.Square(x)))
	})(x).Float64s(), 1e-6)
	assert.InDeltaSlice(t, []float64{-6, 3, 12}, autodiff.Grad(gradSum)(x).Float64s(), 1e-6)

	// A Hessian-vector product of a small network, against finite
	// differences of its gradient.
	r := rand.New(rand.NewPCG(3, 3))
	m := newModel(r, 3, 4, 1)
	xs, ys := randT(r, 6, 3), randT(r, 6, 1)
	v := pytree.Map(m, func(p *tensor.Tensor) *tensor.Tensor {
		if !p.DType().IsFloat() {
			return p
		}
		return randT(r, p.Shape()...)
	})
	dot := func(a, b model) *tensor.Tensor {
		s := tensor.Scalar(0)
		for i := range a.Layers {
			s = tensor.Add(s, tensor.Sum(tensor.Mul(a.Layers[i].W, b.Layers[i].W)))
			s = tensor.Add(s, tensor.Sum(tensor.Mul(a.Layers[i].B, b.Layers[i].B)))
		}
		return s
	}
	grad := autodiff.Grad(func(m model) *tensor.Tensor { return mse(m, xs, ys) })
	hvp := autodiff.Grad(func(m model) *tensor.Tensor { return dot(grad(m), v) })(m)
	const eps = 1e-2
	shift := func(s float32) model {
		return pytree.MapN(func(p []*tensor.Tensor) *tensor.Tensor {
			if !p[0].DType().IsFloat() {
				return p[0]
			}
			return tensor.Add(p[0], tensor.MulScalar(p[1], s))
		}, m, v)
	}
	gp, gm := grad(shift(eps)), grad(shift(-eps))
	for i := range m.Layers {
		num := tensor.MulScalar(tensor.Sub(gp.Layers[i].W, gm.Layers[i].W), 1/(2*eps))
		assert.InDeltaSlice(t, num.Float64s(), hvp.Layers[i].W.Float64s(), 1e-2)
	}
}

func TestVJP(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	w := randT(r, 3, 2)
	x := randT(r, 4, 3)
	type out struct{ Y, Z *tensor.Tensor }
	y, back := autodiff.VJP(func(w *tensor.Tensor) out {
		h := tensor.MatMul(x, w)
		return out{h, tensor.Sum(tensor.Square(h))}
	}, w)
	assert.False(t, y.Y.IsTraced())
	ct := out{tensor.OnesLike(y.Y), tensor.Scalar(0)}
	g1 := back(ct)
	g2 := back(ct) // the pullback can be called again
	// d/dw Σ(xw) = xᵀ·1.
	want := tensor.MatMulT(x, tensor.Ones(tensor.Float32, 4, 2), true, false)
	assert.InDeltaSlice(t, want.Float64s(), g1.Float64s(), 1e-6)
	assert.Equal(t, g1.Float32s(), g2.Float32s())
	assert.Panics(t, func() { back(out{tensor.Ones(tensor.Float32, 4, 3), tensor.Scalar(0)}) })
}

func TestConcurrentDifferentiation(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	m := newModel(r, 4, 8, 3)
	x, y := randT(r, 5, 4), randT(r, 5, 3)
	want := autodiff.Grad(func(m model) *tensor.Tensor { return mse(m, x, y) })(m)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := autodiff.Grad(func(m model) *tensor.Tensor { return mse(m, x, y) })(m)
			errs <- pytree.Diff(want, g, 0, 0)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}

func TestCustomVJP(t *testing.T) {
	// Identity forward, gradient clipped to [-1, 1] backward.
	clipGrad := autodiff.CustomVJP("clip_grad",
		func(x *tensor.Tensor) (*tensor.Tensor, struct{}) { return x, struct{}{} },
		func(_ struct{}, g *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(g, -1, 1) })
	x := tensor.FromFloat32([]float32{1, 2, 3})
	g := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.MulScalar(clipGrad(x), 5))
	})(x)
	assert.Equal(t, []float32{1, 1, 1}, g.Float32s())
	assert.Equal(t, []float32{1, 2, 3}, clipGrad(x).Float32s())

	// A custom rule with residuals: d/dx exp(x) = exp(x), saved.
	myExp := autodiff.CustomVJP("my_exp",
		func(x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
			y := tensor.Exp(x)
			return y, y
		},
		func(y, g *tensor.Tensor) *tensor.Tensor { return tensor.Mul(g, y) })
	err := autodiff.CheckGrad(func(xs []*tensor.Tensor) *tensor.Tensor { return myExp(xs[0]) }, []*tensor.Tensor{x}, autodiff.CheckOptions{})
	assert.NoError(t, err)
	rep := autodiff.Residuals(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(myExp(x)) }, x)
	assert.Equal(t, tensor.ResidualStat{Count: 1, Bytes: 12}, rep.ByLabel["custom_vjp"])
}

type deepMLP struct{ W, B []*tensor.Tensor }

// layer is relu(x·W + b) with the pre-activation named "pre".
func (m deepMLP) layer(i int, x *tensor.Tensor) *tensor.Tensor {
	return tensor.Relu(tensor.Named(tensor.Add(tensor.MatMul(x, m.W[i]), m.B[i]), "pre"))
}

func TestCheckpointPolicies(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	sizes := []int{16, 64, 64, 64, 8}
	var m deepMLP
	for i := 0; i+1 < len(sizes); i++ {
		m.W = append(m.W, tensor.MulScalar(randT(r, sizes[i], sizes[i+1]), float32(1/math.Sqrt(float64(sizes[i])))))
		m.B = append(m.B, randT(r, sizes[i+1]))
	}
	x, y := randT(r, 32, 16), randT(r, 32, 8)
	loss := func(policy autodiff.Policy, remat bool) func(m deepMLP) *tensor.Tensor {
		return func(m deepMLP) *tensor.Tensor {
			h := x
			for i := range m.W {
				f := func(h *tensor.Tensor) *tensor.Tensor { return m.layer(i, h) }
				if remat {
					f = autodiff.Checkpoint(f, policy)
				}
				h = f(h)
			}
			return tensor.Mean(tensor.Square(tensor.Sub(h, y)))
		}
	}
	base := autodiff.Grad(loss(nil, false))(m)
	policies := []struct {
		name   string
		policy autodiff.Policy
	}{
		{"nothing", autodiff.NothingSaveable},
		{"everything", autodiff.EverythingSaveable},
		{"dots", autodiff.DotsSaveable},
		{"only pre", autodiff.SaveOnlyTheseNames("pre")},
		{"anything except relu", autodiff.SaveAnythingExceptTheseNames("relu")},
	}
	reps := map[string]tensor.ResidualReport{}
	for _, p := range policies {
		g := autodiff.Grad(loss(p.policy, true))(m)
		require.NoError(t, pytree.Diff(base, g, 0, 1e-6), p.name)
		reps[p.name] = autodiff.Residuals(loss(p.policy, true), m)
	}
	plain := autodiff.Residuals(loss(nil, false), m)
	hidden := tensor.ResidualStat{Count: 4, Bytes: 4 * 32 * (64 + 64 + 64 + 8)}
	inputs := tensor.ResidualStat{Count: 3, Bytes: 4 * 32 * (64 + 64 + 64)} // layers 2-4's inputs
	// Outside the checkpoints the loss keeps (h - y) and the scalar sum.
	outside := tensor.ResidualStat{Count: 2, Bytes: 4*32*8 + 4}
	sum := func(ss ...tensor.ResidualStat) tensor.ResidualStat {
		var t tensor.ResidualStat
		for _, s := range ss {
			t.Count += s.Count
			t.Bytes += s.Bytes
		}
		return t
	}
	// Without remat each relu keeps its output (the next layer's input).
	assert.Equal(t, hidden, plain.ByLabel["relu"])
	assert.Equal(t, sum(hidden, outside), plain.Activations())
	// Saving everything keeps what no remat keeps.
	assert.Equal(t, plain.Activations(), reps["everything"].Activations())
	// Saving nothing keeps only the checkpoints' inputs.
	assert.Equal(t, sum(inputs, outside), reps["nothing"].Activations())
	assert.Equal(t, inputs, reps["nothing"].ByLabel["checkpoint"])
	// Saving the named pre-activations keeps them (relu is recomputed from
	// them, the matmuls are not), besides the checkpoint inputs.
	assert.Equal(t, hidden, reps["only pre"].ByLabel["pre"])
	assert.Equal(t, sum(hidden, inputs, outside), reps["only pre"].Activations())
	// Saving dots keeps the matmul outputs.
	assert.Equal(t, hidden, reps["dots"].ByLabel["matmul"])
	// Anything but relu: relu outputs are recomputed from the saved "pre".
	assert.Zero(t, reps["anything except relu"].ByLabel["relu"].Count)
	assert.Equal(t, hidden, reps["anything except relu"].ByLabel["pre"])
}
