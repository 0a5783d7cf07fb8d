package tensor

import (
	"fmt"
	"math"
)

// unaryOp builds a float32 (and optionally int32) elementwise op.
func unaryOp(name string, f func(float32) float32, fi func(int32) int32, vjp func(g *Tensor, in []*Tensor, out *Tensor, p any) []*Tensor, save SaveMask) *Op {
	return unaryOpVec(name, nil, f, fi, vjp, save)
}

// unaryOpVec is unaryOp with a whole-slice float32 kernel, for cheap ops
// where calling f per element (a closure call, often with an unpredictable
// branch) costs many times the work.
func unaryOpVec(name string, vec func(d, s []float32), f func(float32) float32, fi func(int32) int32, vjp func(g *Tensor, in []*Tensor, out *Tensor, p any) []*Tensor, save SaveMask) *Op {
	return &Op{
		Name: name,
		Impl: func(in []*Tensor, _ any) *Tensor {
			x := in[0]
			out := newTensor(x.dtype, x.shape)
			switch x.dtype {
			case Float32:
				d, s := out.f32, x.f32
				if vec != nil {
					vec(d, s)
					break
				}
				for i, v := range s {
					d[i] = f(v)
				}
			case Int32:
				d, s := out.i32, x.i32
				for i, v := range s {
					d[i] = fi(v)
				}
			}
			return out
		},
		VJP:  vjp,
		Save: save,
	}
}

// unary validates x for the public function name and applies op.
func unary(name string, op *Op, intOK bool, x *Tensor) *Tensor {
	if x.dtype != Float32 && !(intOK && x.dtype == Int32) {
		panic(fmt.Sprintf("%s: %v: not defined for %v", name, x, x.dtype))
	}
	return Apply(op, nil, x)
}

func f64(f func(float64) float64) func(float32) float32 {
	return func(x float32) float32 { return float32(f(float64(x))) }
}

var negOp, absOp, signOp, expOp, logOp, sqrtOp, rsqrtOp, squareOp, tanhOp, sigmoidOp, reluOp, siluOp, geluOp, geluGradOp, geluExactOp, geluExactGradOp *Op

func init() {
	negOp = unaryOpVec("neg", func(d, s []float32) {
		d = d[:len(s)]
		for i, v := range s {
			d[i] = -v
		}
	}, nil, func(x int32) int32 { return -x },
		func(g *Tensor, _ []*Tensor, _ *Tensor, _ any) []*Tensor { return []*Tensor{Neg(g)} }, 0)
	absOp = unaryOpVec("abs", func(d, s []float32) {
		d = d[:len(s)]
		for i, v := range s {
			d[i] = math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
		}
	}, nil,
		func(x int32) int32 {
			if x < 0 {
				return -x
			}
			return x
		},
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor { return []*Tensor{Mul(g, Sign(in[0]))} },
		SaveInputs(0))
	signOp = unaryOp("sign", func(x float32) float32 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return x // 0, -0 or NaN
	}, func(x int32) int32 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return 0
	}, nil, 0)
	expOp = unaryOp("exp", f64(math.Exp), nil,
		func(g *Tensor, _ []*Tensor, out *Tensor, _ any) []*Tensor { return []*Tensor{Mul(g, out)} },
		SaveOutput)
	logOp = unaryOp("log", f64(math.Log), nil,
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor { return []*Tensor{Div(g, in[0])} },
		SaveInputs(0))
	sqrtOp = unaryOp("sqrt", f64(math.Sqrt), nil,
		func(g *Tensor, _ []*Tensor, out *Tensor, _ any) []*Tensor {
			return []*Tensor{Div(g, MulScalar(out, 2))}
		}, SaveOutput)
	rsqrtOp = unaryOp("rsqrt", func(x float32) float32 { return float32(1 / math.Sqrt(float64(x))) }, nil,
		func(g *Tensor, in []*Tensor, out *Tensor, _ any) []*Tensor {
			// d/dx x^-1/2 = -1/2 x^-3/2 = -out/(2x)
			return []*Tensor{Mul(g, Div(MulScalar(out, -0.5), in[0]))}
		}, SaveInputs(0)|SaveOutput)
	squareOp = unaryOpVec("square", func(d, s []float32) {
		d = d[:len(s)]
		for i, v := range s {
			d[i] = v * v
		}
	}, nil, func(x int32) int32 { return x * x },
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{Mul(g, MulScalar(in[0], 2))}
		}, SaveInputs(0))
	tanhOp = unaryOp("tanh", f64(math.Tanh), nil,
		func(g *Tensor, _ []*Tensor, out *Tensor, _ any) []*Tensor {
			// 1 - tanh²
			return []*Tensor{Mul(g, Sub(Scalar(1), Square(out)))}
		}, SaveOutput)
	sigmoidOp = unaryOp("sigmoid", sigmoid32, nil,
		func(g *Tensor, _ []*Tensor, out *Tensor, _ any) []*Tensor {
			return []*Tensor{Mul(g, Mul(out, Sub(Scalar(1), out)))}
		}, SaveOutput)
	reluOp = unaryOpVec("relu", func(d, s []float32) {
		d = d[:len(s)]
		for i, v := range s {
			d[i] = max(v, 0) // NaN propagates, as in jnp.maximum(x, 0); -0 gives +0
		}
	}, nil, nil, func(g *Tensor, _ []*Tensor, out *Tensor, _ any) []*Tensor {
		// The gradient at 0 is 0, as in JAX.
		return []*Tensor{Where(Greater(out, Scalar(0)), g, Scalar(0))}
	}, SaveOutput)
	siluOp = unaryOp("silu", func(x float32) float32 { return x * sigmoid32(x) }, nil,
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			// d/dx x·σ(x) = σ(x)·(1 + x·(1-σ(x)))
			s := Sigmoid(in[0])
			d := Mul(s, AddScalar(Mul(in[0], Sub(Scalar(1), s)), 1))
			return []*Tensor{Mul(g, d)}
		}, SaveInputs(0))
	geluOp = unaryOp("gelu", geluTanh, nil,
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{Mul(g, Apply(geluGradOp, nil, in[0]))}
		}, SaveInputs(0))
	// gelu_grad is a fused kernel for the first derivative; its own VJP is
	// built from ops so that higher derivatives are right too.
	geluGradOp = unaryOp("gelu_grad", geluTanhGrad, nil,
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{Mul(g, geluTanhGrad2(in[0]))}
		}, SaveInputs(0))
	geluExactOp = unaryOp("gelu_exact", func(x float32) float32 {
		v := float64(x)
		return float32(0.5 * v * (1 + math.Erf(v/math.Sqrt2)))
	}, nil, func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		return []*Tensor{Mul(g, Apply(geluExactGradOp, nil, in[0]))}
	}, SaveInputs(0))
	geluExactGradOp = unaryOp("gelu_exact_grad", func(x float32) float32 {
		v := float64(x)
		cdf := 0.5 * (1 + math.Erf(v/math.Sqrt2))
		pdf := math.Exp(-v*v/2) / math.Sqrt(2*math.Pi)
		return float32(cdf + v*pdf)
	}, nil, func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		// d²/dx² x·Φ(x) = φ(x)·(2 - x²)
		x := in[0]
		x2 := Square(x)
		phi := MulScalar(Exp(MulScalar(x2, -0.5)), float32(1/math.Sqrt(2*math.Pi)))
		return []*Tensor{Mul(g, Mul(phi, Sub(Scalar(2), x2)))}
	}, SaveInputs(0))
}

// geluTanhGrad2 returns the second derivative of the tanh-approximated
// GELU, built from differentiable ops. With u = c·(x + a·x³), t = tanh u,
// du = du/dx and d2u = d²u/dx², it is (1 - t²)·(du + x/2·(d2u - 2·t·du²)).
func geluTanhGrad2(x *Tensor) *Tensor {
	const a = 0.044715
	x2 := Square(x)
	u := MulScalar(Mul(x, AddScalar(MulScalar(x2, a), 1)), geluC)
	t := Tanh(u)
	du := MulScalar(AddScalar(MulScalar(x2, 3*a), 1), geluC)
	d2u := MulScalar(x, 6*a*geluC)
	inner := Add(du, Mul(MulScalar(x, 0.5), Sub(d2u, Mul(MulScalar(t, 2), Square(du)))))
	return Mul(Sub(Scalar(1), Square(t)), inner)
}

func sigmoid32(x float32) float32 {
	v := float64(x)
	if v >= 0 {
		return float32(1 / (1 + math.Exp(-v)))
	}
	e := math.Exp(v)
	return float32(e / (1 + e))
}

const geluC = 0.7978845608028654 // sqrt(2/π)

func geluTanh(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(geluC*(v+0.044715*v*v*v))))
}

func geluTanhGrad(x float32) float32 {
	v := float64(x)
	u := geluC * (v + 0.044715*v*v*v)
	t := math.Tanh(u)
	du := geluC * (1 + 3*0.044715*v*v)
	return float32(0.5*(1+t) + 0.5*v*(1-t*t)*du)
}

// Neg returns -x.
func Neg(x *Tensor) *Tensor { return unary("tensor.Neg", negOp, true, x) }

// Abs returns |x|. Its gradient at 0 is 0.
func Abs(x *Tensor) *Tensor { return unary("tensor.Abs", absOp, true, x) }

// Sign returns -1, 0 or 1 elementwise. It is not differentiable.
func Sign(x *Tensor) *Tensor { return unary("tensor.Sign", signOp, true, x) }

// Exp returns e^x.
func Exp(x *Tensor) *Tensor { return unary("tensor.Exp", expOp, false, x) }

// Log returns the natural logarithm.
func Log(x *Tensor) *Tensor { return unary("tensor.Log", logOp, false, x) }

// Sqrt returns the square root.
func Sqrt(x *Tensor) *Tensor { return unary("tensor.Sqrt", sqrtOp, false, x) }

// Rsqrt returns 1/sqrt(x).
func Rsqrt(x *Tensor) *Tensor { return unary("tensor.Rsqrt", rsqrtOp, false, x) }

// Square returns x*x.
func Square(x *Tensor) *Tensor { return unary("tensor.Square", squareOp, true, x) }

// Tanh returns the hyperbolic tangent.
func Tanh(x *Tensor) *Tensor { return unary("tensor.Tanh", tanhOp, false, x) }

// Sigmoid returns 1/(1+e^-x).
func Sigmoid(x *Tensor) *Tensor { return unary("tensor.Sigmoid", sigmoidOp, false, x) }

// Relu returns max(x, 0) (NaN for NaN, like Maximum); its gradient at 0
// is 0.
func Relu(x *Tensor) *Tensor { return unary("tensor.Relu", reluOp, false, x) }

// Silu returns x·sigmoid(x) (also called swish).
func Silu(x *Tensor) *Tensor { return unary("tensor.Silu", siluOp, false, x) }

// Gelu returns the Gaussian error linear unit in its tanh approximation,
// which is jax.nn.gelu's default (approximate=True).
func Gelu(x *Tensor) *Tensor { return unary("tensor.Gelu", geluOp, false, x) }

// GeluExact returns x·Φ(x) with the exact normal CDF (PyTorch's default).
func GeluExact(x *Tensor) *Tensor { return unary("tensor.GeluExact", geluExactOp, false, x) }

type clampParams struct{ lo, hi float32 }

var clampOp *Op

func init() {
	clampOp = &Op{
		Name: "clamp",
		Impl: func(in []*Tensor, p any) *Tensor {
			c := p.(clampParams)
			x := in[0]
			out := newTensor(Float32, x.shape)
			for i, v := range x.f32 {
				out.f32[i] = min(max(v, c.lo), c.hi)
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, p any) []*Tensor {
			c := p.(clampParams)
			x := in[0]
			inside := LogicalAnd(GreaterEqual(x, Scalar(c.lo)), LessEqual(x, Scalar(c.hi)))
			return []*Tensor{Where(inside, g, Scalar(0))}
		},
		Save: SaveInputs(0),
	}
}

// Clamp limits x to [lo, hi] (jnp.clip). The gradient passes where
// lo <= x <= hi and is 0 outside. It panics if lo > hi.
func Clamp(x *Tensor, lo, hi float32) *Tensor {
	if x.dtype != Float32 {
		panic(fmt.Sprintf("tensor.Clamp: %v: not defined for %v", x, x.dtype))
	}
	if lo > hi {
		panic(fmt.Sprintf("tensor.Clamp: %v: lo %v > hi %v", x, lo, hi))
	}
	return Apply(clampOp, clampParams{lo, hi}, x)
}
