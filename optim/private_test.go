package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// perExample returns per-example gradients of newModel's W and B for n
// examples, example b scaled by scales[b] so that some exceed a clip
// norm and some do not, and their float64 values.
func perExample(scales []float64) (model, [][]float64, [][]float64) {
	n := len(scales)
	var w, b []float64
	var ws, bs [][]float64
	for i, s := range scales {
		wi, bi := wave(12, float64(i)+0.5), wave(4, float64(i)+3.1)
		for k := range wi {
			wi[k] *= s
		}
		for k := range bi {
			bi[k] *= s
		}
		w, b = append(w, wi...), append(b, bi...)
		ws, bs = append(ws, wi), append(bs, bi)
	}
	return model{W: f32(w, n, 3, 4), B: f32(b, n, 4)}, ws, bs
}

// clippedSum is PerExampleGlobalNormClip in float64: the examples'
// gradients scaled to norm at most c, summed, and the count clipped.
func clippedSum(ws, bs [][]float64, c float64) ([]float64, []float64, int) {
	w, b := make([]float64, len(ws[0])), make([]float64, len(bs[0]))
	clipped := 0
	for i := range ws {
		sq := 0.0
		for _, v := range append(append([]float64{}, ws[i]...), bs[i]...) {
			sq += v * v
		}
		div := math.Max(math.Sqrt(sq)/c, 1)
		if div > 1 {
			clipped++
		}
		for k, v := range ws[i] {
			w[k] += v / div
		}
		for k, v := range bs[i] {
			b[k] += v / div
		}
	}
	return w, b, clipped
}

func TestPerExampleGlobalNormClip(t *testing.T) {
	g, ws, bs := perExample([]float64{0.1, 1, 3, 0.05, 10})
	for _, c := range []float64{0.5, 2, 1e3} {
		sum, count := optim.PerExampleGlobalNormClip(g, c)
		w, b, n := clippedSum(ws, bs, c)
		s := sum.(model)
		require.InDeltaSlice(t, w, s.W.Float64s(), 1e-5, "clip %g", c)
		require.InDeltaSlice(t, b, s.B.Float64s(), 1e-5, "clip %g", c)
		require.Equal(t, []int{3, 4}, s.W.Shape())
		require.Nil(t, s.Ids)
		require.Equal(t, n, int(count.Item()), "clip %g", c)
	}
	// The clip 2 case clips some examples, not all.
	_, _, n := clippedSum(ws, bs, 2)
	require.Equal(t, 2, n)
}

// TestDifferentiallyPrivateAggregate: the update is the clipped sum plus
// noise of standard deviation clip·multiplier drawn with optax's keys,
// over the number of examples; the state carries the next key.
func TestDifferentiallyPrivateAggregate(t *testing.T) {
	g, ws, bs := perExample([]float64{0.1, 1, 3, 0.05, 10})
	const clip, mult, seed = 2.0, 1.5, 42
	w, b, _ := clippedSum(ws, bs, clip)

	// Without noise: the mean of the clipped gradients.
	tx := optim.DifferentiallyPrivateAggregate(clip, 0, seed)
	u, _ := tx.Update(g, tx.Init(nil), nil)
	mean := func(v []float64) []float64 {
		out := make([]float64, len(v))
		for i := range v {
			out[i] = v[i] / 5
		}
		return out
	}
	require.InDeltaSlice(t, mean(w), u.(model).W.Float64s(), 1e-6)
	require.InDeltaSlice(t, mean(b), u.(model).B.Float64s(), 1e-6)

	// With noise, two steps: each step splits the state's key into three
	// (next key, W's noise, B's noise).
	tx = optim.DifferentiallyPrivateAggregate(clip, mult, seed)
	st := tx.Init(nil)
	key := tensor.NewKey(seed)
	for step := range 2 {
		u, st = tx.Update(g, st, nil)
		ks := key.Split(3)
		for name, c := range map[string]struct {
			got  *tensor.Tensor
			sum  []float64
			k    tensor.Key
			dims []int
		}{
			"W": {u.(model).W, w, ks[1], []int{3, 4}},
			"B": {u.(model).B, b, ks[2], []int{4}},
		} {
			noise := tensor.Normal(c.k, c.dims...).Float64s()
			want := make([]float64, len(c.sum))
			for i := range want {
				want[i] = (c.sum[i] + clip*mult*noise[i]) / 5
			}
			require.InDeltaSlice(t, want, c.got.Float64s(), 1e-5, "step %d %s", step, name)
		}
		d := ks[0].Data()
		require.Equal(t, []int32{int32(d[0]), int32(d[1])}, st.(optim.DifferentiallyPrivateAggregateState).RNGKey.Int32s())
		key = ks[0]
	}

	// In a chain with SGD: one step of DP-SGD moves the parameters by
	// -lr times the update.
	params := newModel()
	opt := optim.Chain(optim.DifferentiallyPrivateAggregate(clip, 0, seed), optim.SGD(optim.Constant(0.5)))
	next, _ := optim.Step(opt, params, g, opt.Init(params))
	want := pytree.Leaves(params)[0].Float64s()
	for i := range want {
		want[i] -= 0.5 * w[i] / 5
	}
	require.InDeltaSlice(t, want, next.W.Float64s(), 1e-6)
	require.Equal(t, params.Ids, next.Ids)
}

func TestDifferentiallyPrivateAggregatePanics(t *testing.T) {
	g, _, _ := perExample([]float64{1, 2})
	tx := optim.DifferentiallyPrivateAggregate(1, 1, 0)
	require.PanicsWithValue(t, "optim.DifferentiallyPrivateAggregate: l2NormClip 0, want > 0",
		func() { optim.DifferentiallyPrivateAggregate(0, 1, 0) })
	require.PanicsWithValue(t, "optim.DifferentiallyPrivateAggregate: noiseMultiplier -1 is negative",
		func() { optim.DifferentiallyPrivateAggregate(1, -1, 0) })
	require.PanicsWithValue(t, "optim.DifferentiallyPrivateAggregate: gradient B f32[3,4] has 3 examples along axis 0 but W f32[2,3,4] has 2",
		func() { tx.Update(model{W: g.W, B: tensor.Zeros(tensor.Float32, 3, 4)}, tx.Init(nil), nil) })
	require.PanicsWithValue(t, "optim.PerExampleGlobalNormClip: gradient B f32[] has no batch axis: want per-example gradients, the examples along axis 0 of every leaf (autodiff.Vmap of the gradient)",
		func() { optim.PerExampleGlobalNormClip(model{W: g.W, B: tensor.Scalar(1)}, 1) })
	require.PanicsWithValue(t, "optim.DifferentiallyPrivateAggregate: state is optim.EmptyState, want optim.DifferentiallyPrivateAggregateState (the state Init returned)",
		func() { tx.Update(g, optim.EmptyState{}, nil) })
}
