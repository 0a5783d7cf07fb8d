package tensor_test

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/tensor"
)

// The benchmarks report GB/s counted as bytes read plus bytes written (twice
// the output's size for these pure copies).

func reportCopyGBs(b *testing.B, out *tensor.Tensor) {
	bytes := 2 * float64(out.Bytes())
	b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

func mib(n int) string { return fmt.Sprintf("%dMiB", n) }

// BenchmarkConcat joins two f32[r, c] halves along the last axis (the
// interleaving case: r runs of c elements from each operand).
func BenchmarkConcat(b *testing.B) {
	for _, sz := range []struct{ mb, rows, cols int }{{1, 512, 256}, {16, 2048, 1024}} {
		b.Run(mib(sz.mb), func(b *testing.B) {
			x := sample(tensor.Float32, 1, sz.rows, sz.cols)
			y := sample(tensor.Float32, 2, sz.rows, sz.cols)
			var out *tensor.Tensor
			for b.Loop() {
				out = tensor.Concat(1, x, y)
			}
			reportCopyGBs(b, out)
		})
	}
}

// BenchmarkTake gathers rows of a f32[32768, 256] embedding table (1 KiB
// runs), and, as "elements", single elements along the last axis.
func BenchmarkTake(b *testing.B) {
	table := sample(tensor.Float32, 1, 32768, 256)
	for _, mb := range []int{1, 16} {
		b.Run("rows/"+mib(mb), func(b *testing.B) {
			n := mb << 20 / (256 * 4)
			ids := make([]int, n)
			for i := range ids {
				ids[i] = (i * 7919) % 32768
			}
			idx := tensor.FromInts(ids)
			var out *tensor.Tensor
			for b.Loop() {
				out = tensor.Take(table, idx, 0)
			}
			reportCopyGBs(b, out)
		})
	}
	b.Run("elements/"+mib(1), func(b *testing.B) {
		x := sample(tensor.Float32, 2, 1024, 256)
		ids := make([]int, 256)
		for i := range ids {
			ids[i] = 255 - i
		}
		idx := tensor.FromInts(ids)
		var out *tensor.Tensor
		for b.Loop() {
			out = tensor.Take(x, idx, 1)
		}
		reportCopyGBs(b, out)
	})
}

// BenchmarkSlice cuts the middle half of the columns of a square f32 matrix
// (runs of half a row each).
func BenchmarkSlice(b *testing.B) {
	for _, sz := range []struct{ mb, n int }{{1, 512}, {16, 2048}} {
		b.Run(mib(sz.mb), func(b *testing.B) {
			x := sample(tensor.Float32, 1, sz.n, sz.n)
			var out *tensor.Tensor
			for b.Loop() {
				out = tensor.Slice(x, []int{0, sz.n / 4}, []int{sz.n, 3 * sz.n / 4})
			}
			reportCopyGBs(b, out)
		})
	}
}
