package nn_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// ForwardAct gives the values, gradients and state of act(Forward), and
// ForwardResidual those of act(Forward + r) (with and without the
// residual's gradient), in training and inference, fused or not.
func TestBatchNormForwardActEqualsComposition(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		for _, inference := range []bool{false, true} {
			for _, act := range []struct {
				name string
				f    nn.Activation
			}{{"relu", nn.Relu}, {"gelu", nn.Gelu}, {"softplus", nn.Softplus}, {"nil", nil}} {
				for _, res := range []string{"none", "residual", "residual without gradient"} {
					name := fmt.Sprintf("%v/%s/%s/inference=%v", dt, act.name, res, inference)
					checkForwardAct(t, name, dt, inference, act.f, res)
				}
			}
		}
	}
}

func checkForwardAct(t *testing.T, name string, dt tensor.DType, inference bool, act nn.Activation, res string) {
	t.Helper()
	b, s := nn.MakeWithState(nn.NewBatchNorm(3, nn.BatchNormOptions{}))
	b.Inference = inference
	b.Weight = tensor.FromFloat32([]float32{1.5, -0.5, 2}, 3)
	b.Bias = tensor.FromFloat32([]float32{0.1, 0.2, -0.3}, 3)
	k := tensor.NewKey(3).Split(3)
	k1, k2, k3 := k[0], k[1], k[2]
	x := tensor.Convert(tensor.Normal(k1, 4, 3, 5), dt)
	g := tensor.Convert(tensor.Normal(k2, 4, 3, 5), dt)
	r := tensor.Convert(tensor.Normal(k3, 4, 3, 5), dt)
	run := func(fused bool) ([]*tensor.Tensor, nn.State) {
		tr := tensor.NewTrace()
		lb := b
		lx, lw, lbias, lr := tr.Leaf(x), tr.Leaf(b.Weight), tr.Leaf(b.Bias), tr.Leaf(r)
		lb.Weight, lb.Bias = lw, lbias
		wrt := []*tensor.Tensor{lx, lw, lbias}
		if res == "residual" {
			wrt = append(wrt, lr)
		}
		var y *tensor.Tensor
		var s2 nn.State
		switch {
		case fused && res == "none":
			y, s2 = lb.ForwardAct(lx, s, act)
		case fused:
			y, s2 = lb.ForwardResidual(lx, lr, s, act)
		default:
			y, s2 = lb.Forward(lx, s)
			if res != "none" {
				y = tensor.Add(y, lr)
			}
			if act != nil {
				y = act(y)
			}
		}
		gs := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{g}, wrt, false)
		return append([]*tensor.Tensor{tensor.StopGradient(y)}, gs...), s2
	}
	want, ws := run(false)
	got, gs := run(true)
	for i := range want {
		require.Equal(t, want[i].Float64s(), got[i].Float64s(), "%s result %d", name, i)
	}
	for i, v := range ws.Get(b.Index) {
		require.Equal(t, v.Float64s(), gs.Get(b.Index)[i].Float64s(), name)
	}
}
