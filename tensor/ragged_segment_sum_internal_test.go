package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// SegmentSumRows gives SegmentSum's bits for the same rows held apart
// (each row its own slice, longer than the row): rows of 19 (the row
// kernels: vector part and tail) and 3 (the generic loop), segments that
// add 5 rows or more (a sum in another order rounds differently), a -0
// row first in its segment (written as -0 + 0 = +0), ids outside [0,
// segments) skipped, an empty segment zero; into storage the allocator
// cache hands out dirty. It panics naming its operands.
func TestSegmentSumRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 29))
	for _, tc := range []struct {
		name     string
		trailing []int
	}{
		{"rows of 19", []int{19}},
		{"rows of 3", []int{3}},
		{"rows of 2x8", []int{2, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const m, ns = 40, 7
			inner := numel(tc.trailing)
			data := randTensor(rng, append([]int{m}, tc.trailing...)...)
			d := data.f32()
			// Small and large magnitudes: reordered sums differ.
			for i := range d {
				d[i] *= float32(math.Pow(10, float64(rng.IntN(7)-3)))
			}
			ids := make([]int32, m)
			for j := range ids {
				ids[j] = int32(rng.IntN(ns - 1)) // segment ns-1 stays empty
			}
			ids[3], ids[11] = -1, ns // skipped
			ids[0] = 2
			for e := range inner {
				d[e] = float32(math.Copysign(0, -1)) // -0 first into segment 2
			}
			rows := make([][]float32, m)
			for j := range rows {
				rows[j] = append(append([]float32(nil), d[j*inner:(j+1)*inner]...), 99, 99)
			}
			segs := FromInt32(ids, m)
			want := SegmentSum(data, segs, ns).Float32s()
			for range 4 {
				Donate(Full(Float32, 7, ns, inner))
			}
			got := SegmentSumRows(rows, segs, ns, tc.trailing...)
			require.Equal(t, append([]int{ns}, tc.trailing...), got.Shape())
			gv := got.Float32s()
			require.Equal(t, len(want), len(gv))
			for i := range want {
				require.Equal(t, math.Float32bits(want[i]), math.Float32bits(gv[i]), "element %d: %v, want %v", i, gv[i], want[i])
			}
			require.Equal(t, make([]float32, inner), gv[(ns-1)*inner:], "the empty segment")
		})
	}
	rows := [][]float32{{1, 2}, {3}}
	require.PanicsWithValue(t, "tensor.SegmentSumRows: row 1 has 1 elements, want 2 (trailing [2])", func() {
		SegmentSumRows(rows, FromInts([]int{0, 0}), 1, 2)
	})
	require.PanicsWithValue(t, "tensor.SegmentSumRows: segment ids i32[3]: want i32[2], one per row", func() {
		SegmentSumRows(rows, FromInts([]int{0, 0, 0}), 1, 1)
	})
	require.PanicsWithValue(t, "tensor.SegmentSumRows: negative segment count -1", func() {
		SegmentSumRows(rows, FromInts([]int{0, 0}), -1, 1)
	})
}
