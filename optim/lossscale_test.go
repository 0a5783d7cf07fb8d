package optim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

func TestDynamicLossScaleAdjust(t *testing.T) {
	s := optim.LossScale(optim.DynamicLossScale{Scale: 8, Period: 3})
	steps := []struct {
		finite  bool
		scale   float32
		counter int
	}{
		{true, 8, 1}, {true, 8, 2}, {true, 16, 0}, // grows after Period finite steps
		{false, 8, 0}, {true, 8, 1}, {false, 4, 0}, // shrinks and restarts on overflow
		{false, 2, 0}, {false, 1, 0}, {false, 1, 0}, // not below MinScale (1)
	}
	for i, st := range steps {
		s = s.Adjust(st.finite)
		d := s.(optim.DynamicLossScale)
		require.Equal(t, st.scale, d.Scale, "step %d", i)
		require.Equal(t, st.counter, d.Counter, "step %d", i)
	}
	d := optim.NewDynamicLossScale(4)
	require.Equal(t, float32(4), d.Factor())
	for range 1999 {
		d = d.Adjust(true).(optim.DynamicLossScale)
	}
	require.Equal(t, float32(4), d.Scale, "jmp's default period is 2000")
	require.Equal(t, float32(8), d.Adjust(true).Factor())
	require.Equal(t, float32(3), optim.StaticLossScale{Scale: 3}.Adjust(false).Factor())
	require.Equal(t, float32(1), optim.NoOpLossScale{}.Adjust(true).Factor())
	require.PanicsWithValue(t, "optim.NewDynamicLossScale: initial scale 0 is not positive and finite", func() { optim.NewDynamicLossScale(0) })
}

type f16Model struct{ W *tensor.Tensor }

// f16Grads differentiates mean(W·x) computed in float16 with x = 1e-4:
// each gradient is x/4096 ≈ 2.4e-8, below half float16's smallest
// subnormal (2^-25), so without scaling it flushes to zero.
func f16Grads(s optim.LossScale) f16Model {
	const n = 4096
	x := tensor.Full(tensor.Float16, 1e-4, n)
	vg := autodiff.ValueAndGrad(func(m f16Model) *tensor.Tensor {
		l := tensor.Mean(tensor.Mul(tensor.Convert(m.W, tensor.Float16), x))
		return optim.ScaleLoss(s, tensor.Convert(l, tensor.Float32))
	})
	_, g := vg(f16Model{tensor.Ones(tensor.Float32, n)})
	return g
}

func TestLossScalingRescuesFloat16Gradients(t *testing.T) {
	const n = 4096
	x16 := tensor.Full(tensor.Float16, 1e-4, 1).Float64s()[0] // 1e-4 rounded to float16
	want := x16 / n

	g := f16Grads(optim.NoOpLossScale{})
	require.Equal(t, tensor.Float32, g.W.DType())
	require.Equal(t, 0.0, tensor.Max(tensor.Abs(g.W)).Item(), "unscaled float16 gradients underflow")

	s := optim.StaticLossScale{Scale: 1 << 15}
	g = optim.Unscale(s, f16Grads(s))
	for _, v := range g.W.Float64s() {
		require.InEpsilon(t, want, v, 0x1p-11, "scaled and unscaled: float16 accuracy")
	}
	require.True(t, optim.AllFinite(g))
	require.False(t, optim.AllFinite(f16Model{tensor.FromFloat32([]float32{1, float32(want) / 0})}))
}

// TestStepScaled: a scale too large for float16 overflows the cotangents
// (2^20 > 65504); the step is skipped and the scale halves until it fits.
func TestStepScaled(t *testing.T) {
	opt := optim.SGD(optim.Constant(1e6))
	var s optim.LossScale = optim.NewDynamicLossScale(1 << 20)
	model := f16Model{tensor.Ones(tensor.Float32, 4096)}
	state := opt.Init(model)
	skipped := 0
	for {
		var applied bool
		before := model
		model, state, s, applied = optim.StepScaled(opt, s, model, f16Grads(s), state)
		if applied {
			break
		}
		skipped++
		require.Same(t, before.W, model.W, "a skipped step leaves the parameters")
		require.Less(t, skipped, 10)
	}
	require.Equal(t, 5, skipped, "2^20 .. 2^16 overflow float16, 2^15 fits")
	require.Equal(t, float32(1<<15), s.Factor())
	// lr 1e6 · 2.44e-8: the weights moved by about -0.0244.
	require.InDelta(t, 1-1e6*1e-4/4096, model.W.Float64s()[0], 1e-3)
}
