package nn_test

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkMLPStep measures one forward and backward pass of an MLP with
// ReLU and an MSE loss (the gradient of every parameter), reporting µs/step
// and the GFLOP/s of the matrix products it computes (2·batch·in·out per
// product: per layer the forward product and the weight gradient, and the
// input gradient for every layer but the first, whose input is data), per
// second and per CPU-second: against the gemm's own GFLOP/cpu-s (package
// gemm's BenchmarkSgemm) this is how close the step is to its gemm bound.
// Like a
// training loop, each step donates its gradients and loss once used, and
// the backward pass recycles the activations (autodiff.RecycleIntermediates),
// so that in the steady state a step allocates headers, not storage.
// The case of 2-wide layers and one row is the engine's own cost per step
// (tracing, the graph, the backward walk, the trees, the allocator and
// collector), with next to no arithmetic.
func BenchmarkMLPStep(b *testing.B) {
	cases := []struct {
		sizes []int
		batch int
	}{
		{[]int{2, 2, 2, 2, 2}, 1},
		{[]int{32, 128, 256, 128, 4}, 16},
		{[]int{32, 128, 256, 128, 4}, 1024},
		{[]int{784, 1024, 1024, 10}, 256},
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("sizes=%v/batch=%d", c.sizes, c.batch), func(b *testing.B) {
			k1, k2 := tensor.NewKey(0).Split2()
			m := nn.NewMLP(k1, c.sizes, nn.MLPOptions{})
			x := tensor.Normal(k2, c.batch, c.sizes[0])
			y := tensor.Zeros(tensor.Float32, c.batch, c.sizes[len(c.sizes)-1])
			step := autodiff.ValueAndGradWith(func(m nn.MLP, x *tensor.Tensor) *tensor.Tensor {
				return tensor.MSE(m.Forward(x), y)
			}, autodiff.RecycleIntermediates())
			flops := 0.0
			for i := 0; i+1 < len(c.sizes); i++ {
				products := 3.0
				if i == 0 {
					products = 2 // no gradient for the data
				}
				flops += products * 2 * float64(c.batch*c.sizes[i]*c.sizes[i+1])
			}
			for range 2 { // warm up, and fill the allocator cache
				loss, g := step(m, x)
				tensor.Donate(loss)
				autodiff.DonateTree(g)
			}
			b.ResetTimer()
			cpu0 := cputime.Used().Seconds()
			for b.Loop() {
				loss, g := step(m, x)
				tensor.Donate(loss)
				autodiff.DonateTree(g)
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(sec*1e6, "µs/step")
			b.ReportMetric(flops/sec/1e9, "GFLOP/s")
			// CPU time of the whole process per step (the collector
			// included): on a shared machine, time not running does not
			// count. With -cpu 1 it is what the step costs one core.
			if cpu := cputime.Used().Seconds() - cpu0; cpu > 0 {
				b.ReportMetric(cpu/float64(b.N)*1e6, "cpu-µs/step")
				b.ReportMetric(flops*float64(b.N)/cpu/1e9, "GFLOP/cpu-s")
			}
		})
	}
}

// BenchmarkMLPStepSplit measures the forward and backward pass of the MLP
// 784-1024-1024-10 on 256 rows done as parts=k passes of 256/k rows on one
// goroutine, as k data-parallel devices sharing a core do (each pass
// packs the same weights again and writes a full weight gradient): its
// cpu-ms/step against parts=1 is the overhead of devices that outnumber
// cores, before any collective.
func BenchmarkMLPStepSplit(b *testing.B) {
	sizes, rows := []int{784, 1024, 1024, 10}, 256
	k1, k2 := tensor.NewKey(0).Split2()
	m := nn.NewMLP(k1, sizes, nn.MLPOptions{})
	x := tensor.Normal(k2, rows, sizes[0])
	for _, parts := range []int{1, 2, 8} {
		b.Run(fmt.Sprintf("parts=%d", parts), func(b *testing.B) {
			n := rows / parts
			xs := make([]*tensor.Tensor, parts)
			for i := range xs {
				xs[i] = tensor.SliceAxis(x, 0, i*n, (i+1)*n)
			}
			y := tensor.Zeros(tensor.Float32, n, sizes[len(sizes)-1])
			step := autodiff.ValueAndGradWith(func(m nn.MLP, x *tensor.Tensor) *tensor.Tensor {
				return tensor.MSE(m.Forward(x), y)
			}, autodiff.RecycleIntermediates())
			run := func() {
				for _, xi := range xs {
					loss, g := step(m, xi)
					tensor.Donate(loss)
					autodiff.DonateTree(g)
				}
			}
			run() // warm up, and fill the allocator cache
			b.ResetTimer()
			cpu0 := cputime.Used()
			for b.Loop() {
				run()
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/step")
			if cpu := cputime.Used() - cpu0; cpu > 0 {
				b.ReportMetric(cpu.Seconds()/float64(b.N)*1e3, "cpu-ms/step")
			}
		})
	}
}

// BenchmarkAttentionStep measures forward and backward of causal
// self-attention on [8, 128, 256] with 8 heads.
func BenchmarkAttentionStep(b *testing.B) {
	const B, T, D, N = 8, 128, 256, 8
	k1, k2 := tensor.NewKey(0).Split2()
	a := nn.NewMultiHeadAttention(k1, D, N, nn.AttentionOptions{Causal: true})
	x := tensor.Normal(k2, B, T, D)
	step := autodiff.ValueAndGradWith(func(a nn.MultiHeadAttention, x *tensor.Tensor) *tensor.Tensor {
		return tensor.Mean(tensor.Square(a.Forward(x)))
	})
	step(a, x)
	b.ResetTimer()
	for b.Loop() {
		step(a, x)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e6, "µs/step")
}

// BenchmarkMoEStep measures forward and backward of a MoE layer with 8
// experts, top-2 routing and capacity factor 1.25 on 512 tokens of 256
// features (hidden 1024), the loss including the auxiliary loss.
func BenchmarkMoEStep(b *testing.B) {
	const T, D, H, E = 512, 256, 1024, 8
	k1, k2 := tensor.NewKey(0).Split2()
	m := nn.NewMoE(k1, D, H, E, nn.MoEOptions{})
	x := tensor.Normal(k2, T, D)
	step := autodiff.ValueAndGradWith(func(m nn.MoE, x *tensor.Tensor) *tensor.Tensor {
		o := m.Forward(x)
		return tensor.Add(tensor.Mean(tensor.Square(o.Output)), tensor.MulScalar(o.AuxLoss, 0.01))
	})
	step(m, x)
	b.ResetTimer()
	for b.Loop() {
		step(m, x)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e6, "µs/step")
}
