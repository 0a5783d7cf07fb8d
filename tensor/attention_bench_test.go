package tensor_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gonox/gonox/tensor"
)

// BenchmarkAttention times a forward and backward pass of causal attention
// with 4 heads of 32 features at contexts 64 (batch 32, examples/moe's
// attention), 1024 (batch 2) and 4096 (batch 1): the fused op
// (tensor.DotProductAttention), the fused op with its products in
// bfloat16 (DotProductAttentionAs, fused_bf16) and, for scale, the same attention written
// with ops (matmul, mask, softmax, matmul), which stores the [B,N,T,T]
// weights. GFLOP/s counts the unmasked work (4·B·N·T²·H flops forward,
// twice that backward, halved by the causal mask); -benchmem gives the
// bytes a pass allocates. bench/compare.sh runs it beside PyTorch's
// matmul-softmax-matmul (bench/anchors.py attention).
//
//	go test ./tensor -run '^$' -bench Attention -benchmem
func BenchmarkAttention(b *testing.B) {
	const N, H = 4, 32
	for _, c := range []struct{ T, B int }{{64, 32}, {1024, 2}, {4096, 1}} {
		rng := newRNG(1)
		q, k, v := randF32(rng, c.B, c.T, N, H), randF32(rng, c.B, c.T, N, H), randF32(rng, c.B, c.T, N, H)
		g := randF32(rng, c.B, c.T, N, H)
		fused := func(x []*tensor.Tensor) *tensor.Tensor {
			return tensor.DotProductAttention(x[0], x[1], x[2], nil, 0, true)
		}
		bf16 := func(x []*tensor.Tensor) *tensor.Tensor {
			return tensor.DotProductAttentionAs(x[0], x[1], x[2], nil, 0, true, tensor.BFloat16)
		}
		ops := func(x []*tensor.Tensor) *tensor.Tensor { return attentionOps(x[0], x[1], x[2]) }
		for _, impl := range []struct {
			name string
			f    func([]*tensor.Tensor) *tensor.Tensor
		}{{"fused", fused}, {"fused_bf16", bf16}, {"ops", ops}} {
			if impl.name == "ops" && c.T > 1024 && testing.Short() {
				continue
			}
			b.Run(fmt.Sprintf("context=%d/%s", c.T, impl.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					tr, l := traceLeaves(q, k, v)
					o := impl.f(l)
					tensor.Backward(tr, ts(o), ts(g), l, false)
				}
				secs := b.Elapsed().Seconds() / float64(b.N)
				flops := 12.0 * float64(c.B*N*c.T*c.T*H) / 2
				b.ReportMetric(flops/secs/1e9, "GFLOP/s")
				b.ReportMetric(secs*1e3, "ms/pass")
			})
		}
	}
}

// attentionOps is causal attention written with ops, as
// nn.DotProductAttention was before the fused op.
func attentionOps(q, k, v *tensor.Tensor) *tensor.Tensor {
	T, H := q.Dim(1), q.Dim(3)
	tril := tensor.GreaterEqual(tensor.Reshape(tensor.Arange(T), T, 1), tensor.Reshape(tensor.Arange(T), 1, T))
	qt := tensor.Transpose(tensor.MulScalar(q, float32(1/math.Sqrt(float64(H)))), 0, 2, 1, 3)
	kt, vt := tensor.Transpose(k, 0, 2, 1, 3), tensor.Transpose(v, 0, 2, 1, 3)
	logits := tensor.Where(tril, tensor.MatMulT(qt, kt, false, true), tensor.Scalar(float32(math.Inf(-1))))
	return tensor.Transpose(tensor.MatMul(tensor.Softmax(logits, -1), vt), 0, 2, 1, 3)
}
