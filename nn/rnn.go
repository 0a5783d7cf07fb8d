package nn

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor"
)

// GRUCell is one step of a gated recurrent unit (eqx.nn.GRUCell). For an
// input x and a hidden state h:
//
//	r  = σ(x·Wih[:, :H]    + B[:H]     + h·Whh[:, :H])
//	z  = σ(x·Wih[:, H:2H]  + B[H:2H]   + h·Whh[:, H:2H])
//	n  = tanh(x·Wih[:, 2H:] + B[2H:] + r ⊙ (h·Whh[:, 2H:] + BN))
//	h' = n + z ⊙ (h − n)  =  (1 − z) ⊙ n + z ⊙ h
//
// The parameters are Equinox's, transposed to gonox's [in, out] layout:
// WeightIH is Equinox's weight_ih [3H, in] transposed, WeightHH its
// weight_hh, Bias its bias and BiasN its bias_n. PyTorch's
// torch.nn.GRUCell has two biases per gate; it maps onto these with
// Bias = bias_ih + [bias_hh_r, bias_hh_z, 0] and BiasN = bias_hh_n (its
// weights are Equinox's, transposed). The gates are in the order reset,
// update, new in both.
//
// Drive it over a sequence with autodiff.Scan:
//
//	step := func(h, x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
//		h = cell.Forward(x, h)
//		return h, h
//	}
//	hT, hs := autodiff.Scan(step, cell.ZeroState(batch), xs) // xs [T, batch, in], hs [T, batch, H]
//
// GRU is the layer over whole sequences, with PyTorch's parameters and
// options (layers, directions).
type GRUCell struct {
	WeightIH *tensor.Tensor // f32[in, 3·hidden]
	WeightHH *tensor.Tensor // f32[hidden, 3·hidden]
	Bias     *tensor.Tensor // f32[3·hidden], or nil
	BiasN    *tensor.Tensor // f32[hidden], or nil
}

// RNNOptions configures NewGRUCell and NewLSTMCell. The zero value gives
// Equinox's cells: biases, and every parameter uniform in ±1/√hidden.
type RNNOptions struct {
	// NoBias leaves out the biases (Equinox's use_bias=False).
	NoBias bool
}

// NewGRUCell returns a GRUCell from in input features to a hidden state of
// hidden features. As in Equinox, key is split into four keys (input
// weight, hidden weight, bias, bias_n) and every parameter is uniform in
// ±1/√hidden; the weights are drawn in Equinox's [3H, in] layout and
// transposed, so a key gives Equinox's parameters exactly (transposed)
// wherever tensor.UniformRange gives jax.random.uniform's numbers.
func NewGRUCell(key tensor.Key, in, hidden int, opts RNNOptions) GRUCell {
	checkRNNSizes("nn.NewGRUCell", in, hidden)
	k := key.Split(4)
	lim := float32(math.Sqrt(1 / float64(hidden)))
	c := GRUCell{
		WeightIH: tensor.T(tensor.UniformRange(k[0], -lim, lim, 3*hidden, in)),
		WeightHH: tensor.T(tensor.UniformRange(k[1], -lim, lim, 3*hidden, hidden)),
	}
	if !opts.NoBias {
		c.Bias = tensor.UniformRange(k[2], -lim, lim, 3*hidden)
		c.BiasN = tensor.UniformRange(k[3], -lim, lim, hidden)
	}
	return c
}

func checkRNNSizes(fn string, in, hidden int) {
	if in < 0 || hidden <= 0 {
		panic(fmt.Sprintf("%s: in=%d, hidden=%d: need in >= 0 and hidden > 0", fn, in, hidden))
	}
}

// In returns the number of input features.
func (c GRUCell) In() int { return c.WeightIH.Dim(0) }

// Hidden returns the size of the hidden state.
func (c GRUCell) Hidden() int { return c.WeightHH.Dim(0) }

// ZeroState returns the all-zero hidden state [batch..., hidden] for the
// given leading (batch) dimensions, the usual initial state, in the cell's
// dtype.
func (c GRUCell) ZeroState(batch ...int) *tensor.Tensor {
	return tensor.Zeros(c.WeightHH.DType(), append(append([]int{}, batch...), c.Hidden())...)
}

// Forward returns the next hidden state from an input x [..., in] and a
// hidden state h [..., hidden] with the same leading (batch) dimensions:
// Equinox's cell(input, hidden) for a batch of rows at once.
func (c GRUCell) Forward(x, h *tensor.Tensor) *tensor.Tensor {
	requireBuilt("nn.GRUCell", "WeightIH", c.WeightIH, "nn.NewGRUCell")
	H := c.Hidden()
	checkCellInputs("nn.GRUCell", x, h, c.WeightIH, c.In(), H)
	ig := matmulLast(x, c.WeightIH)
	if c.Bias != nil {
		ig = tensor.Add(ig, c.Bias)
	}
	hg := matmulLast(h, c.WeightHH)
	if c.BiasN != nil {
		// b_n on the new gate's part only (adding zeros to the others
		// changes no bit).
		hg = tensor.Add(hg, tensor.Concat(-1, tensor.Zeros(c.BiasN.DType(), 2*H), c.BiasN))
	}
	return tensor.GRUCell(ig, hg, h)
}

// LSTMState is the state an LSTMCell carries from step to step: the
// hidden state H (also the cell's output) and the cell state C, Equinox's
// (h, c) tuple. It is also the (h_0, c_0) and (h_n, c_n) of the sequence
// layer LSTM, whose H and C are [layers·directions, batch, hidden] (see
// LSTM.Forward); the zero LSTMState starts LSTM from zeros.
type LSTMState struct {
	H, C *tensor.Tensor
}

// LSTMCell is one step of a long short-term memory unit (eqx.nn.LSTMCell).
// For an input x and a state (h, c):
//
//	i, f, g, o = split(x·WeightIH + h·WeightHH + Bias, 4)
//	c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g)
//	h' = σ(o) ⊙ tanh(c')
//
// The parameters are Equinox's, transposed to gonox's [in, out] layout:
// WeightIH is Equinox's weight_ih [4H, in] transposed, WeightHH its
// weight_hh, Bias its bias; the gates are in the order input, forget,
// cell, output. PyTorch's torch.nn.LSTMCell has the same gate order and
// weights; its two biases add up to Bias = bias_ih + bias_hh. LSTM is the
// layer over whole sequences, with PyTorch's parameters and options.
type LSTMCell struct {
	WeightIH *tensor.Tensor // f32[in, 4·hidden]
	WeightHH *tensor.Tensor // f32[hidden, 4·hidden]
	Bias     *tensor.Tensor // f32[4·hidden], or nil
}

// NewLSTMCell returns an LSTMCell from in input features to states of
// hidden features. As in Equinox, key is split into three keys (input
// weight, hidden weight, bias) and every parameter is uniform in
// ±1/√hidden, the weights drawn in Equinox's [4H, in] layout and
// transposed.
func NewLSTMCell(key tensor.Key, in, hidden int, opts RNNOptions) LSTMCell {
	checkRNNSizes("nn.NewLSTMCell", in, hidden)
	k := key.Split(3)
	lim := float32(math.Sqrt(1 / float64(hidden)))
	c := LSTMCell{
		WeightIH: tensor.T(tensor.UniformRange(k[0], -lim, lim, 4*hidden, in)),
		WeightHH: tensor.T(tensor.UniformRange(k[1], -lim, lim, 4*hidden, hidden)),
	}
	if !opts.NoBias {
		c.Bias = tensor.UniformRange(k[2], -lim, lim, 4*hidden)
	}
	return c
}

// In returns the number of input features.
func (c LSTMCell) In() int { return c.WeightIH.Dim(0) }

// Hidden returns the size of the hidden and cell states.
func (c LSTMCell) Hidden() int { return c.WeightHH.Dim(0) }

// ZeroState returns the all-zero state for the given leading (batch)
// dimensions, the usual initial state, in the cell's dtype.
func (c LSTMCell) ZeroState(batch ...int) LSTMState {
	shape := append(append([]int{}, batch...), c.Hidden())
	dt := c.WeightHH.DType()
	return LSTMState{H: tensor.Zeros(dt, shape...), C: tensor.Zeros(dt, shape...)}
}

// Forward returns the next state from an input x [..., in] and a state
// whose H and C are [..., hidden] with x's leading (batch) dimensions:
// Equinox's cell(input, (h, c)) for a batch of rows at once.
func (c LSTMCell) Forward(x *tensor.Tensor, s LSTMState) LSTMState {
	requireBuilt("nn.LSTMCell", "WeightIH", c.WeightIH, "nn.NewLSTMCell")
	H := c.Hidden()
	checkCellInputs("nn.LSTMCell", x, s.H, c.WeightIH, c.In(), H)
	if s.C == nil || !sameShapes(s.C, s.H) {
		panic(fmt.Sprintf("nn.LSTMCell: state H %v and C %v must have one shape", s.H, s.C))
	}
	xp := matmulLast(x, c.WeightIH)
	if c.Bias != nil {
		xp = tensor.Add(xp, c.Bias)
	}
	h, cn := tensor.LSTMCell(xp, matmulLast(s.H, c.WeightHH), s.C)
	return LSTMState{H: h, C: cn}
}

// checkCellInputs panics unless x is [..., in] and h [..., hidden] with
// the same leading dimensions.
func checkCellInputs(fn string, x, h, w *tensor.Tensor, in, hidden int) {
	if x == nil || h == nil {
		panic(fmt.Sprintf("%s: x %v, hidden state %v: nil operand (start from the cell's ZeroState(batch...))", fn, x, h))
	}
	xs, hs := x.Shape(), h.Shape()
	ok := len(xs) >= 1 && len(xs) == len(hs) && xs[len(xs)-1] == in && hs[len(hs)-1] == hidden
	for i := 0; ok && i < len(xs)-1; i++ {
		ok = xs[i] == hs[i]
	}
	if !ok {
		panic(fmt.Sprintf("%s: x %v, hidden state %v: want [..., %d] and [..., %d] with the same leading dimensions",
			fn, x, h, in, hidden))
	}
	if x.DType() != w.DType() || h.DType() != w.DType() {
		panic(fmt.Sprintf("%s: x %v, hidden state %v, weight %v: dtypes differ; convert the inputs with "+
			"tensor.Convert or the cell with nn.CastTo", fn, x, h, w))
	}
}

func sameShapes(a, b *tensor.Tensor) bool {
	if a.Rank() != b.Rank() {
		return false
	}
	for i := range a.Rank() {
		if a.Dim(i) != b.Dim(i) {
			return false
		}
	}
	return true
}

// matmulLast multiplies x [..., k] by w [k, n] to [..., n].
func matmulLast(x, w *tensor.Tensor) *tensor.Tensor {
	if x.Rank() <= 2 {
		return tensor.MatMul(x, w)
	}
	shape := x.Shape()
	y := tensor.MatMul(tensor.Reshape(x, -1, w.Dim(0)), w)
	shape[len(shape)-1] = w.Dim(1)
	return tensor.Reshape(y, shape...)
}
