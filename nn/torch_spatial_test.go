package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// The spatial operations against PyTorch 1.13, in float64 on both sides:
// F.pad's reflect, replicate and circular modes, Conv's padding_mode,
// F.interpolate and nn.Upsample, pixel shuffle and unshuffle, unfold and
// fold.
// testdata/torch_spatial.py wrote the inputs, outputs and the gradients
// of Σ y·g in testdata/torch_spatial.json.

var padModes = map[string]tensor.PadMode{"reflect": tensor.PadReflect, "replicate": tensor.PadReplicate, "circular": tensor.PadCircular}

var interpModes = map[string]tensor.InterpMode{"nearest": tensor.InterpNearest, "nearest-exact": tensor.InterpNearestExact,
	"linear": tensor.InterpLinear, "bilinear": tensor.InterpLinear, "trilinear": tensor.InterpLinear,
	"bicubic": tensor.InterpCubic, "area": tensor.InterpArea}

// floats reads a config value that is a number or a list of numbers.
func (c torchCase) floats(key string) []float64 {
	switch v := c.Config[key].(type) {
	case float64:
		return []float64{v}
	case []any:
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = x.(float64)
		}
		return out
	}
	return nil
}

// fnGrads returns f(x) and the gradient of Σ f(x)·g with respect to x.
func fnGrads(f func(*tensor.Tensor) *tensor.Tensor, x, g *tensor.Tensor) (y, dx *tensor.Tensor) {
	vg := autodiff.ValueAndGradAux(func(x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
		y := f(x)
		return tensor.Sum(tensor.Mul(y, g)), y
	})
	_, y, dx = vg(x)
	return y, dx
}

func TestTorchSpatial(t *testing.T) {
	cases := loadTorchFile(t, "torch_spatial.json")
	kinds := map[string]int{}
	for _, c := range cases {
		kinds[c.Kind]++
		t.Run(c.Name, func(t *testing.T) {
			x, g := c.f64(t, "x"), c.f64(t, "g")
			var f func(*tensor.Tensor) *tensor.Tensor
			switch c.Kind {
			case "pad":
				mode, ok := padModes[c.Config["mode"].(string)]
				require.True(t, ok)
				f = func(x *tensor.Tensor) *tensor.Tensor { return tensor.PadWith(x, c.pairs("pads"), mode) }
			case "conv":
				checkTorchConv(t, c, x, g, padModes[c.Config["mode"].(string)])
				return
			case "interp", "upsample":
				u := nn.Upsample{Size: c.ints("size", x.Rank()-2), ScaleFactor: c.floats("scale_factor"),
					AlignCorners: c.flag("align_corners"), RecomputeScale: c.flag("recompute_scale_factor")}
				if m, ok := c.Config["mode"].(string); ok {
					u.Mode = interpModes[m]
				}
				f = u.Forward
			case "pixel_shuffle":
				f = nn.PixelShuffle{R: int(c.num("r"))}.Forward
			case "pixel_unshuffle":
				f = nn.PixelUnshuffle{R: int(c.num("r"))}.Forward
			case "unfold", "fold":
				spec := tensor.UnfoldSpec{Kernel: c.ints("kernel", 2), Dilation: c.ints("dilation", 2),
					Padding: c.ints("padding", 2), Stride: c.ints("stride", 2)}
				if c.Kind == "unfold" {
					f = nn.Unfold{Spec: spec}.Forward
				} else {
					f = nn.Fold{Size: c.ints("size", 2), Spec: spec}.Forward
				}
			default:
				t.Fatalf("unknown kind %q", c.Kind)
			}
			y, dx := fnGrads(f, x, g)
			require.Equal(t, tensor.Float64, y.DType())
			requireTorch64(t, c, "y", y)
			if c.flag("torch_backward_inconsistent") {
				// PyTorch's bicubic backward copies the cotangent where
				// its forward interpolated (torch_spatial.py): gonox's
				// gradient is that of the forward both agree on.
				require.NoError(t, autodiff.CheckGrad(func(xs []*tensor.Tensor) *tensor.Tensor {
					return tensor.Sum(tensor.Mul(f(xs[0]), g))
				}, []*tensor.Tensor{x}, autodiff.CheckOptions{}))
				return
			}
			requireTorch64(t, c, "dx", dx)
		})
	}
	require.Equal(t, map[string]int{"pad": 9, "conv": 15, "interp": 40, "upsample": 1, "pixel_shuffle": 2, "pixel_unshuffle": 2,
		"unfold": 3, "fold": 3}, kinds)
}
