package tensor

import (
	"fmt"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// batch_norm: (x, w, b[, r]) -> (y, mean, var) for x [N, C, spatial...]
// and per-channel w, b [1, C, 1, ...]: the batch's mean and biased
// variance per channel (channel_moments' sweep) and y = act(x̂·w + b [+
// r]), x̂ = (x - mean)·rstd, rstd = 1/√(var + eps) (channel_affine's
// sweep). It exists for its VJP: the gradient of x through the statistics
// and through the normalisation is one formula,
//
//	dx = w·rstd·(gz - mean(gz) - x̂·mean(gz·x̂))   (gz the cotangent of z)
//
// computed from the per-channel sums Σ gz and Σ gz·x (one sweep reading
// g and x, and y for Relu's mask) and one sweep writing dx
// (channel_affine2), where the composition computes its two terms in two
// sweeps and adds them in a third. Float32 host operands only: BatchNorm
// composes otherwise.
var batchNormOp, channelAffine2Op *Op

// batchNormParams are batch_norm's static parameters.
type batchNormParams struct {
	eps float64    // added in x's dtype (rounded to float32 for float32 x)
	act Activation // ActIdentity or ActRelu
	// resGrad: the residual may want a cotangent (it is traced), which
	// then is the masked cotangent gz, materialised.
	resGrad bool
}

func init() {
	batchNormOp = &Op{
		Name: "batch_norm",
		ImplN: func(in []*Tensor, p any) ([]*Tensor, any) {
			x, w, b := in[0], in[1], in[2]
			bp := p.(batchNormParams)
			c := x.shape[1]
			shape := channelShapeOf(x.shape)
			mean, variance := newOutUninit(Float32, shape), newOutUninit(Float32, shape)
			local := isLocal(in...)
			channelMoments(mean.f32(), variance.f32(), x.f32(), x.shape, local)
			scale, shift := make([]float32, c), make([]float32, c)
			cnt := float32(numel(x.shape) / max(1, c))
			// The composition's roundings: Div(s, n), Rsqrt(var + eps)·w,
			// -(mean·scale) + b.
			for k := range c {
				mean.f32()[k] /= cnt
				variance.f32()[k] /= cnt
				shift[k] = variance.f32()[k] + float32(bp.eps)
			}
			vec.Rsqrt(scale, shift)
			for k := range c {
				scale[k] *= w.f32()[k]
				shift[k] = -(mean.f32()[k] * scale[k]) + b.f32()[k]
			}
			var r []float32
			if len(in) == 4 {
				r = in[3].f32()
			}
			y := newOutUninit(Float32, x.shape)
			channelAffine(y.f32(), x.f32(), scale, shift, r, x.shape, bp.act, local)
			return []*Tensor{y, mean, variance}, nil
		},
		VJPN: func(gs, in, outs []*Tensor, p, _ any) []*Tensor {
			return batchNormVJP(gs, in, outs, p.(batchNormParams))
		},
		SaveFor: func(any) SaveMask { return SaveInputs(0, 1) | SaveOutput },
		JVP: func(x, t, outs []*Tensor, p any) []*Tensor {
			return batchNormJVP(x, t, outs, p.(batchNormParams))
		},
		// Each example's statistics from propagated ops (another
		// summation order: the rule cases give a tolerance).
		Batch: func(in []*Tensor, batched []bool, p any) []*Tensor {
			n := batchSize(in, batched)
			a := alignBatch(in, batched, len(exampleShape(in[0], batched[0])))
			x := materialize(a[0], batched[0], n)
			var r *Tensor
			if len(a) == 4 {
				r = a[3]
			}
			return batchNormComposed(x, a[1], a[2], r, p.(batchNormParams), 1)
		},
		Traits: Traits{Reuse: FreshVJP},
	}

	// channel_affine2: (g, x, a, s, b[, y]) -> gz·a + x·s + b, g and x
	// [N, C, spatial...], a, s, b [1, C, 1, ...], gz = g, or g where y > 0
	// (a relu's mask) if y is given, in one sweep (the bits of the
	// composition Add(Add(Mul(gz, a), Mul(x, s)), b)): the input gradient
	// of batch_norm.
	channelAffine2Op = &Op{
		Name:     "channel_affine2",
		Sharding: ShardingRule{Family: ShardElementwise},
		Impl: func(in []*Tensor, _ any) *Tensor {
			g, x := in[0], in[1]
			var y []float32
			if len(in) == 6 {
				y = in[5].f32()
			}
			out := newOutUninit(Float32, x.shape)
			channelAffine2(out.f32(), g.f32(), x.f32(), in[2].f32(), in[3].f32(), in[4].f32(), y, x.shape, isLocal(in...))
			return out
		},
		VJP: func(ct *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			g, x, a, s := maskBy(in[0], in, 5), in[1], in[2], in[3]
			da, _ := channelSums(ct, g, a.shape)
			ds, db := channelSums(ct, x, s.shape)
			return append([]*Tensor{maskBy(Mul(ct, a), in, 5), Mul(ct, s), da, ds, db}, make([]*Tensor, len(in)-5)...)
		},
		Save: SaveAllInputs,
		JVP: func(x, t, outs []*Tensor, _ any) []*Tensor {
			xs := append([]*Tensor{maskBy(x[0], x, 5)}, x[1:]...)
			ts := append([]*Tensor{maskBy(t[0], x, 5)}, t[1:]...)
			var d *Tensor
			for _, pair := range [][2]int{{0, 2}, {2, 0}, {1, 3}, {3, 1}} {
				if ts[pair[0]] != nil {
					d = addTangents(d, Mul(ts[pair[0]], xs[pair[1]]))
				}
			}
			d = addTangents(d, ts[4])
			return one1(toShapeOf(d, outs[0]))
		},
		Batch: func(in []*Tensor, batched []bool, _ any) []*Tensor {
			a := alignBatch(in, batched, maxExampleRank(in, batched))
			g := a[0]
			if len(a) == 6 {
				n := batchSize(in, batched)
				g = Apply(reluBwdOp, nil, materialize(a[0], batched[0], n), materialize(a[5], batched[5], n))
			}
			return one1(Add(Add(Mul(g, a[2]), Mul(a[1], a[3])), a[4]))
		},
		Traits: Traits{Reuse: FreshVJP},
	}
}

// batchNormVJP returns the cotangents of batch_norm's x, w, b (and r) for
// the cotangents gs of y, mean and variance: dx = gz·scale + x·α + β per
// channel (one channel_affine2 sweep) from Σ gz and Σ gz·x (one
// channel_affine_grad sweep), Relu's mask applied by both sweeps unless
// the residual wants the masked cotangent.
func batchNormVJP(gs, in, outs []*Tensor, p batchNormParams) []*Tensor {
	x, w := in[0], in[1]
	gy, gm, gv := gs[0], gs[1], gs[2]
	y, mean, variance := outs[0], outs[1], outs[2]
	shape := mean.shape
	inv := Scalar(1 / float32(numel(x.shape)/max(1, x.shape[1])))
	rstd := Rsqrt(Add(variance, constLike(variance, p.eps)))
	scale := Mul(rstd, w)
	res := make([]*Tensor, len(in))
	var gz, mask, alpha, beta *Tensor
	if gy != nil {
		// gz, the cotangent of x̂·w + b [+ r], is gy·[y > 0] for relu:
		// materialised only for the residual, else applied by each sweep.
		gz = gy
		if p.act == ActRelu {
			mask = y
			if p.resGrad {
				gz, mask = Apply(reluBwdOp, nil, gy, y), nil
			}
		}
		var sgx, sg *Tensor
		if mask != nil {
			r := ApplyN(channelAffineGradOp, nil, gz, x, mask)
			sgx, sg = r[0], r[1]
		} else {
			sgx, sg = channelSums(gz, x, shape)
		}
		// Σ gz·x̂ = rstd·(Σ gz·x - mean·Σ gz): the weight's gradient.
		dw := Mul(rstd, Sub(sgx, Mul(mean, sg)))
		res[1], res[2] = dw, sg
		if p.resGrad {
			res[3] = gz
		}
		alpha = Neg(Mul(Mul(scale, rstd), Mul(dw, inv)))
		beta = Sub(Neg(Mul(scale, Mul(sg, inv))), Mul(alpha, mean))
	}
	if gm != nil {
		beta = addTangents(beta, Mul(gm, inv))
	}
	if gv != nil {
		g2 := Mul(MulScalar(gv, 2), inv)
		alpha = addTangents(alpha, g2)
		beta = addTangents(beta, Neg(Mul(g2, mean)))
	}
	switch {
	case mask != nil:
		res[0] = Apply(channelAffine2Op, nil, gz, x, scale, alpha, beta, mask)
	case gz != nil:
		res[0] = Apply(channelAffine2Op, nil, gz, x, scale, alpha, beta)
	case alpha != nil:
		res[0] = ChannelAffine(x, Reshape(alpha, -1), Reshape(beta, -1), ActIdentity)
	case beta != nil:
		res[0] = BroadcastTo(beta, x.shape...)
	}
	return res
}

// batchNormJVP returns the tangents of batch_norm's y, mean and variance:
// dmean = mean(dx), dvar = 2·mean((x - mean)·dx), and dy = f'(z)·(dx̂·w
// + x̂·dw + db [+ dr]) with dx̂ = (dx - dmean)·rstd - x̂·rstd²·dvar/2.
func batchNormJVP(x, t, outs []*Tensor, p batchNormParams) []*Tensor {
	xs, w := x[0], x[1]
	y, mean, variance := outs[0], outs[1], outs[2]
	axes := channelSumAxes(len(xs.shape), 0)
	inv := Scalar(1 / float32(numel(xs.shape)/max(1, xs.shape[1])))
	rstd := Rsqrt(Add(variance, constLike(variance, p.eps)))
	xc := Sub(xs, mean)
	var dm, dv, dz *Tensor
	if t[0] != nil {
		dm = Mul(SumKeep(t[0], axes...), inv)
		dv = Mul(MulScalar(SumKeep(Mul(xc, t[0]), axes...), 2), inv)
		// dx̂ = rstd·(dx - dmean - xc·rstd²·dvar/2)
		k := Mul(Square(rstd), MulScalar(dv, 0.5))
		dxh := Mul(Sub(Sub(t[0], dm), Mul(xc, k)), rstd)
		dz = Mul(dxh, w)
	}
	if t[1] != nil {
		dz = addTangents(dz, Mul(Mul(xc, rstd), t[1]))
	}
	dz = addTangents(dz, t[2])
	if len(t) == 4 {
		dz = addTangents(dz, t[3])
	}
	dz = toShapeOf(dz, y)
	if dz != nil && p.act == ActRelu {
		dz = Apply(reluBwdOp, nil, dz, y)
	}
	return []*Tensor{dz, dm, dv}
}

// batchNormComposed is batch_norm from propagated ops, for x [lead...,
// N, C, spatial...] and w, b (and r) broadcasting against it: y, mean
// and variance with kept dims. Without lead dimensions the statistics and
// the affine map are ChannelMoments' and ChannelAffine's (one sweep each
// where they fuse).
func batchNormComposed(x, w, b, r *Tensor, p batchNormParams, lead int) []*Tensor {
	axes := channelSumAxes(len(x.shape)-lead, lead)
	n := 1
	for _, a := range axes {
		n *= x.shape[a]
	}
	var s, q *Tensor
	if lead == 0 {
		s, q = ChannelMoments(x)
		shape := channelShapeOf(x.shape)
		s, q = Reshape(s, shape...), Reshape(q, shape...)
	} else {
		s, q = channelMomentsComposed(x, lead)
	}
	count := Scalar(float32(n))
	mean, variance := Div(s, count), Div(q, count)
	scale := Mul(Rsqrt(Add(variance, constLike(variance, p.eps))), w)
	shift := Add(Neg(Mul(mean, scale)), b)
	var y *Tensor
	if lead == 0 {
		y = channelAffineApply("tensor.BatchNorm", x, Reshape(scale, -1), Reshape(shift, -1), r, p.act)
	} else {
		z := Add(Mul(x, scale), shift)
		if r != nil {
			z = Add(z, r)
		}
		y = p.act.apply(z)
	}
	return []*Tensor{y, mean, variance}
}

// BatchNorm returns the training-mode batch normalisation of x [N, C,
// spatial...] (any number of spatial dimensions, none included),
//
//	y = act((x - mean)/√(variance + eps)·weight + bias [+ residual])
//
// with mean and biased variance those of each channel over every axis but
// axis 1, also returned ([C] each). weight and bias are [C], or nil for
// ones and zeros; residual is nil or of x's shape. It is the composition
// of ChannelMoments and ChannelAffine (ChannelAffineAdd) with the
// per-channel arithmetic between them, with the same values and
// gradients to rounding, but for float32 host operands one primitive
// whose backward pass computes the input gradient in one formula, dx =
// weight/√(variance + eps)·(g - mean(g) - x̂·mean(g·x̂)) (g the cotangent
// before the residual, x̂ the normalised x), from one sweep of sums over g
// and x and one sweep writing dx; the composition's takes three. act is
// fused as in ChannelAffine. eps is added in the variance's dtype: to
// every digit for float64, rounded to float32 otherwise. Statistics over
// a sharded batch (placed operands) and float64 and half-precision operands use the composition.
func BatchNorm(x, weight, bias, residual *Tensor, eps float64, act Activation) (y, mean, variance *Tensor) {
	const name = "tensor.BatchNorm"
	checkNil(name, "x", x)
	if !x.dtype.IsFloat() || len(x.shape) < 2 {
		panic(fmt.Sprintf("%s: %s: want float x [N, C, ...]", name, operands("", x)))
	}
	c := x.shape[1]
	if weight == nil {
		weight = Ones(x.dtype, c)
	}
	if bias == nil {
		bias = Zeros(x.dtype, c)
	}
	if !sameFloat(x, weight) || !sameFloat(x, bias) || len(weight.shape) != 1 || len(bias.shape) != 1 ||
		weight.shape[0] != c || bias.shape[0] != c {
		panic(fmt.Sprintf("%s: %s: want weight and bias [%d] of x's dtype", name, operands("", x, weight, bias), c))
	}
	if residual != nil && (!sameFloat(x, residual) || !sameShape(x.shape, residual.shape)) {
		panic(fmt.Sprintf("%s: %s: want a residual of x's shape and dtype", name, operands("", x, residual)))
	}
	if act >= numActivations {
		panic(fmt.Sprintf("%s: %s: unknown activation %v", name, operands("", x), act))
	}
	shape := channelShapeOf(x.shape)
	w, b := Reshape(weight, shape...), Reshape(bias, shape...)
	fused := act == ActIdentity || act == ActRelu
	ops := []*Tensor{x, w, b}
	if residual != nil {
		ops = append(ops, residual)
	}
	var out []*Tensor
	host := true
	for _, t := range ops {
		host = host && t.layout() == nil
	}
	if x.dtype == Float32 && host {
		p := batchNormParams{eps: eps, act: act, resGrad: residual != nil && residual.IsTraced()}
		if !fused {
			p.act = ActIdentity
		}
		out = applyNIn(batchNormOp, p, ops)
		if !fused {
			out[0] = act.apply(out[0])
		}
	} else {
		out = batchNormComposed(x, w, b, residual, batchNormParams{eps: eps, act: act}, 0)
	}
	return out[0], Reshape(out[1], -1), Reshape(out[2], -1)
}

// channelAffine2 writes gz·a[c] + x·s[c] + b[c] into dst for g and x [N,
// C, spatial...] row by row, gz = g, or g where y > 0 if y is not nil,
// each product rounded (the composition's bits).
func channelAffine2(dst, g, x, a, s, b, y []float32, shape []int, local bool) {
	c := len(s)
	if c == 0 || len(x) == 0 {
		return
	}
	m := len(x) / numel(shape[2:]) // rows: N·C
	w := len(x) / m
	rows := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			k, j, e := i%c, i*w, (i+1)*w
			var yr []float32
			if y != nil {
				yr = y[j:e]
			}
			vec.Affine2Row(dst[j:e], g[j:e], yr, x[j:e], a[k], s[k], b[k]) // one sweep of the row
		}
	}
	if serial(3*len(x)*costCheap, local) {
		rows(0, m)
		return
	}
	parallelFor(m, 3*w*costCheap, 1, false, rows)
}
