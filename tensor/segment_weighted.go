package tensor

import (
	"fmt"
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
			gt := Apply(segmentTakeOp, nil, g, ids)
			wb := rowWeights(w, len(data.shape))
			res := make([]*Tensor, 3)
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
// ...] (half data is widened to float32); weights [N] has its dtype; segmentIDs is Int32
// [N], with ids outside [0, numSegments) dropped as SegmentSum drops them.
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
	case segmentIDs.dtype != Int32:
		panic(fmt.Sprintf("%s: segment ids must be int32", what()))
	case len(data.shape) == 0:
		panic(fmt.Sprintf("%s: data must have at least one dimension", what()))
	case len(segmentIDs.shape) != 1 || segmentIDs.shape[0] != data.shape[0]:
		panic(fmt.Sprintf("%s: want one segment id per row: i32[%d]", what(), data.shape[0]))
	case len(weights.shape) != 1 || weights.shape[0] != data.shape[0]:
		panic(fmt.Sprintf("%s: want one weight per row: [%d]", what(), data.shape[0]))
	case numSegments < 0:
		panic(fmt.Sprintf("%s: negative segment count", what()))
	}
	return Apply(segmentWeightedSumOp, segmentParams{numSegments}, data, segmentIDs, weights)
}
