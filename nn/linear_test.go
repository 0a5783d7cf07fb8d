package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// linearRef computes x @ W + B row by row in float64.
func linearRef(x [][]float64, w mat, b []float64) mat {
	out := matmul(x, w)
	if b != nil {
		for i := range out {
			for j := range out[i] {
				out[i][j] += b[j]
			}
		}
	}
	return out
}

func TestLinearForward(t *testing.T) {
	cases := []struct {
		name   string
		shape  []int // input shape
		noBias bool
	}{
		{"vector", []int{5}, false},
		{"batch", []int{7, 5}, false},
		{"batch no bias", []int{7, 5}, true},
		{"batch and time", []int{2, 3, 5}, false},
		{"rank 4", []int{2, 1, 3, 5}, true},
		{"empty batch", []int{0, 5}, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := nn.NewLinear(tensor.NewKey(uint64(i)), 5, 4, nn.LinearOptions{NoBias: c.noBias})
			require.Equal(t, []int{5, 4}, l.W.Shape())
			assert.Equal(t, 5, l.In())
			assert.Equal(t, 4, l.Out())
			if c.noBias {
				require.Nil(t, l.B)
			} else {
				require.Equal(t, []int{4}, l.B.Shape())
			}
			x := randn(100+uint64(i), c.shape...)
			y := l.Forward(x)
			wantShape := append(append([]int{}, c.shape[:len(c.shape)-1]...), 4)
			require.Equal(t, wantShape, y.Shape())
			var b []float64
			if l.B != nil {
				b = l.B.Float64s()
			}
			xv := x.Float64s()
			rows := make([][]float64, len(xv)/5)
			for r := range rows {
				rows[r] = xv[r*5 : (r+1)*5]
			}
			assert.InDeltaSlice(t, flat(linearRef(rows, toMat(l.W), b)), y.Float64s(), 1e-5)
			assert.Equal(t, y.Float32s(), l.Call(x, tensor.NewKey(9)).Float32s())
		})
	}
}

func TestLinearHandWorked(t *testing.T) {
	l := nn.Linear{
		W: tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3),
		B: tensor.FromFloat32([]float32{0.5, -1, 0}),
	}
	y := l.Forward(tensor.FromFloat32([]float32{1, 1, 2, -1}, 2, 2))
	// [1 1]·W = [5 7 9]; [2 -1]·W = [-2 -1 0]; plus B.
	assert.Equal(t, []float32{5.5, 6, 9, -1.5, -2, 0}, y.Float32s())
}

func TestLinearDefaultInit(t *testing.T) {
	// Equinox: weight and bias uniform in ±1/√in.
	const in, out = 250, 400
	l := nn.NewLinear(tensor.NewKey(3), in, out, nn.LinearOptions{})
	lim := 1 / math.Sqrt(in)
	for name, p := range map[string]*tensor.Tensor{"W": l.W, "B": l.B} {
		lo, hi := minMax(p.Float64s())
		assert.GreaterOrEqual(t, lo, -lim, name)
		assert.Less(t, hi, lim, name)
		assert.Less(t, lo, -0.9*lim, name)
		assert.Greater(t, hi, 0.9*lim, name)
	}
	_, std := meanStd(l.W.Float64s())
	assert.InEpsilon(t, lim/math.Sqrt(3), std, 0.01)
	// The key is split into a weight key and a bias key.
	wk, bk := tensor.NewKey(3).Split2()
	assert.Equal(t, tensor.UniformRange(wk, float32(-lim), float32(lim), in, out).Float32s(), l.W.Float32s())
	assert.Equal(t, tensor.UniformRange(bk, float32(-lim), float32(lim), out).Float32s(), l.B.Float32s())
	// Same key, same layer.
	assert.Equal(t, l.W.Float32s(), nn.NewLinear(tensor.NewKey(3), in, out, nn.LinearOptions{}).W.Float32s())
}

func TestLinearCustomInit(t *testing.T) {
	l := nn.NewLinear(tensor.NewKey(0), 3, 2, nn.LinearOptions{WeightInit: nn.Ones, BiasInit: nn.Constant(2)})
	assert.Equal(t, []float32{1, 1, 1, 1, 1, 1}, l.W.Float32s())
	assert.Equal(t, []float32{2, 2}, l.B.Float32s())
}

func TestLinearGrad(t *testing.T) {
	l := nn.NewLinear(tensor.NewKey(1), 4, 3, nn.LinearOptions{})
	x := randn(2, 2, 5, 4)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
		return nn.Linear{W: xs[0], B: xs[1]}.Forward(xs[2])
	}, l.W, l.B, x)
}

// TestLinearForwardAct: ForwardAct equals the activation applied to
// Forward, bit for bit in value and in every gradient, whether or not the
// activation fuses with the bias (and with no bias at all); Fused names the
// fusable activations.
func TestLinearForwardAct(t *testing.T) {
	cases := []struct {
		name  string
		act   nn.Activation
		fused bool
		want  tensor.Activation
	}{
		{"relu", nn.Relu, true, tensor.ActRelu},
		{"gelu", nn.Gelu, true, tensor.ActGelu},
		{"gelu exact", nn.GeluExact, true, tensor.ActGeluExact},
		{"silu", nn.Silu, true, tensor.ActSilu},
		{"tanh", nn.Tanh, true, tensor.ActTanh},
		{"sigmoid", nn.Sigmoid, true, tensor.ActSigmoid},
		{"identity", nn.Identity, true, tensor.ActIdentity},
		{"tensor.Relu itself", tensor.Relu, true, tensor.ActRelu},
		{"softplus", nn.Softplus, false, 0},
		{"closure", func(x *tensor.Tensor) *tensor.Tensor { return tensor.MulScalar(x, 2) }, false, 0},
		{"nil", nil, false, 0},
	}
	x := randn(7, 6, 4)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, ok := c.act.Fused()
			require.Equal(t, c.fused, ok)
			require.Equal(t, c.want, a)
			for _, noBias := range []bool{false, true} {
				l := nn.NewLinear(tensor.NewKey(3), 4, 5, nn.LinearOptions{NoBias: noBias})
				loss := func(f func(nn.Linear) *tensor.Tensor) func(nn.Linear) *tensor.Tensor {
					return func(l nn.Linear) *tensor.Tensor { return tensor.Sum(tensor.Square(f(l))) }
				}
				v1, g1 := autodiff.ValueAndGrad(loss(func(l nn.Linear) *tensor.Tensor { return l.ForwardAct(x, c.act) }))(l)
				v2, g2 := autodiff.ValueAndGrad(loss(func(l nn.Linear) *tensor.Tensor {
					y := l.Forward(x)
					if c.act != nil {
						y = c.act(y)
					}
					return y
				}))(l)
				require.Equal(t, v2.Float32s(), v1.Float32s())
				require.Equal(t, g2.W.Float32s(), g1.W.Float32s())
				if !noBias {
					require.Equal(t, g2.B.Float32s(), g1.B.Float32s())
				}
			}
		})
	}
}

func TestLinearPanics(t *testing.T) {
	l := nn.NewLinear(tensor.NewKey(0), 4, 3, nn.LinearOptions{})
	requirePanicContains(t, func() { l.Forward(tensor.Zeros(tensor.Float32, 2, 5)) },
		"nn.Linear: x f32[2,5], W f32[4,3]: last dim of x must be 4")
	requirePanicContains(t, func() { l.Forward(tensor.Scalar(1)) }, "nn.Linear: x f32[]")
	requirePanicContains(t, func() { l.Forward(tensor.Zeros(tensor.Float64, 2, 4)) },
		"nn.Linear: x f64[2,4], parameter f32[4,3]: dtypes differ; convert x with tensor.Convert or the layer with nn.CastTo")
	requirePanicContains(t, func() { nn.NewLinear(tensor.NewKey(0), -1, 3, nn.LinearOptions{}) }, "nn.NewLinear: negative size in=-1 out=3")
	requirePanicContains(t, func() {
		nn.NewLinear(tensor.NewKey(0), 4, 3, nn.LinearOptions{WeightInit: func(tensor.Key, ...int) *tensor.Tensor { return tensor.Zeros(tensor.Float32, 3, 4) }})
	}, "nn.NewLinear: weight initializer returned f32[3,4], want f32[4,3]")
	requirePanicContains(t, func() {
		nn.NewLinear(tensor.NewKey(0), 4, 3, nn.LinearOptions{BiasInit: func(tensor.Key, ...int) *tensor.Tensor { return nil }})
	}, "nn.NewLinear: bias initializer returned nil, want f32[3]")
}

func TestMLPForward(t *testing.T) {
	sq := nn.Activation(tensor.Square)
	cases := []struct {
		name string
		opts nn.MLPOptions
		act  nn.Activation // expected activations
		fin  nn.Activation
	}{
		{"defaults: relu, identity", nn.MLPOptions{}, nn.Relu, nn.Identity},
		{"tanh and sigmoid", nn.MLPOptions{Activation: nn.Tanh, FinalActivation: nn.Sigmoid}, nn.Tanh, nn.Sigmoid},
		{"custom", nn.MLPOptions{Activation: sq, NoBias: true, NoFinalBias: true}, sq, nn.Identity},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sizes := []int{3, 8, 6, 2}
			m := nn.NewMLP(tensor.NewKey(uint64(i)), sizes, c.opts)
			require.Len(t, m.Layers, 3)
			keys := tensor.NewKey(uint64(i)).Split(3)
			for j, l := range m.Layers {
				require.Equal(t, []int{sizes[j], sizes[j+1]}, l.W.Shape())
				if j < 2 {
					assert.Equal(t, c.opts.NoBias, l.B == nil)
				} else {
					assert.Equal(t, c.opts.NoFinalBias, l.B == nil)
				}
				// Layer j is NewLinear with key j of the split.
				want := nn.NewLinear(keys[j], sizes[j], sizes[j+1], nn.LinearOptions{})
				assert.Equal(t, want.W.Float32s(), l.W.Float32s())
			}
			x := randn(7, 5, 3)
			h := x
			for j, l := range m.Layers {
				h = l.Forward(h)
				if j < 2 {
					h = c.act(h)
				} else {
					h = c.fin(h)
				}
			}
			assert.Equal(t, h.Float32s(), m.Forward(x).Float32s())
			assert.Equal(t, h.Float32s(), m.Call(x, tensor.NewKey(0)).Float32s())
		})
	}
}

func TestMLPNilActivationIsIdentity(t *testing.T) {
	m := nn.NewMLP(tensor.NewKey(0), []int{2, 3, 1}, nn.MLPOptions{})
	m.Activation, m.FinalActivation = nil, nil
	x := randn(1, 4, 2)
	want := m.Layers[1].Forward(m.Layers[0].Forward(x))
	assert.Equal(t, want.Float32s(), m.Forward(x).Float32s())
}

func TestMLPGrad(t *testing.T) {
	m := nn.NewMLP(tensor.NewKey(4), []int{3, 5, 2}, nn.MLPOptions{Activation: nn.Tanh})
	x := randn(5, 4, 3)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
		mm := nn.MLP{Layers: []nn.Linear{{W: xs[0], B: xs[1]}, {W: xs[2], B: xs[3]}}, Activation: nn.Tanh, FinalActivation: nn.Identity}
		return mm.Forward(xs[4])
	}, m.Layers[0].W, m.Layers[0].B, m.Layers[1].W, m.Layers[1].B, x)
}

func TestMLPPanics(t *testing.T) {
	requirePanicContains(t, func() { nn.NewMLP(tensor.NewKey(0), []int{3}, nn.MLPOptions{}) },
		"nn.NewMLP: sizes [3]: need at least an input and an output size")
	requirePanicContains(t, func() { nn.NewMLP(tensor.NewKey(0), []int{3, 4, 5}, nn.MLPOptions{Axes: nn.MegatronAxes(3)}) },
		"nn.NewMLP: sizes [3 4 5] make 2 layers but Axes has 3 entries")
	requirePanicContains(t, func() { nn.NewMLP(tensor.NewKey(0), []int{3, 0, 5}, nn.MLPOptions{}) },
		"nn.NewMLP: sizes [3 0 5]: size 1 is 0, want a positive width")
	requirePanicContains(t, func() { nn.NewMLP(tensor.NewKey(0), []int{-3, 4}, nn.MLPOptions{}) },
		"nn.NewMLP: sizes [-3 4]: size 0 is -3, want a positive width")
}
