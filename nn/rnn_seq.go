package nn

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/gonox/gonox/tensor"
)

// Nonlinearity is the activation of an Elman RNN (PyTorch's nonlinearity
// argument of torch.nn.RNN).
type Nonlinearity int

const (
	// RNNTanh is h' = tanh(x·W_ih + b_ih + h·W_hh + b_hh), PyTorch's
	// default "tanh".
	RNNTanh Nonlinearity = iota
	// RNNRelu is h' = relu(x·W_ih + b_ih + h·W_hh + b_hh), PyTorch's "relu".
	RNNRelu
)

// String returns PyTorch's name of the nonlinearity.
func (n Nonlinearity) String() string {
	switch n {
	case RNNTanh:
		return "tanh"
	case RNNRelu:
		return "relu"
	}
	return fmt.Sprintf("Nonlinearity(%d)", int(n))
}

// RecurrentOptions configures NewLSTM, NewGRU and NewRNN, with PyTorch's
// arguments of torch.nn.LSTM, GRU and RNN. The zero value gives PyTorch's
// defaults: one layer, one direction, time-first sequences, biases, no
// dropout, tanh.
type RecurrentOptions struct {
	// Layers is the number of stacked layers (num_layers); 0 means 1.
	// Layer k > 0 reads the outputs of layer k-1, both directions
	// concatenated.
	Layers int
	// Bidirectional adds a second direction per layer that reads the
	// sequence from its end (bidirectional=True); the outputs of the two
	// are concatenated, the forward one first.
	Bidirectional bool
	// BatchFirst takes and returns sequences as [batch, time, features]
	// (batch_first=True) instead of [time, batch, features]. The final
	// states are [layers·directions, batch, hidden] either way, as in
	// PyTorch.
	BatchFirst bool
	// NoBias leaves out both biases of every layer (bias=False).
	NoBias bool
	// Dropout is the probability of dropping each output of every layer
	// but the last during training (dropout=); it needs a key at call
	// time (RecurrentCall.Key, or Call). InferenceMode switches it off.
	Dropout float64
	// Nonlinearity is NewRNN's activation (nonlinearity=); the other
	// constructors panic unless it is RNNTanh, the zero value.
	Nonlinearity Nonlinearity
	// ProjSize, for NewLSTM only, projects each layer's hidden state to
	// ProjSize features with a weight WeightHR (proj_size=): the outputs
	// and h_n have ProjSize features, c_n keeps hidden. 0 means no
	// projection; it must be below hidden.
	ProjSize int
}

// RecurrentWeights are the parameters of one layer and direction of an
// LSTM, GRU or RNN: PyTorch's weight_ih_l{k}{_reverse},
// weight_hh_l{k}{_reverse}, bias_ih_l{k}{_reverse},
// bias_hh_l{k}{_reverse} and (LSTM with a projection)
// weight_hr_l{k}{_reverse}. The weights are stored transposed, in
// gonox's [in, out] layout (as Linear and the cells store theirs): WeightIH
// is PyTorch's weight_ih transposed, and so on; the biases are PyTorch's.
// The gates along the out axis are in PyTorch's order: input, forget,
// cell, output for the LSTM; reset, update, new for the GRU.
type RecurrentWeights struct {
	WeightIH *tensor.Tensor // f32[in, gates·hidden]: the layer's input features (the last layer's outputs for k > 0)
	WeightHH *tensor.Tensor // f32[hidden (or proj), gates·hidden]
	BiasIH   *tensor.Tensor // f32[gates·hidden], or nil
	BiasHH   *tensor.Tensor // f32[gates·hidden], or nil
	WeightHR *tensor.Tensor // f32[hidden, proj] for an LSTM with ProjSize, else nil
}

// RecurrentCall holds the optional arguments of the sequence layers'
// ForwardWith.
type RecurrentCall struct {
	// Key draws the dropout between layers. It is required when the
	// layer's Dropout is active (a rate above 0, not in inference mode)
	// and there is more than one layer: the output of layer k is dropped
	// with Key.Split(layers-1)[k].
	Key *tensor.Key
	// Lengths, if not nil, gives the length of each sequence of the batch
	// (one per batch element, each in [1, T]), as PyTorch's
	// pack_padded_sequence does: the positions t >= Lengths[b] are
	// padding, which neither updates the states nor shows in the outputs
	// (they are zero there, as pad_packed_sequence(total_length=T) makes
	// them), the final states are those after each sequence's last
	// element, and the reverse direction starts at each sequence's last
	// element. The order of the batch does not matter (enforce_sorted=False).
	Lengths []int
	// Remat, if not 0, bounds the memory of the backward pass: the loop
	// over time runs in segments of Remat steps (⌈√T⌉ when Remat < 0),
	// each a checkpoint (tensor.Remat) of which only the inputs are kept
	// (the layer's input and the segment's first states), its steps and
	// their input projection (one product per segment) recomputed by the
	// backward pass, as autodiff.ScanRemat does. The memory of the
	// intermediate values falls from O(T) steps to O(T/Remat) states plus
	// O(Remat) steps, at the price of running the loop twice. Results and
	// gradients equal those without it within rounding (a weight's
	// contributions of the steps are summed per segment first).
	Remat int
}

// LSTM is a multi-layer long short-term memory layer over sequences,
// torch.nn.LSTM: for each layer and direction, with the gates
// i, f, g, o of x·W_ih + b_ih + h·W_hh + b_hh,
//
//	c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g)
//	h' = σ(o) ⊙ tanh(c')          (times W_hr with ProjSize)
//
// Weights[k·D + d] holds layer k's direction d (D = 2 when Bidirectional,
// d = 1 the reverse direction), the order of PyTorch's h_n; see
// RecurrentWeights for the layout. Forward computes the input projection
// of the whole sequence as one product per layer and direction, and only
// h·W_hh inside the loop over time; its gradient reaches every parameter,
// the input and the initial states.
type LSTM struct {
	Weights       []RecurrentWeights
	Bidirectional bool    // two directions per layer
	BatchFirst    bool    // sequences are [batch, time, features]
	Dropout       Dropout // between layers
}

// GRU is a multi-layer gated recurrent unit over sequences, torch.nn.GRU:
// for each layer and direction, with the gates of x·W_ih + b_ih (ir, iz,
// in) and of h·W_hh + b_hh (hr, hz, hn),
//
//	r = σ(ir + hr), z = σ(iz + hz)
//	n = tanh(in + r ⊙ hn)
//	h' = (1 − z) ⊙ n + z ⊙ h
//
// Its fields are LSTM's.
type GRU struct {
	Weights       []RecurrentWeights
	Bidirectional bool
	BatchFirst    bool
	Dropout       Dropout
}

// RNN is a multi-layer Elman recurrent layer over sequences, torch.nn.RNN:
// for each layer and direction h' = act(x·W_ih + b_ih + h·W_hh + b_hh),
// act tanh or relu (Nonlinearity). Its other fields are LSTM's.
type RNN struct {
	Weights       []RecurrentWeights
	Nonlinearity  Nonlinearity
	Bidirectional bool
	BatchFirst    bool
	Dropout       Dropout
}

type recKind int

const (
	recLSTM recKind = iota
	recGRU
	recTanh
	recRelu
)

func (k recKind) gates() int {
	switch k {
	case recLSTM:
		return 4
	case recGRU:
		return 3
	}
	return 1
}

// NewLSTM returns an LSTM from in input features to hidden features per
// direction, torch.nn.LSTM(in, hidden, ...) with the options' arguments.
// Every parameter is uniform in ±1/√hidden, as PyTorch initialises them;
// key is split into one key per parameter.
func NewLSTM(key tensor.Key, in, hidden int, opts RecurrentOptions) LSTM {
	w, drop := newRecurrent("nn.NewLSTM", key, in, hidden, opts, recLSTM)
	return LSTM{Weights: w, Bidirectional: opts.Bidirectional, BatchFirst: opts.BatchFirst, Dropout: drop}
}

// NewGRU returns a GRU from in input features to hidden features per
// direction, torch.nn.GRU(in, hidden, ...), initialised as NewLSTM.
func NewGRU(key tensor.Key, in, hidden int, opts RecurrentOptions) GRU {
	w, drop := newRecurrent("nn.NewGRU", key, in, hidden, opts, recGRU)
	return GRU{Weights: w, Bidirectional: opts.Bidirectional, BatchFirst: opts.BatchFirst, Dropout: drop}
}

// NewRNN returns an Elman RNN from in input features to hidden features
// per direction, torch.nn.RNN(in, hidden, ...), initialised as NewLSTM.
func NewRNN(key tensor.Key, in, hidden int, opts RecurrentOptions) RNN {
	kind := recTanh
	if opts.Nonlinearity == RNNRelu {
		kind = recRelu
	}
	w, drop := newRecurrent("nn.NewRNN", key, in, hidden, opts, kind)
	return RNN{Weights: w, Nonlinearity: opts.Nonlinearity, Bidirectional: opts.Bidirectional,
		BatchFirst: opts.BatchFirst, Dropout: drop}
}

func newRecurrent(fn string, key tensor.Key, in, hidden int, opts RecurrentOptions, kind recKind) ([]RecurrentWeights, Dropout) {
	layers := opts.Layers
	if layers == 0 {
		layers = 1
	}
	switch {
	case in <= 0 || hidden <= 0 || layers < 0:
		panic(fmt.Sprintf("%s: in=%d, hidden=%d, Layers=%d: need in > 0, hidden > 0 and Layers >= 0", fn, in, hidden, opts.Layers))
	case !(opts.Dropout >= 0 && opts.Dropout <= 1):
		panic(fmt.Sprintf("%s: Dropout %g is not in [0, 1]", fn, opts.Dropout))
	case opts.Nonlinearity != RNNTanh && opts.Nonlinearity != RNNRelu:
		panic(fmt.Sprintf("%s: Nonlinearity %v: want nn.RNNTanh or nn.RNNRelu", fn, opts.Nonlinearity))
	case opts.Nonlinearity != RNNTanh && kind != recRelu:
		panic(fmt.Sprintf("%s: Nonlinearity %v applies to nn.NewRNN only", fn, opts.Nonlinearity))
	case opts.ProjSize != 0 && kind != recLSTM:
		panic(fmt.Sprintf("%s: ProjSize %d applies to nn.NewLSTM only", fn, opts.ProjSize))
	case opts.ProjSize < 0 || opts.ProjSize >= hidden && opts.ProjSize != 0:
		panic(fmt.Sprintf("%s: ProjSize %d with hidden=%d: want 0 <= ProjSize < hidden", fn, opts.ProjSize, hidden))
	}
	D := 1
	if opts.Bidirectional {
		D = 2
	}
	out := hidden
	if opts.ProjSize > 0 {
		out = opts.ProjSize
	}
	perDir := 2
	if !opts.NoBias {
		perDir += 2
	}
	if opts.ProjSize > 0 {
		perDir++
	}
	keys := key.Split(layers * D * perDir)
	lim := float32(1 / math.Sqrt(float64(hidden)))
	gh := kind.gates() * hidden
	ws := make([]RecurrentWeights, layers*D)
	for i := range ws {
		k := keys[i*perDir : (i+1)*perDir]
		inK := in
		if i >= D {
			inK = D * out
		}
		w := RecurrentWeights{
			WeightIH: tensor.UniformRange(k[0], -lim, lim, inK, gh),
			WeightHH: tensor.UniformRange(k[1], -lim, lim, out, gh),
		}
		k = k[2:]
		if !opts.NoBias {
			w.BiasIH = tensor.UniformRange(k[0], -lim, lim, gh)
			w.BiasHH = tensor.UniformRange(k[1], -lim, lim, gh)
			k = k[2:]
		}
		if opts.ProjSize > 0 {
			w.WeightHR = tensor.UniformRange(k[0], -lim, lim, hidden, out)
		}
		ws[i] = w
	}
	return ws, Dropout{Rate: opts.Dropout}
}

// Forward runs the LSTM over the sequence x, [T, batch, in] (or [batch,
// T, in] with BatchFirst, or one unbatched sequence [T, in]), from the
// initial states s (s.H [layers·directions, batch, hidden or ProjSize]
// and s.C [layers·directions, batch, hidden], without the batch axis for
// an unbatched x; a nil H or C is zeros). It returns the outputs of the
// last layer, [T, batch, directions·(hidden or ProjSize)] (batch first
// with BatchFirst), and the final states (h_n, c_n) of every layer and
// direction: PyTorch's lstm(x, (h0, c0)). Forward panics when the
// layer's dropout is active; use ForwardWith or Call with a key.
func (l LSTM) Forward(x *tensor.Tensor, s LSTMState) (*tensor.Tensor, LSTMState) {
	return l.ForwardWith(x, s, RecurrentCall{})
}

// ForwardWith is Forward with the optional arguments of c: the key of the
// dropout between layers, the lengths of the sequences and Remat.
func (l LSTM) ForwardWith(x *tensor.Tensor, s LSTMState, c RecurrentCall) (*tensor.Tensor, LSTMState) {
	r := recurrent{fn: "nn.LSTM", ctor: "nn.NewLSTM", kind: recLSTM, weights: l.Weights, bidir: l.Bidirectional,
		batchFirst: l.BatchFirst, drop: l.Dropout}
	y, h, cs := r.run(x, s.H, s.C, c)
	return y, LSTMState{H: h, C: cs}
}

// Call is Forward from zero states with key for the dropout between
// layers, returning the outputs only; it makes an LSTM a Module.
func (l LSTM) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	y, _ := l.ForwardWith(x, LSTMState{}, RecurrentCall{Key: &key})
	return y
}

// Forward runs the GRU over the sequence x ([T, batch, in], [batch, T,
// in] with BatchFirst, or one unbatched sequence [T, in]) from the
// initial hidden state h0 ([layers·directions, batch, hidden], without
// the batch axis for an unbatched x; nil is zeros). It returns the
// outputs of the last layer, [T, batch, directions·hidden] (batch first
// with BatchFirst), and the final hidden state h_n of every layer and
// direction: PyTorch's gru(x, h0). Forward panics when the layer's
// dropout is active; use ForwardWith or Call with a key.
func (l GRU) Forward(x, h0 *tensor.Tensor) (y, hn *tensor.Tensor) {
	return l.ForwardWith(x, h0, RecurrentCall{})
}

// ForwardWith is Forward with the optional arguments of c: the key of the
// dropout between layers, the lengths of the sequences and Remat.
func (l GRU) ForwardWith(x, h0 *tensor.Tensor, c RecurrentCall) (y, hn *tensor.Tensor) {
	r := recurrent{fn: "nn.GRU", ctor: "nn.NewGRU", kind: recGRU, weights: l.Weights, bidir: l.Bidirectional,
		batchFirst: l.BatchFirst, drop: l.Dropout}
	y, hn, _ = r.run(x, h0, nil, c)
	return y, hn
}

// Call is Forward from a zero state with key for the dropout between
// layers, returning the outputs only; it makes a GRU a Module.
func (l GRU) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	y, _ := l.ForwardWith(x, nil, RecurrentCall{Key: &key})
	return y
}

// Forward runs the RNN over the sequence x as GRU.Forward does: PyTorch's
// rnn(x, h0).
func (l RNN) Forward(x, h0 *tensor.Tensor) (y, hn *tensor.Tensor) {
	return l.ForwardWith(x, h0, RecurrentCall{})
}

// ForwardWith is Forward with the optional arguments of c: the key of the
// dropout between layers, the lengths of the sequences and Remat.
func (l RNN) ForwardWith(x, h0 *tensor.Tensor, c RecurrentCall) (y, hn *tensor.Tensor) {
	kind := recTanh
	switch l.Nonlinearity {
	case RNNTanh:
	case RNNRelu:
		kind = recRelu
	default:
		panic(fmt.Sprintf("nn.RNN: Nonlinearity %v: want nn.RNNTanh or nn.RNNRelu", l.Nonlinearity))
	}
	r := recurrent{fn: "nn.RNN", ctor: "nn.NewRNN", kind: kind, weights: l.Weights, bidir: l.Bidirectional,
		batchFirst: l.BatchFirst, drop: l.Dropout}
	y, hn, _ = r.run(x, h0, nil, c)
	return y, hn
}

// Call is Forward from a zero state with key for the dropout between
// layers, returning the outputs only; it makes an RNN a Module.
func (l RNN) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	y, _ := l.ForwardWith(x, nil, RecurrentCall{Key: &key})
	return y
}

// recurrent is one call of a sequence layer.
type recurrent struct {
	fn, ctor   string
	kind       recKind
	weights    []RecurrentWeights
	bidir      bool
	batchFirst bool
	drop       Dropout
	zeroH      bool // the initial hidden states are zero (not given)
}

// check validates the parameters and returns the number of layers,
// directions, hidden size and output features per direction.
func (r recurrent) check() (layers, D, hidden, out int) {
	if len(r.weights) == 0 {
		panic(fmt.Sprintf("%s: Weights is empty (the zero %s has no parameters; build it with %s)", r.fn, r.fn[3:], r.ctor))
	}
	D = 1
	if r.bidir {
		D = 2
	}
	if len(r.weights)%D != 0 {
		panic(fmt.Sprintf("%s: %d Weights for 2 directions: want layers·2", r.fn, len(r.weights)))
	}
	layers = len(r.weights) / D
	w0 := r.weights[0]
	requireBuilt(r.fn, "Weights[0].WeightIH", w0.WeightIH, r.ctor)
	requireBuilt(r.fn, "Weights[0].WeightHH", w0.WeightHH, r.ctor)
	G := r.kind.gates()
	if w0.WeightIH.Rank() != 2 || w0.WeightIH.Dim(1)%G != 0 || w0.WeightIH.Dim(1) == 0 {
		panic(fmt.Sprintf("%s: Weights[0].WeightIH %v: want [in, %d·hidden]", r.fn, w0.WeightIH, G))
	}
	hidden = w0.WeightIH.Dim(1) / G
	out = hidden
	if w0.WeightHR != nil {
		if r.kind != recLSTM || w0.WeightHR.Rank() != 2 {
			panic(fmt.Sprintf("%s: Weights[0].WeightHR %v: a projection belongs to an LSTM, [hidden, proj]", r.fn, w0.WeightHR))
		}
		out = w0.WeightHR.Dim(1)
	}
	in := w0.WeightIH.Dim(0)
	dt := w0.WeightIH.DType()
	for i, w := range r.weights {
		if i >= D {
			in = D * out
		}
		want := func(name string, p *tensor.Tensor, shape ...int) {
			if p == nil || p.DType() != dt || !slices.Equal(p.Shape(), shape) {
				panic(fmt.Sprintf("%s: Weights[%d].%s %v: want %v (layer %d of %d, %d direction(s), hidden %d, input %d, output %d)",
					r.fn, i, name, p, describeType(dt, shape), i/D, layers, D, hidden, in, out))
			}
		}
		want("WeightIH", w.WeightIH, in, G*hidden)
		want("WeightHH", w.WeightHH, out, G*hidden)
		if (w.BiasIH == nil) != (w0.BiasIH == nil) || (w.BiasHH == nil) != (w0.BiasIH == nil) {
			panic(fmt.Sprintf("%s: Weights[%d]: BiasIH %v, BiasHH %v: every layer and direction has both biases or neither (Weights[0] has %v)",
				r.fn, i, w.BiasIH, w.BiasHH, w0.BiasIH))
		}
		if w.BiasIH != nil {
			want("BiasIH", w.BiasIH, G*hidden)
			want("BiasHH", w.BiasHH, G*hidden)
		}
		if out != hidden || w.WeightHR != nil {
			want("WeightHR", w.WeightHR, hidden, out)
		}
	}
	return layers, D, hidden, out
}

// run is the forward pass of every layer: x [T, B, in] (or [B, T, in]
// or [T, in]); h0 [L·D, B, out] and c0 [L·D, B, hidden] or nil.
func (r recurrent) run(x, h0, c0 *tensor.Tensor, call RecurrentCall) (y, hn, cn *tensor.Tensor) {
	requireInput(r.fn, "x", x)
	layers, D, hidden, out := r.check()
	w0 := r.weights[0]
	in := w0.WeightIH.Dim(0)
	dt := w0.WeightIH.DType()
	layout := "[T, batch, %d] (time first)"
	if r.batchFirst {
		layout = "[batch, T, %d] (BatchFirst)"
	}
	if (x.Rank() != 3 && x.Rank() != 2) || x.Dim(-1) != in {
		panic(fmt.Sprintf("%s: input %v: want "+layout+" or one sequence [T, %d]", r.fn, x, in, in))
	}
	if x.DType() != dt {
		panic(fmt.Sprintf("%s: input %v, Weights[0].WeightIH %v: dtypes differ; convert the input with tensor.Convert "+
			"or the layer with nn.CastTo", r.fn, x, w0.WeightIH))
	}
	unbatched := x.Rank() == 2
	timeAxis := 0
	if r.batchFirst && !unbatched {
		timeAxis = 1
	}
	T := x.Dim(timeAxis)
	B := 1
	if !unbatched {
		B = x.Dim(1 - timeAxis)
	}
	if T == 0 {
		panic(fmt.Sprintf("%s: input %v: the sequence has no time steps", r.fn, x))
	}
	state := func(name string, s *tensor.Tensor, size int) []*tensor.Tensor {
		if s == nil {
			z := tensor.Zeros(dt, B, size)
			return slices.Repeat([]*tensor.Tensor{z}, layers*D)
		}
		shape := []int{layers * D, B, size}
		if unbatched {
			shape = []int{layers * D, size}
		}
		if !slices.Equal(s.Shape(), shape) || s.DType() != dt {
			panic(fmt.Sprintf("%s: input %v, %s %v: want %v", r.fn, x, name, s, describeType(dt, shape)))
		}
		if unbatched {
			s = tensor.ExpandDims(s, 1)
		}
		return tensor.Unstack(s, 0)
	}
	hs := state("initial hidden state", h0, out)
	r.zeroH = h0 == nil
	var cs []*tensor.Tensor
	if r.kind == recLSTM {
		cs = state("initial cell state", c0, hidden)
	}
	var masks []*tensor.Tensor // [B, 1] bool per step, nil: no padding
	if call.Lengths != nil {
		masks = lengthMasks(r.fn, x, call.Lengths, T, B)
	}
	dropping := layers > 1 && !r.drop.Inference && r.drop.Rate > 0
	var keys []tensor.Key
	if dropping {
		if call.Key == nil {
			panic(fmt.Sprintf("%s: the dropout between layers (rate %g) needs a key: pass RecurrentCall.Key (or use Call), "+
				"or switch it off with nn.InferenceMode", r.fn, r.drop.Rate))
		}
		keys = call.Key.Split(layers - 1)
	}

	if unbatched {
		x = tensor.ExpandDims(x, 1)
	}
	hOut := make([]*tensor.Tensor, layers*D)
	cOut := make([]*tensor.Tensor, len(cs))
	seq := x
	for k := range layers {
		outs := make([]*tensor.Tensor, D)
		for d := range D {
			i := k*D + d
			var c *tensor.Tensor
			if cs != nil {
				c = cs[i]
			}
			outs[d], hOut[i], c = r.direction(r.weights[i], seq, hs[i], c, masks, timeAxis, d == 1, hidden, call.Remat)
			if cs != nil {
				cOut[i] = c
			}
		}
		seq = outs[0]
		if D == 2 {
			seq = tensor.Concat(-1, outs...)
		}
		if dropping && k < layers-1 {
			seq = r.drop.Forward(seq, keys[k])
		}
	}
	hn = tensor.Stack(0, hOut...)
	if cs != nil {
		cn = tensor.Stack(0, cOut...)
	}
	if unbatched {
		seq, hn = tensor.Squeeze(seq, 1), tensor.Squeeze(hn, 1)
		if cn != nil {
			cn = tensor.Squeeze(cn, 1)
		}
	}
	return seq, hn, cn
}

// lengthMasks returns, for each step t, the bool [B, 1] of the batch
// elements whose sequences reach t.
func lengthMasks(fn string, x *tensor.Tensor, lengths []int, T, B int) []*tensor.Tensor {
	if len(lengths) != B {
		panic(fmt.Sprintf("%s: input %v, %d Lengths %v: want one per batch element (%d)", fn, x, len(lengths), lengths, B))
	}
	for b, n := range lengths {
		if n < 1 || n > T {
			panic(fmt.Sprintf("%s: input %v, Lengths %v: Lengths[%d] = %d is not in [1, %d]", fn, x, lengths, b, n, T))
		}
	}
	if slices.Min(lengths) == T {
		return nil // nothing is padding
	}
	masks := make([]*tensor.Tensor, T)
	m := make([]bool, B)
	for t := range T {
		for b, n := range lengths {
			m[b] = t < n
		}
		masks[t] = tensor.FromBool(m, B, 1)
	}
	return masks
}

// direction runs one layer in one direction over seq ([T, B, in] or
// [B, T, in]): the input projection of every step as one product, then
// the loop over time. It returns the outputs (in seq's layout), the last
// hidden state and (LSTM) the last cell state.
func (r recurrent) direction(w RecurrentWeights, seq, h, c *tensor.Tensor, masks []*tensor.Tensor,
	timeAxis int, reverse bool, hidden, remat int) (y, hT, cT *tensor.Tensor) {
	T := seq.Dim(timeAxis)
	ys := make([]*tensor.Tensor, T)
	order := make([]int, T) // the steps in the order they run
	for j := range order {
		order[j] = j
		if reverse {
			order[j] = T - 1 - j
		}
	}
	mask := func(t int) *tensor.Tensor {
		if masks == nil {
			return nil
		}
		return masks[t]
	}
	k := remat
	if k < 0 {
		k = int(math.Ceil(math.Sqrt(float64(T))))
	}
	if k == 0 {
		steps := r.project(w, seq, timeAxis, hidden)
		for j, t := range order {
			h, c, ys[t] = r.step(w, steps[t], h, c, mask(t), j == 0 && r.zeroH)
			steps[t] = nil
		}
		return tensor.Stack(timeAxis, ys...), h, c
	}
	// Segments of k steps, each a checkpoint whose inputs are its first
	// state and the layer's input: the backward pass keeps those and
	// recomputes the segment, its input projection included (one product
	// per segment).
	states := []*tensor.Tensor{h}
	if c != nil {
		states = append(states, c)
	}
	ns := len(states)
	for lo := 0; lo < T; lo += k {
		ts := order[lo:min(lo+k, T)]
		first := min(ts[0], ts[len(ts)-1])
		out := tensor.Remat(func(in []*tensor.Tensor) []*tensor.Tensor {
			steps := r.project(w, tensor.SliceAxis(in[0], timeAxis, first, first+len(ts)), timeAxis, hidden)
			h, c := in[1], (*tensor.Tensor)(nil)
			if ns == 2 {
				c = in[2]
			}
			out := make([]*tensor.Tensor, ns, ns+len(ts))
			for _, t := range ts {
				var y *tensor.Tensor
				h, c, y = r.step(w, steps[t-first], h, c, mask(t), false)
				out = append(out, y)
			}
			out[0] = h
			if ns == 2 {
				out[1] = c
			}
			return out
		}, nil, append([]*tensor.Tensor{seq}, states...)...)
		copy(states, out[:ns])
		for i, t := range ts {
			ys[t] = out[ns+i]
		}
	}
	h = states[0]
	if ns == 2 {
		c = states[1]
	}
	return tensor.Stack(timeAxis, ys...), h, c
}

// project returns x·W_ih + b_ih for every step of seq at once, one
// product, split into the steps along timeAxis. The LSTM and the Elman
// RNN add both biases here; the GRU's b_hh belongs to the loop
// (r ⊙ (h·W_hn + b_hn)).
func (r recurrent) project(w RecurrentWeights, seq *tensor.Tensor, timeAxis, hidden int) []*tensor.Tensor {
	shape := seq.Shape()
	flat := tensor.Reshape(seq, -1, shape[2])
	var proj *tensor.Tensor
	switch {
	case w.BiasIH == nil:
		proj = tensor.MatMul(flat, w.WeightIH)
	case r.kind == recGRU:
		proj = tensor.MatMulBiasAct(flat, w.WeightIH, w.BiasIH, tensor.ActIdentity)
	default:
		proj = tensor.MatMulBiasAct(flat, w.WeightIH, tensor.Add(w.BiasIH, w.BiasHH), tensor.ActIdentity)
	}
	return tensor.Unstack(tensor.Reshape(proj, shape[0], shape[1], r.kind.gates()*hidden), timeAxis)
}

// step is one step of the cell from the projected input xp and the
// states h and c (nil but for the LSTM): the new states and the output.
// Where m (bool [B, 1]) is false, the states stay and the output is zero.
// zeroH says h is zero: the LSTM and the Elman RNN then skip h·W_hh (the
// results are the same bits: adding the product's zeros changes nothing).
func (r recurrent) step(w RecurrentWeights, xp, h, c, m *tensor.Tensor, zeroH bool) (hT, cT, y *tensor.Tensor) {
	var hNew, cNew *tensor.Tensor
	var hh *tensor.Tensor // h·W_hh, nil when h is zero
	if !zeroH && r.kind != recGRU {
		hh = tensor.MatMul(h, w.WeightHH)
	}
	switch r.kind {
	case recLSTM:
		hNew, cNew = tensor.LSTMCell(xp, hh, c)
		if w.WeightHR != nil {
			hNew = tensor.MatMul(hNew, w.WeightHR)
		}
	case recGRU:
		var hg *tensor.Tensor
		if w.BiasHH != nil {
			hg = tensor.MatMulBiasAct(h, w.WeightHH, w.BiasHH, tensor.ActIdentity)
		} else {
			hg = tensor.MatMul(h, w.WeightHH)
		}
		hNew = tensor.GRUCell(xp, hg, h)
	case recTanh, recRelu:
		pre := xp
		if hh != nil {
			pre = tensor.Add(xp, hh)
		}
		if r.kind == recTanh {
			hNew = tensor.Tanh(pre)
		} else {
			hNew = tensor.Relu(pre)
		}
	}
	if m == nil {
		return hNew, cNew, hNew
	}
	y = tensor.Where(m, hNew, tensor.Zeros(hNew.DType()))
	hT = tensor.Where(m, hNew, h)
	if c != nil {
		cT = tensor.Where(m, cNew, c)
	}
	return hT, cT, y
}

// describeType writes a dtype and shape in type notation, "f32[3,4]".
func describeType(dt tensor.DType, shape []int) string {
	b := []byte(dt.Abbrev() + "[")
	for i, d := range shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(d), 10)
	}
	return string(append(b, ']'))
}
