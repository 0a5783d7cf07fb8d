package nn

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor"
)

// Initializer returns a new float32 parameter of the given shape drawn with
// key, like the functions of jax.nn.initializers (init(key, shape)). The same
// key and shape always give the same tensor.
//
// Initializers that depend on a layer's fan (VarianceScaling and its named
// forms) read it from the shape with JAX's conventions: the input dimension is
// axis -2, the output dimension axis -1, and every other axis is a receptive
// field (see ComputeFans). Layers in this package store their weights as
// [in, out] (Flax's kernel layout, x @ W), so those conventions apply as is.
//
// Write your own as a plain function:
//
//	scaled := nn.Initializer(func(k tensor.Key, shape ...int) *tensor.Tensor {
//		return tensor.MulScalar(tensor.Normal(k, shape...), 0.02)
//	})
type Initializer func(key tensor.Key, shape ...int) *tensor.Tensor

// Zeros is the initializer of zeros (jax.nn.initializers.zeros). It ignores
// the key.
func Zeros(_ tensor.Key, shape ...int) *tensor.Tensor { return tensor.Zeros(tensor.Float32, shape...) }

// Ones is the initializer of ones (jax.nn.initializers.ones). It ignores the
// key.
func Ones(_ tensor.Key, shape ...int) *tensor.Tensor { return tensor.Ones(tensor.Float32, shape...) }

// Constant returns an initializer that fills every element with v
// (jax.nn.initializers.constant).
func Constant(v float32) Initializer {
	return func(_ tensor.Key, shape ...int) *tensor.Tensor {
		return tensor.Full(tensor.Float32, float64(v), shape...)
	}
}

// Normal returns an initializer drawing from N(0, stddev²)
// (jax.nn.initializers.normal; JAX's default stddev is 1e-2).
func Normal(stddev float64) Initializer {
	checkScale("nn.Normal", "stddev", stddev)
	return func(k tensor.Key, shape ...int) *tensor.Tensor {
		return tensor.MulScalar(tensor.Normal(k, shape...), float32(stddev))
	}
}

// TruncatedNormal returns an initializer drawing from the standard normal
// truncated to (-2, 2) and multiplied by stddev
// (jax.nn.initializers.truncated_normal with its default bounds). As in JAX,
// stddev is that of the normal before truncation: the values have standard
// deviation about 0.88·stddev and lie within ±2·stddev.
func TruncatedNormal(stddev float64) Initializer {
	checkScale("nn.TruncatedNormal", "stddev", stddev)
	return func(k tensor.Key, shape ...int) *tensor.Tensor {
		return tensor.MulScalar(tensor.TruncatedNormal(k, -2, 2, shape...), float32(stddev))
	}
}

// Uniform returns an initializer drawing uniformly from [0, scale)
// (jax.nn.initializers.uniform; JAX's default scale is 1e-2). Note the
// interval is not symmetric; UniformRange(-a, a) is.
func Uniform(scale float64) Initializer {
	checkScale("nn.Uniform", "scale", scale)
	return func(k tensor.Key, shape ...int) *tensor.Tensor {
		return tensor.MulScalar(tensor.Uniform(k, shape...), float32(scale))
	}
}

// UniformRange returns an initializer drawing uniformly from [lo, hi), like
// jax.random.uniform(key, shape, minval=lo, maxval=hi). Equinox's Linear
// initializes its weight and bias with UniformRange(-1/√in, 1/√in).
// It panics unless lo < hi are finite.
func UniformRange(lo, hi float64) Initializer {
	if !(lo < hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		panic(fmt.Sprintf("nn.UniformRange: need finite lo < hi, got [%g, %g)", lo, hi))
	}
	return func(k tensor.Key, shape ...int) *tensor.Tensor {
		return tensor.UniformRange(k, float32(lo), float32(hi), shape...)
	}
}

// FanMode says which fan VarianceScaling divides by. The zero value is FanIn,
// JAX's default.
type FanMode int

const (
	FanIn  FanMode = iota // the number of inputs (fan_in)
	FanOut                // the number of outputs (fan_out)
	FanAvg                // their mean (fan_avg)
)

// String returns JAX's name of the mode: "fan_in", "fan_out" or "fan_avg".
func (m FanMode) String() string {
	switch m {
	case FanIn:
		return "fan_in"
	case FanOut:
		return "fan_out"
	case FanAvg:
		return "fan_avg"
	}
	return fmt.Sprintf("FanMode(%d)", int(m))
}

// Distribution is the distribution VarianceScaling draws from. The zero value
// is DistTruncatedNormal, JAX's default.
type Distribution int

const (
	// DistTruncatedNormal is the standard normal truncated to (-2, 2),
	// rescaled so that the truncated values have the requested variance.
	DistTruncatedNormal Distribution = iota
	// DistNormal is the (untruncated) normal distribution.
	DistNormal
	// DistUniform is the uniform distribution on a symmetric interval.
	DistUniform
)

// String returns JAX's name of the distribution: "truncated_normal",
// "normal" or "uniform".
func (d Distribution) String() string {
	switch d {
	case DistTruncatedNormal:
		return "truncated_normal"
	case DistNormal:
		return "normal"
	case DistUniform:
		return "uniform"
	}
	return fmt.Sprintf("Distribution(%d)", int(d))
}

// FanAxes says which axes of a weight are its input, output and batch axes
// for fan computations (JAX's in_axis, out_axis and batch_axis). Negative axes
// count from the end. The zero value is JAX's default: In {-2}, Out {-1}, no
// batch axes.
type FanAxes struct {
	In, Out []int
	// Batch axes are ignored by fan computations: stacked expert weights
	// [E, in, out] use Batch {0} so that each expert is initialized like a
	// single [in, out] layer.
	Batch []int
}

// ComputeFans returns the fan-in and fan-out of a weight of the given shape,
// as jax.nn.initializers do: the in and out sizes are the products of the
// dimensions on the In and Out axes, and the receptive field size, the product
// of the remaining dimensions that are not batch axes, multiplies both. So
// [in, out] has fans (in, out), and a convolution kernel [h, w, in, out] has
// fans (h·w·in, h·w·out). It panics, as JAX does, for a shape with fewer than
// two dimensions, and for an axis out of range or used twice.
func ComputeFans(shape []int, axes FanAxes) (fanIn, fanOut float64) {
	r := len(shape)
	if r < 2 {
		panic(fmt.Sprintf("nn.ComputeFans: shape %v: fans need a weight with at least 2 dimensions (got %d)", shape, r))
	}
	in, out := axes.In, axes.Out
	if in == nil {
		in = []int{-2}
	}
	if out == nil {
		out = []int{-1}
	}
	role := make([]byte, r) // 0 receptive, 'i', 'o', 'b'
	set := func(list []int, c byte) float64 {
		p := 1.0
		for _, a := range list {
			b := a
			if b < 0 {
				b += r
			}
			if b < 0 || b >= r {
				panic(fmt.Sprintf("nn.ComputeFans: shape %v: axis %d out of range", shape, a))
			}
			if role[b] != 0 {
				panic(fmt.Sprintf("nn.ComputeFans: shape %v: axis %d used twice (in %v, out %v, batch %v)", shape, a, in, out, axes.Batch))
			}
			role[b] = c
			p *= float64(shape[b])
		}
		return p
	}
	inSize := set(in, 'i')
	outSize := set(out, 'o')
	set(axes.Batch, 'b')
	field := 1.0
	for i, c := range role {
		if c == 0 {
			field *= float64(shape[i])
		}
	}
	return inSize * field, outSize * field
}

// truncatedNormalStd is the standard deviation of the standard normal
// truncated to (-2, 2), the constant JAX divides by.
const truncatedNormalStd = .87962566103423978

// VarianceScaling returns an initializer whose values have variance
// scale/fan, where fan is the fan-in, fan-out or their mean as mode says,
// drawn from dist, exactly as jax.nn.initializers.variance_scaling(scale,
// mode, distribution) with its default axes:
//
//   - DistTruncatedNormal: TruncatedNormal(-2, 2)·√variance/0.8796…
//     (values within ±2.27·√variance);
//   - DistNormal: Normal·√variance;
//   - DistUniform: UniformRange(-1, 1)·√(3·variance) (bound √(3·variance)).
//
// The fans come from the shape; see ComputeFans. It panics on a negative or
// NaN scale; the returned initializer panics on a shape with fewer than two
// dimensions.
func VarianceScaling(scale float64, mode FanMode, dist Distribution) Initializer {
	return VarianceScalingAxes(scale, mode, dist, FanAxes{})
}

// VarianceScalingAxes is VarianceScaling with the input, output and batch
// axes given explicitly (JAX's in_axis, out_axis and batch_axis).
func VarianceScalingAxes(scale float64, mode FanMode, dist Distribution, axes FanAxes) Initializer {
	checkScale("nn.VarianceScaling", "scale", scale)
	if mode < FanIn || mode > FanAvg {
		panic(fmt.Sprintf("nn.VarianceScaling: invalid %v", mode))
	}
	if dist < DistTruncatedNormal || dist > DistUniform {
		panic(fmt.Sprintf("nn.VarianceScaling: invalid %v", dist))
	}
	return func(k tensor.Key, shape ...int) *tensor.Tensor {
		fanIn, fanOut := ComputeFans(shape, axes)
		if fanIn*fanOut == 0 { // an empty weight: nothing to draw
			return tensor.Zeros(tensor.Float32, shape...)
		}
		var fan float64
		switch mode {
		case FanIn:
			fan = fanIn
		case FanOut:
			fan = fanOut
		default:
			fan = (fanIn + fanOut) / 2
		}
		variance := scale / fan
		switch dist {
		case DistTruncatedNormal:
			std := math.Sqrt(variance) / truncatedNormalStd
			return tensor.MulScalar(tensor.TruncatedNormal(k, -2, 2, shape...), float32(std))
		case DistNormal:
			return tensor.MulScalar(tensor.Normal(k, shape...), float32(math.Sqrt(variance)))
		default:
			return tensor.MulScalar(tensor.UniformRange(k, -1, 1, shape...), float32(math.Sqrt(3*variance)))
		}
	}
}

// GlorotUniform is VarianceScaling(1, FanAvg, DistUniform)
// (jax.nn.initializers.glorot_uniform, also called Xavier uniform).
func GlorotUniform() Initializer { return VarianceScaling(1, FanAvg, DistUniform) }

// GlorotNormal is VarianceScaling(1, FanAvg, DistTruncatedNormal)
// (jax.nn.initializers.glorot_normal; truncated, as in JAX).
func GlorotNormal() Initializer { return VarianceScaling(1, FanAvg, DistTruncatedNormal) }

// HeUniform is VarianceScaling(2, FanIn, DistUniform)
// (jax.nn.initializers.he_uniform, also called Kaiming uniform).
func HeUniform() Initializer { return VarianceScaling(2, FanIn, DistUniform) }

// HeNormal is VarianceScaling(2, FanIn, DistTruncatedNormal)
// (jax.nn.initializers.he_normal; truncated, as in JAX).
func HeNormal() Initializer { return VarianceScaling(2, FanIn, DistTruncatedNormal) }

// LeCunUniform is VarianceScaling(1, FanIn, DistUniform)
// (jax.nn.initializers.lecun_uniform).
func LeCunUniform() Initializer { return VarianceScaling(1, FanIn, DistUniform) }

// LeCunNormal is VarianceScaling(1, FanIn, DistTruncatedNormal)
// (jax.nn.initializers.lecun_normal, Flax's default kernel init; truncated,
// as in JAX).
func LeCunNormal() Initializer { return VarianceScaling(1, FanIn, DistTruncatedNormal) }

func checkScale(fn, name string, v float64) {
	if !(v >= 0) || math.IsInf(v, 0) {
		panic(fmt.Sprintf("%s: %s must be finite and >= 0, got %g", fn, name, v))
	}
}
