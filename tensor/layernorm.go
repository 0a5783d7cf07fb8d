package tensor

import (
	"fmt"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// layer_norm normalises each row of x [..., D] (its last axis) to zero
// mean and unit variance and applies a per-feature scale and shift, in
// one sweep over the rows:
//
//	y = (x - mean)·rstd·w + b,  rstd = 1/√(var + eps)
//
// with the biased variance. The composition of MeanKeep, Sub, Square,
// Rsqrt, Mul and Add makes eight passes over the activations forward,
// keeps the centred input and the normalised one for the backward pass,
// and about twice as many passes backward. The op's further results are
// the per-row mean and rstd, [...] each: the backward pass keeps x, w,
// those two vectors (and y, which the next layer's product keeps anyway)
// and computes dx, dw and db in one more sweep (layer_norm_bwd),
// recomputing the normalised rows.
var layerNormOp, layerNormBwdOp *Op

// lnParams are layer_norm's and layer_norm_bwd's parameters.
type lnParams struct{ eps float32 }

func init() {
	layerNormOp = &Op{
		Name: "layer_norm",
		ImplN: func(in []*Tensor, p any) ([]*Tensor, any) {
			x := in[0]
			rows := x.shape[:len(x.shape)-1]
			y := newOutUninit(Float32, x.shape)
			mean, rstd := newOutUninit(Float32, rows), newOutUninit(Float32, rows)
			layerNormRows(y.f32(), mean.f32(), rstd.f32(), x.f32(), in[1].f32(), in[2].f32(), p.(lnParams).eps, isLocal(in...))
			return []*Tensor{y, mean, rstd}, nil
		},
		VJPN:  layerNormVJP,
		Save:  SaveInputs(0, 1) | SaveOutput,
		JVP:   layerNormJVP,
		Batch: layerNormBatch,
		// Package shard never meets the op: LayerNorm composes propagated
		// ops for placed operands. (Gathering is the zero rule.)
		Traits: Traits{Reuse: FreshVJP}, // the backward op allocates its results
	}
	// layer_norm_bwd: (g, x, w, mean, rstd) → (dx, dw, db) in one sweep.
	// Not differentiable itself: layer_norm's VJP composes ops instead
	// when its values are traced (higher derivatives) or carry tangents.
	layerNormBwdOp = &Op{
		Name: "layer_norm_bwd",
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			g, x, w := in[0], in[1], in[2]
			dx := newOutUninit(Float32, x.shape)
			dw, db := newOutUninit(Float32, w.shape), newOutUninit(Float32, w.shape)
			layerNormBwdRows(dx.f32(), dw.f32(), db.f32(), g.f32(), x.f32(), w.f32(), in[3].f32(), in[4].f32(), isLocal(in...))
			return []*Tensor{dx, dw, db}, nil
		},
		// Each example's from ops (another summation order: the rule
		// case gives a tolerance).
		Batch: func(in []*Tensor, batched []bool, _ any) []*Tensor {
			n := batchSize(in, batched)
			r := len(exampleShape(in[1], batched[1]))
			a := alignBatch(in, batched, r)
			g, x := materialize(a[0], batched[0], n), materialize(a[1], batched[1], n)
			mean := ExpandDims(materialize(in[3], batched[3], n), -1)
			rstd := ExpandDims(materialize(in[4], batched[4], n), -1)
			axes := make([]int, r-1)
			for i := range axes {
				axes[i] = i + 1
			}
			dx, dw, db := layerNormBwdOps(g, x, a[2], mean, rstd, axes)
			return []*Tensor{dx, dw, db}
		},
	}
}

// LayerNorm returns (x - mean)/√(var + eps)·weight + bias over the last
// axis of x [..., D], with the biased variance, as eqx.nn.LayerNorm
// computes it; weight and bias are [D], or nil for none.
//
// With both given and float32 host operands (or shard.Map blocks) it is
// one op (layer_norm): one sweep over the rows forward, and a backward
// pass that keeps x, weight, the output and one mean and one reciprocal
// standard deviation per row, and computes the gradients of x, weight and
// bias in one more sweep, with eps rounded to float32. Its results equal
// the composition's within float32 rounding. Otherwise (float64 or half
// operands, placed tensors, no weight or no bias) it is composed from
// MeanKeep, Sub, Square, Rsqrt, Mul and Add; on float64 operands eps is
// added in float64 (as torch.nn.functional.layer_norm adds it to double
// tensors), on the others rounded to float32.
//
// It panics unless x is float with at least one axis and weight and bias
// are vectors of x's dtype as long as its last axis.
func LayerNorm(x, weight, bias *Tensor, eps float64) *Tensor {
	const name = "tensor.LayerNorm"
	checkNil(name, "x", x)
	for _, p := range []*Tensor{weight, bias} {
		if p == nil {
			continue
		}
		if !x.dtype.IsFloat() || len(x.shape) == 0 || p.dtype != x.dtype || len(p.shape) != 1 || p.shape[0] != x.shape[len(x.shape)-1] {
			panic(fmt.Sprintf("%s: %s: want float x [..., D] and weight, bias [D] of its dtype", name, operands("", x, weight, bias)))
		}
	}
	if !x.dtype.IsFloat() || len(x.shape) == 0 {
		panic(fmt.Sprintf("%s: %s: want float x [..., D]", name, operands("", x)))
	}
	if weight == nil || bias == nil || x.dtype != Float32 || x.layout() != nil || weight.layout() != nil || bias.layout() != nil {
		y, _, _ := layerNormComposed(x, weight, bias, eps)
		return y
	}
	return ApplyN(layerNormOp, lnParams{float32(eps)}, x, weight, bias)[0]
}

// layerNormComposed is LayerNorm from ops, with the mean and rstd per row
// [..., 1]: eps in float64 for float64 x, rounded to float32 otherwise.
func layerNormComposed(x, w, b *Tensor, eps float64) (y, mean, rstd *Tensor) {
	mean = MeanKeep(x, -1)
	xc := Sub(x, mean)
	e := Scalar(float32(eps))
	if x.dtype == Float64 {
		e = ScalarFloat64(eps)
	}
	rstd = Rsqrt(Add(MeanKeep(Square(xc), -1), e))
	y = Mul(xc, rstd)
	if w != nil {
		y = Mul(y, w)
	}
	if b != nil {
		y = Add(y, b)
	}
	return y, mean, rstd
}

// layerNormVJP is layer_norm's VJP: the fused backward op on untraced
// values, the composition of ops otherwise (and for cotangents of the
// mean and rstd results, which only higher derivatives give).
func layerNormVJP(gs, in, outs []*Tensor, _ any, _ any) []*Tensor {
	x, w := in[0], in[1]
	g := gs[0]
	if g == nil {
		g = ZerosLike(x)
	}
	mean, rstd := outs[1], outs[2]
	if gs[1] == nil && gs[2] == nil && !higherOrder(g, x, w, mean, rstd) && g.layout() == nil {
		return ApplyN(layerNormBwdOp, nil, g, x, w, mean, rstd)
	}
	mk, rk := ExpandDims(mean, -1), ExpandDims(rstd, -1)
	axes := make([]int, len(x.shape)-1)
	for i := range axes {
		axes[i] = i
	}
	dx, dw, db := layerNormBwdOps(g, x, w, mk, rk, axes)
	n := float32(x.shape[len(x.shape)-1])
	if gs[1] != nil { // ∂mean/∂x = 1/D
		dx = Add(dx, MulScalar(ExpandDims(gs[1], -1), 1/n))
	}
	if gs[2] != nil { // ∂rstd/∂x = -rstd²·x̂/D
		xhat := Mul(Sub(x, mk), rk)
		dx = Sub(dx, Mul(MulScalar(Mul(ExpandDims(gs[2], -1), Mul(rk, rk)), 1/n), xhat))
	}
	return []*Tensor{dx, dw, db}
}

// layerNormBwdOps is layer_norm_bwd from ops: with x̂ = (x - mean)·rstd
// and gy = g·w, dx = rstd·(gy - mean(gy) - x̂·mean(gy·x̂)), dw = Σ g·x̂ and
// db = Σ g over axes. mean and rstd are [..., 1].
func layerNormBwdOps(g, x, w, mean, rstd *Tensor, axes []int) (dx, dw, db *Tensor) {
	xhat := Mul(Sub(x, mean), rstd)
	gy := Mul(g, w)
	dx = Mul(rstd, Sub(Sub(gy, MeanKeep(gy, -1)), Mul(xhat, MeanKeep(Mul(gy, xhat), -1))))
	return dx, Sum(Mul(g, xhat), axes...), Sum(g, axes...)
}

// layerNormJVP: with x̂ = (x - mean)·rstd and dx̂ = rstd·(dx - mean(dx) -
// x̂·mean(x̂·dx)), dy = dx̂·w + x̂·dw + db, dmean = mean(dx) and drstd =
// -rstd²·mean(x̂·dx).
func layerNormJVP(x, t, outs []*Tensor, _ any) []*Tensor {
	mk, rk := ExpandDims(outs[1], -1), ExpandDims(outs[2], -1)
	xhat := Mul(Sub(x[0], mk), rk)
	var dy, dmean, drstd *Tensor
	if t[0] != nil {
		mdx, mxdx := MeanKeep(t[0], -1), MeanKeep(Mul(xhat, t[0]), -1)
		dy = Mul(Mul(rk, Sub(Sub(t[0], mdx), Mul(xhat, mxdx))), x[1])
		dmean = Squeeze(mdx, -1)
		drstd = Squeeze(Neg(Mul(Mul(rk, rk), mxdx)), -1)
	}
	if t[1] != nil {
		dy = addTangents(dy, Mul(xhat, t[1]))
	}
	dy = toShapeOf(addTangents(dy, t[2]), outs[0])
	return []*Tensor{dy, dmean, drstd}
}

// layerNormBatch: a batch of x with one weight and bias is one call (the
// batch is more rows); batched weights or biases (an ensemble's) are the
// composition.
func layerNormBatch(in []*Tensor, batched []bool, p any) []*Tensor {
	if !batched[1] && !batched[2] {
		return applyNIn(layerNormOp, p, in)
	}
	n := batchSize(in, batched)
	a := alignBatch(in, batched, len(exampleShape(in[0], batched[0])))
	x := materialize(a[0], batched[0], n)
	y, mean, rstd := layerNormComposed(x, a[1], a[2], float64(p.(lnParams).eps))
	return []*Tensor{y, Squeeze(mean, -1), Squeeze(rstd, -1)}
}

// lnBlock is the number of rows whose dw and db contributions the
// backward kernel sums before adding them to the others: fixed, so the
// sums do not depend on how the rows are split over goroutines.
const lnBlock = 32

// layerNormRows writes y, the mean and rstd of every row of x (rows of
// len(w) elements), with the composition's operations in its order.
func layerNormRows(y, mean, rstd, x, w, b []float32, eps float32, local bool) {
	n := len(w)
	if n == 0 {
		return
	}
	inv := 1 / float32(n)
	rows := func(lo, hi int) {
		var sq [stageLen]float32
		var r [1]float32
		for i := lo; i < hi; i++ {
			xr, yr := x[i*n:(i+1)*n], y[i*n:(i+1)*n]
			m := float32(vec.SumF64(xr)) * inv
			vec.SubVS(yr, xr, m)
			v := 0.0
			for c := 0; c < n; c += stageLen {
				e := min(c+stageLen, n)
				vec.MulVV(sq[:e-c], yr[c:e], yr[c:e])
				v += vec.SumF64(sq[:e-c])
			}
			r[0] = float32(v)*inv + eps
			vec.Rsqrt(r[:], r[:])
			mean[i], rstd[i] = m, r[0]
			vec.MulVS(yr, yr, r[0])
			vec.MulVV(yr, yr, w)
			vec.AddVV(yr, yr, b)
		}
	}
	m := len(x) / n
	if serial(len(x)*8*costCheap, local) {
		rows(0, m)
		return
	}
	parallelFor(m, n*8*costCheap, 1, false, rows)
}

// layerNormBwdRows writes dx of every row and dw, db summed over the rows
// (in float64, by blocks of lnBlock rows added in order).
func layerNormBwdRows(dx, dw, db, g, x, w, mean, rstd []float32, local bool) {
	n := len(w)
	if n == 0 {
		return
	}
	m := len(x) / n
	nb := (m + lnBlock - 1) / lnBlock
	// Per block: Σ g·x̂, then Σ g; the sums over the blocks after them.
	bp, part := f64Scratch(2 * n * (nb + 1))
	defer f64Pool.Put(bp)
	inv := 1 / float64(n)
	blocks := func(lo, hi int) {
		xh := make([]float32, 2*n)
		xh, gy := xh[:n], xh[n:]
		for k := lo; k < hi; k++ {
			sgx, sg := part[2*n*k:2*n*k+n], part[2*n*k+n:2*n*(k+1)]
			for i := k * lnBlock; i < min((k+1)*lnBlock, m); i++ {
				xr, gr, dr := x[i*n:(i+1)*n], g[i*n:(i+1)*n], dx[i*n:(i+1)*n]
				vec.SubVS(xh, xr, mean[i])
				vec.MulVS(xh, xh, rstd[i])
				vec.MulVV(gy, gr, w)
				s1 := vec.SumF64(gy)
				vec.AccF64(sg, gr)
				vec.MulVV(dr, gr, xh)
				vec.AccF64(sgx, dr)
				vec.MulVV(dr, gy, xh)
				s2 := vec.SumF64(dr)
				vec.MulVS(dr, xh, float32(s2*inv))
				vec.SubVV(dr, gy, dr)
				vec.SubVS(dr, dr, float32(s1*inv))
				vec.MulVS(dr, dr, rstd[i])
			}
		}
	}
	// dw and db: each column sums its blocks in block order.
	sgx, sg := part[2*n*nb:2*n*nb+n], part[2*n*nb+n:]
	fold := func(lo, hi int) {
		for k := range nb {
			for j := lo; j < hi; j++ {
				sgx[j] += part[2*n*k+j]
				sg[j] += part[2*n*k+n+j]
			}
		}
		vec.RoundF64(dw[lo:hi], sgx[lo:hi])
		vec.RoundF64(db[lo:hi], sg[lo:hi])
	}
	if serial(len(x)*12*costCheap, local) {
		blocks(0, nb)
		fold(0, n)
		return
	}
	parallelFor(nb, lnBlock*n*12*costCheap, 1, false, blocks)
	parallelFor(n, 2*nb*costCheap, 8, false, fold)
}
