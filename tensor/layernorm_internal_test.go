package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rule cases of layer_norm and its backward op (ad_rules_test.go).
var _ = addRuleCases(
	ruleCase{name: "layerNormOp", op: &layerNormOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 5), rPos(r, 5), rF(r, 5)) },
		f: func(x []*Tensor) []*Tensor {
			return applyAll(layerNormOp, lnParams{1e-5}, x) // y, mean and rstd
		}, vmapTol: 1e-6},
	ruleCase{name: "layerNormBwdOp", op: &layerNormBwdOp,
		in: func(r *rand.Rand) []*Tensor {
			return args(rF(r, 3, 5), rF(r, 3, 5), rPos(r, 5), rF(r, 3), rPos(r, 3))
		},
		f: ap(&layerNormBwdOp, nil), vmapTol: 1e-5},
)

// The kernels split over goroutines give the serial results bit for bit.
func TestLayerNormKernelsParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 1))
	x, g := randTensor(rng, 3, 70, 20), randTensor(rng, 3, 70, 20)
	w, b := randTensor(rng, 20), randTensor(rng, 20)
	run := func() []*Tensor {
		out := ApplyN(layerNormOp, lnParams{1e-5}, x, w, b)
		return append(out, ApplyN(layerNormBwdOp, nil, g, x, w, out[1], out[2])...)
	}
	want := run()
	withParallel(t, 16)
	spawned := parallelSpawned.Load()
	got := run()
	require.Greater(t, parallelSpawned.Load(), spawned, "no goroutine started")
	for i := range want {
		require.Equal(t, want[i].f32(), got[i].f32(), "result %d", i)
	}
}

// The fused op and its gradients equal the composition's within float32
// rounding, and its mean and rstd are the composition's.
func TestLayerNormMatchesComposition(t *testing.T) {
	rng := rand.New(rand.NewPCG(82, 1))
	for _, shape := range [][]int{{7}, {4, 9}, {2, 33, 300}} {
		D := shape[len(shape)-1]
		x, c := randTensor(rng, shape...), randTensor(rng, shape...)
		x = AddScalar(x, 3) // a mean far from 0
		w, b := randTensor(rng, D), randTensor(rng, D)
		fused := func(in []*Tensor) *Tensor { return LayerNorm(in[0], in[1], in[2], 1e-5) }
		comp := func(in []*Tensor) *Tensor { y, _, _ := layerNormComposed(in[0], in[1], in[2], 1e-5); return y }
		outs := ApplyN(layerNormOp, lnParams{1e-5}, x, w, b)
		y, mean, rstd := layerNormComposed(x, w, b, 1e-5)
		requireNear(t, y, outs[0], 1e-5, "y")
		requireNear(t, Squeeze(mean, -1), outs[1], 1e-6, "mean")
		requireNear(t, Squeeze(rstd, -1), outs[2], 1e-5, "rstd")
		gf, gc := vjpAll(fused, c, x, w, b), vjpAll(comp, c, x, w, b)
		for i := range gf {
			requireNear(t, gc[i], gf[i], 2e-4, "gradient %d", i)
		}
	}
}

// requireNear checks |got - want| ≤ tol·max(1, max|want|) elementwise.
func requireNear(t *testing.T, want, got *Tensor, tol float64, msg string, args ...any) {
	t.Helper()
	require.Equal(t, want.shape, got.shape)
	w, g := want.Float64s(), got.Float64s()
	scale := 1.0
	for _, v := range w {
		scale = max(scale, v, -v)
	}
	for i := range w {
		require.InDeltaf(t, w[i], g[i], tol*scale, msg+" at %d", append(args, i)...)
	}
}

// vjpAll returns the cotangents of xs for the output cotangent c of f.
func vjpAll(f func([]*Tensor) *Tensor, c *Tensor, xs ...*Tensor) []*Tensor {
	tr := NewTrace()
	leaves := make([]*Tensor, len(xs))
	for i, x := range xs {
		leaves[i] = tr.Leaf(x)
	}
	return Backward(tr, []*Tensor{f(leaves)}, []*Tensor{c}, leaves, false)
}
