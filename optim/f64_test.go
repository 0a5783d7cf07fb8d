package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

type f64Model struct{ W *tensor.Tensor }

// Adam, AdamW and SGD with momentum update float64 parameters in float64,
// as float64 loops over optax's formulas do.
func TestFloat64Parameters(t *testing.T) {
	p0 := []float64{1, -2, 0.5}
	grads := [][]float64{{0.1, -0.3, 2}, {0.2, 0.1, -1}, {-0.5, 0.4, 0.3}}
	const lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-8, 0.1

	for _, decay := range []float64{0, wd} {
		tx := optim.Adam(optim.Constant(lr))
		if decay != 0 {
			tx = optim.AdamW(optim.Constant(lr), optim.AdamWOptions{WeightDecay: decay})
		}
		params := f64Model{W: tensor.FromFloat64s(p0, 3)}
		state := tx.Init(params)
		want := append([]float64(nil), p0...)
		m, v := make([]float64, 3), make([]float64, 3)
		for step, g := range grads {
			params, state = optim.Step(tx, params, f64Model{W: tensor.FromFloat64s(g, 3)}, state)
			k := float64(step + 1)
			for i := range want {
				m[i] = b1*m[i] + (1-b1)*g[i]
				v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
				mh, vh := m[i]/(1-math.Pow(b1, k)), v[i]/(1-math.Pow(b2, k))
				want[i] -= lr * (mh/(math.Sqrt(vh)+eps) + decay*want[i])
			}
		}
		require.Equal(t, tensor.Float64, params.W.DType())
		// The coefficients are float32 (AdamCoeffs): agreement to ~1e-9.
		assert.InDeltaSlice(t, want, params.W.Float64s(), 1e-9, "weight decay %v", decay)
	}

	tx := optim.SGD(optim.Constant(lr), optim.SGDOptions{Momentum: 0.9})
	params := f64Model{W: tensor.FromFloat64s(p0, 3)}
	state := tx.Init(params)
	want := append([]float64(nil), p0...)
	tr := make([]float64, 3)
	for _, g := range grads {
		params, state = optim.Step(tx, params, f64Model{W: tensor.FromFloat64s(g, 3)}, state)
		for i := range want {
			tr[i] = g[i] + 0.9*tr[i]
			want[i] -= lr * tr[i]
		}
	}
	assert.InDeltaSlice(t, want, params.W.Float64s(), 1e-8, "SGD momentum") // a float32 learning rate
}
