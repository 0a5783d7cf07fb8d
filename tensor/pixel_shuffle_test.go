package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// TestPixelShuffle: each element lands where PyTorch's formula says,
// (c·r² + i·r + j, h, w) to (c, h·r + i, w·r + j), over extra batch
// dimensions; PixelUnshuffle undoes it; gradients by finite differences.
func TestPixelShuffle(t *testing.T) {
	const r = 3
	x := sample(tensor.Float32, 1, 2, 2*r*r, 2, 3)
	y := tensor.PixelShuffle(x, r)
	require.Equal(t, []int{2, 2, 2 * r, 3 * r}, y.Shape())
	forEach(x.Shape(), func(idx []int) {
		b, ch, h, w := idx[0], idx[1], idx[2], idx[3]
		c, i, j := ch/(r*r), ch%(r*r)/r, ch%r
		require.Equal(t, x.At(idx...), y.At(b, c, h*r+i, w*r+j), "%v", idx)
	})
	require.Equal(t, x.Float32s(), tensor.PixelUnshuffle(y, r).Float32s())
	require.Equal(t, x.Shape(), tensor.PixelUnshuffle(y, r).Shape())
	require.Same(t, x, tensor.PixelShuffle(x, 1))
	require.Same(t, x, tensor.PixelUnshuffle(x, 1))

	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.PixelShuffle(xs[0], 2) }
	checkGradOf(t, f, sample(tensor.Float32, 2, 8, 2, 3))
	u := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.PixelUnshuffle(xs[0], 2) }
	checkGradOf(t, u, sample(tensor.Float32, 3, 1, 2, 4, 2))

	require.PanicsWithValue(t, "tensor.PixelShuffle: f32[2,6,2,3] by 2: want [..., C·4, H, W]",
		func() { tensor.PixelShuffle(sample(tensor.Float32, 1, 2, 6, 2, 3), 2) })
	require.PanicsWithValue(t, "tensor.PixelShuffle: f32[4,2] by 2: want [..., C·4, H, W]",
		func() { tensor.PixelShuffle(sample(tensor.Float32, 1, 4, 2), 2) })
	require.PanicsWithValue(t, "tensor.PixelShuffle: f32[2,4,2,3] by 0: the factor must be at least 1",
		func() { tensor.PixelShuffle(sample(tensor.Float32, 1, 2, 4, 2, 3), 0) })
	require.PanicsWithValue(t, "tensor.PixelUnshuffle: f32[1,4,3] by 2: want [..., C, H·2, W·2]",
		func() { tensor.PixelUnshuffle(sample(tensor.Float32, 1, 1, 4, 3), 2) })
}

// The nil-operand calls of PixelShuffle and PixelUnshuffle
// (TestNilOperands).
func init() {
	nilOps["PixelShuffle"] = func(t []*tensor.Tensor) { tensor.PixelShuffle(t[0], 2) }
	nilOps["PixelUnshuffle"] = func(t []*tensor.Tensor) { tensor.PixelUnshuffle(t[0], 2) }
}
