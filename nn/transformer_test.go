package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func TestSquareSubsequentMask(t *testing.T) {
	inf := float32(math.Inf(1))
	require.Equal(t, []float32{0, -inf, -inf, 0, 0, -inf, 0, 0, 0}, nn.SquareSubsequentMask(3).Float32s())
	require.Equal(t, []bool{false, true, true, false, false, true, false, false, false}, nn.TorchCausalMask(3).Bools())
	require.Equal(t, []int{0, 0}, nn.SquareSubsequentMask(0).Shape())
}

// The initialization is PyTorch's: in_proj_weight Glorot-uniform over
// [3·d, d], zero attention biases, Linear's ±1/√in elsewhere; in
// nn.Transformer every matrix Glorot-uniform.
func TestTransformerInit(t *testing.T) {
	const D, FF = 64, 128
	l := nn.NewTransformerEncoderLayer(tensor.NewKey(1), D, 4, nn.TransformerOptions{DimFeedforward: FF})
	span := func(x *tensor.Tensor) (lo, hi float64) {
		return tensor.Min(x).Float64s()[0], tensor.Max(x).Float64s()[0]
	}
	for _, c := range []struct {
		name  string
		x     *tensor.Tensor
		bound float64
	}{
		{"query", l.SelfAttn.QueryProj.W, math.Sqrt(6.0 / (4 * D))},
		{"value", l.SelfAttn.ValueProj.W, math.Sqrt(6.0 / (4 * D))},
		{"out", l.SelfAttn.OutputProj.W, 1 / math.Sqrt(D)},
		{"linear1", l.Linear1.W, 1 / math.Sqrt(D)},
		{"linear2", l.Linear2.W, 1 / math.Sqrt(FF)},
		{"linear2 bias", l.Linear2.B, 1 / math.Sqrt(FF)},
	} {
		lo, hi := span(c.x)
		require.Less(t, -c.bound, lo, c.name)
		require.Less(t, hi, c.bound, c.name)
		require.Less(t, lo, -0.9*c.bound, c.name)
		require.Greater(t, hi, 0.9*c.bound, c.name)
	}
	for _, b := range []*tensor.Tensor{l.SelfAttn.QueryProj.B, l.SelfAttn.KeyProj.B, l.SelfAttn.ValueProj.B, l.SelfAttn.OutputProj.B} {
		lo, hi := span(b)
		require.Equal(t, [2]float64{0, 0}, [2]float64{lo, hi})
	}
	m := nn.NewTransformer(tensor.NewKey(2), D, 4, 1, 1, nn.TransformerOptions{DimFeedforward: FF})
	lo, hi := span(m.Decoder.Layers[0].Linear2.W)
	g := math.Sqrt(6.0 / (D + FF))
	require.True(t, lo > -g && lo < -0.9*g && hi < g && hi > 0.9*g, "Glorot bound %g: [%g, %g]", g, lo, hi)
}

// Dropout draws from the call's key: the same key gives the same result,
// another key another; InferenceMode is the layer without dropout; rate 1
// drops every block, so a pre-norm layer is then exactly the identity.
func TestTransformerDropout(t *testing.T) {
	const D, T, B = 8, 5, 3
	opts := nn.TransformerOptions{DimFeedforward: 16, Dropout: 0.3, BatchFirst: true}
	l := nn.NewTransformerEncoderLayer(tensor.NewKey(1), D, 2, opts)
	x := randn(2, B, T, D)
	k1, k2 := tensor.NewKey(3), tensor.NewKey(4)
	y1 := l.Call(x, k1)
	require.Equal(t, y1.Float32s(), l.Call(x, k1).Float32s())
	require.NotEqual(t, y1.Float32s(), l.Call(x, k2).Float32s())
	require.PanicsWithValue(t, "nn.TransformerEncoderLayer: dropout is active and needs a key: pass the call's Key (or use Call), or switch it off with InferenceMode",
		func() { l.Forward(x) })

	off := l
	off.Dropout, off.Dropout1, off.Dropout2, off.SelfAttn.Dropout = nn.Dropout{}, nn.Dropout{}, nn.Dropout{}, nn.Dropout{}
	inf := nn.InferenceMode(l, true)
	require.Equal(t, off.Forward(x).Float32s(), inf.Forward(x).Float32s())
	require.Equal(t, off.Forward(x).Float32s(), inf.Call(x, k1).Float32s())
	require.NotEqual(t, off.Forward(x).Float32s(), y1.Float32s())

	opts.Dropout, opts.NormFirst = 1, true
	all := nn.NewTransformerEncoderLayer(tensor.NewKey(1), D, 2, opts)
	require.Equal(t, x.Float32s(), all.Call(x, k1).Float32s())
	dec := nn.NewTransformerDecoderLayer(tensor.NewKey(1), D, 2, opts)
	mem := randn(5, B, 4, D)
	require.Equal(t, x.Float32s(), dec.ForwardWith(x, mem, nn.TransformerDecoderCall{Key: &k1}).Float32s())

	// A stack gives layer i the key Split(n)[i]; float masks (the composed
	// path) draw too, in float64 as well.
	opts.Dropout, opts.NormFirst = 0.3, false
	enc := nn.NewTransformerEncoder(tensor.NewKey(6), D, 2, 2, true, opts)
	mask := nn.SquareSubsequentMask(T)
	ya := enc.ForwardWith(x, nn.TransformerEncoderCall{Mask: mask, Key: &k1})
	require.Equal(t, ya.Float32s(), enc.ForwardWith(x, nn.TransformerEncoderCall{Mask: mask, Key: &k1}).Float32s())
	ks := k1.Split(2)
	manual := enc.Layers[1].ForwardWith(enc.Layers[0].ForwardWith(x, nn.TransformerEncoderCall{Mask: mask, Key: &ks[0]}),
		nn.TransformerEncoderCall{Mask: mask, Key: &ks[1]})
	require.InDeltaSlice(t, enc.Norm.Forward(manual).Float64s(), ya.Float64s(), 1e-6)
	enc64 := nn.CastTo(enc, tensor.Float64)
	y64 := enc64.ForwardWith(tensor.Convert(x, tensor.Float64), nn.TransformerEncoderCall{Mask: tensor.Convert(mask, tensor.Float64), Key: &k1})
	require.Equal(t, tensor.Float64, y64.DType())
}

// Vmap over one-example calls is the batched call; Checkpoint gives the
// plain gradient.
func TestTransformerVmapCheckpoint(t *testing.T) {
	const D, T, S, B = 8, 4, 3, 3
	opts := nn.TransformerOptions{DimFeedforward: 16, BatchFirst: true, Activation: nn.GeluExact}
	m := nn.NewTransformer(tensor.NewKey(1), D, 2, 1, 2, opts)
	src, tgt := randn(2, B, S, D), randn(3, B, T, D)
	causal := nn.TorchCausalMask(T)
	batched := m.ForwardWith(src, tgt, nn.TransformerCall{TgtMask: causal})
	one := func(x [2]*tensor.Tensor) *tensor.Tensor {
		return m.ForwardWith(x[0], x[1], nn.TransformerCall{TgtMask: causal})
	}
	require.InDeltaSlice(t, batched.Float64s(), autodiff.Vmap(one)([2]*tensor.Tensor{src, tgt}).Float64s(), 1e-6)
	for b := range B {
		got := one([2]*tensor.Tensor{tensor.Unstack(src, 0)[b], tensor.Unstack(tgt, 0)[b]})
		require.InDeltaSlice(t, tensor.Unstack(batched, 0)[b].Float64s(), got.Float64s(), 1e-6)
	}

	loss := func(m nn.Transformer) *tensor.Tensor {
		return tensor.Mean(tensor.Square(m.ForwardWith(src, tgt, nn.TransformerCall{TgtMask: causal})))
	}
	l1, g1 := autodiff.ValueAndGrad(loss)(m)
	l2, g2 := autodiff.ValueAndGrad(autodiff.Checkpoint(loss, autodiff.DotsSaveable))(m)
	require.Equal(t, l1.Item(), l2.Item())
	require.True(t, pytree.Equal(g1, g2, 1e-5, 1e-6))
}

// Hostile inputs panic naming the layer and the operands in type notation.
func TestTransformerHostile(t *testing.T) {
	const D = 8
	l := nn.NewTransformerEncoderLayer(tensor.NewKey(1), D, 2, nn.TransformerOptions{DimFeedforward: 16})
	d := nn.NewTransformerDecoderLayer(tensor.NewKey(1), D, 2, nn.TransformerOptions{DimFeedforward: 16, BatchFirst: true})
	x := randn(2, 5, 3, D) // [T=5, B=3, D]
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"width", "nn.TransformerEncoderLayer: src f32[5,3,4]: want float [length, batch, 8] or one example [length, 8]",
			func() { l.Forward(randn(1, 5, 3, 4)) }},
		{"rank", "nn.TransformerEncoderLayer: src f32[2,5,3,8]: want float [length, batch, 8] or one example [length, 8]",
			func() { l.Forward(randn(1, 2, 5, 3, D)) }},
		{"int", "nn.TransformerEncoderLayer: src i32[5,8]: want float [length, batch, 8] or one example [length, 8]",
			func() { l.Forward(tensor.Zeros(tensor.Int32, 5, D)) }},
		{"nil", "nn.TransformerEncoderLayer: src is nil", func() { l.Forward(nil) }},
		{"mask", "nn.TransformerEncoderLayer: Mask f32[4,4]: want bool or float [5, 5] or [6, 5, 5] (batch·heads, queries, keys)",
			func() { l.ForwardWith(x, nn.TransformerEncoderCall{Mask: nn.SquareSubsequentMask(4)}) }},
		{"int mask", "nn.TransformerEncoderLayer: Mask i32[5,5]: want bool or float [5, 5] or [6, 5, 5] (batch·heads, queries, keys)",
			func() { l.ForwardWith(x, nn.TransformerEncoderCall{Mask: tensor.Zeros(tensor.Int32, 5, 5)}) }},
		{"padding", "nn.TransformerEncoderLayer: KeyPaddingMask bool[5,3]: want bool or float [3, 5] (batch, keys)",
			func() {
				l.ForwardWith(x, nn.TransformerEncoderCall{KeyPaddingMask: tensor.Zeros(tensor.Bool, 5, 3)})
			}},
		{"unbatched padding", "nn.TransformerEncoderLayer: KeyPaddingMask bool[1,5]: want bool or float [5] (keys) for an unbatched call",
			func() {
				l.ForwardWith(randn(1, 5, D), nn.TransformerEncoderCall{KeyPaddingMask: tensor.Zeros(tensor.Bool, 1, 5)})
			}},
		{"memory batch", "nn.TransformerDecoderLayer: tgt f32[3,5,8], memory f32[2,4,8]: want the same batch (or both unbatched)",
			func() { d.Forward(randn(1, 3, 5, D), randn(2, 2, 4, D)) }},
		{"memory mask", "nn.TransformerDecoderLayer: MemoryMask bool[5,5]: want bool or float [5, 4] or [6, 5, 4] (batch·heads, queries, keys)",
			func() {
				d.ForwardWith(randn(1, 3, 5, D), randn(2, 3, 4, D), nn.TransformerDecoderCall{MemoryMask: nn.TorchCausalMask(5)})
			}},
		{"zero layer", "nn.TransformerEncoderLayer: Linear1.W is nil (the zero TransformerEncoderLayer has no parameters; build it with nn.NewTransformerEncoderLayer)",
			func() { nn.TransformerEncoderLayer{}.Forward(x) }},
		{"empty stack", "nn.TransformerEncoder: no layers (build it with nn.NewTransformerEncoder)",
			func() { nn.TransformerEncoder{}.Forward(x) }},
		{"heads", "nn.NewTransformerEncoderLayer: d_model 8, nhead 3: nhead must be positive and divide d_model",
			func() { nn.NewTransformerEncoderLayer(tensor.NewKey(0), D, 3, nn.TransformerOptions{}) }},
		{"dropout", "nn.NewTransformerDecoderLayer: DimFeedforward 2048, Dropout 1.5, LayerNormEps 1e-05: want a positive size, a rate in [0, 1] and a positive eps",
			func() { nn.NewTransformerDecoderLayer(tensor.NewKey(0), D, 2, nn.TransformerOptions{Dropout: 1.5}) }},
		{"layers", "nn.NewTransformerEncoder: numLayers 0: want at least one",
			func() { nn.NewTransformerEncoder(tensor.NewKey(0), D, 2, 0, false, nn.TransformerOptions{}) }},
		{"causal", "nn.TorchCausalMask: n -1 is negative", func() { nn.TorchCausalMask(-1) }},
	} {
		t.Run(c.name, func(t *testing.T) { require.PanicsWithValue(t, c.want, c.f) })
	}
}
