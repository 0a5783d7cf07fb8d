package tensor

import (
	"fmt"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// SegmentWeightedSum: a segment sum of weighted rows in one pass.

var segmentWeightedSumOp *Op

func init() {
	segmentWeightedSumOp = &Op{
		Name:     "segment_weighted_sum",
		Sharding: ShardingRule{Family: ShardSegmentSum},
		Impl: func(in []*Tensor, pp any) *Tensor {
			data, ids, w := in[0], in[1], in[2]
			ns := pp.(segmentParams).numSegments
			shape := append([]int{ns}, data.shape[1:]...)
			inner := numel(data.shape[1:])
			if scatterRows(data.dtype, 1, inner) {
				out := newOutUninit(Float32, shape) // cleared by the row chunks
				scatterRowsF32(out.f32(), data.f32(), w.f32(), ids.i32(), ns, inner, true, true, isLocal(data, ids, w))
				return out
			}
			out := newTensor(data.dtype, shape)
			if data.dtype == Float64 {
				segmentWeightedKernel(out.f64(), data.f64(), w.f64(), ids.i32(), ns, inner)
			} else {
				segmentWeightedKernel(out.f32(), data.f32(), w.f32(), ids.i32(), ns, inner)
			}
			return out
		},
		VJPNeed: func(g *Tensor, in []*Tensor, _ *Tensor, _ any, need uint64) []*Tensor {
			data, ids, w := in[0], in[1], in[2]
			res := make([]*Tensor, 3)
			if fusedWeightedTake(g, data, w) {
				outs := ApplyN(segmentWeightedTakeOp, nil, g, ids, w, data)
				res[0], res[2] = outs[0], outs[1]
				return res
			}
			gt := Apply(segmentTakeOp, nil, g, ids)
			wb := rowWeights(w, len(data.shape))
			if Wants(need, 0) {
				res[0] = Mul(gt, wb)
			}
			if Wants(need, 2) {
				res[2] = Reshape(unbroadcastTemp(Mul(gt, data), wb.shape), w.shape...)
			}
			if gt.node == nil && gt.layout() == nil {
				Donate(gt)
			}
			return res
		},
		Save: SaveAllInputs,
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			ns := pp.(segmentParams).numSegments
			var a, b *Tensor
			if t[0] != nil {
				a = SegmentWeightedSum(t[0], x[2], x[1], ns)
			}
			if t[2] != nil {
				b = SegmentWeightedSum(x[0], t[2], x[1], ns)
			}
			return one1(addTangents(a, b))
		},
		// The weighted rows, then segment_sum's rule.
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			n := batchSize(in, batched)
			data, w := materialize(in[0], batched[0], n), materialize(in[2], batched[2], n)
			prod := Mul(data, rowWeights(w, len(data.shape)))
			return segmentSumOp.Batch([]*Tensor{prod, in[1]}, []bool{true, batched[1]}, pp)
		},
		Traits: Traits{Types: TypesFloat64, Reuse: FreshVJP},
	}
}

// segmentWeightedKernel adds ws[r]·src[r] into dst[ids[r]] (rows of inner
// elements, ns of them in dst), each product rounded to T before the add.
func segmentWeightedKernel[T float32 | float64](dst, src, ws []T, ids []int32, ns, inner int) {
	for r, id := range ids {
		if id < 0 || int(id) >= ns {
			continue
		}
		d := dst[int(id)*inner : (int(id)+1)*inner]
		for e, v := range src[r*inner : (r+1)*inner] {
			d[e] += T(ws[r] * v) // rounded before the add: no fused multiply-add
		}
	}
}

// segmentWeightedTakeOp is SegmentWeightedSum's transpose in one pass:
// with G the rows of g at the ids (zero rows for ids outside [0,
// g.shape[0])), it returns w[i]·G[i] (the cotangent of data) and
// Σ G[i]·data[i] (of the weights), each product rounded to float32 and
// each row's products summed as Sum sums a row (vec.SumF64): the bits of
// segment_take, Mul and Sum. Inputs: g [segments, ...], ids [N], w [N],
// data [N, ...], float32 (SegmentWeightedSum's VJP takes it for float32
// rows of host or block operands, the composition otherwise).
var segmentWeightedTakeOp *Op

func init() {
	segmentWeightedTakeOp = &Op{
		Name: "segment_weighted_take",
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			g, ids, w, data := in[0], in[1], in[2], in[3]
			dx := newOutUninit(Float32, data.shape) // every row written
			dw := newOutUninit(Float32, w.shape)
			inner := numel(data.shape[1:])
			weightedTakeRowsF32(dx.f32(), dw.f32(), g.f32(), w.f32(), data.f32(), ids.i32(), g.shape[0], inner, isLocal(g, ids, w, data))
			return []*Tensor{dx, dw}, nil
		},
		// dx[i] = w[i]·G[i], dw[i] = <G[i], x[i]>: with cotangents a of dx
		// and b of dw, g gets the segment sums of w·a and b·x, w gets
		// <G, a>, data gets b·G.
		VJPN: func(gs, in, _ []*Tensor, _ any, _ any) []*Tensor {
			g, ids, w, data := in[0], in[1], in[2], in[3]
			ns := g.shape[0]
			gt := Apply(segmentTakeOp, nil, g, ids)
			wb := rowWeights(w, len(data.shape))
			res := make([]*Tensor, 4)
			if a := gs[0]; a != nil {
				res[0] = SegmentWeightedSum(a, w, ids, ns)
				res[2] = Reshape(unbroadcast(Mul(gt, a), wb.shape), w.shape...)
			}
			if b := gs[1]; b != nil {
				res[0] = addTangents(res[0], SegmentWeightedSum(data, b, ids, ns))
				res[3] = Mul(gt, rowWeights(b, len(data.shape)))
			}
			return res
		},
		Save: SaveAllInputs,
		JVP: func(x, t, _ []*Tensor, _ any) []*Tensor {
			g, ids, w, data := x[0], x[1], x[2], x[3]
			gt := Apply(segmentTakeOp, nil, g, ids)
			wb := rowWeights(w, len(data.shape))
			var dx, dw *Tensor
			if t[0] != nil {
				tt := ApplyN(segmentWeightedTakeOp, nil, t[0], ids, w, data)
				dx, dw = tt[0], tt[1]
			}
			if t[2] != nil {
				dx = addTangents(dx, Mul(gt, rowWeights(t[2], len(data.shape))))
			}
			if t[3] != nil {
				dw = addTangents(dw, Reshape(unbroadcast(Mul(gt, t[3]), wb.shape), w.shape...))
			}
			return []*Tensor{dx, dw}
		},
		// The composition on the batch: segment_take's rule, then the
		// weights and the rows' sums.
		Batch: func(in []*Tensor, batched []bool, _ any) []*Tensor {
			n := batchSize(in, batched)
			var gt *Tensor
			if batched[0] || batched[1] {
				gt = segmentTakeOp.Batch(in[:2], batched[:2], nil)[0]
			} else {
				gt = materialize(Apply(segmentTakeOp, nil, in[0], in[1]), false, n)
			}
			w, data := materialize(in[2], batched[2], n), materialize(in[3], batched[3], n)
			wb := rowWeights(w, len(data.shape))
			return []*Tensor{Mul(gt, wb), Reshape(unbroadcast(Mul(gt, data), wb.shape), w.shape...)}
		},
		Sharding: ShardingRule{Family: ShardGather},
		Traits:   Traits{Reuse: FreshVJP},
	}
}

// fusedWeightedTake reports whether SegmentWeightedSum's VJP takes
// segment_weighted_take: float32 operands that are not placed (its
// sharding is the gather fallback; the composition propagates).
func fusedWeightedTake(g, data, w *Tensor) bool {
	return g.dtype == Float32 && data.dtype == Float32 && w.dtype == Float32 &&
		g.layout() == nil && data.layout() == nil && w.layout() == nil
}

// weightedTakeRowsF32 computes segment_weighted_take's rows (inner
// elements each; g has n rows), split over goroutines when large.
func weightedTakeRowsF32(dx, dw, g, w, data []float32, ids []int32, n, inner int, local bool) {
	rows := func(lo, hi int) {
		var zeroBuf, prodBuf [256]float32
		zero, prod := zeroBuf[:], prodBuf[:]
		if inner > len(prodBuf) {
			zero, prod = make([]float32, inner), make([]float32, inner)
		}
		zero, prod = zero[:inner], prod[:inner]
		for j := lo; j < hi; j++ {
			src := zero
			if v := ids[j]; v >= 0 && int(v) < n {
				src = g[int(v)*inner : (int(v)+1)*inner]
			}
			vec.MulVS(dx[j*inner:(j+1)*inner], src, w[j])
			vec.MulVV(prod, src, data[j*inner:(j+1)*inner])
			dw[j] = float32(vec.SumF64(prod))
		}
	}
	if serial(len(dx)*costCheap*3, local) {
		rows(0, len(ids))
		return
	}
	parallelFor(len(ids), inner*costCheap*3, 1, false, rows)
}

// rowWeights reshapes w ([rows] or [batch, rows]) to broadcast against
// rank-dimensional data whose leading dimensions are w's.
func rowWeights(w *Tensor, rank int) *Tensor {
	shape := make([]int, rank)
	for i := range shape {
		shape[i] = 1
	}
	copy(shape, w.shape)
	return Reshape(w, shape...)
}

// SegmentWeightedSum sums the rows of data weighted by weights, by
// segment: out[s] is the sum of weights[i]·data[i] over the i with
// segmentIDs[i] == s, SegmentSum(Mul(data, weights as a column), ...)
// computed in one pass without the weighted rows (a mixture of experts'
// combine: each token's expert outputs weighted by their gates). Each
// product is rounded before it is added, in the order of the rows, so the
// result has the bits of that composition. data is a float of shape [N,
// ...] (half data is widened to float32); weights [N] has its dtype;
// segmentIDs is Int32 [N], with ids outside [0, numSegments) dropped as
// SegmentSum drops them.
//
// The gradients: for data g gathered at the ids times the weights, for
// weights the gathered g's dot product with each row.
func SegmentWeightedSum(data, weights, segmentIDs *Tensor, numSegments int) *Tensor {
	checkNil("tensor.SegmentWeightedSum", "data weights segmentIDs", data, weights, segmentIDs)
	what := func() string {
		return fmt.Sprintf("tensor.SegmentWeightedSum: %s into %d segments", operands("", data, weights, segmentIDs), numSegments)
	}
	switch {
	case !data.dtype.IsFloat():
		panic(fmt.Sprintf("%s: data must be a float", what()))
	case weights.dtype != data.dtype:
		panic(fmt.Sprintf("%s: weights must have data's dtype", what()))
	}
	checkSegments(what, data, segmentIDs, numSegments)
	if len(weights.shape) != 1 || weights.shape[0] != data.shape[0] {
		panic(fmt.Sprintf("%s: want one weight per row: [%d]", what(), data.shape[0]))
	}
	return Apply(segmentWeightedSumOp, segmentParams{numSegments}, data, segmentIDs, weights)
}
