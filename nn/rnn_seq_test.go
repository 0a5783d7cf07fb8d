package nn_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// The sequence layers against PyTorch 1.13's torch.nn.LSTM, GRU and RNN:
// testdata/torch_rnnseq.py wrote, in float64, the inputs, the parameters
// (in PyTorch's layout, under its names), the outputs, the final states
// and the gradients of Σ y·g + Σ h_n·gh (+ Σ c_n·gc) with respect to the
// input, the initial states and every parameter.

// seqInputs is what the tests differentiate: the layer's weights, the
// input and the initial states (nil: zeros).
type seqInputs struct {
	Weights []nn.RecurrentWeights
	X       *tensor.Tensor
	H0, C0  *tensor.Tensor
}

// torchRecurrentWeights reads the case's parameters into Weights[k·D+d],
// transposing the weights from PyTorch's [out, in] to gonox's [in, out].
func torchRecurrentWeights(t *testing.T, c torchCase, get func(*testing.T, string) *tensor.Tensor) []nn.RecurrentWeights {
	layers, D := int(c.num("layers")), 1
	if c.flag("bidirectional") {
		D = 2
	}
	ws := make([]nn.RecurrentWeights, layers*D)
	for k := range layers {
		for d := range D {
			sfx := torchRecurrentSuffix(k, d)
			w := nn.RecurrentWeights{
				WeightIH: tensor.T(get(t, "weight_ih"+sfx)),
				WeightHH: tensor.T(get(t, "weight_hh"+sfx)),
			}
			if c.flag("bias") {
				w.BiasIH, w.BiasHH = get(t, "bias_ih"+sfx), get(t, "bias_hh"+sfx)
			}
			if c.num("proj") > 0 {
				w.WeightHR = tensor.T(get(t, "weight_hr"+sfx))
			}
			ws[k*D+d] = w
		}
	}
	return ws
}

func torchRecurrentSuffix(k, d int) string {
	if d == 1 {
		return fmt.Sprintf("_l%d_reverse", k)
	}
	return fmt.Sprintf("_l%d", k)
}

// runTorchRecurrent runs the case's layer on in: y, h_n and c_n (nil but
// for the LSTM).
func runTorchRecurrent(c torchCase, in seqInputs, remat int) (y, hn, cn *tensor.Tensor) {
	call := nn.RecurrentCall{Remat: remat}
	if l, ok := c.Config["lengths"]; ok {
		for _, v := range l.([]any) {
			call.Lengths = append(call.Lengths, int(v.(float64)))
		}
	}
	bidir, bf := c.flag("bidirectional"), c.flag("batch_first")
	switch c.Kind {
	case "lstm":
		l := nn.LSTM{Weights: in.Weights, Bidirectional: bidir, BatchFirst: bf}
		y, s := l.ForwardWith(in.X, nn.LSTMState{H: in.H0, C: in.C0}, call)
		return y, s.H, s.C
	case "gru":
		l := nn.GRU{Weights: in.Weights, Bidirectional: bidir, BatchFirst: bf}
		y, hn = l.ForwardWith(in.X, in.H0, call)
	default:
		l := nn.RNN{Weights: in.Weights, Bidirectional: bidir, BatchFirst: bf}
		if c.Config["nonlinearity"] == "relu" {
			l.Nonlinearity = nn.RNNRelu
		}
		y, hn = l.ForwardWith(in.X, in.H0, call)
	}
	return y, hn, nil
}

// TestTorchRecurrent runs every case in float64 (to 1e-9 relative, as
// float64 arithmetic in another order) and in float32 (to float32
// rounding): outputs, final states and every gradient; and in float64 with
// the loop in checkpointed segments of 3 steps (RecurrentCall.Remat).
func TestTorchRecurrent(t *testing.T) {
	cases := loadTorchFile(t, "torch_rnnseq.json")
	require.Len(t, cases, 26)
	for _, c := range cases {
		for _, v := range []struct {
			dt    tensor.DType
			remat int
		}{{tensor.Float64, 0}, {tensor.Float32, 0}, {tensor.Float64, 3}} {
			dt := v.dt
			name := c.Name + "/" + dt.String()
			if v.remat != 0 {
				name += fmt.Sprintf("/remat=%d", v.remat)
			}
			t.Run(name, func(t *testing.T) {
				get := c.f64
				req := requireTorch64
				if dt == tensor.Float32 {
					get = func(t *testing.T, name string) *tensor.Tensor {
						return tensor.Convert(c.f64(t, name), tensor.Float32)
					}
					req = requireTorch
				}
				in := seqInputs{Weights: torchRecurrentWeights(t, c, get), X: get(t, "x")}
				if c.flag("h0") {
					in.H0 = get(t, "h0")
					if c.Kind == "lstm" {
						in.C0 = get(t, "c0")
					}
				}
				var y, hn, cn *tensor.Tensor
				_, grads := autodiff.ValueAndGrad(func(p seqInputs) *tensor.Tensor {
					y, hn, cn = runTorchRecurrent(c, p, v.remat)
					loss := tensor.Add(tensor.Sum(tensor.Mul(y, get(t, "g"))), tensor.Sum(tensor.Mul(hn, get(t, "gh"))))
					if cn != nil {
						loss = tensor.Add(loss, tensor.Sum(tensor.Mul(cn, get(t, "gc"))))
					}
					return loss
				})(in)
				require.Equal(t, dt, y.DType())
				req(t, c, "y", y)
				req(t, c, "hn", hn)
				if c.Kind == "lstm" {
					req(t, c, "cn", cn)
				}
				req(t, c, "dx", grads.X)
				if c.flag("h0") {
					req(t, c, "dh0", grads.H0)
					if c.Kind == "lstm" {
						req(t, c, "dc0", grads.C0)
					}
				}
				D := len(in.Weights) / int(c.num("layers"))
				for i, g := range grads.Weights {
					sfx := torchRecurrentSuffix(i/D, i%D)
					req(t, c, "dweight_ih"+sfx, tensor.T(g.WeightIH))
					req(t, c, "dweight_hh"+sfx, tensor.T(g.WeightHH))
					if c.flag("bias") {
						req(t, c, "dbias_ih"+sfx, g.BiasIH)
						req(t, c, "dbias_hh"+sfx, g.BiasHH)
					}
					if c.num("proj") > 0 {
						req(t, c, "dweight_hr"+sfx, tensor.T(g.WeightHR))
					}
				}
			})
		}
	}
}

// The constructors lay the parameters out as PyTorch's (transposed) and
// draw them uniformly in ±1/√hidden.
func TestRecurrentConstructors(t *testing.T) {
	for _, tt := range []struct {
		name    string
		weights []nn.RecurrentWeights
		gates   int
		opts    nn.RecurrentOptions
	}{
		{"LSTM", nn.NewLSTM(tensor.NewKey(1), 5, 16, nn.RecurrentOptions{}).Weights, 4, nn.RecurrentOptions{}},
		{"LSTM 3 layers bidirectional proj", nn.NewLSTM(tensor.NewKey(2), 5, 16,
			nn.RecurrentOptions{Layers: 3, Bidirectional: true, ProjSize: 6}).Weights, 4,
			nn.RecurrentOptions{Layers: 3, Bidirectional: true, ProjSize: 6}},
		{"GRU 2 layers no bias", nn.NewGRU(tensor.NewKey(3), 5, 16, nn.RecurrentOptions{Layers: 2, NoBias: true}).Weights, 3,
			nn.RecurrentOptions{Layers: 2, NoBias: true}},
		{"RNN relu bidirectional", nn.NewRNN(tensor.NewKey(4), 5, 16,
			nn.RecurrentOptions{Bidirectional: true, Nonlinearity: nn.RNNRelu}).Weights, 1,
			nn.RecurrentOptions{Bidirectional: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			layers, D := max(tt.opts.Layers, 1), 1
			if tt.opts.Bidirectional {
				D = 2
			}
			require.Len(t, tt.weights, layers*D)
			H, out := 16, 16
			if tt.opts.ProjSize > 0 {
				out = tt.opts.ProjSize
			}
			lim := 1 / math.Sqrt(16)
			var all []float64
			for i, w := range tt.weights {
				in := 5
				if i >= D {
					in = D * out
				}
				require.Equal(t, []int{in, tt.gates * H}, w.WeightIH.Shape(), "Weights[%d].WeightIH", i)
				require.Equal(t, []int{out, tt.gates * H}, w.WeightHH.Shape(), "Weights[%d].WeightHH", i)
				ps := []*tensor.Tensor{w.WeightIH, w.WeightHH}
				if tt.opts.NoBias {
					require.Nil(t, w.BiasIH)
					require.Nil(t, w.BiasHH)
				} else {
					require.Equal(t, []int{tt.gates * H}, w.BiasIH.Shape())
					require.Equal(t, []int{tt.gates * H}, w.BiasHH.Shape())
					ps = append(ps, w.BiasIH, w.BiasHH)
				}
				if tt.opts.ProjSize > 0 {
					require.Equal(t, []int{H, out}, w.WeightHR.Shape())
					ps = append(ps, w.WeightHR)
				} else {
					require.Nil(t, w.WeightHR)
				}
				for _, p := range ps {
					require.Equal(t, tensor.Float32, p.DType())
					all = append(all, p.Float64s()...)
				}
			}
			// Uniform in ±lim: inside the bounds, mean ≈ 0 and variance
			// ≈ lim²/3 (thousands of draws; 5 standard errors).
			var sum, sq float64
			for _, v := range all {
				require.True(t, v >= -lim && v <= lim, "%g outside ±%g", v, lim)
				sum += v
				sq += v * v
			}
			n := float64(len(all))
			mean, vr := sum/n, sq/n
			require.InDelta(t, 0, mean, 5*lim/math.Sqrt(3*n))
			require.InDelta(t, lim*lim/3, vr, 5*lim*lim*math.Sqrt(4.0/45/n))
			// Distinct keys per parameter: no two parameters are equal.
			for i := 1; i < len(tt.weights); i++ {
				require.NotEqual(t, tt.weights[0].WeightHH.Float64s(), tt.weights[i].WeightHH.Float64s())
			}
		})
	}
}

// Dropout between layers: identity in inference mode and at rate 0; with a
// rate, the same key gives the same outputs and another key others; at
// rate 1 the last layer sees zeros, so its outputs do not depend on x.
func TestRecurrentDropout(t *testing.T) {
	k := tensor.NewKey(7).Split(3)
	x := tensor.Normal(k[1], 6, 2, 3)
	lstm := nn.NewLSTM(k[0], 3, 4, nn.RecurrentOptions{Layers: 3, Dropout: 0.5})
	plain, _ := nn.InferenceMode(lstm, true).Forward(x, nn.LSTMState{})
	noDrop := lstm
	noDrop.Dropout.Rate = 0
	y0, _ := noDrop.Forward(x, nn.LSTMState{})
	require.Equal(t, plain.Float32s(), y0.Float32s())
	a, b := lstm.Call(x, k[2]), lstm.Call(x, k[2])
	require.Equal(t, a.Float32s(), b.Float32s())
	require.NotEqual(t, plain.Float32s(), a.Float32s())
	require.NotEqual(t, a.Float32s(), lstm.Call(x, tensor.NewKey(8)).Float32s())

	all := lstm
	all.Dropout.Rate = 1
	x2 := tensor.Normal(tensor.NewKey(9), 6, 2, 3)
	require.Equal(t, all.Call(x, k[2]).Float32s(), all.Call(x2, k[2]).Float32s())

	// One layer: nothing to drop, no key needed.
	one := nn.NewGRU(k[0], 3, 4, nn.RecurrentOptions{Dropout: 0.5})
	y1, _ := one.Forward(x, nil)
	require.Equal(t, []int{6, 2, 4}, y1.Shape())
	require.PanicsWithValue(t, "nn.LSTM: the dropout between layers (rate 0.5) needs a key: pass RecurrentCall.Key (or use Call), "+
		"or switch it off with nn.InferenceMode", func() { lstm.Forward(x, nn.LSTMState{}) })
}

// An unbatched sequence equals the batch of one, and vmapping the layer
// over one example at a time (with and without Remat) equals the batched
// call; Checkpoint around the layer leaves the gradient as it is.
func TestRecurrentVmapCheckpoint(t *testing.T) {
	k := tensor.NewKey(11).Split(4)
	gru := nn.NewGRU(k[0], 3, 5, nn.RecurrentOptions{Layers: 2, Bidirectional: true})
	x := tensor.Normal(k[1], 4, 7, 3) // [batch, T, in]
	batched, _ := nn.GRU{Weights: gru.Weights, Bidirectional: true, BatchFirst: true}.Forward(x, nil)
	one := func(x *tensor.Tensor) *tensor.Tensor { y, _ := gru.Forward(x, nil); return y }
	mapped := autodiff.Vmap(one)(x)
	require.Equal(t, batched.Shape(), mapped.Shape())
	require.InDeltaSlice(t, batched.Float64s(), mapped.Float64s(), 1e-6)
	oneRemat := func(x *tensor.Tensor) *tensor.Tensor {
		y, _ := gru.ForwardWith(x, nil, nn.RecurrentCall{Remat: 3})
		return y
	}
	require.InDeltaSlice(t, batched.Float64s(), autodiff.Vmap(oneRemat)(x).Float64s(), 1e-6)
	y0 := one(tensor.Squeeze(tensor.SliceAxis(x, 0, 0, 1), 0))
	require.InDeltaSlice(t, tensor.SliceAxis(batched, 0, 0, 1).Float64s(), y0.Float64s(), 1e-6)

	loss := func(g nn.GRU) *tensor.Tensor {
		y, _ := nn.GRU{Weights: g.Weights, Bidirectional: true, BatchFirst: true}.Forward(x, nil)
		return tensor.Sum(tensor.Square(y))
	}
	ckpt := func(g nn.GRU) *tensor.Tensor { return autodiff.Checkpoint(loss, nil)(g) }
	g1, g2 := autodiff.Grad(loss)(gru), autodiff.Grad(ckpt)(gru)
	l1, _ := pytree.Flatten(g1)
	l2, _ := pytree.Flatten(g2)
	require.Len(t, l2, len(l1))
	for i := range l1 {
		require.Equal(t, l1[i].Float32s(), l2[i].Float32s())
	}
}

// Float64 gradients against central differences (autodiff.CheckGrad) for
// a 2-layer bidirectional LSTM with a projection and padded sequences.
func TestRecurrentCheckGrad(t *testing.T) {
	k := tensor.NewKey(12).Split(4)
	lstm := to64(nn.NewLSTM(k[0], 3, 4, nn.RecurrentOptions{Layers: 2, Bidirectional: true, ProjSize: 2}))
	x := tensor.Convert(tensor.Normal(k[1], 5, 3, 3), tensor.Float64)
	h0 := tensor.Convert(tensor.Normal(k[2], 4, 3, 2), tensor.Float64)
	c0 := tensor.Convert(tensor.Normal(k[3], 4, 3, 4), tensor.Float64)
	leaves, st := pytree.Flatten(lstm)
	loss := func(xs []*tensor.Tensor) *tensor.Tensor {
		l := pytree.Unflatten[nn.LSTM](st, xs[3:])
		y, s := l.ForwardWith(xs[0], nn.LSTMState{H: xs[1], C: xs[2]}, nn.RecurrentCall{Lengths: []int{5, 2, 4}})
		return tensor.Add(tensor.Sum(tensor.Square(y)), tensor.Add(tensor.Sum(tensor.Sin(s.H)), tensor.Sum(s.C)))
	}
	require.NoError(t, autodiff.CheckGrad(loss, append([]*tensor.Tensor{x, h0, c0}, leaves...), autodiff.CheckOptions{}))
}

// Hostile inputs panic naming the layer and the operands in type notation.
func TestRecurrentPanics(t *testing.T) {
	key := tensor.NewKey(0)
	lstm := nn.NewLSTM(key, 3, 4, nn.RecurrentOptions{Layers: 2})
	gru := nn.NewGRU(key, 3, 4, nn.RecurrentOptions{BatchFirst: true})
	rnn := nn.NewRNN(key, 3, 4, nn.RecurrentOptions{})
	x := tensor.Zeros(tensor.Float32, 5, 2, 3)
	badW := lstm
	badW.Weights = append([]nn.RecurrentWeights{}, lstm.Weights...)
	badW.Weights[1].WeightHH = tensor.Zeros(tensor.Float32, 5, 16)
	noBias := lstm
	noBias.Weights = append([]nn.RecurrentWeights{}, lstm.Weights...)
	noBias.Weights[1].BiasHH = nil
	badNL := rnn
	badNL.Nonlinearity = 7
	for _, tt := range []struct {
		name string
		f    func()
		want string
	}{
		{"zero LSTM", func() { nn.LSTM{}.Forward(x, nn.LSTMState{}) },
			"nn.LSTM: Weights is empty (the zero LSTM has no parameters; build it with nn.NewLSTM)"},
		{"zero GRU", func() { nn.GRU{}.Forward(x, nil) },
			"nn.GRU: Weights is empty (the zero GRU has no parameters; build it with nn.NewGRU)"},
		{"nil x", func() { rnn.Forward(nil, nil) }, "nn.RNN: x is nil"},
		{"rank 1", func() { lstm.Forward(tensor.Zeros(tensor.Float32, 3), nn.LSTMState{}) },
			"nn.LSTM: input f32[3]: want [T, batch, 3] (time first) or one sequence [T, 3]"},
		{"features", func() { gru.Forward(tensor.Zeros(tensor.Float32, 2, 5, 4), nil) },
			"nn.GRU: input f32[2,5,4]: want [batch, T, 3] (BatchFirst) or one sequence [T, 3]"},
		{"dtype", func() { rnn.Forward(tensor.Zeros(tensor.Float64, 5, 2, 3), nil) },
			"nn.RNN: input f64[5,2,3], Weights[0].WeightIH f32[3,4]: dtypes differ; convert the input with tensor.Convert or the layer with nn.CastTo"},
		{"no steps", func() { rnn.Forward(tensor.Zeros(tensor.Float32, 0, 2, 3), nil) },
			"nn.RNN: input f32[0,2,3]: the sequence has no time steps"},
		{"h0 shape", func() { lstm.Forward(x, nn.LSTMState{H: tensor.Zeros(tensor.Float32, 2, 4)}) },
			"nn.LSTM: input f32[5,2,3], initial hidden state f32[2,4]: want f32[2,2,4]"},
		{"c0 shape", func() { lstm.Forward(x, nn.LSTMState{C: tensor.Zeros(tensor.Float32, 1, 2, 4)}) },
			"nn.LSTM: input f32[5,2,3], initial cell state f32[1,2,4]: want f32[2,2,4]"},
		{"h0 batch first", func() { gru.Forward(tensor.Zeros(tensor.Float32, 2, 5, 3), tensor.Zeros(tensor.Float32, 1, 5, 4)) },
			"nn.GRU: input f32[2,5,3], initial hidden state f32[1,5,4]: want f32[1,2,4]"},
		{"h0 dtype", func() { rnn.Forward(x, tensor.Zeros(tensor.Float64, 1, 2, 4)) },
			"nn.RNN: input f32[5,2,3], initial hidden state f64[1,2,4]: want f32[1,2,4]"},
		{"lengths count", func() { rnn.ForwardWith(x, nil, nn.RecurrentCall{Lengths: []int{5}}) },
			"nn.RNN: input f32[5,2,3], 1 Lengths [5]: want one per batch element (2)"},
		{"lengths range", func() { rnn.ForwardWith(x, nil, nn.RecurrentCall{Lengths: []int{5, 6}}) },
			"nn.RNN: input f32[5,2,3], Lengths [5 6]: Lengths[1] = 6 is not in [1, 5]"},
		{"lengths zero", func() { rnn.ForwardWith(x, nil, nn.RecurrentCall{Lengths: []int{0, 5}}) },
			"nn.RNN: input f32[5,2,3], Lengths [0 5]: Lengths[0] = 0 is not in [1, 5]"},
		{"weight shape", func() { badW.Forward(x, nn.LSTMState{}) },
			"nn.LSTM: Weights[1].WeightHH f32[5,16]: want f32[4,16] (layer 1 of 2, 1 direction(s), hidden 4, input 4, output 4)"},
		{"bias missing", func() { noBias.Forward(x, nn.LSTMState{}) },
			"nn.LSTM: Weights[1]: BiasIH f32[16], BiasHH <nil>: every layer and direction has both biases or neither (Weights[0] has f32[16])"},
		{"odd weights", func() { nn.GRU{Weights: gru.Weights, Bidirectional: true}.Forward(x, nil) },
			"nn.GRU: 1 Weights for 2 directions: want layers·2"},
		{"nonlinearity", func() { badNL.Forward(x, nil) }, "nn.RNN: Nonlinearity Nonlinearity(7): want nn.RNNTanh or nn.RNNRelu"},
		{"ctor sizes", func() { nn.NewLSTM(key, 3, 0, nn.RecurrentOptions{}) },
			"nn.NewLSTM: in=3, hidden=0, Layers=0: need in > 0, hidden > 0 and Layers >= 0"},
		{"ctor layers", func() { nn.NewGRU(key, 3, 4, nn.RecurrentOptions{Layers: -1}) },
			"nn.NewGRU: in=3, hidden=4, Layers=-1: need in > 0, hidden > 0 and Layers >= 0"},
		{"ctor dropout", func() { nn.NewRNN(key, 3, 4, nn.RecurrentOptions{Dropout: 1.5}) },
			"nn.NewRNN: Dropout 1.5 is not in [0, 1]"},
		{"ctor relu LSTM", func() { nn.NewLSTM(key, 3, 4, nn.RecurrentOptions{Nonlinearity: nn.RNNRelu}) },
			"nn.NewLSTM: Nonlinearity relu applies to nn.NewRNN only"},
		{"ctor proj GRU", func() { nn.NewGRU(key, 3, 4, nn.RecurrentOptions{ProjSize: 2}) },
			"nn.NewGRU: ProjSize 2 applies to nn.NewLSTM only"},
		{"ctor proj size", func() { nn.NewLSTM(key, 3, 4, nn.RecurrentOptions{ProjSize: 4}) },
			"nn.NewLSTM: ProjSize 4 with hidden=4: want 0 <= ProjSize < hidden"},
	} {
		t.Run(tt.name, func(t *testing.T) { require.PanicsWithValue(t, tt.want, tt.f) })
	}
}

// A PyTorch state dict, under PyTorch's names and in its layout, loads
// into the layer through checkpoint.TorchRNN (a safetensors file written
// and read back), and the layer then computes PyTorch's outputs.
func TestTorchRecurrentSafetensors(t *testing.T) {
	for _, c := range loadTorchFile(t, "torch_rnnseq.json") {
		if c.Config["unbatched"] == true {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			f32 := func(t *testing.T, name string) *tensor.Tensor { return tensor.Convert(c.f64(t, name), tensor.Float32) }
			state := map[string]*tensor.Tensor{}
			for name := range c.Tensors {
				if strings.HasPrefix(name, "weight_") || strings.HasPrefix(name, "bias_") {
					state["rnn."+name] = f32(t, name)
				}
			}
			path := filepath.Join(t.TempDir(), "rnn.safetensors")
			require.NoError(t, checkpoint.ExportSafetensors(path, state, nil))

			layers, bidir := int(c.num("layers")), c.flag("bidirectional")
			opts := nn.RecurrentOptions{Layers: layers, Bidirectional: bidir, BatchFirst: c.flag("batch_first"),
				NoBias: !c.flag("bias"), ProjSize: int(c.num("proj"))}
			in, hidden := int(c.num("in")), int(c.num("hidden"))
			rules := checkpoint.MapNames(append([]checkpoint.Rule{checkpoint.Rename(`^rnn\.`, "")},
				checkpoint.TorchRNN(layers, bidir)...)...)
			var w []nn.RecurrentWeights
			switch c.Kind {
			case "lstm":
				l, _, err := checkpoint.ImportSafetensors(path, nn.NewLSTM(tensor.NewKey(0), in, hidden, opts), rules)
				require.NoError(t, err)
				w = l.Weights
			case "gru":
				l, _, err := checkpoint.ImportSafetensors(path, nn.NewGRU(tensor.NewKey(0), in, hidden, opts), rules)
				require.NoError(t, err)
				w = l.Weights
			default:
				if c.Config["nonlinearity"] == "relu" {
					opts.Nonlinearity = nn.RNNRelu
				}
				l, _, err := checkpoint.ImportSafetensors(path, nn.NewRNN(tensor.NewKey(0), in, hidden, opts), rules)
				require.NoError(t, err)
				w = l.Weights
			}
			require.Equal(t, torchRecurrentWeights(t, c, f32)[len(w)-1].WeightHH.Float32s(), w[len(w)-1].WeightHH.Float32s())
			in2 := seqInputs{Weights: w, X: f32(t, "x")}
			if c.flag("h0") {
				in2.H0 = f32(t, "h0")
				if c.Kind == "lstm" {
					in2.C0 = f32(t, "c0")
				}
			}
			y, hn, _ := runTorchRecurrent(c, in2, 0)
			requireTorch(t, c, "y", y)
			requireTorch(t, c, "hn", hn)
		})
	}
}

// The sequence layers are Modules: Call is the output of Forward from zero
// states, and a Sequential of a GRU and a Linear trains both.
func TestRecurrentModules(t *testing.T) {
	k := tensor.NewKey(13).Split(5)
	x := tensor.Normal(k[0], 5, 2, 3)
	for _, m := range []nn.Module{
		nn.NewLSTM(k[1], 3, 4, nn.RecurrentOptions{}),
		nn.NewGRU(k[1], 3, 4, nn.RecurrentOptions{Bidirectional: true}),
		nn.NewRNN(k[1], 3, 4, nn.RecurrentOptions{Nonlinearity: nn.RNNRelu}),
	} {
		var want *tensor.Tensor
		switch l := m.(type) {
		case nn.LSTM:
			want, _ = l.Forward(x, nn.LSTMState{})
		case nn.GRU:
			want, _ = l.Forward(x, nil)
		case nn.RNN:
			want, _ = l.Forward(x, nil)
		}
		require.Equal(t, want.Float32s(), m.Call(x, k[2]).Float32s())
	}
	seq := nn.NewSequential(nn.NewGRU(k[3], 3, 4, nn.RecurrentOptions{}), nn.NewLinear(k[4], 4, 1, nn.LinearOptions{}))
	g := autodiff.Grad(func(s nn.Sequential) *tensor.Tensor { return tensor.Sum(s.Call(x, k[2])) })(seq)
	gw := g.Layers[0].(nn.GRU).Weights[0].WeightHH
	require.Equal(t, []int{4, 12}, gw.Shape())
	require.NotZero(t, tensor.Sum(tensor.Abs(gw)).Float64s()[0])
}

// Forward mode: the JVP of the layer (with padding) in a direction equals
// the directional derivative that reverse mode gives, ⟨∇f, v⟩, in float64,
// with and without Remat.
func TestRecurrentJVP(t *testing.T) {
	k := tensor.NewKey(14).Split(4)
	gru := to64(nn.NewGRU(k[0], 3, 4, nn.RecurrentOptions{Layers: 2, Bidirectional: true}))
	x := tensor.Convert(tensor.Normal(k[1], 5, 2, 3), tensor.Float64)
	v := tensor.Convert(tensor.Normal(k[2], 5, 2, 3), tensor.Float64)
	f := func(x *tensor.Tensor) *tensor.Tensor {
		y, hn := gru.ForwardWith(x, nil, nn.RecurrentCall{Lengths: []int{5, 3}})
		return tensor.Add(tensor.Sum(tensor.Square(y)), tensor.Sum(hn))
	}
	_, dir := autodiff.JVP(f, x, v)
	g := autodiff.Grad(f)(x)
	require.InDelta(t, tensor.Sum(tensor.Mul(g, v)).Float64s()[0], dir.Float64s()[0], 1e-12)
	fr := func(x *tensor.Tensor) *tensor.Tensor {
		y, hn := gru.ForwardWith(x, nil, nn.RecurrentCall{Lengths: []int{5, 3}, Remat: 2})
		return tensor.Add(tensor.Sum(tensor.Square(y)), tensor.Sum(hn))
	}
	_, dirRemat := autodiff.JVP(fr, x, v)
	require.InDelta(t, dir.Float64s()[0], dirRemat.Float64s()[0], 1e-12)
}

// Remat gives the outputs and gradients of the plain loop within float32
// rounding (a weight's per-step contributions are summed per segment
// first; the outputs agree bit for bit on the kernels of this test's
// sizes, which nothing promises), whatever the segment length (one step,
// uneven segments, ⌈√T⌉, longer than the sequence), with padding, both
// directions and a projection.
func TestRecurrentRematSameBits(t *testing.T) {
	k := tensor.NewKey(15).Split(3)
	lstm := nn.NewLSTM(k[0], 3, 4, nn.RecurrentOptions{Layers: 2, Bidirectional: true, ProjSize: 2})
	x := tensor.Normal(k[1], 7, 3, 3)
	h0 := tensor.Normal(k[2], 4, 3, 2)
	run := func(remat int) []*tensor.Tensor {
		type in struct {
			L  nn.LSTM
			X  *tensor.Tensor
			H0 *tensor.Tensor
		}
		var y *tensor.Tensor
		_, g := autodiff.ValueAndGrad(func(p in) *tensor.Tensor {
			var s nn.LSTMState
			y, s = p.L.ForwardWith(p.X, nn.LSTMState{H: p.H0}, nn.RecurrentCall{Lengths: []int{7, 2, 5}, Remat: remat})
			return tensor.Add(tensor.Sum(tensor.Square(y)), tensor.Add(tensor.Sum(tensor.Sin(s.H)), tensor.Sum(tensor.Square(s.C))))
		})(in{lstm, x, h0})
		leaves, _ := pytree.Flatten(g)
		return append(leaves, y)
	}
	want := run(0)
	for _, remat := range []int{1, 3, -1, 20} {
		got := run(remat)
		require.Len(t, got, len(want))
		for i := range want {
			w, g := want[i].Float64s(), got[i].Float64s()
			for j := range w {
				require.InDelta(t, w[j], g[j], 1e-6+1e-5*math.Abs(w[j]), "Remat %d, leaf %d [%d]", remat, i, j)
			}
		}
	}
}

// Remat keeps less for the backward pass: on 64 steps of an LSTM,
// segments of ⌈√64⌉ = 8 steps keep a fraction of what the plain loop
// keeps (its inputs, the segments' first states, not every step's gates).
func TestRecurrentRematResiduals(t *testing.T) {
	k := tensor.NewKey(16).Split(2)
	lstm := nn.NewLSTM(k[0], 8, 32, nn.RecurrentOptions{})
	x := tensor.Normal(k[1], 64, 4, 8)
	kept := func(remat int) int {
		var bytes int
		autodiff.Grad(func(l nn.LSTM) *tensor.Tensor {
			y, _ := l.ForwardWith(x, nn.LSTMState{}, nn.RecurrentCall{Remat: remat})
			loss := tensor.Sum(tensor.Square(y))
			bytes = tensor.Residuals(loss).Bytes
			return loss
		})(lstm)
		return bytes
	}
	plain, remat := kept(0), kept(-1)
	t.Logf("residuals: plain loop %d bytes, Remat ⌈√T⌉ %d bytes", plain, remat)
	require.Less(t, 3*remat, plain)
}
