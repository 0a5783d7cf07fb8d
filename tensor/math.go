package tensor

import (
	"fmt"
	"math"
)

// This file holds the elementwise math of jax.numpy (and jax.lax, and
// jax.scipy.special for the gamma functions) beyond Exp, Log, Sqrt and the
// activations: trigonometric and hyperbolic functions and their inverses,
// exp and log variants, the error function and its inverse, the gamma
// functions, and rounding. Each is an op declared once, as "How to write
// an op" (doc.go) says: computed in float64 and rounded once to float32
// (so correctly rounded wherever Go's math is), half operands widened and
// the result rounded to their dtype, the elementwise sharding rule, a VJP
// built from ops (so higher derivatives work) as JAX defines it, the JVP
// that an elementwise function's VJP gives, and the batching rule that
// runs it on the whole batch.

// mathOp declares an elementwise float op y = f(x) with the VJP
// g·dy/dx = vjp(g, x, y), reading the saved values in save. Rounding ops
// (vjp nil) have no VJP: their gradient is zero, as JAX's. intID makes
// the op the identity on int32 (rounding an integer).
func mathOp(name string, f func(float64) float64, vjp func(g, x, y *Tensor) *Tensor, save SaveMask, intID bool) *Op {
	kernel := func(d, s []float32) {
		d = d[:len(s)]
		for i, v := range s {
			d[i] = float32(f(float64(v)))
		}
	}
	var fi func(int32) int32
	if intID {
		fi = func(v int32) int32 { return v }
	}
	var v func(g *Tensor, in []*Tensor, out *Tensor, _ any) []*Tensor
	var tr Traits
	if vjp != nil {
		v = func(g *Tensor, in []*Tensor, out *Tensor, _ any) []*Tensor { return []*Tensor{vjp(g, in[0], out)} }
		// Every VJP below returns the result of a Mul, Div or Neg it
		// makes: fresh storage the backward pass may own.
		tr = Traits{Reuse: FreshVJP}
	}
	op := withFloat64(unaryOpCost(name, costSlow, kernel, nil, fi, v, save, tr), costSlow, each64(f))
	if intID {
		op = withInt64(op, func(v int64) int64 { return v })
	}
	return op
}

var (
	sinOp, cosOp, tanOp, asinOp, acosOp, atanOp             *Op
	sinhOp, coshOp, asinhOp, acoshOp, atanhOp               *Op
	expm1Op, log1pOp, log2Op, log10Op, exp2Op               *Op
	erfOp, erfcOp, erfInvOp, lgammaOp, digammaOp, polygOp   *Op
	roundOp, floorOp, ceilOp, truncOp, reciprocalOp, cbrtOp *Op
	atan2Op                                                 *Op
)

// Constants of the VJPs, and the masks of what they read.
var (
	twoOverSqrtPi = 2 / math.Sqrt(math.Pi)
	sqrtPiOverTwo = math.Sqrt(math.Pi) / 2
	ln2, ln10     = math.Ln2, math.Ln10
	saveX, saveY  = SaveInputs(0), SaveOutput
)

// oneMinusSquare returns 1 - x².
func oneMinusSquare(x *Tensor) *Tensor { return Sub(Scalar(1), Square(x)) }

func init() {
	sinOp = mathOp("sin", math.Sin, func(g, x, _ *Tensor) *Tensor { return Mul(g, Cos(x)) }, saveX, false)
	cosOp = mathOp("cos", math.Cos, func(g, x, _ *Tensor) *Tensor { return Neg(Mul(g, Sin(x))) }, saveX, false)
	tanOp = mathOp("tan", math.Tan, func(g, _, y *Tensor) *Tensor { return Mul(g, AddScalar(Square(y), 1)) }, saveY, false)
	asinOp = mathOp("asin", math.Asin, func(g, x, _ *Tensor) *Tensor { return Mul(g, Rsqrt(oneMinusSquare(x))) }, saveX, false)
	acosOp = mathOp("acos", math.Acos, func(g, x, _ *Tensor) *Tensor { return Neg(Mul(g, Rsqrt(oneMinusSquare(x)))) }, saveX, false)
	atanOp = mathOp("atan", math.Atan, func(g, x, _ *Tensor) *Tensor { return Div(g, AddScalar(Square(x), 1)) }, saveX, false)
	sinhOp = mathOp("sinh", math.Sinh, func(g, x, _ *Tensor) *Tensor { return Mul(g, Cosh(x)) }, saveX, false)
	coshOp = mathOp("cosh", math.Cosh, func(g, x, _ *Tensor) *Tensor { return Mul(g, Sinh(x)) }, saveX, false)
	asinhOp = mathOp("asinh", math.Asinh, func(g, x, _ *Tensor) *Tensor { return Mul(g, Rsqrt(AddScalar(Square(x), 1))) }, saveX, false)
	// As JAX: 1/sqrt((x-1)(x+1)), accurate near 1.
	acoshOp = mathOp("acosh", math.Acosh, func(g, x, _ *Tensor) *Tensor {
		return Mul(g, Rsqrt(Mul(AddScalar(x, -1), AddScalar(x, 1))))
	}, saveX, false)
	atanhOp = mathOp("atanh", math.Atanh, func(g, x, _ *Tensor) *Tensor {
		return Div(g, Mul(AddScalar(x, 1), Sub(Scalar(1), x)))
	}, saveX, false)
	expm1Op = mathOp("expm1", math.Expm1, func(g, _, y *Tensor) *Tensor { return Mul(g, AddScalar(y, 1)) }, saveY, false)
	log1pOp = mathOp("log1p", math.Log1p, func(g, x, _ *Tensor) *Tensor { return Div(g, AddScalar(x, 1)) }, saveX, false)
	log2Op = mathOp("log2", math.Log2, func(g, x, _ *Tensor) *Tensor { return Div(g, mulConst(x, ln2)) }, saveX, false)
	log10Op = mathOp("log10", math.Log10, func(g, x, _ *Tensor) *Tensor { return Div(g, mulConst(x, ln10)) }, saveX, false)
	exp2Op = mathOp("exp2", math.Exp2, func(g, _, y *Tensor) *Tensor { return Mul(g, mulConst(y, ln2)) }, saveY, false)
	// erf' = 2/√π·e^(-x²); erfinv' = √π/2·e^(y²).
	erfOp = mathOp("erf", math.Erf, func(g, x, _ *Tensor) *Tensor {
		return Mul(g, mulConst(Exp(Neg(Square(x))), twoOverSqrtPi))
	}, saveX, false)
	erfcOp = mathOp("erfc", math.Erfc, func(g, x, _ *Tensor) *Tensor {
		return Mul(g, mulConst(Exp(Neg(Square(x))), -twoOverSqrtPi))
	}, saveX, false)
	erfInvOp = mathOp("erf_inv", math.Erfinv, func(g, _, y *Tensor) *Tensor {
		return Mul(g, mulConst(Exp(Square(y)), sqrtPiOverTwo))
	}, saveY, false)
	lgammaOp = mathOp("lgamma", func(x float64) float64 { v, _ := math.Lgamma(x); return v },
		func(g, x, _ *Tensor) *Tensor { return Mul(g, Digamma(x)) }, saveX, false)
	digammaOp = mathOp("digamma", digamma, func(g, x, _ *Tensor) *Tensor { return Mul(g, Polygamma(1, x)) }, saveX, false)
	// polygamma: params is the order n >= 1; its derivative is order n+1.
	polygOp = &Op{
		Name: "polygamma",
		Impl: func(in []*Tensor, p any) *Tensor {
			n, x := p.(int), in[0]
			if x.dtype == Float64 {
				out := newOutUninit(Float64, x.shape)
				mapT(each64(func(v float64) float64 { return polygamma(n, v) }), out.f64(), x.f64(), costSlow, x.local() != nil)
				return out
			}
			out := newOutUninit(Float32, x.shape)
			mapF32(func(d, s []float32) {
				d = d[:len(s)]
				for i, v := range s {
					d[i] = float32(polygamma(n, float64(v)))
				}
			}, out.f32(), x.f32(), costSlow, x.local() != nil)
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, p any) []*Tensor {
			return []*Tensor{Mul(g, Polygamma(p.(int)+1, in[0]))}
		},
		Save:     saveX,
		Sharding: ShardingRule{Family: ShardElementwise},
		Traits:   Traits{Reuse: FreshVJP, Types: TypesFloat64},
	}
	// Under Vmap the op runs on the batch as it is (n does not depend on
	// the shape); its JVP is its VJP applied to the tangent.
	polygOp.Batch = sameOpBatch(&polygOp)
	polygOp.JVP = symmetricJVP(&polygOp)
	roundOp = mathOp("round", math.RoundToEven, nil, 0, true)
	floorOp = mathOp("floor", math.Floor, nil, 0, true)
	ceilOp = mathOp("ceil", math.Ceil, nil, 0, true)
	truncOp = mathOp("trunc", math.Trunc, nil, 0, true)
	// reciprocal' = -1/x² = -y².
	reciprocalOp = mathOp("reciprocal", func(x float64) float64 { return 1 / x },
		func(g, _, y *Tensor) *Tensor { return Neg(Mul(g, Square(y))) }, saveY, false)
	// cbrt' = 1/(3·y²).
	cbrtOp = mathOp("cbrt", math.Cbrt, func(g, _, y *Tensor) *Tensor { return Div(g, MulScalar(Square(y), 3)) }, saveY, false)
	// atan2(y, x): d/dy = x/(x²+y²), d/dx = -y/(x²+y²).
	atan2Op = binaryOp(atan2Def, func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		y, x := in[0], in[1]
		gd := Div(g, Add(Square(x), Square(y)))
		return []*Tensor{unbroadcast(Mul(gd, x), y.shape), unbroadcast(Neg(Mul(gd, y)), x.shape)}
	}, func(prim, t, outs []*Tensor, _ any) []*Tensor {
		// (x·dy - y·dx)/(x²+y²).
		y, x := prim[0], prim[1]
		var num *Tensor
		if t[0] != nil {
			num = Mul(x, t[0])
		}
		if t[1] != nil {
			if num == nil {
				num = Neg(Mul(y, t[1]))
			} else {
				num = Sub(num, Mul(y, t[1]))
			}
		}
		return one1(toShapeOf(Div(num, Add(Square(x), Square(y))), outs[0]))
	}, SaveAllInputs, ShardElementwise, binaryTraits)
}

var atan2Def = &binaryDef{name: "tensor.Atan2", sym: ",",
	f32: mk2(func(y, x float32) float32 { return float32(math.Atan2(float64(y), float64(x))) }),
	f64: mk2(math.Atan2)}

// mathUnary checks x for the public function name (float, or int32 too
// when intOK) and applies op.
func mathUnary(name string, op *Op, intOK bool, x *Tensor) *Tensor {
	checkNil(name, "x", x)
	return unary(name, op, intOK, x)
}

// Sin returns sin(x) elementwise (jnp.sin), x in radians.
func Sin(x *Tensor) *Tensor { return mathUnary("tensor.Sin", sinOp, false, x) }

// Cos returns cos(x) elementwise (jnp.cos), x in radians.
func Cos(x *Tensor) *Tensor { return mathUnary("tensor.Cos", cosOp, false, x) }

// Tan returns tan(x) elementwise (jnp.tan).
func Tan(x *Tensor) *Tensor { return mathUnary("tensor.Tan", tanOp, false, x) }

// Asin returns arcsin(x) elementwise (jnp.arcsin), NaN outside [-1, 1].
func Asin(x *Tensor) *Tensor { return mathUnary("tensor.Asin", asinOp, false, x) }

// Acos returns arccos(x) elementwise (jnp.arccos), NaN outside [-1, 1].
func Acos(x *Tensor) *Tensor { return mathUnary("tensor.Acos", acosOp, false, x) }

// Atan returns arctan(x) elementwise (jnp.arctan), in (-π/2, π/2).
func Atan(x *Tensor) *Tensor { return mathUnary("tensor.Atan", atanOp, false, x) }

// Sinh returns the hyperbolic sine elementwise (jnp.sinh).
func Sinh(x *Tensor) *Tensor { return mathUnary("tensor.Sinh", sinhOp, false, x) }

// Cosh returns the hyperbolic cosine elementwise (jnp.cosh).
func Cosh(x *Tensor) *Tensor { return mathUnary("tensor.Cosh", coshOp, false, x) }

// Asinh returns the inverse hyperbolic sine elementwise (jnp.arcsinh).
func Asinh(x *Tensor) *Tensor { return mathUnary("tensor.Asinh", asinhOp, false, x) }

// Acosh returns the inverse hyperbolic cosine elementwise (jnp.arccosh),
// NaN below 1.
func Acosh(x *Tensor) *Tensor { return mathUnary("tensor.Acosh", acoshOp, false, x) }

// Atanh returns the inverse hyperbolic tangent elementwise (jnp.arctanh),
// ±Inf at ±1 and NaN outside [-1, 1].
func Atanh(x *Tensor) *Tensor { return mathUnary("tensor.Atanh", atanhOp, false, x) }

// Expm1 returns e^x - 1 elementwise (jnp.expm1), accurate for small x
// where Exp(x) - 1 loses every digit.
func Expm1(x *Tensor) *Tensor { return mathUnary("tensor.Expm1", expm1Op, false, x) }

// Log1p returns ln(1 + x) elementwise (jnp.log1p), accurate for small x.
func Log1p(x *Tensor) *Tensor { return mathUnary("tensor.Log1p", log1pOp, false, x) }

// Log2 returns the base-2 logarithm elementwise (jnp.log2).
func Log2(x *Tensor) *Tensor { return mathUnary("tensor.Log2", log2Op, false, x) }

// Log10 returns the base-10 logarithm elementwise (jnp.log10).
func Log10(x *Tensor) *Tensor { return mathUnary("tensor.Log10", log10Op, false, x) }

// Exp2 returns 2^x elementwise (jnp.exp2).
func Exp2(x *Tensor) *Tensor { return mathUnary("tensor.Exp2", exp2Op, false, x) }

// Erf returns the error function elementwise (jax.scipy.special.erf,
// lax.erf).
func Erf(x *Tensor) *Tensor { return mathUnary("tensor.Erf", erfOp, false, x) }

// Erfc returns the complementary error function 1 - erf(x) elementwise
// (jax.scipy.special.erfc), accurate where erf(x) is close to 1.
func Erfc(x *Tensor) *Tensor { return mathUnary("tensor.Erfc", erfcOp, false, x) }

// ErfInv returns the inverse error function elementwise
// (jax.scipy.special.erfinv, lax.erf_inv): ±Inf at ±1, NaN outside
// [-1, 1].
func ErfInv(x *Tensor) *Tensor { return mathUnary("tensor.ErfInv", erfInvOp, false, x) }

// Lgamma returns ln|Γ(x)| elementwise (jax.scipy.special.gammaln,
// lax.lgamma), +Inf at the poles 0, -1, -2, .... Its derivative is
// Digamma.
func Lgamma(x *Tensor) *Tensor { return mathUnary("tensor.Lgamma", lgammaOp, false, x) }

// Digamma returns ψ(x) = d/dx ln Γ(x) elementwise
// (jax.scipy.special.digamma, lax.digamma), NaN at the poles 0, -1, -2,
// .... Its derivative is Polygamma(1, x).
func Digamma(x *Tensor) *Tensor { return mathUnary("tensor.Digamma", digammaOp, false, x) }

// Polygamma returns ψ⁽ⁿ⁾(x), the n-th derivative of Digamma, elementwise
// (jax.scipy.special.polygamma with an integer order n >= 0;
// Polygamma(0, x) is Digamma(x)). At the poles 0, -1, -2, ... it is +Inf
// for odd n (both one-sided limits) and NaN for even n. It panics if n is
// negative.
func Polygamma(n int, x *Tensor) *Tensor {
	checkNil("tensor.Polygamma", "x", x)
	if n < 0 {
		panic(fmt.Sprintf("tensor.Polygamma: order %d of %v is negative", n, x))
	}
	if n == 0 {
		return Digamma(x)
	}
	if !x.dtype.IsFloat() {
		panic(fmt.Sprintf("tensor.Polygamma: %v: not defined for %v", x, x.dtype))
	}
	return Apply(polygOp, n, x)
}

// Round rounds to the nearest integer, halves to even, elementwise
// (jnp.round, lax.round with ROUND_TO_NEAREST_EVEN): 0.5 → 0, 1.5 → 2,
// -2.5 → -2. int32 tensors are returned as they are (a copy). Its gradient
// is zero, as JAX's.
func Round(x *Tensor) *Tensor { return mathUnary("tensor.Round", roundOp, true, x) }

// Floor rounds toward -∞ elementwise (jnp.floor); see Round for int32 and
// the gradient.
func Floor(x *Tensor) *Tensor { return mathUnary("tensor.Floor", floorOp, true, x) }

// Ceil rounds toward +∞ elementwise (jnp.ceil); see Round for int32 and
// the gradient.
func Ceil(x *Tensor) *Tensor { return mathUnary("tensor.Ceil", ceilOp, true, x) }

// Trunc rounds toward zero elementwise (jnp.trunc); see Round for int32
// and the gradient.
func Trunc(x *Tensor) *Tensor { return mathUnary("tensor.Trunc", truncOp, true, x) }

// Reciprocal returns 1/x elementwise (jnp.reciprocal) for a float x.
func Reciprocal(x *Tensor) *Tensor { return mathUnary("tensor.Reciprocal", reciprocalOp, false, x) }

// Cbrt returns the real cube root elementwise (jnp.cbrt): negative for
// negative x.
func Cbrt(x *Tensor) *Tensor { return mathUnary("tensor.Cbrt", cbrtOp, false, x) }

// Atan2 returns the angle of the point (x, y), arctan(y/x) in the right
// quadrant, in [-π, π], elementwise with broadcasting (jnp.arctan2(y, x):
// y first). Its gradient at the origin is NaN, as JAX's.
func Atan2(y, x *Tensor) *Tensor {
	checkNil("tensor.Atan2", "y x", y, x)
	return binary(atan2Def, atan2Op, y, x)
}
