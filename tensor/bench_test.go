package tensor_test

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/tensor"
)

// Run with, for example:
//
//	go test ./tensor -run '^$' -bench . -benchtime 2s
//
// Metrics: GFLOP/s for MatMul (2·m·n·k per product), GB/s for elementwise
// ops and reductions (bytes read plus bytes written per call), µs/step for
// the MLP training step.

func reportGFLOPs(b *testing.B, flops float64) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(flops*float64(b.N)/s/1e9, "GFLOP/s")
	}
}

func reportGBs(b *testing.B, bytes float64) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(bytes*float64(b.N)/s/1e9, "GB/s")
	}
}

func BenchmarkMatMul(b *testing.B) {
	for _, s := range []struct{ m, k, n int }{
		{1024, 1024, 1024},
		{1024, 4096, 256},
		{256, 256, 256},
	} {
		b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.k, s.n), func(b *testing.B) {
			rng := newRNG(1)
			x, w := randF32(rng, s.m, s.k), randF32(rng, s.k, s.n)
			for b.Loop() {
				tensor.MatMul(x, w)
			}
			reportGFLOPs(b, 2*float64(s.m)*float64(s.n)*float64(s.k))
		})
	}
}

func BenchmarkElementwise(b *testing.B) {
	for _, n := range []int{1 << 20, 1 << 24} {
		name := "1M"
		if n == 1<<24 {
			name = "16M"
		}
		rng := newRNG(2)
		x := randF32(rng, n/1024, 1024)
		y := randF32(rng, n/1024, 1024)
		bias := randF32(rng, 1024)
		const f = 4 // bytes per float32
		cases := []struct {
			op    string
			f     func() *tensor.Tensor
			bytes float64
		}{
			{"Add", func() *tensor.Tensor { return tensor.Add(x, y) }, 3 * f * float64(n)},
			{"AddBias", func() *tensor.Tensor { return tensor.Add(x, bias) }, 2*f*float64(n) + f*1024},
			{"Mul", func() *tensor.Tensor { return tensor.Mul(x, y) }, 3 * f * float64(n)},
			{"Exp", func() *tensor.Tensor { return tensor.Exp(x) }, 2 * f * float64(n)},
			{"Relu", func() *tensor.Tensor { return tensor.Relu(x) }, 2 * f * float64(n)},
			{"Sum", func() *tensor.Tensor { return tensor.Sum(x) }, f * float64(n)},
			{"SumRows", func() *tensor.Tensor { return tensor.Sum(x, 1) }, f*float64(n) + f*float64(n/1024)},
			{"SumCols", func() *tensor.Tensor { return tensor.Sum(x, 0) }, f*float64(n) + f*1024},
		}
		for _, c := range cases {
			b.Run(c.op+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					c.f()
				}
				reportGBs(b, c.bytes)
			})
		}
	}
}

// BenchmarkMLPStep runs one forward and backward pass of a 32-128-256-128-4
// GELU network on a batch of 16 through Trace/Backward.
func BenchmarkMLPStep(b *testing.B) {
	rng := newRNG(3)
	params := mlpParams(rng, 32, 128, 256, 128, 4)
	x, y := randF32(rng, 16, 32), randF32(rng, 16, 4)
	b.ReportAllocs()
	for b.Loop() {
		tr, l := traceLeaves(params...)
		loss := mlpLoss(l, x, y)
		tensor.Backward(tr, ts(loss), ts(tensor.Scalar(1)), l, false)
	}
	if b.N > 0 {
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/step")
	}
}
