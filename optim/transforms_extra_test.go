package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

type extraModel struct{ A, B *tensor.Tensor }

// leafAs builds a float32 or float64 tensor of the given values.
func leafAs(dt tensor.DType, v []float64, shape ...int) *tensor.Tensor {
	if dt == tensor.Float64 {
		return tensor.FromFloat64s(v, shape...)
	}
	return f32(v, shape...)
}

var extraDTypes = []tensor.DType{tensor.Float32, tensor.Float64}

func TestZeroNans(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, dt := range extraDTypes {
		tx := optim.ZeroNans()
		g := extraModel{A: leafAs(dt, []float64{1, nan, -inf, 2}, 2, 2), B: leafAs(dt, []float64{3, 4}, 2)}
		st := tx.Init(g)
		found := st.(optim.ZeroNansState).FoundNaN.(extraModel)
		assert.Equal(t, []bool{false}, found.A.Bools(), "%v: Init", dt)
		u, st := tx.Update(g, st, nil)
		um := u.(extraModel)
		require.Equal(t, dt, um.A.DType())
		assert.Equal(t, []float64{1, 0, math.Inf(-1), 2}, um.A.Float64s(), "%v: NaN to 0, infinities kept", dt)
		assert.Equal(t, []float64{3, 4}, um.B.Float64s(), "%v", dt)
		found = st.(optim.ZeroNansState).FoundNaN.(extraModel)
		assert.Equal(t, []bool{true}, found.A.Bools(), "%v", dt)
		assert.Equal(t, []bool{false}, found.B.Bools(), "%v", dt)
		// A nil gradient keeps its flag.
		u, st = tx.Update(extraModel{B: g.B}, st, nil)
		assert.Nil(t, u.(extraModel).A)
		assert.Equal(t, []bool{true}, st.(optim.ZeroNansState).FoundNaN.(extraModel).A.Bools(), "%v", dt)
		// found_nan is the last update's, not a running flag.
		_, st = tx.Update(extraModel{A: leafAs(dt, []float64{1, 2, 3, 4}, 2, 2), B: g.B}, st, nil)
		assert.Equal(t, []bool{false}, st.(optim.ZeroNansState).FoundNaN.(extraModel).A.Bools(), "%v", dt)
		assert.PanicsWithValue(t, "optim.ZeroNans: gradients and optimizer state's FoundNaN differ in structure: *tensor.Tensor: *tensor.Tensor vs extraModel (gradients vs optimizer state's FoundNaN)\n  gradients: *\n  optimizer state's FoundNaN: extraModel{A: *, B: *}", func() { tx.Update(g.A, st, nil) })
	}
}

func TestAdaptiveGradClip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p, g    []float64
		shape   []int
		clip    float64
		want    []float64
		comment string
	}{
		// Columns of [in, out]: ‖p‖ = 5, 1; ‖g‖ = 10, √0.05; limits 2.5, 0.5:
		// column 0 scales by 2.5/10, column 1 passes.
		{"matrix [in,out]", []float64{3, 0, 4, 1}, []float64{6, 0.1, 8, 0.2}, []int{2, 2}, 0.5,
			[]float64{1.5, 0.1, 2, 0.2}, ""},
		// One unit; ‖p‖ = 0 gives eps: limit 0.5e-3, ‖g‖ = 5.
		{"vector, eps", []float64{0, 0}, []float64{3, 4}, []int{2}, 0.5, []float64{3e-4, 4e-4}, ""},
		// [1, 2] has one dimension above 1: one unit, ‖p‖ = 5, ‖g‖ = 10.
		{"row [1,2]", []float64{3, 4}, []float64{6, 8}, []int{1, 2}, 0.5, []float64{1.5, 2}, ""},
		// Rank 3 [in, heads, d]: over axis 0. Units (h,d): ‖p‖ = 1, 2; ‖g‖ = 4, 0.5.
		{"rank 3", []float64{1, 0, 0, 2}, []float64{0, 0, 4, 0.5}, []int{2, 1, 2}, 0.5,
			[]float64{0, 0, 0.5, 0.5}, ""},
		// Conv [out, in, kh, kw]: per output channel, ‖p‖ = 1, 2; ‖g‖ = 4, 0.5.
		{"conv [out,in,kh,kw]", []float64{1, 0, 0, 2}, []float64{0, 4, 0.3, 0.4}, []int{2, 1, 1, 2}, 0.5,
			[]float64{0, 0.5, 0.3, 0.4}, ""},
		// Exactly at the limit clips (optax's trigger is g < max), to itself.
		{"at the limit", []float64{3, 4}, []float64{1.5, 2}, []int{2}, 0.5, []float64{1.5, 2}, ""},
	} {
		for _, dt := range extraDTypes {
			tx := optim.AdaptiveGradClip(tc.clip, 1e-3)
			p, g := leafAs(dt, tc.p, tc.shape...), leafAs(dt, tc.g, tc.shape...)
			u, _ := tx.Update(g, tx.Init(p), p)
			ut := u.(*tensor.Tensor)
			require.Equal(t, dt, ut.DType(), tc.name)
			assert.Equal(t, tc.shape, ut.Shape(), tc.name)
			assert.InDeltaSlice(t, tc.want, ut.Float64s(), 1e-6, "%s %v", tc.name, dt)
		}
	}
}

func TestCentralizeAndSign(t *testing.T) {
	for _, dt := range extraDTypes {
		for _, tc := range []struct {
			name  string
			tx    optim.Transform
			g     []float64
			shape []int
			want  []float64
		}{
			// Row means 2 and 6 (every axis but the first).
			{"centralize matrix", optim.Centralize(), []float64{1, 2, 3, 4, 6, 8}, []int{2, 3}, []float64{-1, 0, 1, -2, 0, 2}},
			// optax.centralize's docstring example.
			{"centralize optax example", optim.Centralize(), []float64{1, 2, 3, 4, 5, 6}, []int{2, 3}, []float64{-1, 0, 1, -1, 0, 1}},
			{"centralize rank 3", optim.Centralize(), []float64{1, 3, 5, 9}, []int{2, 1, 2}, []float64{-1, 1, -2, 2}},
			{"centralize vector", optim.Centralize(), []float64{1, 2}, []int{2}, []float64{1, 2}},
			{"sign", optim.ScaleBySign(), []float64{-2, 0, 3.5, 1e-30}, []int{4}, []float64{-1, 0, 1, 1}},
			{"signSGD", optim.SignSGD(optim.Constant(0.1)), []float64{-2, 0, 3.5}, []int{3}, []float64{0.1, 0, -0.1}},
		} {
			g := leafAs(dt, tc.g, tc.shape...)
			u, _ := tc.tx.Update(g, tc.tx.Init(g), g)
			ut := u.(*tensor.Tensor)
			require.Equal(t, dt, ut.DType(), tc.name)
			assert.InDeltaSlice(t, tc.want, ut.Float64s(), 1e-6, "%s %v", tc.name, dt)
		}
	}
}

func TestApplyEvery(t *testing.T) {
	for _, dt := range extraDTypes {
		tx := optim.ApplyEvery(3)
		p := leafAs(dt, []float64{0, 0}, 2)
		st := tx.Init(p)
		wants := [][]float64{{0, 0}, {0, 0}, {6, 12}, {0, 0}, {0, 0}, {15, 30}, {0, 0}}
		counts := []int32{1, 2, 0, 1, 2, 0, 1}
		for i, want := range wants {
			g := float64(i + 1)
			var u any
			u, st = tx.Update(leafAs(dt, []float64{g, 2 * g}, 2), st, nil)
			assert.Equal(t, want, u.(*tensor.Tensor).Float64s(), "%v step %d", dt, i)
			assert.Equal(t, dt, u.(*tensor.Tensor).DType())
			assert.Equal(t, []int32{counts[i]}, st.(optim.ApplyEveryState).Count.Int32s(), "%v step %d", dt, i)
		}
	}
	// k = 1 is the identity.
	tx := optim.ApplyEvery(1)
	g := vec(1, -2)
	u, _ := tx.Update(g, tx.Init(g), nil)
	assert.Equal(t, []float64{1, -2}, u.(*tensor.Tensor).Float64s())
}

func TestAddNoise(t *testing.T) {
	// Variance eta/(1+t)^gamma: 4 at t = 0, 1 at t = 1; keys split as optax.
	const eta, gamma, seed = 4, 2, 7
	for _, dt := range extraDTypes {
		tx := optim.AddNoise(eta, gamma, seed)
		g := extraModel{A: leafAs(dt, []float64{1, 2, 3}, 3), B: leafAs(dt, []float64{0, 0}, 1, 2)}
		st := tx.Init(g)
		key := tensor.NewKey(seed)
		normal := func(k tensor.Key, shape ...int) []float64 {
			if dt == tensor.Float64 {
				return tensor.NormalFloat64(k, shape...).Float64s()
			}
			return tensor.Normal(k, shape...).Float64s()
		}
		for step, std := range []float64{2, 1} {
			keys := key.Split(3)
			var u any
			u, st = tx.Update(g, st, nil)
			um := u.(extraModel)
			na, nb := normal(keys[1], 3), normal(keys[2], 1, 2)
			for i := range na {
				assert.InDelta(t, g.A.Float64s()[i]+std*na[i], um.A.Float64s()[i], 1e-6, "%v step %d", dt, step)
			}
			for i := range nb {
				assert.InDelta(t, std*nb[i], um.B.Float64s()[i], 1e-6, "%v step %d", dt, step)
			}
			assert.Equal(t, dt, um.A.DType())
			assert.Equal(t, []int32{int32(step + 1)}, st.(optim.AddNoiseState).Count.Int32s())
			key = keys[0]
		}
	}
}

func TestSkipLargeUpdates(t *testing.T) {
	for _, dt := range extraDTypes {
		tx := optim.SkipLargeUpdates(optim.Trace(0.5, false), 10)
		st := tx.Init(leafAs(dt, []float64{0, 0}, 2))
		for i, tc := range []struct {
			g, want []float64
			skipped int32
		}{
			{[]float64{1, 2}, []float64{1, 2}, 0},     // Σu² = 5 < 10
			{[]float64{3, 1}, []float64{0, 0}, 1},     // Σu² = 10: skipped, trace kept
			{[]float64{1, 0}, []float64{1.5, 1}, 1},   // [1, 0] + 0.5·[1, 2]
			{[]float64{nan(), 0}, []float64{0, 0}, 2}, // NaN is not below
		} {
			var u any
			u, st = tx.Update(leafAs(dt, tc.g, 2), st, nil)
			assert.InDeltaSlice(t, tc.want, u.(*tensor.Tensor).Float64s(), 1e-6, "%v step %d", dt, i)
			assert.Equal(t, []int32{tc.skipped}, st.(optim.SkipLargeUpdatesState).Skipped.Int32s(), "%v step %d", dt, i)
		}
	}
}

func nan() float64 { return math.NaN() }

func TestExtraTransformsPanics(t *testing.T) {
	p5 := tensor.Zeros(tensor.Float32, 1, 2, 1, 2, 2)
	for _, tc := range []struct {
		name string
		f    func()
		msg  string
	}{
		{"agc clipping", func() { optim.AdaptiveGradClip(0, 1e-3) }, "optim.AdaptiveGradClip: clipping 0, want finite > 0"},
		{"agc eps", func() { optim.AdaptiveGradClip(1, -1) }, "optim.AdaptiveGradClip: eps -1 is negative"},
		{"agc no params", func() {
			tx := optim.AdaptiveGradClip(1, 1e-3)
			tx.Update(vec(1), tx.Init(vec(1)), nil)
		}, "optim.AdaptiveGradClip: Update needs params"},
		{"agc rank 5", func() {
			tx := optim.AdaptiveGradClip(1, 1e-3)
			tx.Update(p5, tx.Init(p5), p5)
		}, "optim.AdaptiveGradClip: leaf f32[1,2,1,2,2] has rank 5; unit-wise norms are defined for ranks up to 4"},
		{"apply every k", func() { optim.ApplyEvery(0) }, "optim.ApplyEvery: k 0, want >= 1"},
		{"add noise eta", func() { optim.AddNoise(-1, 0.55, 0) }, "optim.AddNoise: eta -1 is negative"},
		{"add noise gamma", func() { optim.AddNoise(1, math.Inf(1), 0) }, "optim.AddNoise: eta 1, gamma +Inf, want both finite"},
		{"skip max", func() { optim.SkipLargeUpdates(optim.Identity(), 0) }, "optim.SkipLargeUpdates: maxSquaredNorm 0, want > 0"},
		{"skip nil", func() { optim.SkipLargeUpdates(nil, 1) }, "optim.SkipLargeUpdates: nil inner transform"},
		{"signSGD nil", func() { optim.SignSGD(nil) }, "optim.SignSGD: nil learning rate schedule (use optim.Constant for a fixed rate)"},
		{"zero nans state", func() { optim.ZeroNans().Update(vec(1), optim.EmptyState{}, nil) }, "optim.ZeroNans: state is optim.EmptyState, want optim.ZeroNansState (the state Init returned)"},
	} {
		assert.PanicsWithValue(t, tc.msg, tc.f, tc.name)
	}
	// A gradient of another shape names both operands.
	tx := optim.AdaptiveGradClip(1, 1e-3)
	p := tensor.Zeros(tensor.Float32, 2, 3)
	assert.PanicsWithValue(t, "optim.AdaptiveGradClip: gradient is f32[3,2], parameter f32[2,3]", func() { tx.Update(tensor.Zeros(tensor.Float32, 3, 2), tx.Init(p), p) })
}
