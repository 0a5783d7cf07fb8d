package tensor_test

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/tensor"
)

// BenchmarkMatMulDType compares MatMul in float32 (Sgemm) and float64
// (Dgemm) at n×n×n: a float64 product moves twice the bytes and its
// vectors hold half the elements, so about half float32's GFLOP/s is the
// expected ratio.
func BenchmarkMatMulDType(b *testing.B) {
	for _, n := range []int{256, 1024} {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
			b.Run(fmt.Sprintf("%s/%d", dt.Abbrev(), n), func(b *testing.B) {
				k := tensor.NewKey(1).Split(2)
				x, y := tensor.Normal(k[0], n, n), tensor.Normal(k[1], n, n)
				if dt == tensor.Float64 {
					x, y = tensor.Convert(x, dt), tensor.Convert(y, dt)
				}
				b.ResetTimer()
				for range b.N {
					tensor.Donate(tensor.MatMul(x, y))
				}
				b.ReportMetric(2*float64(n*n*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
