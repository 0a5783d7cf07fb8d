package nn_test

import (
	"testing"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkTransformerEncoderLayer times one forward and backward pass
// (the gradient of Σ y² with respect to every parameter) of an encoder
// layer, d_model 256, 8 heads, dim_feedforward 1024, post-norm relu,
// batch_first [16, 64, 256], float32, without dropout: without a mask,
// with the bool causal mask (the fused attention) and with the float
// SquareSubsequentMask (PyTorch's composed math, the weights stored).
// GFLOP/s counts the matrix products (3 × the forward's). The PyTorch
// figures of the same step come from testdata/torch_transformer.py --bench.
func BenchmarkTransformerEncoderLayer(b *testing.B) {
	const B, T, D, H, FF = 16, 64, 256, 8, 1024
	x := tensor.Normal(tensor.NewKey(1), B, T, D)
	l := nn.NewTransformerEncoderLayer(tensor.NewKey(2), D, H, nn.TransformerOptions{DimFeedforward: FF, BatchFirst: true})
	flops := 3 * float64(2*B*T*(4*D*D+2*D*FF)+2*2*B*T*T*D)
	for _, c := range []struct {
		name string
		mask *tensor.Tensor
	}{{"nomask", nil}, {"boolcausal", nn.TorchCausalMask(T)}, {"floatcausal", nn.SquareSubsequentMask(T)}} {
		b.Run(c.name, func(b *testing.B) {
			g := autodiff.Grad(func(l nn.TransformerEncoderLayer) *tensor.Tensor {
				return tensor.Sum(tensor.Square(l.ForwardWith(x, nn.TransformerEncoderCall{Mask: c.mask})))
			})
			b.ReportAllocs()
			runStep(b, func() { g(l) }, flops)
		})
	}
}
