package tensor_test

import (
	"testing"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/tensor"
)

// TestMatMulAsStackedRows checks that MatMulAs in bfloat16 on a batch of
// matrices times one float32 matrix (nn.Linear under the bf16 policy on
// [B,T,in]) computes, forward and backward, the bits of the product of
// the batch's rows stacked (the reshapes nn.Linear made before), and
// that its result is the float64 product of the bf16-rounded operands
// within float32 accumulation.
func TestMatMulAsStackedRows(t *testing.T) {
	for _, tc := range []stackedCase{
		{"rank3", []int{3, 5, 8}, []int{8, 6}, false},
		{"rank4 odd k", []int{2, 3, 4, 7}, []int{7, 9}, false},
		{"transposed w", []int{4, 5, 16}, []int{4, 16}, true},
		{"wide", []int{2, 33, 40}, []int{40, 48}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := func(x, w *tensor.Tensor) *tensor.Tensor {
				return tensor.MatMulAs(x, w, false, tc.tb, tensor.BFloat16, tensor.Float32)
			}
			bf := func(v float32) float64 { return float64(half.FromFloat32BF(v).Float32()) }
			requireStackedRows(t, tc, 17, as, bf, func(mag float64) float64 { return 1e-6*mag + 1e-7 })
		})
	}
}
