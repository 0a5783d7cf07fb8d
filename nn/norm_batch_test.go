package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// ForwardAct gives the values, gradients and state of act(Forward), in
// training and inference, fused or not.
func TestBatchNormForwardActEqualsComposition(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		for _, inference := range []bool{false, true} {
			for _, act := range []struct {
				name string
				f    nn.Activation
			}{{"relu", nn.Relu}, {"gelu", nn.Gelu}, {"softplus", nn.Softplus}, {"nil", nil}} {
				b, s := nn.MakeWithState(nn.NewBatchNorm(3, nn.BatchNormOptions{}))
				b.Inference = inference
				b.Weight = tensor.FromFloat32([]float32{1.5, -0.5, 2}, 3)
				b.Bias = tensor.FromFloat32([]float32{0.1, 0.2, -0.3}, 3)
				k1, k2 := tensor.NewKey(3).Split2()
				x := tensor.Convert(tensor.Normal(k1, 4, 3, 5), dt)
				g := tensor.Convert(tensor.Normal(k2, 4, 3, 5), dt)
				run := func(fused bool) ([]*tensor.Tensor, nn.State) {
					tr := tensor.NewTrace()
					lb := b
					lx, lw, lbias := tr.Leaf(x), tr.Leaf(b.Weight), tr.Leaf(b.Bias)
					lb.Weight, lb.Bias = lw, lbias
					var y *tensor.Tensor
					var s2 nn.State
					if fused {
						y, s2 = lb.ForwardAct(lx, s, act.f)
					} else {
						y, s2 = lb.Forward(lx, s)
						if act.f != nil {
							y = act.f(y)
						}
					}
					gs := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{g}, []*tensor.Tensor{lx, lw, lbias}, false)
					return append([]*tensor.Tensor{tensor.StopGradient(y)}, gs...), s2
				}
				want, ws := run(false)
				got, gs := run(true)
				name := dt.String() + "/" + act.name
				for i := range want {
					require.Equal(t, want[i].Float64s(), got[i].Float64s(), "%s inference=%v result %d", name, inference, i)
				}
				for i, v := range ws.Get(b.Index) {
					require.Equal(t, v.Float64s(), gs.Get(b.Index)[i].Float64s(), name)
				}
			}
		}
	}
}
