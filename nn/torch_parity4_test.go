package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// The parts of nn that testdata/torch_parity4.py checks against PyTorch
// 1.13 in float64 on both sides, to 1e-12 (requireTight): BatchNorm's eps
// and momentum and SpectralNorm's eps as float64 constants, and the
// losses of losses_parity4.go.

func TestTorchParity4(t *testing.T) {
	kinds := map[string]int{}
	for _, c := range loadTorchFile(t, "torch_parity4.json") {
		t.Run(c.Name, func(t *testing.T) {
			switch c.Kind {
			case "batchnorm":
				checkBatchNorm(t, c, c.f64(t, "x"), c.f64(t, "g"), c.f64, requireTight, requireTight)
			case "spectral":
				// Linear's W is [in, out]: PyTorch's weight transposed.
				lin := nn.Linear{W: tensor.Transpose(c.f64(t, "weight"), 1, 0)}
				s, state := nn.MakeWithState(nn.NewSpectralNorm(tensor.NewKey(1), lin, nn.SpectralNormOptions{Eps: c.num("eps")}))
				state = state.Set(s.Index, c.f64(t, "u"), c.f64(t, "v"))
				l, after := s.Normalized(state)
				uv := after.Get(s.Index)
				requireTight(t, c, "u_after", uv[0])
				requireTight(t, c, "v_after", uv[1])
				requireTight(t, c, "sigma", s.Sigma(after))
				requireTight(t, c, "y", tensor.Transpose(l.W, 1, 0))
			default:
				checkParity4Loss(t, c)
			}
		})
		kinds[c.Kind]++
	}
	require.Equal(t, 4, kinds["batchnorm"])
	require.Equal(t, 1, kinds["spectral"])
}

// checkParity4Loss checks a loss case.
func checkParity4Loss(t *testing.T, c torchCase) {
	t.Helper()
	t.Fatalf("%s: unknown kind %q", c.Name, c.Kind)
}
