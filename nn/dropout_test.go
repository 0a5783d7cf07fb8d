package nn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func TestDropoutStatistics(t *testing.T) {
	const n = 200_000
	for i, rate := range []float64{0.1, 0.5, 0.9} {
		t.Run(fmt.Sprintf("rate=%g", rate), func(t *testing.T) {
			d := nn.NewDropout(rate)
			x := tensor.AddScalar(tensor.Uniform(tensor.NewKey(uint64(i)), n), 1) // in [1, 2)
			y := d.Forward(x, tensor.NewKey(100+uint64(i)))
			require.Equal(t, x.Shape(), y.Shape())
			xv, yv := x.Float32s(), y.Float32s()
			q := float32(1 - rate)
			// The mask is Bernoulli(key, 1-rate), as in Equinox, and the
			// survivors are scaled by exactly 1/q, as x/q in float32.
			mask := tensor.Bernoulli(tensor.NewKey(100+uint64(i)), q, n).Bools()
			kept, bad := 0, -1
			for j := range yv {
				want := float32(0)
				if mask[j] {
					kept++
					want = xv[j] / q
				}
				if yv[j] != want && bad < 0 {
					bad = j
				}
			}
			require.Equal(t, -1, bad, "first wrong element")
			p := 1 - rate
			// Binomial standard deviation √(n p (1-p)); allow 5 of them.
			assert.InDelta(t, p*n, float64(kept), 5*math.Sqrt(n*p*(1-p)), "keep count")
			// The mean is preserved (inverted dropout).
			mx, _ := meanStd(x.Float64s())
			my, _ := meanStd(y.Float64s())
			ex2 := 0.0
			for _, v := range xv {
				ex2 += float64(v) * float64(v) / n
			}
			// mean(y) - mean(x) has variance E[x²](1-p)/p/n; allow 5 standard errors.
			assert.InDelta(t, mx, my, 5*math.Sqrt(ex2*(1-p)/p/n))
		})
	}
}

func TestDropoutKeys(t *testing.T) {
	d := nn.NewDropout(0.5)
	x := tensor.Ones(tensor.Float32, 64)
	k1, k2 := tensor.NewKey(7).Split2()
	a := d.Forward(x, k1).Float32s()
	assert.Equal(t, a, d.Forward(x, k1).Float32s(), "same key, same mask")
	assert.NotEqual(t, a, d.Forward(x, k2).Float32s(), "another key, another mask")
	assert.Equal(t, a, d.Call(x, k1).Float32s())
}

func TestDropoutIdentityModes(t *testing.T) {
	x := randn(1, 3, 4)
	inf := nn.Dropout{Rate: 0.7, Inference: true}
	assert.Same(t, x, inf.Forward(x, tensor.NewKey(0)), "inference mode returns x itself")
	assert.Same(t, x, nn.NewDropout(0).Forward(x, tensor.NewKey(0)), "rate 0 returns x itself")
	assert.Same(t, x, nn.Dropout{}.Forward(x, tensor.NewKey(0)), "the zero Dropout is the identity")
}

func TestDropoutRateOne(t *testing.T) {
	x := randn(2, 5)
	d := nn.NewDropout(1)
	assert.Equal(t, make([]float32, 5), d.Forward(x, tensor.NewKey(0)).Float32s())
	_, g := autodiff.ValueAndGrad(func(x *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(d.Forward(x, tensor.NewKey(0)))
	})(x)
	assert.Equal(t, make([]float32, 5), g.Float32s(), "gradient is zero, not NaN")
}

func TestDropoutGrad(t *testing.T) {
	d := nn.NewDropout(0.3)
	key := tensor.NewKey(5)
	x := randn(3, 4, 6)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return d.Forward(xs[0], key) }, x)
	// The gradient of the sum is mask/q.
	_, g := autodiff.ValueAndGrad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(d.Forward(x, key)) })(x)
	mask := tensor.Bernoulli(key, float32(1-0.3), 4, 6).Bools()
	for i, v := range g.Float32s() {
		want := float32(0)
		if mask[i] {
			want = 1 / float32(0.7)
		}
		assert.InDelta(t, want, v, 1e-6)
	}
}

func TestDropoutPanics(t *testing.T) {
	requirePanicContains(t, func() { nn.NewDropout(1.5) }, "nn.NewDropout: rate 1.5 is not in [0, 1]")
	requirePanicContains(t, func() { nn.NewDropout(math.NaN()) }, "nn.NewDropout: rate NaN")
	requirePanicContains(t, func() { nn.Dropout{Rate: -0.1}.Forward(randn(0, 2), tensor.NewKey(0)) }, "nn.Dropout: rate -0.1 is not in [0, 1]")
	requirePanicContains(t, func() { nn.NewDropout(0.5).Forward(tensor.Arange(3), tensor.NewKey(0)) }, "nn.Dropout: x i32[3]: want float32")
}

// A model with dropout in many kinds of places.
type dropModel struct {
	Seq     nn.Sequential
	Ptr     *nn.Dropout
	Arr     [2]nn.Dropout
	ByName  map[string]nn.Dropout
	Any     any
	Lin     nn.Linear
	private nn.Dropout // unexported: invisible to pytree and left alone
}

func TestInferenceMode(t *testing.T) {
	k := tensor.NewKey(0)
	m := dropModel{
		Seq:     nn.NewSequential(nn.NewLinear(k, 2, 2, nn.LinearOptions{}), nn.NewDropout(0.1), nn.Relu),
		Ptr:     &nn.Dropout{Rate: 0.2},
		Arr:     [2]nn.Dropout{{Rate: 0.3}, {Rate: 0.4}},
		ByName:  map[string]nn.Dropout{"a": {Rate: 0.5}},
		Any:     nn.Dropout{Rate: 0.6},
		Lin:     nn.NewLinear(k, 2, 3, nn.LinearOptions{}),
		private: nn.Dropout{Rate: 0.7},
	}
	before := pytree.Format(m)
	ev := nn.InferenceMode(m, true)
	assert.Equal(t, before, pytree.Format(m), "the model itself is not changed")
	assert.True(t, ev.Seq.Layers[1].(nn.Dropout).Inference)
	assert.True(t, ev.Ptr.Inference)
	assert.NotSame(t, m.Ptr, ev.Ptr)
	assert.True(t, ev.Arr[0].Inference && ev.Arr[1].Inference)
	assert.True(t, ev.ByName["a"].Inference)
	assert.True(t, ev.Any.(nn.Dropout).Inference)
	assert.False(t, ev.private.Inference)
	assert.False(t, m.Seq.Layers[1].(nn.Dropout).Inference)
	assert.False(t, m.ByName["a"].Inference)
	// Rates and tensors are kept; tensors are shared.
	assert.Equal(t, 0.1, ev.Seq.Layers[1].(nn.Dropout).Rate)
	assert.Same(t, m.Lin.W, ev.Lin.W)
	assert.Same(t, m.Seq.Layers[0].(nn.Linear).W, ev.Seq.Layers[0].(nn.Linear).W)
	// And back.
	tr := nn.InferenceMode(ev, false)
	assert.False(t, tr.Seq.Layers[1].(nn.Dropout).Inference)
	assert.False(t, tr.Ptr.Inference)
	assert.Equal(t, before, pytree.Format(tr))
	// Pointers to models and interfaces work too.
	pm := nn.InferenceMode(&m, true)
	assert.True(t, pm.Ptr.Inference)
	assert.False(t, m.Ptr.Inference)
	var mod nn.Module = nn.NewDropout(0.5)
	assert.True(t, nn.InferenceMode(mod, true).(nn.Dropout).Inference)
	// A model without dropout comes back as is.
	lin := nn.NewLinear(k, 2, 3, nn.LinearOptions{})
	assert.Same(t, lin.W, nn.InferenceMode(lin, true).W)
	// Evaluation mode makes the model deterministic and the identity.
	x := randn(1, 4, 2)
	seq := nn.InferenceMode(m.Seq, true)
	want := tensor.Relu(m.Seq.Layers[0].(nn.Linear).Forward(x))
	assert.Equal(t, want.Float32s(), seq.Forward(x, tensor.NewKey(1)).Float32s())
}

type cyclic struct {
	Next *cyclic
	D    nn.Dropout
}

func TestInferenceModeCycle(t *testing.T) {
	c := &cyclic{}
	c.Next = c
	requirePanicContains(t, func() { nn.InferenceMode(c, true) }, "pytree.MapType: cycle: cyclic.Next leads back to a cyclic already on the path")
}
