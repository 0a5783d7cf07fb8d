package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// UseCeil with SAME padding, which already rounds the output size up, is
// SAME padding alone (it used to drop the padding: 3×3 windows at stride 2
// on 7×7 gave 3×3, not 4×4).
func TestPoolUseCeilWithSamePadding(t *testing.T) {
	x := tensor.Reshape(tensor.AsType(tensor.Arange(98), tensor.Float32), 1, 2, 7, 7)
	for _, tc := range []struct {
		name string
		make func(opts nn.PoolOptions) nn.Pool
		pad  tensor.Padding
	}{
		{"max SAME", func(o nn.PoolOptions) nn.Pool { return nn.NewMaxPool2d(3, o) }, tensor.SamePadding},
		{"avg SAME", func(o nn.PoolOptions) nn.Pool { return nn.NewAvgPool2d(3, o) }, tensor.SamePadding},
		{"avg SAME_LOWER", func(o nn.PoolOptions) nn.Pool { return nn.NewAvgPool2d(3, o) }, tensor.Padding{Mode: tensor.PadSameLower}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.make(nn.PoolOptions{Stride: []int{2}, Padding: tc.pad}).Forward(x)
			got := tc.make(nn.PoolOptions{Stride: []int{2}, Padding: tc.pad, UseCeil: true}).Forward(x)
			require.Equal(t, []int{1, 2, 4, 4}, got.Shape())
			require.Equal(t, want.Float32s(), got.Float32s())
		})
	}
}
