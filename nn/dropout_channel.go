package nn

import (
	"fmt"
	"math"
	"strings"

	"github.com/gonox/gonox/tensor"
)

// ChannelDropout is PyTorch's Dropout1d, Dropout2d and Dropout3d: during
// training it zeroes whole channels of channels-first inputs, each with
// probability Rate, and scales the kept channels by 1/(1-Rate). x is [N,
// C, spatial...] or, unbatched, [C, spatial...], with Spatial spatial
// dimensions; the draw is one Bernoulli per (example, channel), so the
// same key drops the same channels. Inference (set by InferenceMode on the
// embedded Dropout) or Rate 0 make it the identity.
type ChannelDropout struct {
	Dropout
	// Spatial is the number of spatial dimensions: 1, 2 or 3.
	Spatial int
}

// NewDropout1d returns a ChannelDropout over [N, C, L] (or [C, L]) inputs
// in training mode. It panics unless 0 <= rate <= 1.
func NewDropout1d(rate float64) ChannelDropout { return newChannelDropout(rate, 1) }

// NewDropout2d returns a ChannelDropout over [N, C, H, W] (or [C, H, W])
// inputs in training mode. It panics unless 0 <= rate <= 1.
func NewDropout2d(rate float64) ChannelDropout { return newChannelDropout(rate, 2) }

// NewDropout3d returns a ChannelDropout over [N, C, D, H, W] (or [C, D, H,
// W]) inputs in training mode. It panics unless 0 <= rate <= 1.
func NewDropout3d(rate float64) ChannelDropout { return newChannelDropout(rate, 3) }

func newChannelDropout(rate float64, spatial int) ChannelDropout {
	if !(rate >= 0 && rate <= 1) {
		panic(fmt.Sprintf("nn.NewDropout%dd: rate %g is not in [0, 1]", spatial, rate))
	}
	return ChannelDropout{Dropout: Dropout{Rate: rate}, Spatial: spatial}
}

// Forward applies channel dropout to x with the randomness of key (unused
// in inference mode).
func (d ChannelDropout) Forward(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	op := fmt.Sprintf("nn.Dropout%dd", d.Spatial)
	if d.Spatial < 1 || d.Spatial > 3 {
		panic(fmt.Sprintf("nn.ChannelDropout: Spatial %d, want 1, 2 or 3 (use NewDropout1d, 2d or 3d)", d.Spatial))
	}
	requireInput(op, "x", x)
	if x.Rank() != d.Spatial+1 && x.Rank() != d.Spatial+2 {
		dims := []string{"D", "H", "W"}[3-d.Spatial:]
		if d.Spatial == 1 {
			dims = []string{"L"}
		}
		s := strings.Join(dims, ", ")
		panic(fmt.Sprintf("%s: x %v: want [N, C, %s] or [C, %s]", op, x, s, s))
	}
	return dropoutWith(op, x, key, d.Dropout, x.Rank()-d.Spatial, false)
}

// Call is Forward; it makes a ChannelDropout a Module.
func (d ChannelDropout) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	return d.Forward(x, key)
}

// alphaDropoutSat is -SELU's negative saturation value, scale·alpha: the value
// AlphaDropout sets dropped elements to before its affine correction.
const alphaDropoutSat = 1.7580993408473766

// AlphaDropout is PyTorch's AlphaDropout, the dropout of self-normalizing
// networks (Klambauer et al. 2017) for SELU activations: during training
// each element is dropped with probability Rate = p and set to SELU's
// saturation value -α' (α' = 1.7580993408473766), then every element is
// mapped by a·y + b with
//
//	a = 1/√((1-p)(1 + p·α'²)),  b = a·α'·p
//
// so that inputs of mean 0 and variance 1 keep mean 0 and variance 1.
// Inference (set by InferenceMode on the embedded Dropout) or Rate 0 make
// it the identity; Rate 1 gives zeros, as PyTorch.
type AlphaDropout struct {
	Dropout
}

// NewAlphaDropout returns an AlphaDropout in training mode. It panics
// unless 0 <= rate <= 1.
func NewAlphaDropout(rate float64) AlphaDropout {
	if !(rate >= 0 && rate <= 1) {
		panic(fmt.Sprintf("nn.NewAlphaDropout: rate %g is not in [0, 1]", rate))
	}
	return AlphaDropout{Dropout{Rate: rate}}
}

// Forward applies alpha dropout to x (any shape) with the randomness of
// key, one Bernoulli per element.
func (d AlphaDropout) Forward(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	requireInput("nn.AlphaDropout", "x", x)
	return dropoutWith("nn.AlphaDropout", x, key, d.Dropout, x.Rank(), true)
}

// Call is Forward; it makes an AlphaDropout a Module.
func (d AlphaDropout) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor { return d.Forward(x, key) }

// FeatureAlphaDropout is PyTorch's FeatureAlphaDropout: AlphaDropout
// dropping whole channels of channels-first inputs [N, C, ...] (one
// Bernoulli per example and channel), as ChannelDropout does.
type FeatureAlphaDropout struct {
	Dropout
}

// NewFeatureAlphaDropout returns a FeatureAlphaDropout in training mode.
// It panics unless 0 <= rate <= 1.
func NewFeatureAlphaDropout(rate float64) FeatureAlphaDropout {
	if !(rate >= 0 && rate <= 1) {
		panic(fmt.Sprintf("nn.NewFeatureAlphaDropout: rate %g is not in [0, 1]", rate))
	}
	return FeatureAlphaDropout{Dropout{Rate: rate}}
}

// Forward applies feature alpha dropout to x [N, C, ...] with the
// randomness of key.
func (d FeatureAlphaDropout) Forward(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	const op = "nn.FeatureAlphaDropout"
	requireInput(op, "x", x)
	if x.Rank() < 2 {
		panic(fmt.Sprintf("%s: x %v: want [N, C, ...]", op, x))
	}
	return dropoutWith(op, x, key, d.Dropout, 2, true)
}

// Call is Forward; it makes a FeatureAlphaDropout a Module.
func (d FeatureAlphaDropout) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	return d.Forward(x, key)
}

// dropoutWith applies d to x for op: one Bernoulli draw per element of the
// leading maskDims dimensions of x, broadcast over the rest; inverted
// dropout, or alpha dropout.
func dropoutWith(op string, x *tensor.Tensor, key tensor.Key, d Dropout, maskDims int, alpha bool) *tensor.Tensor {
	if !(d.Rate >= 0 && d.Rate <= 1) {
		panic(fmt.Sprintf("%s: rate %g is not in [0, 1]", op, d.Rate))
	}
	if d.Inference || d.Rate == 0 {
		return x
	}
	if !x.DType().IsFloat() {
		panic(fmt.Sprintf("%s: x %v: want a float x", op, x))
	}
	if d.Rate == 1 {
		return tensor.Mul(x, constLike(x, 0))
	}
	shape := x.Shape()
	mask := make([]int, len(shape))
	for i := range mask {
		mask[i] = 1
	}
	copy(mask, shape[:maskDims])
	q := 1 - d.Rate
	keep := tensor.Bernoulli(key, float32(q), mask...)
	if !alpha {
		return tensor.Where(keep, tensor.Div(x, constLike(x, q)), scalarLike(x, 0))
	}
	a := 1 / math.Sqrt(q*(1+d.Rate*alphaDropoutSat*alphaDropoutSat))
	y := tensor.Where(keep, x, scalarLike(x, -alphaDropoutSat))
	return tensor.Add(tensor.Mul(y, constLike(x, a)), constLike(x, a*alphaDropoutSat*d.Rate))
}
