package nn

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// GroupNormOptions configures NewGroupNorm. The zero value gives
// Equinox's eqx.nn.GroupNorm: eps 1e-5, a weight of ones and a bias of
// zeros per channel.
type GroupNormOptions struct {
	// Eps is added to the variance; 0 means 1e-5. It is a float64, used
	// at full precision on float64 inputs (rounded to float32 for the
	// other dtypes).
	Eps float64
	// NoAffine leaves out the weight and bias (channelwise_affine=False).
	NoAffine bool
	// Axis is the logical name of the channel dimension of the weight and
	// bias; "" sets none.
	Axis string
}

// GroupNorm splits the channels of each example into Groups groups and
// normalises each group by its mean and variance over its channels and
// spatial positions, then scales and shifts each channel (eqx.nn.GroupNorm,
// PyTorch's GroupNorm): x [N, C, spatial...]. With one group it is a
// LayerNorm over all but the batch dimension; with C groups,
// InstanceNorm. It needs no State: its statistics are the example's own.
type GroupNorm struct {
	Weight *tensor.Tensor // f32[C], or nil
	Bias   *tensor.Tensor // f32[C], or nil
	Groups int
	Eps    float64
}

// NewGroupNorm returns a GroupNorm of groups groups over channels channels
// (which groups must divide).
func NewGroupNorm(groups, channels int, opts GroupNormOptions) GroupNorm {
	if groups < 1 || channels < 1 || channels%groups != 0 {
		panic(fmt.Sprintf("nn.NewGroupNorm: %d groups of %d channels: want positive counts, the groups dividing the channels", groups, channels))
	}
	g := GroupNorm{Groups: groups, Eps: opts.Eps}
	if g.Eps == 0 {
		g.Eps = defaultEps
	}
	if !opts.NoAffine {
		g.Weight = withAxes(tensor.Ones(tensor.Float32, channels), opts.Axis)
		g.Bias = withAxes(tensor.Zeros(tensor.Float32, channels), opts.Axis)
	}
	return g
}

// Forward normalises x [N, C, spatial...].
func (g GroupNorm) Forward(x *tensor.Tensor) *tensor.Tensor {
	requireInput("nn.GroupNorm", "x", x)
	if g.Groups <= 0 {
		panic(fmt.Sprintf("nn.GroupNorm: Groups is %d (the zero GroupNorm has no groups; build it with nn.NewGroupNorm)", g.Groups))
	}
	if !x.DType().IsFloat() || x.Rank() < 2 || x.Dim(1)%g.Groups != 0 || (g.Weight != nil && x.Dim(1) != g.Weight.Dim(0)) {
		panic(fmt.Sprintf("nn.GroupNorm: x %v: want float [N, C, ...] with C divisible by %d groups", x, g.Groups))
	}
	requireParamDType("nn.GroupNorm", x, g.Weight)
	shape := x.Shape()
	h := tensor.Reshape(x, shape[0], g.Groups, -1)
	hc := tensor.Sub(h, tensor.MeanKeep(h, -1))
	variance := tensor.MeanKeep(tensor.Square(hc), -1)
	y := tensor.Reshape(tensor.Mul(hc, tensor.Rsqrt(tensor.Add(variance, constLike(variance, g.Eps)))), shape...)
	cs := channelShape(x)
	if g.Weight != nil {
		y = tensor.Mul(y, tensor.Reshape(g.Weight, cs...))
	}
	if g.Bias != nil {
		y = tensor.Add(y, tensor.Reshape(g.Bias, cs...))
	}
	return y
}

// Call is Forward, ignoring key; it makes a GroupNorm a Module.
func (g GroupNorm) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return g.Forward(x) }
