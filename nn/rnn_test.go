package nn_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// rnnRef is testdata/torch_rnn.json, written by testdata/torch_rnn.py:
// torch.nn.GRUCell and LSTMCell run for 5 steps in float64 from float32
// parameters, with the gradients of sum_t sum(w_t·h_t).
type rnnRef struct {
	In, Hidden, Batch, Steps int
	GRU, LSTM                cellRef
}

type cellRef struct {
	WeightIH []float64 `json:"weight_ih"`
	WeightHH []float64 `json:"weight_hh"`
	BiasIH   []float64 `json:"bias_ih"`
	BiasHH   []float64 `json:"bias_hh"`
	Xs       []float64 `json:"xs"`
	H0       []float64 `json:"h0"`
	C0       []float64 `json:"c0"`
	W        []float64 `json:"w"`
	Hs       []float64 `json:"hs"`
	Cs       []float64 `json:"cs"`
	Loss     float64   `json:"loss"`
	DWIH     []float64 `json:"d_weight_ih"`
	DWHH     []float64 `json:"d_weight_hh"`
	DBIH     []float64 `json:"d_bias_ih"`
	DBHH     []float64 `json:"d_bias_hh"`
	DXs      []float64 `json:"d_xs"`
	DH0      []float64 `json:"d_h0"`
	DC0      []float64 `json:"d_c0"`
}

func loadRNNRef(t *testing.T) rnnRef {
	t.Helper()
	b, err := os.ReadFile("testdata/torch_rnn.json")
	require.NoError(t, err)
	var r rnnRef
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

// torchWeight turns a torch weight [gates·H, in] into gonox's [in, gates·H].
func torchWeight(v []float64, rows, cols int) *tensor.Tensor {
	return tensor.T(tensor.FromFloat64(v, rows, cols))
}

// transposeFlat transposes a gonox gradient [in, gates·H] into torch's
// layout, flattened.
func transposeFlat(x *tensor.Tensor) []float64 { return tensor.T(x).Float64s() }

type gruInputs struct {
	Cell nn.GRUCell
	Xs   *tensor.Tensor
	H0   *tensor.Tensor
}

// GRUCell equals torch.nn.GRUCell mapped onto Equinox's parameters, for 5
// steps of forward and gradient, driven by autodiff.Scan (with and without
// remat) and by a plain Go loop.
func TestGRUCellEqualsTorch(t *testing.T) {
	r := loadRNNRef(t)
	g, H, I, B, T := r.GRU, r.Hidden, r.In, r.Batch, r.Steps
	bias := append([]float64{}, g.BiasIH...)
	for i := range 2 * H {
		bias[i] += g.BiasHH[i]
	}
	in := gruInputs{
		Cell: nn.GRUCell{
			WeightIH: torchWeight(g.WeightIH, 3*H, I),
			WeightHH: torchWeight(g.WeightHH, 3*H, H),
			Bias:     tensor.FromFloat64(bias),
			BiasN:    tensor.FromFloat64(g.BiasHH[2*H:]),
		},
		Xs: tensor.FromFloat64(g.Xs, T, B, I),
		H0: tensor.FromFloat64(g.H0, B, H),
	}
	w := tensor.FromFloat64(g.W, T, B, H)
	step := func(c nn.GRUCell) func(h, x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
		return func(h, x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
			h = c.Forward(x, h)
			return h, h
		}
	}
	runs := map[string]func(p gruInputs) *tensor.Tensor{
		"scan": func(p gruInputs) *tensor.Tensor {
			_, hs := autodiff.Scan(step(p.Cell), p.H0, p.Xs)
			return hs
		},
		"scan remat": func(p gruInputs) *tensor.Tensor {
			_, hs := autodiff.Scan(step(p.Cell), p.H0, p.Xs, autodiff.ScanRemat(2))
			return hs
		},
		"loop": func(p gruInputs) *tensor.Tensor {
			h, hs := p.H0, make([]*tensor.Tensor, T)
			for t, x := range tensor.Unstack(p.Xs, 0) {
				h = p.Cell.Forward(x, h)
				hs[t] = h
			}
			return tensor.Stack(0, hs...)
		},
	}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			near(t, g.Hs, run(in).Float64s(), 1e-5, 1e-6, "hidden states")
			loss, grad := autodiff.ValueAndGrad(func(p gruInputs) *tensor.Tensor {
				return tensor.Sum(tensor.Mul(w, run(p)))
			})(in)
			assert.InDelta(t, g.Loss, loss.Item(), 1e-5)
			near(t, g.DWIH, transposeFlat(grad.Cell.WeightIH), 1e-4, 1e-5, "d weight_ih")
			near(t, g.DWHH, transposeFlat(grad.Cell.WeightHH), 1e-4, 1e-5, "d weight_hh")
			// Bias is bias_ih (all gates) and bias_hh of r and z; BiasN
			// is bias_hh of n.
			db := grad.Cell.Bias.Float64s()
			near(t, g.DBIH, db, 1e-4, 1e-5, "d bias_ih")
			near(t, g.DBHH[:2*H], db[:2*H], 1e-4, 1e-5, "d bias_hh (r, z)")
			near(t, g.DBHH[2*H:], grad.Cell.BiasN.Float64s(), 1e-4, 1e-5, "d bias_hh (n)")
			near(t, g.DXs, grad.Xs.Float64s(), 1e-4, 1e-5, "d xs")
			near(t, g.DH0, grad.H0.Float64s(), 1e-4, 1e-5, "d h0")
		})
	}
}

type lstmInputs struct {
	Cell nn.LSTMCell
	Xs   *tensor.Tensor
	S0   nn.LSTMState
}

// LSTMCell equals torch.nn.LSTMCell (one bias, the sum of torch's two) for
// 5 steps of forward and gradient.
func TestLSTMCellEqualsTorch(t *testing.T) {
	r := loadRNNRef(t)
	g, H, I, B, T := r.LSTM, r.Hidden, r.In, r.Batch, r.Steps
	bias := make([]float64, 4*H)
	for i := range bias {
		bias[i] = g.BiasIH[i] + g.BiasHH[i]
	}
	in := lstmInputs{
		Cell: nn.LSTMCell{
			WeightIH: torchWeight(g.WeightIH, 4*H, I),
			WeightHH: torchWeight(g.WeightHH, 4*H, H),
			Bias:     tensor.FromFloat64(bias),
		},
		Xs: tensor.FromFloat64(g.Xs, T, B, I),
		S0: nn.LSTMState{H: tensor.FromFloat64(g.H0, B, H), C: tensor.FromFloat64(g.C0, B, H)},
	}
	w := tensor.FromFloat64(g.W, T, B, H)
	run := func(p lstmInputs, opts ...autodiff.ScanOption) nn.LSTMState {
		_, states := autodiff.Scan(func(s nn.LSTMState, x *tensor.Tensor) (nn.LSTMState, nn.LSTMState) {
			s = p.Cell.Forward(x, s)
			return s, s
		}, p.S0, p.Xs, opts...)
		return states
	}
	for _, opts := range [][]autodiff.ScanOption{nil, {autodiff.ScanRemat(0)}} {
		states := run(in, opts...)
		near(t, g.Hs, states.H.Float64s(), 1e-5, 1e-6, "hidden states")
		near(t, g.Cs, states.C.Float64s(), 1e-5, 1e-6, "cell states")
		loss, grad := autodiff.ValueAndGrad(func(p lstmInputs) *tensor.Tensor {
			return tensor.Sum(tensor.Mul(w, run(p, opts...).H))
		})(in)
		assert.InDelta(t, g.Loss, loss.Item(), 1e-5)
		near(t, g.DWIH, transposeFlat(grad.Cell.WeightIH), 1e-4, 1e-5, "d weight_ih")
		near(t, g.DWHH, transposeFlat(grad.Cell.WeightHH), 1e-4, 1e-5, "d weight_hh")
		near(t, g.DBIH, grad.Cell.Bias.Float64s(), 1e-4, 1e-5, "d bias (= d bias_ih)")
		near(t, g.DBHH, grad.Cell.Bias.Float64s(), 1e-4, 1e-5, "d bias (= d bias_hh)")
		near(t, g.DXs, grad.Xs.Float64s(), 1e-4, 1e-5, "d xs")
		near(t, g.DH0, grad.S0.H.Float64s(), 1e-4, 1e-5, "d h0")
		near(t, g.DC0, grad.S0.C.Float64s(), 1e-4, 1e-5, "d c0")
	}
}

// The constructors follow Equinox: shapes, the bound 1/√hidden, the key
// split into 4 (GRU) or 3 (LSTM) keys and the weights drawn in Equinox's
// [gates·H, in] layout; NoBias leaves the biases out. A single example
// (no batch dimension) works as Equinox's cells do.
func TestRNNCellConstructors(t *testing.T) {
	key := tensor.NewKey(0)
	g := nn.NewGRUCell(key, 3, 4, nn.RNNOptions{})
	assert.Equal(t, []int{3, 12}, g.WeightIH.Shape())
	assert.Equal(t, []int{4, 12}, g.WeightHH.Shape())
	assert.Equal(t, []int{12}, g.Bias.Shape())
	assert.Equal(t, []int{4}, g.BiasN.Shape())
	k := key.Split(4)
	assert.Equal(t, tensor.T(tensor.UniformRange(k[0], -0.5, 0.5, 12, 3)).Float32s(), g.WeightIH.Float32s())
	assert.Equal(t, tensor.UniformRange(k[3], -0.5, 0.5, 4).Float32s(), g.BiasN.Float32s())
	for _, v := range g.WeightHH.Float32s() {
		require.True(t, v >= -0.5 && v < 0.5)
	}
	l := nn.NewLSTMCell(key, 3, 4, nn.RNNOptions{NoBias: true})
	assert.Equal(t, []int{3, 16}, l.WeightIH.Shape())
	assert.Nil(t, l.Bias)
	k = key.Split(3)
	assert.Equal(t, tensor.T(tensor.UniformRange(k[1], -0.5, 0.5, 16, 4)).Float32s(), l.WeightHH.Float32s())

	// One example without a batch dimension equals a row of a batch.
	x, h := randn(1, 2, 3), randn(2, 2, 4)
	batch := g.Forward(x, h)
	row := g.Forward(tensor.Unstack(x, 0)[1], tensor.Unstack(h, 0)[1])
	assert.Equal(t, []int{4}, row.Shape())
	near(t, tensor.Unstack(batch, 0)[1].Float64s(), row.Float64s(), 1e-6, 1e-7, "GRU row")
	s := l.Forward(x, l.ZeroState(2))
	assert.Equal(t, []int{2, 4}, s.H.Shape())
	// Without biases a zero input and state stay zero.
	z := l.Forward(tensor.Zeros(tensor.Float32, 3), l.ZeroState())
	assert.Equal(t, []float32{0, 0, 0, 0}, z.H.Float32s())

	requirePanicContains(t, func() { g.Forward(randn(3, 2, 5), h) },
		"nn.GRUCell: x f32[2,5], hidden state f32[2,4]: want [..., 3] and [..., 4] with the same leading dimensions")
	requirePanicContains(t, func() { l.Forward(x, nn.LSTMState{H: h, C: randn(4, 3, 4)}) },
		"nn.LSTMCell: state H f32[2,4] and C f32[3,4] must have one shape")
	requirePanicContains(t, func() { g.Forward(tensor.Convert(x, tensor.Float64), h) },
		"nn.GRUCell: x f64[2,3], hidden state f32[2,4], weight f32[3,12]: dtypes differ")
	requirePanicContains(t, func() {
		l.Forward(x, nn.LSTMState{H: tensor.Zeros(tensor.Float64, 2, 4), C: tensor.Zeros(tensor.Float64, 2, 4)})
	},
		"nn.LSTMCell: x f32[2,3], hidden state f64[2,4], weight f32[3,16]: dtypes differ")
	requirePanicContains(t, func() { nn.NewGRUCell(key, 3, 0, nn.RNNOptions{}) },
		"nn.NewGRUCell: in=3, hidden=0: need in >= 0 and hidden > 0")
}
