package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// refChannelAffine is act(x·s[c] + b[c]) and its gradients for the
// cotangent g, in float64 loops over x [N, C, S...].
func refChannelAffine(x, s, b, g []float32, n, c int, act func(float64) (y, dy float64)) (y, dx, ds, db []float64) {
	w := len(x) / max(1, n*c)
	y, dx = make([]float64, len(x)), make([]float64, len(x))
	ds, db = make([]float64, c), make([]float64, c)
	for i := range x {
		k := i / w % c
		z := float64(x[i])*float64(s[k]) + float64(b[k])
		v, d := act(z)
		y[i] = v
		gz := float64(g[i]) * d
		dx[i] = gz * float64(s[k])
		ds[k] += gz * float64(x[i])
		db[k] += gz
	}
	return y, dx, ds, db
}

func TestChannelAffineAgainstLoops(t *testing.T) {
	acts := []struct {
		act tensor.Activation
		f   func(z float64) (float64, float64)
	}{
		{tensor.ActIdentity, func(z float64) (float64, float64) { return z, 1 }},
		{tensor.ActRelu, func(z float64) (float64, float64) {
			if z > 0 {
				return z, 1
			}
			return 0, 0
		}},
		{tensor.ActTanh, func(z float64) (float64, float64) { y := math.Tanh(z); return y, 1 - y*y }},
	}
	rng := newRNG(70)
	for _, shape := range [][]int{{2, 3, 5, 4}, {4, 3}, {3, 2, 37}, {2, 3, 0}, {1, 5, 2, 2, 3}} {
		c := shape[1]
		x, s, b := randF32(rng, shape...), randF32(rng, c), randF32(rng, c)
		g := randF32(rng, shape...)
		for _, a := range acts {
			name := a.act.String() + shapeName(shape)
			y, dx, ds, db := refChannelAffine(x.Float32s(), s.Float32s(), b.Float32s(), g.Float32s(), shape[0], c, a.f)
			requireClose(t, y, tensor.ChannelAffine(x, s, b, a.act), 1e-6, 1e-6, name)
			tr, l := traceLeaves(x, s, b)
			gs := tensor.Backward(tr, ts(tensor.ChannelAffine(l[0], l[1], l[2], a.act)), ts(g), l, false)
			requireClose(t, dx, gs[0], 1e-6, 1e-5, name+" dx")
			requireClose(t, ds, gs[1], 1e-5, 1e-5, name+" dscale")
			requireClose(t, db, gs[2], 1e-5, 1e-5, name+" dshift")
		}
	}
}

// The forward result is that of the composition act(x·s + b), bit for bit,
// in float32, and in float64 (which composes).
func TestChannelAffineEqualsComposition(t *testing.T) {
	rng := newRNG(71)
	x, s, b := randF32(rng, 3, 4, 6, 5), randF32(rng, 4), randF32(rng, 4)
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		x, s, b := tensor.Convert(x, dt), tensor.Convert(s, dt), tensor.Convert(b, dt)
		for _, a := range activations {
			want := a.f(tensor.Add(tensor.Mul(x, tensor.Reshape(s, 1, 4, 1, 1)), tensor.Reshape(b, 1, 4, 1, 1)))
			got := tensor.ChannelAffine(x, s, b, a.act)
			require.Equal(t, dt, got.DType())
			require.Equal(t, tensor.Convert(want, tensor.Float64).Float64s(), tensor.Convert(got, tensor.Float64).Float64s(), "%v %v", dt, a.act)
		}
	}
}

// ChannelAffineAdd is act(x·s + b + r): the composition's bits forward in
// float32 and float64, and its gradients (of the residual too, or not
// asked for it) against float64 loops.
func TestChannelAffineAdd(t *testing.T) {
	rng := newRNG(73)
	shape := []int{3, 4, 6, 5}
	x, s, b, r := randF32(rng, shape...), randF32(rng, 4), randF32(rng, 4), randF32(rng, shape...)
	g := randF32(rng, shape...)
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		x, s, b, r := tensor.Convert(x, dt), tensor.Convert(s, dt), tensor.Convert(b, dt), tensor.Convert(r, dt)
		for _, a := range activations {
			z := tensor.Add(tensor.Mul(x, tensor.Reshape(s, 1, 4, 1, 1)), tensor.Reshape(b, 1, 4, 1, 1))
			want := a.f(tensor.Add(z, r))
			got := tensor.ChannelAffineAdd(x, s, b, r, a.act)
			require.Equal(t, tensor.Convert(want, tensor.Float64).Float64s(), tensor.Convert(got, tensor.Float64).Float64s(), "%v %v", dt, a.act)
		}
	}
	relu := func(z float64) (float64, float64) {
		if z > 0 {
			return z, 1
		}
		return 0, 0
	}
	// The reference: ChannelAffine's loops on x with the shift made
	// per element (x·s + b + r = x·s + (b + r)).
	xs, ss, bs, rs, gs := x.Float32s(), s.Float32s(), b.Float32s(), r.Float32s(), g.Float32s()
	w := 30
	wantY, wantDx, wantDs, wantDb := make([]float64, len(xs)), make([]float64, len(xs)), make([]float64, 4), make([]float64, 4)
	wantDr := make([]float64, len(xs))
	for i := range xs {
		k := i / w % 4
		v, d := relu(float64(xs[i])*float64(ss[k]) + float64(bs[k]) + float64(rs[i]))
		wantY[i] = v
		gz := float64(gs[i]) * d
		wantDx[i], wantDr[i] = gz*float64(ss[k]), gz
		wantDs[k] += gz * float64(xs[i])
		wantDb[k] += gz
	}
	requireClose(t, wantY, tensor.ChannelAffineAdd(x, s, b, r, tensor.ActRelu), 1e-6, 1e-6, "y")
	for _, withR := range []bool{true, false} {
		tr, l := traceLeaves(x, s, b, r)
		wrt := l
		if !withR {
			wrt = l[:3]
		}
		grads := tensor.Backward(tr, ts(tensor.ChannelAffineAdd(l[0], l[1], l[2], l[3], tensor.ActRelu)), ts(g), wrt, false)
		requireClose(t, wantDx, grads[0], 1e-6, 1e-5, "dx")
		requireClose(t, wantDs, grads[1], 1e-5, 1e-5, "dscale")
		requireClose(t, wantDb, grads[2], 1e-5, 1e-5, "dshift")
		if withR {
			requireClose(t, wantDr, grads[3], 1e-6, 1e-6, "dresidual")
		}
	}
	require.PanicsWithValue(t, "tensor.ChannelAffineAdd: f32[3,4,6,5], f32[4], f32[4], f32[3,4]: want a residual of x's shape and dtype", func() {
		tensor.ChannelAffineAdd(x, s, b, randF32(rng, 3, 4), tensor.ActRelu)
	})
}

func TestChannelAffineGrad(t *testing.T) {
	rng := newRNG(72)
	x, s, b := randF32(rng, 2, 3, 4), randF32(rng, 3), randF32(rng, 3)
	f := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.ChannelAffine(xs[0], xs[1], xs[2], tensor.ActIdentity)
	}
	checkGrad(t, f, ts(x, s, b), autodiffOpts(1e-3, 0, 0))
	// Second derivatives, through channel_affine_grad and its own VJP.
	sq := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Square(f(xs)) }
	for i := range 3 {
		checkGrad(t, gradOf(sq, i), ts(x, s, b), autodiffOpts(1e-3, 0, 0))
	}
	// Relu away from its kink: x away from 0, a positive scale, no shift.
	xr := awayFrom(73, -2, 2, ptrF(0), 0.05, 2, 3, 4)
	sr, br := randRange(rng, 0.5, 2, 3), tensor.Zeros(tensor.Float32, 3)
	relu := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.ChannelAffine(xs[0], xs[1], xs[2], tensor.ActRelu)
	}
	checkGrad(t, relu, ts(xr, sr, br), autodiffOpts(1e-3, 0, 0))
}

// Half operands are widened, computed in float32 and rounded once.
func TestChannelAffineHalf(t *testing.T) {
	rng := newRNG(74)
	x, s, b := randF32(rng, 2, 3, 8), randF32(rng, 3), randF32(rng, 3)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		xh, sh, bh := tensor.Convert(x, dt), tensor.Convert(s, dt), tensor.Convert(b, dt)
		want := tensor.Convert(tensor.ChannelAffine(tensor.Convert(xh, tensor.Float32), tensor.Convert(sh, tensor.Float32), tensor.Convert(bh, tensor.Float32), tensor.ActRelu), dt)
		got := tensor.ChannelAffine(xh, sh, bh, tensor.ActRelu)
		require.Equal(t, dt, got.DType())
		require.Equal(t, tensor.Convert(want, tensor.Float32).Float32s(), tensor.Convert(got, tensor.Float32).Float32s(), "%v", dt)
	}
}

func TestChannelAffinePanics(t *testing.T) {
	x, v := tensor.Zeros(tensor.Float32, 2, 3, 4), tensor.Zeros(tensor.Float32, 3)
	for _, c := range []struct {
		want string
		f    func()
	}{
		{"tensor.ChannelAffine: f32[2,3,4], f32[4], f32[3]: want x [N, C, ...] and scale and shift [C]",
			func() { tensor.ChannelAffine(x, tensor.Zeros(tensor.Float32, 4), v, tensor.ActIdentity) }},
		{"tensor.ChannelAffine: f32[3], f32[3], f32[3]: want x [N, C, ...] and scale and shift [C]",
			func() { tensor.ChannelAffine(v, v, v, tensor.ActIdentity) }},
		{"tensor.ChannelAffine: f32[2,3,4], f64[3], f32[3]: operands must be float of one dtype",
			func() { tensor.ChannelAffine(x, tensor.Zeros(tensor.Float64, 3), v, tensor.ActIdentity) }},
		{"tensor.ChannelAffine: f32[2,3,4], f32[3], f32[3]: unknown activation Activation(99)",
			func() { tensor.ChannelAffine(x, v, v, tensor.Activation(99)) }},
	} {
		requirePanic(t, c.want, c.f)
	}
}

func TestChannelMomentsAgainstLoops(t *testing.T) {
	rng := newRNG(75)
	for _, shape := range [][]int{{2, 3, 5, 4}, {4, 3}, {3, 2, 300}, {2, 3, 0}} {
		c := shape[1]
		x := randRange(rng, 1, 3, shape...) // a mean away from 0
		g1, g2 := randF32(rng, c), randF32(rng, c)
		xs, gs1, gs2 := x.Float32s(), g1.Float32s(), g2.Float32s()
		w := len(xs) / (shape[0] * c)
		n := float64(len(xs) / c)
		sum, mean, q := make([]float64, c), make([]float64, c), make([]float64, c)
		for i, v := range xs {
			sum[i/max(1, w)%c] += float64(v)
		}
		for k := range mean {
			mean[k] = sum[k] / n
		}
		dx := make([]float64, len(xs))
		for i, v := range xs {
			k := i / max(1, w) % c
			d := float64(v) - mean[k]
			q[k] += d * d
			dx[i] = float64(gs1[k]) + 2*float64(gs2[k])*d
		}
		name := shapeName(shape)
		s, sq := tensor.ChannelMoments(x)
		requireClose(t, sum, s, 1e-5, 1e-6, name+" sum")
		requireClose(t, q, sq, 1e-4, 1e-5, name+" sumSq")
		tr, l := traceLeaves(x)
		s, sq = tensor.ChannelMoments(l[0])
		grads := tensor.Backward(tr, ts(s, sq), ts(g1, g2), l, false)
		requireClose(t, dx, grads[0], 1e-5, 1e-5, name+" dx")
	}
}

// The gradient is that of the composition, second order included, and
// float64 operands (which compose) give the float32 moments.
func TestChannelMomentsGrad(t *testing.T) {
	rng := newRNG(76)
	x := randF32(rng, 2, 3, 4)
	w := tensor.FromFloat32([]float32{1, -2, 3}, 3)
	f := func(xs []*tensor.Tensor) *tensor.Tensor {
		s, q := tensor.ChannelMoments(xs[0])
		return tensor.Sum(tensor.Add(tensor.Mul(tensor.Square(s), w), tensor.Mul(q, tensor.Square(s))))
	}
	checkGrad(t, f, ts(x), autodiffOpts(1e-3, 0, 0))
	checkGrad(t, gradOf(f, 0), ts(x), autodiffOpts(1e-3, 0, 0))
	s32, q32 := tensor.ChannelMoments(x)
	s64, q64 := tensor.ChannelMoments(tensor.Convert(x, tensor.Float64))
	requireClose(t, s64.Float64s(), s32, 1e-6, 1e-6)
	requireClose(t, q64.Float64s(), q32, 1e-5, 1e-6)
}

func TestChannelMomentsPanics(t *testing.T) {
	requirePanic(t, "tensor.ChannelMoments: f32[3]: want float x [N, C, ...]",
		func() { tensor.ChannelMoments(tensor.Zeros(tensor.Float32, 3)) })
	requirePanic(t, "tensor.ChannelMoments: i32[2,3]: want float x [N, C, ...]",
		func() { tensor.ChannelMoments(tensor.Zeros(tensor.Int32, 2, 3)) })
}
