package nn_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// An upsampling decoder stage: nearest-neighbour doubling, PyTorch's
// nn.Upsample(scale_factor=2), and bilinear resizing to a size with the
// corners aligned.
func ExampleUpsample() {
	x := tensor.FromFloat32([]float32{1, 2, 3, 4}, 1, 1, 2, 2) // [N, C, H, W]
	up := nn.Upsample{ScaleFactor: []float64{2}}
	y := up.Forward(x)
	fmt.Println(y, y.Float32s())
	bilinear := nn.Upsample{Size: []int{3, 3}, Mode: tensor.InterpLinear, AlignCorners: true}
	y = bilinear.Forward(x)
	fmt.Println(y, y.Float32s())
	// Output:
	// f32[1,1,4,4] [1 1 2 2 1 1 2 2 3 3 4 4 3 3 4 4]
	// f32[1,1,3,3] [1 1.5 2 2 2.5 3 3 3.5 4]
}

// A convolution with reflect padding, PyTorch's Conv2d(padding=1,
// padding_mode="reflect"): the border is mirrored, not zero, so a
// kernel of ones sums nine input elements at every position, the
// corners included (on this ramp the sums stay a ramp; zero padding
// would give 12 at the top left).
func ExampleConvOptions_paddingMode() {
	conv := nn.NewConv2d(tensor.NewKey(0), 1, 1, 3, nn.ConvOptions{Padding: nn.Padding(1),
		PaddingMode: tensor.PadReflect, NoBias: true, WeightInit: nn.Constant(1)})
	x := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 1, 3, 3)
	p := tensor.PadWith(x, [][2]int{{0, 0}, {0, 0}, {1, 1}, {1, 1}}, tensor.PadReflect)
	fmt.Println(p, p.Float32s())
	y := conv.Forward(x)
	fmt.Println(y, y.Float32s())
	// Output:
	// f32[1,1,5,5] [5 4 5 6 5 2 1 2 3 2 5 4 5 6 5 8 7 8 9 8 5 4 5 6 5]
	// f32[1,1,3,3] [33 36 39 42 45 48 51 54 57]
}

func TestConvPaddingModePanics(t *testing.T) {
	require.PanicsWithValue(t, "nn.NewConv: padding mode PadMode(4): want PadZeros, PadReflect, PadReplicate or PadCircular",
		func() { nn.NewConv2d(tensor.NewKey(0), 1, 1, 3, nn.ConvOptions{PaddingMode: 4}) })
	c := nn.NewConv1d(tensor.NewKey(0), 1, 1, 3, nn.ConvOptions{Padding: tensor.Pads([2]int{-1, 2}), PaddingMode: tensor.PadCircular})
	require.PanicsWithValue(t, "nn.Conv: padding [[-1 2]] with mode circular: want no negative padding",
		func() { c.Forward(tensor.Zeros(tensor.Float32, 1, 1, 5)) })
	c = nn.NewConv1d(tensor.NewKey(0), 1, 1, 3, nn.ConvOptions{Padding: nn.Padding(3), PaddingMode: tensor.PadReflect})
	require.PanicsWithValue(t, "nn.Conv: x f32[1,1,3], padding [[3 3]] with mode reflect: spatial axis 0 pads 3, which reflect needs below its size 3",
		func() { c.Forward(tensor.Zeros(tensor.Float32, 1, 3)) })
	c = nn.NewConv2d(tensor.NewKey(0), 1, 1, 3, nn.ConvOptions{Padding: tensor.Pads([2]int{1, 1}, [2]int{0, 4}), PaddingMode: tensor.PadCircular})
	require.PanicsWithValue(t, "nn.Conv: x f32[2,1,5,3], padding [[1 1] [0 4]] with mode circular: spatial axis 1 pads 4, which circular needs at most its size 3",
		func() { c.Forward(tensor.Zeros(tensor.Float32, 2, 1, 5, 3)) })
}

// TestConvPaddingModeSingleExample: one example [C, spatial...] is padded
// and convolved as a batch of one; SAME padding with a stride pads as the
// zero mode would, with the mode's values.
func TestConvPaddingModeSingleExample(t *testing.T) {
	for _, mode := range []tensor.PadMode{tensor.PadReflect, tensor.PadReplicate, tensor.PadCircular} {
		c := nn.NewConv2d(tensor.NewKey(1), 2, 3, 3, nn.ConvOptions{Padding: tensor.SamePadding, Stride: []int{2}, PaddingMode: mode})
		x := tensor.Normal(tensor.NewKey(2), 2, 5, 6)
		y := c.Forward(x)
		require.Equal(t, []int{3, 3, 3}, y.Shape())
		// SAME with stride 2 on 5 and 6: 3 outputs each, padding (1, 1)
		// and (0, 1).
		xp := tensor.PadWith(tensor.ExpandDims(x, 0), [][2]int{{0, 0}, {0, 0}, {1, 1}, {0, 1}}, mode)
		want := tensor.Conv(xp, c.Weight, tensor.ConvSpec{Strides: []int{2, 2}})
		want = tensor.Add(want, tensor.Reshape(c.Bias, 1, 3, 1, 1))
		require.Equal(t, tensor.Squeeze(want, 0).Float32s(), y.Float32s(), "%v", mode)
	}
}

func TestUpsampleLayers(t *testing.T) {
	require.PanicsWithValue(t, "nn.Upsample: x f32[2,3]: want [N, C, spatial...]",
		func() { nn.Upsample{Size: []int{4}}.Forward(tensor.Zeros(tensor.Float32, 2, 3)) })
	require.PanicsWithValue(t, "nn.Upsample: x is nil", func() { nn.Upsample{Size: []int{4}}.Forward(nil) })
	x := tensor.Normal(tensor.NewKey(3), 2, 8, 3, 2)
	var m nn.Module = nn.PixelShuffle{R: 2}
	y := m.Call(x, tensor.Key{})
	require.Equal(t, []int{2, 2, 6, 4}, y.Shape())
	m = nn.PixelUnshuffle{R: 2}
	require.Equal(t, x.Float32s(), m.Call(y, tensor.Key{}).Float32s())
	m = nn.Upsample{ScaleFactor: []float64{1.5, 2}, Mode: tensor.InterpNearestExact}
	require.Equal(t, []int{2, 8, 4, 4}, m.Call(x, tensor.Key{}).Shape())
}
