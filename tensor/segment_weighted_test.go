package tensor_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func TestSegmentWeightedSumHandWorked(t *testing.T) {
	data := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 4, 2)
	w := tensor.FromFloat32([]float32{0.5, 2, -1, 3})
	// Rows 0 and 2 go to segment 1, row 1 to segment 0, row 3 (id 5) is dropped.
	got := tensor.SegmentWeightedSum(data, w, ints([]int{1, 0, 1, 5}, 4), 3)
	requireTensor(t, got, tensor.Float32, []int{3, 2}, []float64{6, 8, 0.5 - 5, 1 - 6, 0, 0})
}

// segmentWeightedComposition is what SegmentWeightedSum fuses.
func segmentWeightedComposition(data, w, ids *tensor.Tensor, n int) *tensor.Tensor {
	shape := make([]int, data.Rank())
	for i := range shape {
		shape[i] = 1
	}
	shape[0] = w.Dim(0)
	return tensor.SegmentSum(tensor.Mul(data, tensor.Reshape(w, shape...)), ids, n)
}

// The fused op rounds each product before adding it, in row order: the
// bits of Mul then SegmentSum, forward and backward, on the row kernels
// (rows of 16 elements or more, split over goroutines when large) and on
// the generic loop; with repeated, dropped and unused segments.
func TestSegmentWeightedSumMatchesComposition(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		n     int
	}{
		{[]int{7, 3}, 4},
		{[]int{9, 2, 8}, 5},
		{[]int{40, 128}, 12},
		{[]int{4096, 128}, 2048}, // a MoE layer's combine: parallel chunks
		{[]int{6}, 3},
	} {
		t.Run(fmt.Sprint(tc.shape), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.shape[0]), 3))
			data := sample(tensor.Float32, 1, tc.shape...)
			w := sample(tensor.Float32, 2, tc.shape[0])
			idv := make([]int, tc.shape[0])
			for i := range idv {
				idv[i] = r.IntN(tc.n+2) - 1 // -1 and n dropped
			}
			ids := ints(idv, len(idv))
			got := tensor.SegmentWeightedSum(data, w, ids, tc.n)
			want := segmentWeightedComposition(data, w, ids, tc.n)
			require.Equal(t, want.Shape(), got.Shape())
			assert.Equal(t, want.Float32s(), got.Float32s())

			g := sample(tensor.Float32, 3, want.Shape()...)
			grads := func(f func(data, w *tensor.Tensor) *tensor.Tensor) []*tensor.Tensor {
				tr := tensor.NewTrace()
				x, v := tr.Leaf(data), tr.Leaf(w)
				y := tensor.Sum(tensor.Mul(f(x, v), g))
				return tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{x, v}, false)
			}
			gw := grads(func(x, v *tensor.Tensor) *tensor.Tensor { return segmentWeightedComposition(x, v, ids, tc.n) })
			gg := grads(func(x, v *tensor.Tensor) *tensor.Tensor { return tensor.SegmentWeightedSum(x, v, ids, tc.n) })
			assert.Equal(t, gw[0].Float32s(), gg[0].Float32s(), "data's gradient")
			assert.Equal(t, gw[1].Float32s(), gg[1].Float32s(), "weights' gradient")
		})
	}
}

func TestSegmentWeightedSumGrad(t *testing.T) {
	ids := ints([]int{2, 0, 2, -1, 7, 1}, 6)
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.SegmentWeightedSum(xs[0], xs[1], ids, 3) }
	checkGradOf(t, f, sample(tensor.Float32, 1, 6, 2), sample(tensor.Float32, 2, 6))
	checkGradOf(t, f, sample(tensor.Float32, 1, 6, 17), sample(tensor.Float32, 2, 6))
	// Second order: the VJP's ops (segment_weighted_take on float32 rows)
	// differentiated in every operand, through both of its results.
	for _, inner := range []int{2, 17} {
		r0, r1 := sample(tensor.Float32, 5, 6, inner), sample(tensor.Float32, 6, 6)
		h := func(xs []*tensor.Tensor) *tensor.Tensor {
			tr := tensor.NewTrace()
			x, w := tr.Leaf(xs[0]), tr.Leaf(xs[1])
			loss := tensor.Sum(tensor.Square(tensor.SegmentWeightedSum(x, w, ids, 3)))
			g := tensor.Backward(tr, []*tensor.Tensor{loss}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{x, w}, false)
			return tensor.Add(tensor.Sum(tensor.Mul(g[0], r0)), tensor.Sum(tensor.Mul(g[1], r1)))
		}
		checkGradOf(t, h, sample(tensor.Float32, 3, 6, inner), sample(tensor.Float32, 4, 6))
	}
}

func TestSegmentWeightedSumPanics(t *testing.T) {
	x := tensor.Zeros(tensor.Float32, 4, 2)
	w := tensor.Zeros(tensor.Float32, 4)
	ids := ints([]int{0, 1, 0, 1}, 4)
	for _, tc := range []struct {
		name string
		f    func()
		msg  string
	}{
		{"int data", func() { tensor.SegmentWeightedSum(tensor.Zeros(tensor.Int32, 4, 2), w, ids, 2) }, "data must be a float"},
		{"weights dtype", func() { tensor.SegmentWeightedSum(x, tensor.Zeros(tensor.Float64, 4), ids, 2) }, "weights must have data's dtype"},
		{"float ids", func() { tensor.SegmentWeightedSum(x, w, tensor.Zeros(tensor.Float32, 4), 2) }, "segment ids must be int32"},
		{"ids length", func() { tensor.SegmentWeightedSum(x, w, ints([]int{0, 1}, 2), 2) }, "one segment id per row: i32[4]"},
		{"weights shape", func() { tensor.SegmentWeightedSum(x, tensor.Zeros(tensor.Float32, 4, 1), ids, 2) }, "one weight per row"},
		{"negative count", func() { tensor.SegmentWeightedSum(x, w, ids, -1) }, "negative segment count"},
		{"nil", func() { tensor.SegmentWeightedSum(nil, w, ids, 2) }, "tensor.SegmentWeightedSum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r)
				assert.Contains(t, fmt.Sprint(r), tc.msg)
			}()
			tc.f()
		})
	}
}
