package nn

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor"
)

// More activations of jax.nn, built from tensor's ops (so they
// differentiate, run on half dtypes and on sharded tensors like those
// ops). The ones with a parameter have a variable with JAX's default and a
// function that takes the parameter.
var (
	// LeakyRelu is x where x >= 0, 0.01·x elsewhere (jax.nn.leaky_relu
	// with its default negative_slope); see LeakyReluWith. Its gradient
	// at 0 is 1, as JAX's (PyTorch's leaky_relu gives the slope there).
	LeakyRelu Activation = leakyRelu
	// Elu is x where x > 0, e^x - 1 elsewhere (jax.nn.elu, alpha 1); see
	// EluWith.
	Elu Activation = elu
	// Selu is λ·Elu with α = 1.6732632… and λ = 1.0507009…, the scaled
	// exponential linear unit (jax.nn.selu).
	Selu Activation = selu
	// Celu is x where x > 0, e^x - 1 elsewhere for α = 1 (jax.nn.celu);
	// see CeluWith.
	Celu Activation = celu
	// Mish is x·tanh(softplus(x)) (jax.nn.mish).
	Mish Activation = mish
	// Relu6 is min(max(x, 0), 6) (jax.nn.relu6); as in JAX its gradient is
	// 1 strictly between 0 and 6 and 0 elsewhere, at 0 and 6 too.
	Relu6 Activation = relu6
	// HardTanh is x clipped to [-1, 1] (jax.nn.hard_tanh); its gradient is
	// 1 on [-1, 1], as JAX's (PyTorch's hardtanh gives 0 at ±1).
	HardTanh Activation = hardTanh
	// HardSigmoid is Relu6(x + 3)/6 (jax.nn.hard_sigmoid).
	HardSigmoid Activation = hardSigmoid
	// HardSwish is x·HardSigmoid(x) (jax.nn.hard_swish, also hard_silu).
	// Its gradient at ±3 is JAX's, 0 at -3 and 1 at 3 (PyTorch's
	// hardswish gives x/3 + ½ there: -½ and 1.5).
	HardSwish Activation = hardSwish
	// Softsign is x/(|x| + 1) (jax.nn.soft_sign).
	Softsign Activation = softsign
	// Glu is the gated linear unit over the last axis (jax.nn.glu): the
	// last axis, of even size, is split into halves a and b, and the
	// result is a·sigmoid(b), of half the size. See GluAxis.
	Glu Activation = glu
	// Softmin is softmax(-x) over the last axis (torch.nn.Softmin with
	// dim=-1); see SoftminAxis.
	Softmin Activation = softmin
	// HardShrink is x where |x| > ½, 0 elsewhere (torch.nn.Hardshrink,
	// lambd ½); see HardShrinkWith. Its gradient is 0 at ±½, as PyTorch's.
	HardShrink Activation = hardShrink
	// SoftShrink is x - ½ where x > ½, x + ½ where x < -½, 0 elsewhere
	// (torch.nn.Softshrink, lambd ½); see SoftShrinkWith. Its gradient is
	// 0 at ±½, as PyTorch's.
	SoftShrink Activation = softShrink
	// TanhShrink is x - tanh(x) (torch.nn.Tanhshrink).
	TanhShrink Activation = tanhShrink
)

func softmin(x *tensor.Tensor) *tensor.Tensor { return softminAxis(x, -1) }

// SoftminAxis returns softmax(-x) over the given axis (negative counts
// from the end): torch.nn.Softmin(dim=axis).
func SoftminAxis(axis int) Activation {
	return func(x *tensor.Tensor) *tensor.Tensor { return softminAxis(x, axis) }
}

func softminAxis(x *tensor.Tensor, axis int) *tensor.Tensor {
	requireInput("nn.Softmin", "x", x)
	a := axis
	if a < 0 {
		a += x.Rank()
	}
	if a < 0 || a >= x.Rank() || !x.DType().IsFloat() {
		panic(fmt.Sprintf("nn.Softmin: x %v, axis %d: want a float x with that axis", x, axis))
	}
	return tensor.Softmax(tensor.Neg(x), axis)
}

func hardShrink(x *tensor.Tensor) *tensor.Tensor { return hardShrinkLambda(x, 0.5) }

// HardShrinkWith returns torch.nn.Hardshrink(lambd): x where |x| > lambd,
// 0 elsewhere. It panics unless lambd >= 0.
func HardShrinkWith(lambd float64) Activation {
	checkLambda("nn.HardShrinkWith", lambd)
	return func(x *tensor.Tensor) *tensor.Tensor { return hardShrinkLambda(x, lambd) }
}

func hardShrinkLambda(x *tensor.Tensor, lambd float64) *tensor.Tensor {
	out := tensor.Greater(tensor.Abs(x), scalarLike(x, lambd))
	return tensor.Where(out, x, scalarLike(x, 0))
}

func softShrink(x *tensor.Tensor) *tensor.Tensor { return softShrinkLambda(x, 0.5) }

// SoftShrinkWith returns torch.nn.Softshrink(lambd): x - lambd where
// x > lambd, x + lambd where x < -lambd, 0 elsewhere. It panics unless
// lambd >= 0.
func SoftShrinkWith(lambd float64) Activation {
	checkLambda("nn.SoftShrinkWith", lambd)
	return func(x *tensor.Tensor) *tensor.Tensor { return softShrinkLambda(x, lambd) }
}

func softShrinkLambda(x *tensor.Tensor, lambd float64) *tensor.Tensor {
	l := scalarLike(x, lambd)
	above, below := tensor.Greater(x, l), tensor.Less(x, tensor.Neg(l))
	return tensor.Where(above, tensor.Sub(x, l), tensor.Where(below, tensor.Add(x, l), scalarLike(x, 0)))
}

func checkLambda(op string, lambd float64) {
	if !(lambd >= 0) {
		panic(fmt.Sprintf("%s: lambd %v must be >= 0", op, lambd))
	}
}

func tanhShrink(x *tensor.Tensor) *tensor.Tensor { return tensor.Sub(x, tensor.Tanh(x)) }

// Threshold returns torch.nn.Threshold(threshold, value): x where
// x > threshold, value elsewhere (its gradient 0 there, at the threshold
// too). It panics if threshold is NaN.
func Threshold(threshold, value float64) Activation {
	if math.IsNaN(threshold) {
		panic("nn.Threshold: threshold is NaN")
	}
	return func(x *tensor.Tensor) *tensor.Tensor {
		return tensor.Where(tensor.Greater(x, scalarLike(x, threshold)), x, scalarLike(x, value))
	}
}

func leakyRelu(x *tensor.Tensor) *tensor.Tensor { return leakyReluSlope(x, 0.01) }

// LeakyReluWith returns jax.nn.leaky_relu with the given negative slope:
// x where x >= 0, slope·x elsewhere (gradient 1 at 0, where PyTorch's
// leaky_relu gives slope).
func LeakyReluWith(slope float64) Activation {
	return func(x *tensor.Tensor) *tensor.Tensor { return leakyReluSlope(x, slope) }
}

func leakyReluSlope(x *tensor.Tensor, slope float64) *tensor.Tensor {
	return tensor.Where(tensor.GreaterEqual(x, scalarLike(x, 0)), x, tensor.Mul(x, constLike(x, slope)))
}

func elu(x *tensor.Tensor) *tensor.Tensor { return eluAlpha(x, 1) }

// EluWith returns jax.nn.elu with the given alpha: x where x > 0,
// alpha·(e^x - 1) elsewhere.
func EluWith(alpha float64) Activation {
	return func(x *tensor.Tensor) *tensor.Tensor { return eluAlpha(x, alpha) }
}

// eluAlpha is JAX's where(x > 0, x, alpha·expm1(where(x > 0, 0, x))): the
// inner where keeps e^x of large x from overflowing into the gradient.
func eluAlpha(x *tensor.Tensor, alpha float64) *tensor.Tensor {
	pos := tensor.Greater(x, scalarLike(x, 0))
	neg := tensor.Expm1(tensor.Where(pos, tensor.Scalar(0), x))
	return tensor.Where(pos, x, tensor.Mul(neg, constLike(x, alpha)))
}

// The constants of jax.nn.selu.
const (
	seluAlpha = 1.6732632423543772848170429916717
	seluScale = 1.0507009873554804934193349852946
)

func selu(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Mul(eluAlpha(x, seluAlpha), constLike(x, seluScale))
}

func celu(x *tensor.Tensor) *tensor.Tensor { return celuAlpha(x, 1) }

// CeluWith returns jax.nn.celu with the given alpha: x where x > 0,
// alpha·(e^(x/alpha) - 1) elsewhere. It panics if alpha is 0.
func CeluWith(alpha float64) Activation {
	if alpha == 0 {
		panic("nn.CeluWith: alpha must not be 0")
	}
	return func(x *tensor.Tensor) *tensor.Tensor { return celuAlpha(x, alpha) }
}

func celuAlpha(x *tensor.Tensor, alpha float64) *tensor.Tensor {
	pos := tensor.Greater(x, scalarLike(x, 0))
	a := constLike(x, alpha)
	neg := tensor.Expm1(tensor.Div(tensor.Where(pos, tensor.Scalar(0), x), a))
	return tensor.Where(pos, x, tensor.Mul(neg, a))
}

// constLike returns v as the constant of an arithmetic op with x: a
// float64 scalar for float64 x, so that float64 computations use v to
// float64 precision, and a (weakly typed) float32 scalar otherwise.
func constLike(x *tensor.Tensor, v float64) *tensor.Tensor {
	if x.DType() == tensor.Float64 {
		return tensor.ScalarFloat64(v)
	}
	return tensor.Scalar(float32(v))
}

// scalarLike returns v as a scalar of x's dtype (comparisons, unlike
// arithmetic, take no weakly typed float32 scalar).
func scalarLike(x *tensor.Tensor, v float64) *tensor.Tensor {
	if x.DType() == tensor.Float64 {
		return tensor.ScalarFloat64(v)
	}
	s := tensor.Scalar(float32(v))
	if x.DType() != tensor.Float32 && x.DType().IsFloat() {
		s = tensor.Convert(s, x.DType())
	}
	return s
}

func mish(x *tensor.Tensor) *tensor.Tensor { return tensor.Mul(x, tensor.Tanh(tensor.Softplus(x))) }

// relu6 is min(max(x, 0), 6) with JAX's gradient: x passes where 0 < x < 6,
// the clipped constant elsewhere.
func relu6(x *tensor.Tensor) *tensor.Tensor {
	inside := tensor.LogicalAnd(tensor.Greater(x, scalarLike(x, 0)), tensor.Less(x, scalarLike(x, 6)))
	return tensor.Where(inside, x, tensor.Clamp(tensor.StopGradient(x), 0, 6))
}

func hardTanh(x *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(x, -1, 1) }

func hardSigmoid(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Div(relu6(tensor.AddScalar(x, 3)), tensor.Scalar(6))
}

func hardSwish(x *tensor.Tensor) *tensor.Tensor { return tensor.Mul(x, hardSigmoid(x)) }

func softsign(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Div(x, tensor.AddScalar(tensor.Abs(x), 1))
}

func glu(x *tensor.Tensor) *tensor.Tensor { return gluAxis(x, -1) }

// GluAxis returns jax.nn.glu over the given axis (negative counts from
// the end), which must have an even size.
func GluAxis(axis int) Activation {
	return func(x *tensor.Tensor) *tensor.Tensor { return gluAxis(x, axis) }
}

func gluAxis(x *tensor.Tensor, axis int) *tensor.Tensor {
	a := axis
	if a < 0 {
		a += x.Rank()
	}
	if a < 0 || a >= x.Rank() || x.Dim(a)%2 != 0 {
		panic(fmt.Sprintf("nn.Glu: x %v, axis %d: the axis must exist and have an even size", x, axis))
	}
	h := tensor.Split(x, a, 2)
	return tensor.Mul(h[0], tensor.Sigmoid(h[1]))
}

// PReLU is a leaky ReLU with a learnt negative slope (eqx.nn.PReLU):
// x where x >= 0, NegativeSlope·x elsewhere, so the gradient with respect
// to x at 0 is 1 (PyTorch's prelu gives the slope there). NegativeSlope
// broadcasts against the input: a scalar (Equinox's default) or one slope
// per channel (shape [C] for inputs [..., C], say; PyTorch's channel axis
// 1 of [N, C, L] is a slope of shape [C, 1]).
type PReLU struct {
	NegativeSlope *tensor.Tensor
}

// NewPReLU returns a PReLU with a scalar slope initAlpha (Equinox's
// default is 0.25). With shape it holds one slope per element of that
// shape, every one initAlpha.
func NewPReLU(initAlpha float32, shape ...int) PReLU {
	return PReLU{NegativeSlope: tensor.Full(tensor.Float32, float64(initAlpha), shape...)}
}

// Forward applies the PReLU to x.
func (p PReLU) Forward(x *tensor.Tensor) *tensor.Tensor {
	if p.NegativeSlope == nil {
		panic("nn.PReLU: NegativeSlope is nil (use NewPReLU)")
	}
	requireParamDType("nn.PReLU", x, p.NegativeSlope)
	return tensor.Where(tensor.GreaterEqual(x, scalarLike(x, 0)), x, tensor.Mul(p.NegativeSlope, x))
}

// Call is Forward, ignoring key; it makes a PReLU a Module.
func (p PReLU) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return p.Forward(x) }
