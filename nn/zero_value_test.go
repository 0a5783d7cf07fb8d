package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// A layer declared but never built (its zero value: a field of a model
// struct left unset, a var) has no parameters. Calling it panics naming the
// layer, the missing field and the constructor, not with a nil dereference
// or a division by zero deep inside; a nil input panics naming the layer.
// The layers whose zero value is useful (Dropout, LayerNorm, RMSNorm, MLP,
// Sequential: identities or plain normalisations) are left out.
func TestZeroValueLayersPanicNamingConstructor(t *testing.T) {
	x2 := tensor.Ones(tensor.Float32, 2, 4)
	x4 := tensor.Ones(tensor.Float32, 2, 3, 8, 8)
	ids := tensor.FromInt32([]int32{0}, 1)
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"Linear", func() { nn.Linear{}.Forward(x2) },
			"nn.Linear: W is nil (the zero Linear has no parameters; build it with nn.NewLinear)"},
		{"Linear ForwardAct", func() { nn.Linear{}.ForwardAct(x2, nn.Relu) },
			"nn.Linear: W is nil (the zero Linear has no parameters; build it with nn.NewLinear)"},
		{"Conv", func() { nn.Conv{}.Forward(x4) },
			"nn.Conv: Weight is nil (the zero Conv has no parameters; build it with nn.NewConv2d or NewConv, NewConv1d, NewConv3d)"},
		{"ConvTranspose", func() { nn.ConvTranspose{}.Forward(x4) },
			"nn.ConvTranspose: Weight is nil (the zero ConvTranspose has no parameters; build it with nn.NewConvTranspose2d or NewConvTranspose, NewConvTranspose1d, NewConvTranspose3d)"},
		{"Embedding", func() { nn.Embedding{}.Forward(ids) },
			"nn.Embedding: W is nil (the zero Embedding has no parameters; build it with nn.NewEmbedding)"},
		{"Embedding nil ids", func() { nn.NewEmbedding(tensor.NewKey(0), 3, 2, nn.EmbeddingOptions{}).Forward(nil) },
			"nn.Embedding: ids is nil"},
		{"MultiHeadAttention", func() { nn.MultiHeadAttention{}.Forward(tensor.Ones(tensor.Float32, 2, 3, 4)) },
			"nn.MultiHeadAttention: QueryProj.W is nil (the zero MultiHeadAttention has no parameters; build it with nn.NewMultiHeadAttention)"},
		{"LSTMCell", func() { nn.LSTMCell{}.Forward(x2, nn.LSTMState{H: x2, C: x2}) },
			"nn.LSTMCell: WeightIH is nil (the zero LSTMCell has no parameters; build it with nn.NewLSTMCell)"},
		{"GRUCell", func() { nn.GRUCell{}.Forward(x2, x2) },
			"nn.GRUCell: WeightIH is nil (the zero GRUCell has no parameters; build it with nn.NewGRUCell)"},
		{"MoE", func() { nn.MoE{}.Forward(x2) },
			"nn.MoE: Router is nil (the zero MoE has no parameters; build it with nn.NewMoE)"},
		{"GroupNorm", func() { nn.GroupNorm{}.Forward(x4) },
			"nn.GroupNorm: Groups is 0 (the zero GroupNorm has no groups; build it with nn.NewGroupNorm)"},
		{"Pool", func() { nn.Pool{}.Forward(x4) },
			"nn.Pool: Kernel is empty (the zero Pool has no window; build it with nn.NewMaxPool2d, NewAvgPool2d or their 1-D, 3-D and N-D forms)"},
		{"Pool nil x", func() { nn.NewMaxPool2d(2, nn.PoolOptions{}).Forward(nil) },
			"nn.Pool: x is nil"},
		{"AdaptivePool", func() { nn.AdaptivePool{}.Forward(x4) },
			"nn.AdaptivePool: Out is empty (the zero AdaptivePool has no output size; build it with nn.NewAdaptiveAvgPool or nn.NewAdaptiveMaxPool)"},
		{"AdaptivePool nil x", func() { nn.NewAdaptiveAvgPool(2, 2).Forward(nil) },
			"nn.AdaptivePool: x is nil"},
		{"BatchNorm", func() { nn.BatchNorm{}.Forward(x4, nn.State{}) },
			"nn.State.Get: a zero StateIndex (of a layer not built by its constructor, such as the zero BatchNorm) was never numbered: build the layer with its constructor and the model's State with nn.MakeWithState"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.PanicsWithValue(t, tt.want, tt.f)
		})
	}
}

// ZeroState gives the cell's own dtype: a float64 cell (CastTo) started from
// its ZeroState used to get a float32 state and panic with "dtypes differ".
// GRUCell has one too. A nil state panics pointing at ZeroState.
func TestRNNZeroStateAndNilState(t *testing.T) {
	key := tensor.NewKey(0)
	l := nn.CastTo(nn.NewLSTMCell(key, 3, 4, nn.RNNOptions{}), tensor.Float64)
	g := nn.CastTo(nn.NewGRUCell(key, 3, 4, nn.RNNOptions{}), tensor.Float64)
	x := tensor.Ones(tensor.Float64, 2, 3)
	s := l.ZeroState(2)
	require.Equal(t, "f64[2,4] f64[2,4]", s.H.String()+" "+s.C.String())
	require.Equal(t, "f64[2,4]", l.Forward(x, s).H.String())
	h := g.ZeroState(2)
	require.Equal(t, "f64[2,4]", h.String())
	require.Equal(t, make([]float64, 8), h.Float64s())
	require.Equal(t, "f64[2,4]", g.Forward(x, h).String())
	require.Equal(t, "f32[4]", nn.NewGRUCell(key, 3, 4, nn.RNNOptions{}).ZeroState().String())

	require.PanicsWithValue(t, "nn.LSTMCell: x f64[2,3], hidden state <nil>: nil operand (start from the cell's ZeroState(batch...))",
		func() { l.Forward(x, nn.LSTMState{}) })
	require.PanicsWithValue(t, "nn.GRUCell: x f64[2,3], hidden state <nil>: nil operand (start from the cell's ZeroState(batch...))",
		func() { g.Forward(x, nil) })
}
