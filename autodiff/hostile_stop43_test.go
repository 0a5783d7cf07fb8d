package autodiff_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// Hostile uses of OnGradient (stop 43): a nil hook is no hook; a hook that
// panics fails its call with its own panic and leaves nothing behind for
// the next call; leaves that are one tensor twice (tied weights) are
// reported once per position; float64 leaves are reported with float64
// gradients; a loss that depends on no leaf reports none.
func TestHostileOnGradient(t *testing.T) {
	type two struct{ A, B *tensor.Tensor }
	m := two{tensor.FromFloat32([]float32{1, 2, 3}, 3), tensor.FromFloat32([]float32{4, 5, 6}, 3)}
	loss := func(p two) *tensor.Tensor { return tensor.Sum(tensor.Mul(p.A, p.B)) }
	record := func(seen *[]int) autodiff.Option {
		return autodiff.OnGradient(func(i int, _ *tensor.Tensor) { *seen = append(*seen, i) })
	}

	_, g := autodiff.ValueAndGrad(loss, autodiff.OnGradient(nil))(m)
	assert.Equal(t, []float32{4, 5, 6}, g.A.Float32s())

	require.PanicsWithValue(t, "hook failed", func() {
		autodiff.ValueAndGrad(loss, autodiff.OnGradient(func(int, *tensor.Tensor) { panic("hook failed") }))(m)
	})
	var seen []int
	_, g = autodiff.ValueAndGrad(loss, record(&seen))(m)
	assert.ElementsMatch(t, []int{0, 1}, seen, "after a hook panicked")
	assert.Equal(t, []float32{1, 2, 3}, g.B.Float32s())

	seen = nil
	_, g = autodiff.ValueAndGrad(loss, record(&seen))(two{m.A, m.A})
	assert.ElementsMatch(t, []int{0, 1}, seen, "tied")
	assert.Equal(t, []float32{1, 2, 3}, g.A.Float32s())
	assert.Equal(t, []float32{1, 2, 3}, g.B.Float32s())

	var dtypes []tensor.DType
	m64 := two{tensor.FromFloat64s([]float64{1, 2}, 2), tensor.FromFloat64s([]float64{3, 4}, 2)}
	_, g = autodiff.ValueAndGrad(loss, autodiff.OnGradient(func(_ int, x *tensor.Tensor) { dtypes = append(dtypes, x.DType()) }))(m64)
	assert.Equal(t, []tensor.DType{tensor.Float64, tensor.Float64}, dtypes)
	assert.Equal(t, []float64{3, 4}, g.A.Float64s())

	seen = nil
	autodiff.ValueAndGrad(func(two) *tensor.Tensor { return tensor.Scalar(1) }, record(&seen))(m)
	assert.Empty(t, seen, "a constant loss")
}
