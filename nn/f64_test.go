package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// to64 converts every float32 leaf of a model to float64: a float64 model
// is a float32 one with its leaves converted (eqx.nn layers' dtype=).
func to64[M any](m M) M {
	return pytree.Map(m, func(x *tensor.Tensor) *tensor.Tensor {
		if x.DType() != tensor.Float32 {
			return x
		}
		return tensor.Convert(x, tensor.Float64)
	})
}

// Layers run in float64 unchanged once their leaves are float64: the
// results equal float32's within float32 rounding, and the gradients
// float64 central differences at float64's tolerances.
func TestLayersFloat64(t *testing.T) {
	k := tensor.NewKey(2).Split(4)
	mlp := nn.NewMLP(k[0], []int{5, 8, 3}, nn.MLPOptions{Activation: nn.Gelu})
	ln := nn.NewLayerNorm(5, nn.LayerNormOptions{})
	conv := nn.NewConv2d(k[1], 2, 3, 3, nn.ConvOptions{Padding: tensor.SamePadding})
	x := tensor.Normal(k[2], 4, 5)
	img := tensor.Normal(k[3], 1, 2, 5, 5)

	cases := []struct {
		name string
		f32  func() *tensor.Tensor
		f64  func(x *tensor.Tensor) *tensor.Tensor
		x    *tensor.Tensor
	}{
		{"MLP", func() *tensor.Tensor { return mlp.Forward(x) }, func(x *tensor.Tensor) *tensor.Tensor { return to64(mlp).Forward(x) }, x},
		{"LayerNorm", func() *tensor.Tensor { return ln.Forward(x) }, func(x *tensor.Tensor) *tensor.Tensor { return to64(ln).Forward(x) }, x},
		{"Conv2d", func() *tensor.Tensor { return conv.Forward(img) }, func(x *tensor.Tensor) *tensor.Tensor { return to64(conv).Forward(x) }, img},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x64 := tensor.Convert(c.x, tensor.Float64)
			y := c.f64(x64)
			require.Equal(t, tensor.Float64, y.DType())
			require.InDeltaSlice(t, c.f32().Float64s(), y.Float64s(), 1e-5)
			loss := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Square(c.f64(xs[0]))) }
			require.NoError(t, autodiff.CheckGrad(loss, []*tensor.Tensor{x64}, autodiff.CheckOptions{}))
		})
	}
}
