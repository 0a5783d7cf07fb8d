package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// TestCotangentReuse: reusing cotangent buffers (in-place accumulation,
// donation to activation backward kernels) gives bit for bit the
// gradients of a pass that allocates every cotangent, leaves the inputs and
// the seed untouched, and does happen where the pass owns a cotangent.
func TestCotangentReuse(t *testing.T) {
	rng := newRNG(17)
	x := randF32(rng, 33, 20)
	w1, w2 := randF32(rng, 20, 300), randF32(rng, 300, 7)
	b1, b2 := randF32(rng, 300), randF32(rng, 7)
	layer := func(h, w, b *tensor.Tensor, act tensor.Activation) *tensor.Tensor {
		return tensor.BiasAct(tensor.MatMul(h, w), b, act)
	}
	cases := []struct {
		name   string
		f      func(xs []*tensor.Tensor) *tensor.Tensor
		reuses bool // the pass is expected to reuse some buffer
	}{
		{"mlp relu", func(xs []*tensor.Tensor) *tensor.Tensor {
			return layer(layer(xs[0], xs[1], xs[2], tensor.ActRelu), xs[3], xs[4], tensor.ActIdentity)
		}, true},
		{"mlp gelu", func(xs []*tensor.Tensor) *tensor.Tensor {
			return layer(layer(xs[0], xs[1], xs[2], tensor.ActGelu), xs[3], xs[4], tensor.ActTanh)
		}, true},
		{"activation chain", func(xs []*tensor.Tensor) *tensor.Tensor {
			h := tensor.MatMul(xs[0], xs[1])
			return tensor.Square(tensor.Sigmoid(tensor.Silu(tensor.Tanh(tensor.GeluExact(tensor.Relu(h))))))
		}, true},
		{"fan-out accumulates", func(xs []*tensor.Tensor) *tensor.Tensor {
			h := tensor.MatMul(xs[0], xs[1])
			a := tensor.MatMul(tensor.Relu(h), xs[3])
			b := tensor.MatMul(tensor.Tanh(h), xs[3])
			c := tensor.MatMul(tensor.Sigmoid(h), xs[3])
			return tensor.Add(tensor.Add(a, b), c)
		}, true},
		{"value used twice", func(xs []*tensor.Tensor) *tensor.Tensor {
			h := tensor.Relu(tensor.MatMul(xs[0], xs[1]))
			return tensor.Mul(h, h)
		}, false},
		{"identity bias passes the seed through", func(xs []*tensor.Tensor) *tensor.Tensor {
			return tensor.BiasAct(tensor.Tanh(tensor.MatMul(xs[0], xs[1])), xs[2], tensor.ActIdentity)
		}, false},
		{"one cotangent for two operands", func(xs []*tensor.Tensor) *tensor.Tensor {
			// x and b of one shape: BiasAct's VJP hands both the same tensor.
			u := tensor.Sum(tensor.MatMul(xs[0], xs[1]), 0)
			return tensor.BiasAct(tensor.Relu(u), tensor.Tanh(tensor.Sum(tensor.MatMul(xs[0], xs[1]), 0)), tensor.ActIdentity)
		}, false},
		{"residual add: one owned cotangent in two slots", func(xs []*tensor.Tensor) *tensor.Tensor {
			// Add's VJP hands the matmul's cotangent to h and to the
			// branch; once the branch consumed it, h's slot owns it and
			// the branch's gradient is added into it in place.
			h := tensor.MatMul(xs[0], xs[1])
			r := tensor.Add(h, tensor.Tanh(h))
			return tensor.MatMul(r, xs[3])
		}, true},
		{"reshape of an owned cotangent", func(xs []*tensor.Tensor) *tensor.Tensor {
			// Reshape's VJP returns a view of the matmul's cotangent,
			// which the pass then owns: Relu's VJP writes over it.
			h := tensor.Reshape(tensor.MatMul(xs[0], xs[1]), 33, 30, 10)
			return tensor.MatMul(tensor.Reshape(tensor.Relu(h), 33, 300), xs[3])
		}, true},
		{"a sum's broadcast cotangent", func(xs []*tensor.Tensor) *tensor.Tensor {
			// Sum's VJP broadcasts its cotangent into a new tensor, which
			// the pass owns: Relu's VJP writes over it.
			return tensor.Sum(tensor.Relu(tensor.MatMul(xs[0], xs[1])), 1)
		}, true},
		{"residual add into a value used twice", func(xs []*tensor.Tensor) *tensor.Tensor {
			h := tensor.MatMul(xs[0], xs[1])
			r := tensor.Add(h, h)
			return tensor.MatMul(tensor.Add(r, tensor.Sigmoid(r)), xs[3])
		}, true},
		{"seed into a donating op", func(xs []*tensor.Tensor) *tensor.Tensor {
			return tensor.Relu(tensor.BiasAct(tensor.MatMul(xs[0], xs[1]), xs[2], tensor.ActIdentity))
		}, false},
	}
	xs := []*tensor.Tensor{x, w1, b1, w2, b2}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := func(reuse bool) ([]*tensor.Tensor, *tensor.Tensor) {
				defer tensor.SetCotangentReuse(reuse)()
				tr := tensor.NewTrace()
				leaves := make([]*tensor.Tensor, len(xs))
				for i, v := range xs {
					leaves[i] = tr.Leaf(v)
				}
				y := c.f(leaves)
				seed := tensor.Full(tensor.Float32, 0.5, y.Shape()...)
				before := snapshot(append([]*tensor.Tensor{seed}, xs...)...)
				gs := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{seed}, leaves, false)
				requireUnchanged(t, before)
				return gs, seed
			}
			want, _ := run(false)
			n0 := tensor.CotangentReuses()
			got, _ := run(true)
			for i := range want {
				require.Equal(t, want[i].Float32s(), got[i].Float32s(), "gradient %d", i)
			}
			if c.reuses {
				require.Greater(t, tensor.CotangentReuses(), n0, "no buffer was reused")
			}
		})
	}
}

// TestCotangentReuseHigherOrder: inside a gradient that is itself being
// differentiated, nothing is reused (cotangents are traced), and second
// derivatives are those of a pass that allocates everything.
func TestCotangentReuseHigherOrder(t *testing.T) {
	rng := newRNG(18)
	xs := []*tensor.Tensor{randF32(rng, 5, 4), randF32(rng, 4, 6)}
	f := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Gelu(tensor.Relu(tensor.MatMul(xs[0], xs[1]))))
	}
	second := func(reuse bool) []*tensor.Tensor {
		defer tensor.SetCotangentReuse(reuse)()
		return grad(func(ys []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(grad(f, ys)[0]) }, xs)
	}
	want := second(false)
	got := second(true)
	for i := range want {
		require.Equal(t, want[i].Float32s(), got[i].Float32s())
	}
	checkGrad(t, gradOf(f, 0), xs)
}

// A cotangent the backward pass made takes the logical axes of its value;
// one it did not make (the seed, handed back as the gradient of the
// output itself) is returned as it is, unnamed, and the inputs keep their
// own names.
func TestBackwardNamesItsCotangents(t *testing.T) {
	rng := newRNG(5)
	x := randF32(rng, 4, 3)
	w := tensor.WithLogicalAxes(randF32(rng, 3, 2), "embed", "mlp")
	tr := tensor.NewTrace()
	wt := tr.Leaf(w)
	y := tensor.Sum(tensor.MatMul(x, wt))
	seed := tensor.OnesLike(y)
	gs := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{seed}, []*tensor.Tensor{wt}, false)
	require.Equal(t, []string{"embed", "mlp"}, gs[0].LogicalAxes())
	// The gradient of Sum(x·w) with respect to w is xᵀ·1: column sums of x
	// repeated over the two columns.
	xs := x.Float32s()
	for i := range 3 {
		want := xs[i] + xs[3+i] + xs[6+i] + xs[9+i]
		require.InDelta(t, want, gs[0].Float32s()[2*i], 1e-5)
		require.InDelta(t, want, gs[0].Float32s()[2*i+1], 1e-5)
	}

	tr2 := tensor.NewTrace()
	v := tensor.WithLogicalAxes(randF32(rng, 1), "b")
	vt := tr2.Leaf(v)
	seed2 := tensor.OnesLike(v)
	g2 := tensor.Backward(tr2, []*tensor.Tensor{vt}, []*tensor.Tensor{seed2}, []*tensor.Tensor{vt}, false)
	require.Nil(t, seed2.LogicalAxes(), "the caller's seed was renamed")
	require.Equal(t, []float32{1}, g2[0].Float32s())
}

// TestOuterTraceKeepsConsumedCotangents differentiates a gradient whose
// inner backward pass makes an untraced cotangent (the VJP of X @ B with a
// constant B and seed) and hands it to a VJP that the outer trace records
// with the cotangent as a residual (exp's: g · exp(q), with q traced). The
// inner pass must not donate that cotangent once consumed: the outer
// backward pass reads it. CheckGrad compares the outer gradient with
// finite differences.
func TestOuterTraceKeepsConsumedCotangents(t *testing.T) {
	x := srtRandn(1, 2, 3)
	b := srtRandn(2, 3, 4)
	inner := func(xs []*tensor.Tensor) *tensor.Tensor {
		// ∂/∂x of sum(c · (exp(x·a) @ B)), with a = xs[0] traced outside.
		tr := tensor.NewTrace()
		xl := tr.Leaf(x)
		z := tensor.MatMul(tensor.Exp(tensor.Mul(xl, xs[0])), b)
		c := srtRandn(3, z.Shape()...)
		return tensor.Backward(tr, []*tensor.Tensor{z}, []*tensor.Tensor{c}, []*tensor.Tensor{xl}, false)[0]
	}
	srtCheckGrad(t, inner, tensor.MulScalar(srtRandn(4, 2, 3), 0.5))
}
