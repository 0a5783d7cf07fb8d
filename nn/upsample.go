package nn

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Upsample resizes the spatial dimensions of channels-first batches
// x [N, C, spatial...] (the layout of Conv), PyTorch's nn.Upsample: to
// Size, or by ScaleFactor (one value per spatial dimension or one for
// all; give one of the two), by Mode: tensor.InterpNearest (the zero
// Mode, PyTorch's default mode="nearest"), tensor.InterpNearestExact
// ("nearest-exact"), tensor.InterpLinear ("linear", "bilinear" and
// "trilinear", by the number of spatial dimensions), tensor.InterpCubic
// ("bicubic") or tensor.InterpArea ("area"), with AlignCorners for the
// linear and cubic modes. It has no parameters; see tensor.Interpolate
// for the indices and weights.
type Upsample struct {
	Size         []int             `pytree:"static"`
	ScaleFactor  []float64         `pytree:"static"`
	Mode         tensor.InterpMode `pytree:"static"`
	AlignCorners bool              `pytree:"static"`
	// RecomputeScale interpolates with scale in/out when the size comes
	// from ScaleFactor (recompute_scale_factor=True).
	RecomputeScale bool `pytree:"static"`
}

// Forward resizes x [N, C, spatial...].
func (u Upsample) Forward(x *tensor.Tensor) *tensor.Tensor {
	if x == nil {
		panic("nn.Upsample: x is nil")
	}
	if x.Rank() < 3 {
		panic(fmt.Sprintf("nn.Upsample: x %v: want [N, C, spatial...]", x))
	}
	return tensor.Interpolate(x, tensor.InterpSpec{Mode: u.Mode, Size: u.Size, ScaleFactor: u.ScaleFactor,
		AlignCorners: u.AlignCorners, RecomputeScale: u.RecomputeScale})
}

// Call is Forward, ignoring key; it makes an Upsample a Module.
func (u Upsample) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return u.Forward(x) }

// PixelShuffle rearranges x [..., C·R², H, W] into [..., C, H·R, W·R]
// (PyTorch's nn.PixelShuffle, the upsampling of a sub-pixel
// convolution); see tensor.PixelShuffle. It has no parameters.
type PixelShuffle struct {
	R int `pytree:"static"`
}

// Forward applies tensor.PixelShuffle(x, p.R).
func (p PixelShuffle) Forward(x *tensor.Tensor) *tensor.Tensor { return tensor.PixelShuffle(x, p.R) }

// Call is Forward, ignoring key; it makes a PixelShuffle a Module.
func (p PixelShuffle) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return p.Forward(x) }

// PixelUnshuffle is PixelShuffle's inverse (PyTorch's nn.PixelUnshuffle):
// x [..., C, H·R, W·R] to [..., C·R², H, W].
type PixelUnshuffle struct {
	R int `pytree:"static"`
}

// Forward applies tensor.PixelUnshuffle(x, p.R).
func (p PixelUnshuffle) Forward(x *tensor.Tensor) *tensor.Tensor {
	return tensor.PixelUnshuffle(x, p.R)
}

// Call is Forward, ignoring key; it makes a PixelUnshuffle a Module.
func (p PixelUnshuffle) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return p.Forward(x) }

// Unfold extracts sliding blocks of x [N, C, spatial...] as columns
// [N, C·K, L] (PyTorch's nn.Unfold, im2col); see tensor.Unfold. It has no
// parameters.
type Unfold struct {
	Spec tensor.UnfoldSpec `pytree:"static"`
}

// Forward applies tensor.Unfold(x, u.Spec).
func (u Unfold) Forward(x *tensor.Tensor) *tensor.Tensor { return tensor.Unfold(x, u.Spec) }

// Call is Forward, ignoring key; it makes an Unfold a Module.
func (u Unfold) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return u.Forward(x) }

// Fold sums columns [N, C·K, L] into images [N, C, Size...] (PyTorch's
// nn.Fold, col2im), the transpose of Unfold; see tensor.Fold.
type Fold struct {
	Size []int             `pytree:"static"`
	Spec tensor.UnfoldSpec `pytree:"static"`
}

// Forward applies tensor.Fold(x, f.Size, f.Spec).
func (f Fold) Forward(x *tensor.Tensor) *tensor.Tensor { return tensor.Fold(x, f.Size, f.Spec) }

// Call is Forward, ignoring key; it makes a Fold a Module.
func (f Fold) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return f.Forward(x) }
