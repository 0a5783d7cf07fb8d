package tensor

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor/internal/vec"
	"github.com/gonox/gonox/tensor/internal/vec/f64"
)

// unaryOpVec builds a float32 (and optionally int32) elementwise op with a
// whole-slice float32 kernel (a vec kernel: no call per element; nil for a
// loop over f).
func unaryOpVec(name string, vec func(d, s []float32), f func(float32) float32, fi func(int32) int32, vjp func(g *Tensor, in []*Tensor, out *Tensor, p any) []*Tensor, save SaveMask, tr Traits) *Op {
	return unaryOpCost(name, costCheap, vec, f, fi, vjp, save, tr)
}

// unaryOpCost is unaryOpVec with a cost that weighs the kernel for the
// parallel split.
//
// Its rules: under Vmap the op runs on the whole batch as it is; its JVP is
// its VJP applied to the tangent (an elementwise function's Jacobian is
// diagonal, its own transpose).
func unaryOpCost(name string, cost int, vec func(d, s []float32), f func(float32) float32, fi func(int32) int32, vjp func(g *Tensor, in []*Tensor, out *Tensor, p any) []*Tensor, save SaveMask, tr Traits) *Op {
	op := &Op{
		Name: name,
		Impl: func(in []*Tensor, _ any) *Tensor {
			x := in[0]
			out := newOutUninit(x.dtype, x.shape)
			switch x.dtype {
			case Float32:
				d, s := out.f32(), x.f32()
				if vec == nil {
					for i, v := range s {
						d[i] = f(v)
					}
					break
				}
				mapF32(vec, d, s, cost, x.local() != nil)
			case Int32:
				d, s := out.i32(), x.i32()
				for i, v := range s {
					d[i] = fi(v)
				}
			}
			return out
		},
		VJP:      vjp,
		Save:     save,
		Sharding: ShardingRule{Family: ShardElementwise},
		Traits:   tr,
	}
	op.Batch = sameOpBatch(&op)
	if vjp != nil {
		op.JVP = symmetricJVP(&op)
	}
	return op
}

// mapF32 runs an elementwise kernel over s into d, split over goroutines
// when large.
func mapF32(kernel func(d, s []float32), d, s []float32, cost int, local bool) {
	if serial(len(s)*cost, local) {
		kernel(d, s)
		return
	}
	parallelFor(len(s), cost, 8, local, func(lo, hi int) { kernel(d[lo:hi], s[lo:hi]) })
}

// map2F32 runs a two-operand elementwise kernel, split when large.
func map2F32(kernel func(d, a, b []float32), d, a, b []float32, cost int, local bool) {
	if serial(len(d)*cost, local) {
		kernel(d, a, b)
		return
	}
	parallelFor(len(d), cost, 8, local, func(lo, hi int) { kernel(d[lo:hi], a[lo:hi], b[lo:hi]) })
}

// bwdOp builds a fused backward primitive z = g·f'(x) (or a function of
// the output y) computed by kernel(dst, g, x) in one sweep. Its own VJP,
// built from ops, makes higher derivatives work. Under Vmap both operands
// are given the batch (the kernel wants equal shapes); its JVP is its VJP
// applied to the tangents (symmetricJVP).
func bwdOp(name string, cost int, kernel func(d, g, x []float32), vjp func(c *Tensor, in []*Tensor, out *Tensor, p any) []*Tensor) *Op {
	k := &bwdKernel{kernel, cost}
	op := &Op{
		Name: name,
		Impl: func(in []*Tensor, _ any) *Tensor {
			return k.apply(in[0], in[1])
		},
		bwd:      k,
		VJP:      vjp,
		Save:     SaveAllInputs,
		Sharding: ShardingRule{Family: ShardElementwise},
	}
	op.Batch = materializeBatch(&op)
	op.JVP = symmetricJVP(&op)
	return op
}

// stageLen is the length of the stack buffer through which kernels that
// may write over their input stage intermediate values.
const stageLen = 256

// gradTimes returns a kernel dst = g·grad(x) from a derivative kernel.
// grad(x) is staged through a small buffer, so dst may be g itself.
func gradTimes(grad func(d, s []float32)) func(d, g, x []float32) {
	return func(d, g, x []float32) {
		var buf [stageLen]float32
		for lo := 0; lo < len(d); lo += stageLen {
			hi := min(lo+stageLen, len(d))
			t := buf[:hi-lo]
			grad(t, x[lo:hi])
			vec.MulVV(d[lo:hi], t, g[lo:hi])
		}
	}
}

// unary validates x for the public function name and applies op.
func unary(name string, op *Op, intOK bool, x *Tensor) *Tensor {
	if !x.dtype.IsFloat() && !(intOK && (x.dtype == Int32 || x.dtype == Int64)) {
		panic(fmt.Sprintf("%s: %v: not defined for %v", name, x, x.dtype))
	}
	return Apply(op, nil, x)
}

var negOp, absOp, signOp, expOp, logOp, sqrtOp, rsqrtOp, squareOp, tanhOp, sigmoidOp, reluOp, siluOp, geluOp, geluExactOp *Op

// activationTraits are the traits of the activations (and Square): their
// VJPs return a fresh bwd-op result, computed over a donated cotangent
// when Backward owns it (ad_backward.go).
var activationTraits = Traits{Reuse: FreshVJP | TakesCotangent}

// Fused backward primitives: g·f'(x) or g·f'(y) in one sweep.
var geluBwdOp, geluExactBwdOp, siluBwdOp, tanhBwdOp, sigmoidBwdOp, reluBwdOp, squareBwdOp *Op

func init() {
	negOp = withInt64(withFloat64(unaryOpVec("neg", func(d, s []float32) {
		d = d[:len(s)]
		for i, v := range s {
			d[i] = -v
		}
	}, nil, func(x int32) int32 { return -x },
		func(g *Tensor, _ []*Tensor, _ *Tensor, _ any) []*Tensor { return []*Tensor{Neg(g)} }, 0, Traits{}), costCheap, each64(func(v float64) float64 { return -v })), func(v int64) int64 { return -v })
	absOp = withInt64(withFloat64(unaryOpVec("abs", func(d, s []float32) {
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
		SaveInputs(0), Traits{}), costCheap, each64(math.Abs)), absInt[int64])
	signOp = withInt64(withFloat64(unaryOpVec("sign", func(d, s []float32) {
		d = d[:len(s)]
		for i, x := range s {
			switch {
			case x > 0:
				d[i] = 1
			case x < 0:
				d[i] = -1
			default:
				d[i] = x // 0, -0 or NaN
			}
		}
	}, nil, func(x int32) int32 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return 0
	}, nil, 0, Traits{}), costCheap, each64(sign64)), signInt[int64])
	expOp = withFloat64(unaryOpCost("exp", costMath, vec.Exp, nil, nil,
		func(g *Tensor, _ []*Tensor, out *Tensor, _ any) []*Tensor { return []*Tensor{Mul(g, out)} },
		SaveOutput, Traits{}), costMath, f64.Exp)
	logOp = withFloat64(unaryOpCost("log", costMath, vec.Log, nil, nil,
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor { return []*Tensor{Div(g, in[0])} },
		SaveInputs(0), Traits{}), costMath, f64.Log)
	sqrtOp = withFloat64(unaryOpCost("sqrt", costMath, vec.Sqrt, nil, nil,
		func(g *Tensor, _ []*Tensor, out *Tensor, _ any) []*Tensor {
			return []*Tensor{Div(g, MulScalar(out, 2))}
		}, SaveOutput, Traits{}), costMath, f64.Sqrt)
	rsqrtOp = withFloat64(unaryOpCost("rsqrt", costMath, vec.Rsqrt, nil, nil,
		func(g *Tensor, in []*Tensor, out *Tensor, _ any) []*Tensor {
			// d/dx x^-1/2 = -1/2 x^-3/2 = -out/(2x)
			return []*Tensor{Mul(g, Div(MulScalar(out, -0.5), in[0]))}
		}, SaveInputs(0)|SaveOutput, Traits{}), costMath, f64.Rsqrt)
	squareOp = withInt64(withFloat64(unaryOpVec("square", vec.Square, nil, func(x int32) int32 { return x * x },
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			if in[0].dtype != Float32 {
				return []*Tensor{Mul(g, MulScalar(in[0], 2))}
			}
			return []*Tensor{Apply(squareBwdOp, nil, g, in[0])}
		}, SaveInputs(0), activationTraits), costCheap, f64.Square), func(v int64) int64 { return v * v })
	// square_bwd: g·(2x), as Mul(g, MulScalar(x, 2)) computes it (2x is exact).
	squareBwdOp = withFloat64Bwd(bwdOp("square_bwd", costCheap, func(d, g, x []float32) {
		var buf [stageLen]float32
		for lo := 0; lo < len(d); lo += stageLen {
			hi := min(lo+stageLen, len(d))
			t := buf[:hi-lo]
			vec.MulVS(t, x[lo:hi], 2)
			vec.MulVV(d[lo:hi], g[lo:hi], t)
		}
	}, func(c *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		g, x := in[0], in[1]
		return []*Tensor{Mul(c, MulScalar(x, 2)), Mul(MulScalar(c, 2), g)}
	}), costCheap, func(d, g, x []float64) {
		for i := range d {
			d[i] = g[i] * (2 * x[i])
		}
	})
	tanhOp = withFloat64(unaryOpCost("tanh", costMath, vec.Tanh, nil, nil,
		func(g *Tensor, _ []*Tensor, out *Tensor, _ any) []*Tensor {
			return []*Tensor{Apply(tanhBwdOp, nil, g, out)}
		}, SaveOutput, activationTraits), costMath, f64.Tanh)
	// tanh_bwd: g·(1 - y²).
	tanhBwdOp = withFloat64Bwd(bwdOp("tanh_bwd", costCheap, vec.TanhGradMul, func(c *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		g, y := in[0], in[1]
		return []*Tensor{Apply(tanhBwdOp, nil, c, y), MulScalar(Mul(Mul(c, g), y), -2)}
	}), costCheap, f64.TanhGradMul)
	sigmoidOp = withFloat64(unaryOpCost("sigmoid", costMath, vec.Sigmoid, nil, nil,
		func(g *Tensor, _ []*Tensor, out *Tensor, _ any) []*Tensor {
			return []*Tensor{Apply(sigmoidBwdOp, nil, g, out)}
		}, SaveOutput, activationTraits), costMath, f64.Sigmoid)
	// sigmoid_bwd: g·y·(1 - y).
	sigmoidBwdOp = withFloat64Bwd(bwdOp("sigmoid_bwd", costCheap, vec.SigmoidGradMul, func(c *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		g, y := in[0], in[1]
		return []*Tensor{Apply(sigmoidBwdOp, nil, c, y), Mul(Mul(c, g), Sub(Scalar(1), MulScalar(y, 2)))}
	}), costCheap, f64.SigmoidGradMul)
	reluOp = withFloat64(unaryOpVec("relu", vec.Relu, nil, nil, func(g *Tensor, _ []*Tensor, out *Tensor, _ any) []*Tensor {
		// The gradient at 0 is 0, as in JAX.
		return []*Tensor{Apply(reluBwdOp, nil, g, out)}
	}, SaveOutput, activationTraits), costCheap, f64.Relu)
	// relu_bwd: g where y > 0, else 0. Piecewise constant in y.
	reluBwdOp = withFloat64Bwd(bwdOp("relu_bwd", costCheap, vec.ReluGradMul, func(c *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		return []*Tensor{Apply(reluBwdOp, nil, c, in[1]), nil}
	}), costCheap, f64.ReluGradMul)
	siluOp = withFloat64(unaryOpCost("silu", costMath, vec.Silu, nil, nil,
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{Apply(siluBwdOp, nil, g, in[0])}
		}, SaveInputs(0), activationTraits), costMath, f64.Silu)
	// silu_bwd: g·σ(x)·(1 + x·(1-σ(x))).
	siluBwdOp = withFloat64Bwd(bwdOp("silu_bwd", costMath, gradTimes(vec.SiluGrad), func(c *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		g, x := in[0], in[1]
		return []*Tensor{Apply(siluBwdOp, nil, c, x), Mul(Mul(c, g), siluGrad2(x))}
	}), costMath, gradTimes64(f64.SiluGrad))
	geluOp = withFloat64(unaryOpCost("gelu", costMath, vec.Gelu, nil, nil,
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{Apply(geluBwdOp, nil, g, in[0])}
		}, SaveInputs(0), activationTraits), costMath, f64.Gelu)
	// gelu_bwd: g·gelu'(x) in one sweep.
	geluBwdOp = withFloat64Bwd(bwdOp("gelu_bwd", costMath, gradTimes(vec.GeluGrad), func(c *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		g, x := in[0], in[1]
		return []*Tensor{Apply(geluBwdOp, nil, c, x), Mul(Mul(c, g), geluTanhGrad2(x))}
	}), costMath, gradTimes64(f64.GeluGrad))
	geluExactOp = withFloat64(unaryOpCost("gelu_exact", costSlow, vec.GeluExact, nil, nil,
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{Apply(geluExactBwdOp, nil, g, in[0])}
		}, SaveInputs(0), activationTraits), costSlow, f64.GeluExact)
	geluExactBwdOp = withFloat64Bwd(bwdOp("gelu_exact_bwd", costSlow, gradTimes(vec.GeluExactGrad), func(c *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		g, x := in[0], in[1]
		return []*Tensor{Apply(geluExactBwdOp, nil, c, x), Mul(Mul(c, g), geluExactGrad2(x))}
	}), costSlow, gradTimes64(f64.GeluExactGrad))
}

// geluExactGrad2 returns d²/dx² x·Φ(x) = φ(x)·(2 - x²), built from ops.
func geluExactGrad2(x *Tensor) *Tensor {
	x2 := Square(x)
	phi := MulScalar(Exp(MulScalar(x2, -0.5)), float32(1/math.Sqrt(2*math.Pi)))
	return Mul(phi, Sub(Scalar(2), x2))
}

// siluGrad2 returns d²/dx² x·σ(x) = σ(1-σ)·(2 + x·(1-2σ)), built from ops.
func siluGrad2(x *Tensor) *Tensor {
	s := Sigmoid(x)
	ds := Mul(s, Sub(Scalar(1), s))
	return Mul(ds, AddScalar(Mul(x, Sub(Scalar(1), MulScalar(s, 2))), 2))
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

const geluC = 0.7978845608028654 // sqrt(2/π)

// Neg returns -x.
func Neg(x *Tensor) *Tensor {
	checkNil("tensor.Neg", "x", x)
	return unary("tensor.Neg", negOp, true, x)
}

// Abs returns |x|. Its gradient at 0 is 0.
func Abs(x *Tensor) *Tensor {
	checkNil("tensor.Abs", "x", x)
	return unary("tensor.Abs", absOp, true, x)
}

// Sign returns -1, 0 or 1 elementwise. It is not differentiable.
func Sign(x *Tensor) *Tensor {
	checkNil("tensor.Sign", "x", x)
	return unary("tensor.Sign", signOp, true, x)
}

// Exp returns e^x.
func Exp(x *Tensor) *Tensor {
	checkNil("tensor.Exp", "x", x)
	return unary("tensor.Exp", expOp, false, x)
}

// Log returns the natural logarithm.
func Log(x *Tensor) *Tensor {
	checkNil("tensor.Log", "x", x)
	return unary("tensor.Log", logOp, false, x)
}

// Sqrt returns the square root.
func Sqrt(x *Tensor) *Tensor {
	checkNil("tensor.Sqrt", "x", x)
	return unary("tensor.Sqrt", sqrtOp, false, x)
}

// Rsqrt returns 1/sqrt(x).
func Rsqrt(x *Tensor) *Tensor {
	checkNil("tensor.Rsqrt", "x", x)
	return unary("tensor.Rsqrt", rsqrtOp, false, x)
}

// Square returns x*x.
func Square(x *Tensor) *Tensor {
	checkNil("tensor.Square", "x", x)
	return unary("tensor.Square", squareOp, true, x)
}

// Tanh returns the hyperbolic tangent.
func Tanh(x *Tensor) *Tensor {
	checkNil("tensor.Tanh", "x", x)
	return unary("tensor.Tanh", tanhOp, false, x)
}

// Sigmoid returns 1/(1+e^-x).
func Sigmoid(x *Tensor) *Tensor {
	checkNil("tensor.Sigmoid", "x", x)
	return unary("tensor.Sigmoid", sigmoidOp, false, x)
}

// Relu returns max(x, 0) (NaN for NaN, like Maximum); its gradient at 0
// is 0.
func Relu(x *Tensor) *Tensor {
	checkNil("tensor.Relu", "x", x)
	return unary("tensor.Relu", reluOp, false, x)
}

// Silu returns x·sigmoid(x) (also called swish).
func Silu(x *Tensor) *Tensor {
	checkNil("tensor.Silu", "x", x)
	return unary("tensor.Silu", siluOp, false, x)
}

// Gelu returns the Gaussian error linear unit in its tanh approximation,
// which is jax.nn.gelu's default (approximate=True).
func Gelu(x *Tensor) *Tensor {
	checkNil("tensor.Gelu", "x", x)
	return unary("tensor.Gelu", geluOp, false, x)
}

// GeluExact returns x·Φ(x) with the exact normal CDF (PyTorch's default).
func GeluExact(x *Tensor) *Tensor {
	checkNil("tensor.GeluExact", "x", x)
	return unary("tensor.GeluExact", geluExactOp, false, x)
}

type clampParams struct{ lo, hi float32 }

var clampOp *Op

func init() {
	clampOp = &Op{
		Name:     "clamp",
		Sharding: ShardingRule{Family: ShardElementwise},
		Impl: func(in []*Tensor, p any) *Tensor {
			c := p.(clampParams)
			x := in[0]
			if x.dtype == Float64 {
				out := newOutUninit(Float64, x.shape)
				lo, hi := float64(c.lo), float64(c.hi)
				d := out.f64()
				for i, v := range x.f64() {
					d[i] = min(max(v, lo), hi)
				}
				return out
			}
			out := newOutUninit(Float32, x.shape)
			d := out.f32()[:len(x.f32())]
			for i, v := range x.f32() {
				d[i] = min(max(v, c.lo), c.hi)
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, p any) []*Tensor {
			c := p.(clampParams)
			x := in[0]
			inside := LogicalAnd(GreaterEqual(x, Scalar(c.lo)), LessEqual(x, Scalar(c.hi)))
			return []*Tensor{Where(inside, g, Scalar(0))}
		},
		Save:   SaveInputs(0),
		JVP:    symmetricJVP(&clampOp),
		Batch:  sameOpBatch(&clampOp),
		Traits: Traits{Types: TypesFloat64},
	}
}

// Clamp limits x to [lo, hi] (jnp.clip). The gradient passes where
// lo <= x <= hi and is 0 outside. It panics if lo > hi.
func Clamp(x *Tensor, lo, hi float32) *Tensor {
	checkNil("tensor.Clamp", "x", x)
	if !x.dtype.IsFloat() {
		panic(fmt.Sprintf("tensor.Clamp: %v: not defined for %v", x, x.dtype))
	}
	if lo > hi {
		panic(fmt.Sprintf("tensor.Clamp: %v: lo %v > hi %v", x, lo, hi))
	}
	return Apply(clampOp, clampParams{lo, hi}, x)
}
