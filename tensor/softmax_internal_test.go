package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSoftmaxExp(t *testing.T) {
	assert.Equal(t, 1.0, softmaxExp(0))
	assert.Equal(t, 0.0, softmaxExp(math.Inf(-1)))
	assert.Equal(t, 0.0, softmaxExp(-709))
	assert.True(t, math.IsNaN(softmaxExp(math.NaN())))
	assert.Equal(t, math.Exp(3), softmaxExp(3))
	worst := 0.0
	for i := 0; i <= 2_000_000; i++ {
		x := -float64(i) * 0.000354 // down to -708
		want := math.Exp(x)
		got := softmaxExp(x)
		require.False(t, math.IsNaN(got) || math.IsInf(got, 0), "x=%v", x)
		worst = max(worst, math.Abs(got-want)/want)
	}
	assert.Less(t, worst, 1e-8)
	// Rounded to float32 it is the float32 of math.Exp, or one ulp away.
	for i := 0; i < 100_000; i++ {
		x := -float64(i) * 0.001
		a, b := math.Float32bits(float32(math.Exp(x))), math.Float32bits(float32(softmaxExp(x)))
		require.LessOrEqual(t, max(a, b)-min(a, b), uint32(1), "x=%v", x)
	}
}
