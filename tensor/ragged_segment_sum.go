package tensor

import "fmt"

// SegmentSumRows returns SegmentSum(data, segmentIDs, numSegments) for a
// float32 data [N, trailing...] given by its rows instead of formed:
// rows[j] holds data's row j (its first numel(trailing) elements are
// read), wherever it lives. The result is f32[numSegments, trailing...]
// with SegmentSum's bits: each segment adds its rows in the order of j,
// starting from +0.
//
// It is a kernel, not an op: the result is not traced, and the rows are
// read on the calling goroutine. A collective that receives rows to sum
// them (shard's ragged all-to-all's transpose into a gather's gradient)
// reads them from the senders' blocks with it, without a buffer of the
// received rows between the exchange and the sum.
func SegmentSumRows(rows [][]float32, segmentIDs *Tensor, numSegments int, trailing ...int) *Tensor {
	const op = "tensor.SegmentSumRows"
	checkNil(op, "segmentIDs", segmentIDs)
	inner := 1
	for _, d := range trailing {
		if d < 0 {
			panic(fmt.Sprintf("%s: negative trailing dimension in %v", op, trailing))
		}
		inner *= d
	}
	switch {
	case segmentIDs.dtype != Int32 || len(segmentIDs.shape) != 1 || segmentIDs.shape[0] != len(rows):
		panic(fmt.Sprintf("%s: segment ids %v: want i32[%d], one per row", op, segmentIDs, len(rows)))
	case numSegments < 0:
		panic(fmt.Sprintf("%s: negative segment count %d", op, numSegments))
	}
	for j, r := range rows {
		if len(r) < inner {
			panic(fmt.Sprintf("%s: row %d has %d elements, want %d (trailing %v)", op, j, len(r), inner, trailing))
		}
	}
	shape := append([]int{numSegments}, trailing...)
	ids := segmentIDs.i32()
	if scatterRows(Float32, 1, inner) {
		out := newOutUninit(Float32, shape) // cleared by the row chunks
		scatterRowsOfF32(out.f32(), nil, rows, nil, ids, numSegments, inner, true, true, true)
		return out
	}
	// segmentSumKernel's loop, as SegmentSum runs it for short rows.
	out := newTensor(Float32, shape)
	dst := out.f32()
	for j, id := range ids {
		if id < 0 || int(id) >= numSegments {
			continue
		}
		d := dst[int(id)*inner : (int(id)+1)*inner]
		for e, v := range rows[j][:inner] {
			d[e] += v
		}
	}
	return out
}
