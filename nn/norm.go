package nn

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// defaultEps is Equinox's (and PyTorch's) epsilon for LayerNorm and RMSNorm.
const defaultEps = 1e-5

// LayerNormOptions configures NewLayerNorm. The zero value gives Equinox's
// eqx.nn.LayerNorm: eps 1e-5, a weight (scale) of ones and a bias of zeros.
type LayerNormOptions struct {
	// Eps is added to the variance; 0 means 1e-5. It is a float64, used
	// at full precision on float64 inputs (rounded to float32 for the
	// other dtypes).
	Eps float64
	// NoWeight and NoBias leave out the elementwise scale and bias
	// (Equinox's use_weight=False, use_bias=False).
	NoWeight, NoBias bool
	// Axis is the logical name of the feature dimension of the weight and
	// bias, conventionally AxisEmbed; "" sets none.
	Axis string
}

// LayerNorm normalizes each vector over its last dimension to zero mean and
// unit variance, then scales and shifts it elementwise (eqx.nn.LayerNorm):
//
//	y = (x - mean(x)) / √(var(x) + Eps) · Weight + Bias
//
// with the biased variance, as jnp.var computes it. With a weight and a
// bias on float32 data it is one fused op (tensor.LayerNorm): one sweep
// forward, one backward, and only a mean and a reciprocal standard
// deviation per row kept beside the input for the backward pass.
//
// On float64 inputs it is composed of ops, with Eps in float64.
type LayerNorm struct {
	Weight *tensor.Tensor // f32[dim], or nil
	Bias   *tensor.Tensor // f32[dim], or nil
	Eps    float64
}

// NewLayerNorm returns a LayerNorm over dim features. It takes no key: the
// weight starts at ones and the bias at zeros.
func NewLayerNorm(dim int, opts LayerNormOptions) LayerNorm {
	if dim < 0 {
		panic(fmt.Sprintf("nn.NewLayerNorm: negative dim %d", dim))
	}
	n := LayerNorm{Eps: opts.Eps}
	if n.Eps == 0 {
		n.Eps = defaultEps
	}
	if !opts.NoWeight {
		n.Weight = withAxes(tensor.Ones(tensor.Float32, dim), opts.Axis)
	}
	if !opts.NoBias {
		n.Bias = withAxes(tensor.Zeros(tensor.Float32, dim), opts.Axis)
	}
	return n
}

// Forward normalizes x of shape [..., dim] over its last dimension.
func (n LayerNorm) Forward(x *tensor.Tensor) *tensor.Tensor {
	checkNormInput("nn.LayerNorm", x, n.Weight, n.Bias)
	return tensor.LayerNorm(x, n.Weight, n.Bias, n.Eps)
}

// Call is Forward, ignoring key; it makes a LayerNorm a Module.
func (n LayerNorm) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return n.Forward(x) }

// RMSNormOptions configures NewRMSNorm. The zero value gives eps 1e-5, a
// weight of ones and no bias, as Llama and T5 use RMSNorm; Bias adds a
// learned shift.
type RMSNormOptions struct {
	// Eps is added to the mean square; 0 means 1e-5. It is a float64,
	// used at full precision on float64 inputs (rounded to float32 for the
	// other dtypes).
	Eps float64
	// NoWeight leaves out the elementwise scale; Bias adds an elementwise
	// bias (Equinox's use_weight and use_bias).
	NoWeight, Bias bool
	// Axis is the logical name of the feature dimension of the parameters,
	// conventionally AxisEmbed; "" sets none.
	Axis string
}

// RMSNorm divides each vector by its root mean square over the last
// dimension, then scales (and optionally shifts) it elementwise
// (eqx.nn.RMSNorm, used by Llama and T5):
//
//	y = x / √(mean(x²) + Eps) · Weight + Bias
type RMSNorm struct {
	Weight *tensor.Tensor // f32[dim], or nil
	Bias   *tensor.Tensor // f32[dim], or nil
	Eps    float64
}

// NewRMSNorm returns an RMSNorm over dim features, its weight starting at
// ones (and its bias, if any, at zeros).
func NewRMSNorm(dim int, opts RMSNormOptions) RMSNorm {
	if dim < 0 {
		panic(fmt.Sprintf("nn.NewRMSNorm: negative dim %d", dim))
	}
	n := RMSNorm{Eps: opts.Eps}
	if n.Eps == 0 {
		n.Eps = defaultEps
	}
	if !opts.NoWeight {
		n.Weight = withAxes(tensor.Ones(tensor.Float32, dim), opts.Axis)
	}
	if opts.Bias {
		n.Bias = withAxes(tensor.Zeros(tensor.Float32, dim), opts.Axis)
	}
	return n
}

// Forward normalizes x of shape [..., dim] over its last dimension.
func (n RMSNorm) Forward(x *tensor.Tensor) *tensor.Tensor {
	checkNormInput("nn.RMSNorm", x, n.Weight, n.Bias)
	ms := tensor.MeanKeep(tensor.Square(x), -1)
	y := tensor.Mul(x, tensor.Rsqrt(tensor.Add(ms, constLike(ms, n.Eps))))
	return scaleShift(y, n.Weight, n.Bias)
}

// Call is Forward, ignoring key; it makes an RMSNorm a Module.
func (n RMSNorm) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return n.Forward(x) }

func checkNormInput(fn string, x, w, b *tensor.Tensor) {
	requireInput(fn, "x", x)
	p := w
	if p == nil {
		p = b
	}
	if !x.DType().IsFloat() || x.Rank() == 0 || (p != nil && x.Dim(-1) != p.Dim(0)) {
		if p == nil {
			panic(fmt.Sprintf("%s: x %v: want float with at least one dimension", fn, x))
		}
		panic(fmt.Sprintf("%s: x %v: want float [..., %d]", fn, x, p.Dim(0)))
	}
	requireParamDType(fn, x, p)
}

func scaleShift(y, w, b *tensor.Tensor) *tensor.Tensor {
	if w != nil {
		y = tensor.Mul(y, w)
	}
	if b != nil {
		y = tensor.Add(y, b)
	}
	return y
}
