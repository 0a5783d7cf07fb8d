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

// Six tokens on the hand MoE (expert e multiplies by e+1) with k = 1 and
// probability gates, capacity factor 1. Expert 0 is chosen by tokens 0, 1,
// 2 and 4 (probabilities ordered 2 > 0 > 1 > 4).
//   - global rule: capacity ceil(6/3) = 2, expert 0 keeps 2 and 0;
//     1 and 4 are dropped.
//   - two senders {0,1,2} and {3,4,5}: capacity ceil(3/3) = 1 each; sender 0
//     keeps only 2 for expert 0, sender 1 keeps 4 (alone there): 0 and 1
//     are dropped.
func TestMoEPerSenderHandWorked(t *testing.T) {
	x := tensor.FromFloat64([]float64{2, 0, 0, 1, 0, 0, 3, 0, 0, 0, 1, 0, 0.5, 0, 0, 0, 0, 1}, 6, 3)
	p := func(v float64) float64 { return math.Exp(v) / (math.Exp(v) + 2) } // softmax([v,0,0])[0]
	// Outputs when kept: gate × (e+1) × token.
	kept := [][]float64{
		{2 * p(2), 0, 0}, {p(1), 0, 0}, {3 * p(3), 0, 0},
		{0, 2 * p(1), 0}, {0.5 * p(0.5), 0, 0}, {0, 0, 3 * p(1)},
	}
	for _, c := range []struct {
		senders  int
		capacity int
		dropped  []bool
	}{
		{0, 2, []bool{false, true, false, false, true, false}},
		{1, 2, []bool{false, true, false, false, true, false}},
		{2, 1, []bool{true, true, false, false, false, false}},
		// Six senders of one token: capacity ceil(1/3) = 1, nothing drops.
		{6, 1, []bool{false, false, false, false, false, false}},
	} {
		m := handMoE(1, 1, false, nn.GateSoftmaxTopK)
		m.Senders = c.senders
		out := m.Forward(x)
		assert.Equal(t, c.capacity, out.Capacity, "senders %d", c.senders)
		assert.Equal(t, c.dropped, out.Dropped.Bools(), "senders %d", c.senders)
		var want []float64
		for i, d := range c.dropped {
			if d {
				want = append(want, 0, 0, 0)
			} else {
				want = append(want, kept[i]...)
			}
		}
		assert.InDeltaSlice(t, want, toF64(out.Output.Float32s()), 1e-6, "senders %d", c.senders)
	}
}

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, e := range v {
		out[i] = float64(e)
	}
	return out
}

// With S senders the layer equals S global-rule layers, one per group of
// tokens, in output, dropped choices and gradients; the auxiliary losses
// stay those of the whole batch.
func TestMoEPerSenderEqualsGroups(t *testing.T) {
	for _, c := range []struct {
		senders, k int
		cf         float64
		gating     nn.Gating
	}{
		{2, 2, 1.0, nn.GateTopKSoftmax},
		{4, 2, 1.25, nn.GateSoftmaxTopK},
		{8, 1, 1.0, nn.GateSoftmaxTopK},
		{3, 3, 0.5, nn.GateTopKSoftmax},
	} {
		const N, D, H, E = 48, 6, 5, 8
		m := nn.NewMoE(tensor.NewKey(3), D, H, E, nn.MoEOptions{TopK: c.k, CapacityFactor: c.cf, Gating: c.gating})
		x := randn(11, N, D)
		ms := m
		ms.Senders = c.senders
		got := ms.Forward(x)
		whole := m.Forward(x)
		n := N / c.senders
		var outs, drops []*tensor.Tensor
		for s := range c.senders {
			o := m.Forward(tensor.SliceAxis(x, 0, s*n, (s+1)*n))
			outs, drops = append(outs, o.Output), append(drops, o.Dropped)
			assert.Equal(t, o.Capacity, got.Capacity)
		}
		assert.InDeltaSlice(t, toF64(tensor.Concat(0, outs...).Float32s()), toF64(got.Output.Float32s()), 1e-5)
		assert.Equal(t, tensor.Concat(0, drops...).Bools(), got.Dropped.Bools())
		assert.InDelta(t, whole.AuxLoss.Item(), got.AuxLoss.Item(), 1e-6)
		assert.InDelta(t, whole.RouterZLoss.Item(), got.RouterZLoss.Item(), 1e-6)
		anyDropped := false
		for _, d := range got.Dropped.Bools() {
			anyDropped = anyDropped || d
		}
		assert.True(t, anyDropped, "the case should drop something")

		// Gradients of Σ c ⊙ output.
		cot := randn(12, N, D)
		loss := func(out func(nn.MoE) *tensor.Tensor) func(nn.MoE) *tensor.Tensor {
			return func(mm nn.MoE) *tensor.Tensor { return tensor.Sum(tensor.Mul(out(mm), cot)) }
		}
		_, g1 := autodiff.ValueAndGrad(loss(func(mm nn.MoE) *tensor.Tensor { return mm.Forward(x).Output }))(ms)
		_, g2 := autodiff.ValueAndGrad(loss(func(mm nn.MoE) *tensor.Tensor {
			var outs []*tensor.Tensor
			for s := range c.senders {
				outs = append(outs, mm.Forward(tensor.SliceAxis(x, 0, s*n, (s+1)*n)).Output)
			}
			return tensor.Concat(0, outs...)
		}))(m)
		for _, pair := range [][2]*tensor.Tensor{{g1.Router, g2.Router}, {g1.Up, g2.Up}, {g1.Down, g2.Down}} {
			assert.InDeltaSlice(t, toF64(pair[1].Float32s()), toF64(pair[0].Float32s()), 1e-5)
		}
	}
}

func TestMoEPerSenderPanics(t *testing.T) {
	m := handMoE(1, 1, false, nn.GateSoftmaxTopK)
	m.Senders = 4
	require.PanicsWithValue(t, "nn.MoE: x f32[6,3]: 6 tokens do not split into 4 senders", func() { m.Forward(randn(1, 6, 3)) })
	m.Senders = -1
	require.PanicsWithValue(t, "nn.MoE: negative Senders -1", func() { m.Forward(randn(1, 6, 3)) })
}
