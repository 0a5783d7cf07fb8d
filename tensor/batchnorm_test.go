package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// refBatchNorm is training-mode batch normalisation act(x̂·w + b + r) of x
// [N, C, S...] in float64 loops, with the gradients of x, w, b and r for
// the cotangent g of the result: dx = w·rstd·(gz - mean(gz) -
// x̂·mean(gz·x̂)).
func refBatchNorm(x, w, b, r, g []float32, n, c int, eps float64, relu bool) (y, mean, variance, dx, dw, db, dr []float64) {
	s := len(x) / max(1, n*c)
	cnt := float64(n * s)
	mean, variance = make([]float64, c), make([]float64, c)
	y, dx, dr = make([]float64, len(x)), make([]float64, len(x)), make([]float64, len(x))
	dw, db = make([]float64, c), make([]float64, c)
	ch := func(i int) int { return i / s % c }
	for i, v := range x {
		mean[ch(i)] += float64(v) / cnt
	}
	for i, v := range x {
		d := float64(v) - mean[ch(i)]
		variance[ch(i)] += d * d / cnt
	}
	xh := make([]float64, len(x))
	for i, v := range x {
		k := ch(i)
		xh[i] = (float64(v) - mean[k]) / math.Sqrt(variance[k]+eps)
		z := xh[i]*float64(w[k]) + float64(b[k]) + float64(r[i])
		y[i], dr[i] = z, float64(g[i])
		if relu && z <= 0 {
			y[i], dr[i] = 0, 0
		}
		dw[k] += dr[i] * xh[i]
		db[k] += dr[i]
	}
	for i := range x {
		k := ch(i)
		rstd := 1 / math.Sqrt(variance[k]+eps)
		dx[i] = float64(w[k]) * rstd * (dr[i] - db[k]/cnt - xh[i]*dw[k]/cnt)
	}
	return y, mean, variance, dx, dw, db, dr
}

// BatchNorm's values and gradients equal the float64 loops' within
// float32 rounding, for float32 (the fused op) and float64 (the
// composition), with and without residual and Relu.
func TestBatchNormAgainstLoops(t *testing.T) {
	rng := newRNG(90)
	for _, shape := range [][]int{{4, 3, 5, 4}, {8, 3}, {3, 2, 37}, {2, 5, 2, 2, 3}} {
		c := shape[1]
		x, w, b := randF32(rng, shape...), randF32(rng, c), randF32(rng, c)
		r, g := randF32(rng, shape...), randF32(rng, shape...)
		zero := tensor.Zeros(tensor.Float32, shape...)
		for _, relu := range []bool{false, true} {
			for _, mode := range []string{"none", "residual", "residual without gradient"} {
				act, res := tensor.ActIdentity, zero
				if relu {
					act = tensor.ActRelu
				}
				withRes := mode == "residual"
				if mode != "none" {
					res = r
				}
				y, m, v, dx, dw, db, dr := refBatchNorm(x.Float32s(), w.Float32s(), b.Float32s(), res.Float32s(), g.Float32s(), shape[0], c, 1e-5, relu)
				for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
					name := shapeName(shape) + dt.String() + act.String() + mode
					cv := func(t *tensor.Tensor) *tensor.Tensor { return tensor.Convert(t, dt) }
					leaves := []*tensor.Tensor{cv(x), cv(w), cv(b)}
					if withRes {
						leaves = append(leaves, cv(r))
					}
					tr, l := traceLeaves(leaves...)
					var rl *tensor.Tensor
					switch mode {
					case "residual":
						rl = l[3]
					case "residual without gradient":
						rl = cv(r)
					}
					gy, gm, gv := tensor.BatchNorm(l[0], l[1], l[2], rl, 1e-5, act)
					requireClose(t, y, gy, 1e-5, 1e-5, name+" y")
					requireClose(t, m, gm, 1e-6, 1e-5, name+" mean")
					requireClose(t, v, gv, 1e-6, 1e-5, name+" var")
					gs := tensor.Backward(tr, ts(gy), ts(cv(g)), l, false)
					requireClose(t, dx, gs[0], 1e-5, 1e-4, name+" dx")
					requireClose(t, dw, gs[1], 1e-5, 1e-4, name+" dw")
					requireClose(t, db, gs[2], 1e-5, 1e-5, name+" db")
					if withRes {
						requireClose(t, dr, gs[3], 0, 0, name+" dr")
					}
				}
			}
		}
	}
}

// The fused op's values and gradients (of the statistics' outputs too)
// equal those of the composition of ChannelMoments and ChannelAffineAdd
// within float32 rounding.
func TestBatchNormEqualsComposition(t *testing.T) {
	rng := newRNG(91)
	shape := []int{4, 6, 5, 3}
	x, w, b, r := randF32(rng, shape...), randF32(rng, 6), randF32(rng, 6), randF32(rng, shape...)
	g, cm, cv := randF32(rng, shape...), randF32(rng, 6), randF32(rng, 6)
	composed := func(x, w, b, r *tensor.Tensor) (y, m, v *tensor.Tensor) {
		s, q := tensor.ChannelMoments(x)
		n := tensor.Scalar(float32(4 * 5 * 3))
		m, v = tensor.Div(s, n), tensor.Div(q, n)
		scale := tensor.Mul(tensor.Rsqrt(tensor.AddScalar(v, 1e-5)), w)
		shift := tensor.Add(tensor.Neg(tensor.Mul(m, scale)), b)
		return tensor.ChannelAffineAdd(x, scale, shift, r, tensor.ActRelu), m, v
	}
	var want [][]float32
	for i, f := range []func(x, w, b, r *tensor.Tensor) (y, m, v *tensor.Tensor){composed,
		func(x, w, b, r *tensor.Tensor) (y, m, v *tensor.Tensor) {
			return tensor.BatchNorm(x, w, b, r, 1e-5, tensor.ActRelu)
		}} {
		tr, l := traceLeaves(x, w, b, r)
		y, m, v := f(l[0], l[1], l[2], l[3])
		got := [][]float32{y.Float32s(), m.Float32s(), v.Float32s()}
		for _, d := range tensor.Backward(tr, ts(y, m, v), ts(g, cm, cv), l, false) {
			got = append(got, d.Float32s())
		}
		if i == 0 {
			want = got
			continue
		}
		for j := range want {
			require.InDeltaSlice(t, want[j], got[j], 2e-5, "result %d", j)
		}
	}
}

// First and second derivatives against finite differences: the second
// through batch_norm's VJP, composed of channel_affine_grad and
// channel_affine2 and their own VJPs. The statistics' outputs included.
func TestBatchNormGrad(t *testing.T) {
	rng := newRNG(92)
	x, w, b := randF32(rng, 3, 2, 4), randF32(rng, 2), randF32(rng, 2)
	r, c := randF32(rng, 3, 2, 4), randF32(rng, 3, 2, 4)
	f := func(xs []*tensor.Tensor) *tensor.Tensor {
		y, m, v := tensor.BatchNorm(xs[0], xs[1], xs[2], xs[3], 1e-5, tensor.ActTanh)
		return tensor.Add(tensor.Mul(tensor.Square(y), c), tensor.Mul(tensor.Sum(tensor.Mul(m, v)), tensor.Scalar(0.1)))
	}
	in := ts(x, w, b, r)
	checkGrad(t, f, in, autodiffOpts(1e-3, 0, 0))
	for i := range 4 {
		checkGrad(t, gradOf(f, i), in, autodiffOpts(1e-3, 0, 0))
	}
	// Relu's mask applied by the sweeps (a residual without gradient);
	// no pre-activation of this draw lies within 0.01 of the kink.
	relu := func(xs []*tensor.Tensor) *tensor.Tensor {
		y, _, _ := tensor.BatchNorm(xs[0], xs[1], xs[2], r, 1e-5, tensor.ActRelu)
		return tensor.Mul(tensor.Add(y, tensor.Square(y)), c)
	}
	z, _, _ := tensor.BatchNorm(x, w, b, r, 1e-5, tensor.ActIdentity)
	for _, v := range z.Float32s() {
		require.Greater(t, math.Abs(float64(v)), 0.01)
	}
	checkGrad(t, relu, in[:3], autodiffOpts(1e-3, 0, 0))
	for i := range 3 {
		checkGrad(t, gradOf(relu, i), in[:3], autodiffOpts(1e-3, 0, 0))
	}
}
