package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rules of every op, tested op by op: the batching rule (Vmap over
// each operand and each of its axes equals a loop over the examples, bit
// for bit unless the case says the summation order may change) and the
// JVP rule (against finite differences, and against the transpose of the
// VJP: <J·t, u> = <t, Jᵀ·u>, which holds to rounding).
//
// Every op of the package has a case: TestRulesCoverEveryOp walks the
// package's source for its *Op variables and fails for one without a
// case, a batching rule, or (if it is differentiable) a JVP rule. An op
// added elsewhere registers its cases from its own test file with
// addRuleCases (op_recipe_internal_test.go does it for the toy ops).

// ruleCase tests the rules of one op.
type ruleCase struct {
	// name is the op's variable (softsignOp), op its address.
	name string
	op   **Op
	// in returns one example's operands.
	in func(r *rand.Rand) []*Tensor
	// f applies the op (through its public function, or Apply).
	f func(x []*Tensor) []*Tensor
	// vmapTol: 0 compares Vmap with the loop bit for bit; otherwise the
	// relative tolerance (the batch changes a summation order).
	vmapTol float64
	// fdTol is the tolerance of the finite-difference check relative to
	// the largest tangent (0: 2e-3); noFD skips it (the op is piecewise
	// constant where the inputs are, or rounds).
	fdTol float64
	noFD  bool
	// tTol is the tolerance of the transpose check (0: 1e-5).
	tTol float64
}

var ruleCases []ruleCase

// addRuleCases registers cases (from a test file's package-level var).
func addRuleCases(cs ...ruleCase) bool {
	ruleCases = append(ruleCases, cs...)
	return true
}

// Generators of test operands.

func rU(r *rand.Rand, lo, hi float64, shape ...int) *Tensor {
	d := make([]float32, numel(shape))
	for i := range d {
		d[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return FromFloat32(d, shape...)
}

// rF is uniform in [-2, 2).
func rF(r *rand.Rand, shape ...int) *Tensor { return rU(r, -2, 2, shape...) }

// rPos is uniform in [0.5, 2).
func rPos(r *rand.Rand, shape ...int) *Tensor { return rU(r, 0.5, 2, shape...) }

// rAway is at least 0.25 away from 0 (kinks), up to 2 in magnitude.
func rAway(r *rand.Rand, shape ...int) *Tensor {
	d := make([]float32, numel(shape))
	for i := range d {
		v := 0.25 + 1.75*r.Float64()
		if r.IntN(2) == 0 {
			v = -v
		}
		d[i] = float32(v)
	}
	return FromFloat32(d, shape...)
}

// rDistinct holds distinct values at least 0.1 apart (no ties for the
// max, the sorts and their finite differences).
func rDistinct(r *rand.Rand, shape ...int) *Tensor {
	n := numel(shape)
	d := make([]float32, n)
	for i, p := range r.Perm(n) {
		d[i] = float32(p)*0.25 - float32(n)*0.125 + float32(0.05*r.Float64())
	}
	return FromFloat32(d, shape...)
}

func rI(r *rand.Rand, lo, hi int, shape ...int) *Tensor {
	d := make([]int32, numel(shape))
	for i := range d {
		d[i] = int32(lo + r.IntN(hi-lo))
	}
	return FromInt32(d, shape...)
}

func rB(r *rand.Rand, shape ...int) *Tensor {
	d := make([]bool, numel(shape))
	for i := range d {
		d[i] = r.IntN(2) == 0
	}
	return FromBool(d, shape...)
}

func args(xs ...*Tensor) []*Tensor { return xs }

// fn1 adapts a one-result function of one operand.
func fn1(f func(x *Tensor) *Tensor) func([]*Tensor) []*Tensor {
	return func(x []*Tensor) []*Tensor { return []*Tensor{f(x[0])} }
}

// fn2 adapts a one-result function of two operands.
func fn2(f func(a, b *Tensor) *Tensor) func([]*Tensor) []*Tensor {
	return func(x []*Tensor) []*Tensor { return []*Tensor{f(x[0], x[1])} }
}

// ap applies op with params to the operands.
func ap(op **Op, p any) func([]*Tensor) []*Tensor {
	return func(x []*Tensor) []*Tensor { return applyAll(*op, p, x) }
}

// un is a case of a float unary op over in's operands.
func un(name string, op **Op, f func(*Tensor) *Tensor, in func(r *rand.Rand, shape ...int) *Tensor) ruleCase {
	return ruleCase{name: name, op: op, in: func(r *rand.Rand) []*Tensor { return args(in(r, 3, 4)) }, f: fn1(f)}
}

// bwd is a case of a fused backward op (g, x) of one shape.
func bwd(name string, op **Op, in func(r *rand.Rand, shape ...int) *Tensor) ruleCase {
	return ruleCase{name: name, op: op, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), in(r, 3, 4)) }, f: ap(op, nil)}
}

// bin is a case of a broadcasting binary op over a [3,4] and a [4].
func bin(name string, op **Op, f func(a, b *Tensor) *Tensor, ina, inb func(r *rand.Rand, shape ...int) *Tensor) ruleCase {
	return ruleCase{name: name, op: op, in: func(r *rand.Rand) []*Tensor { return args(ina(r, 3, 4), inb(r, 4)) }, f: fn2(f)}
}

var _ = addRuleCases(
	un("negOp", &negOp, Neg, rF), un("absOp", &absOp, Abs, rAway), un("expOp", &expOp, Exp, rF),
	un("logOp", &logOp, Log, rPos), un("sqrtOp", &sqrtOp, Sqrt, rPos), un("rsqrtOp", &rsqrtOp, Rsqrt, rPos),
	un("squareOp", &squareOp, Square, rF), un("tanhOp", &tanhOp, Tanh, rF), un("sigmoidOp", &sigmoidOp, Sigmoid, rF),
	un("reluOp", &reluOp, Relu, rAway), un("siluOp", &siluOp, Silu, rF), un("geluOp", &geluOp, Gelu, rF),
	un("geluExactOp", &geluExactOp, GeluExact, rF), un("softplusOp", &softplusOp, Softplus, rF),
	un("logSigmoidOp", &logSigmoidOp, LogSigmoid, rF),
	ruleCase{name: "signOp", op: &signOp, in: func(r *rand.Rand) []*Tensor { return args(rI(r, -3, 4, 3, 4)) }, f: fn1(Sign)},
	ruleCase{name: "clampOp", op: &clampOp, in: func(r *rand.Rand) []*Tensor { return args(rClampIn(r, 3, 4)) },
		f: fn1(func(x *Tensor) *Tensor { return Clamp(x, -1, 1) })},
	bwd("reluBwdOp", &reluBwdOp, rAway), bwd("geluBwdOp", &geluBwdOp, rF), bwd("geluExactBwdOp", &geluExactBwdOp, rF),
	bwd("siluBwdOp", &siluBwdOp, rF), bwd("tanhBwdOp", &tanhBwdOp, rF), bwd("sigmoidBwdOp", &sigmoidBwdOp, rF),
	bwd("squareBwdOp", &squareBwdOp, rF),
)

var _ = addRuleCases(
	bin("addOp", &addOp, Add, rF, rF), bin("subOp", &subOp, Sub, rF, rF), bin("mulOp", &mulOp, Mul, rF, rF),
	bin("divOp", &divOp, Div, rF, rAway),
	ruleCase{name: "powOp", op: &powOp, in: func(r *rand.Rand) []*Tensor { return args(rPos(r, 3, 4), rF(r, 3, 1)) }, f: fn2(Pow)},
	ruleCase{name: "remOp", op: &remOp, in: func(r *rand.Rand) []*Tensor { return args(rI(r, -9, 9, 3, 4), rI(r, 1, 4, 4)) }, f: fn2(Rem)},
	ruleCase{name: "floorDivOp", op: &floorDivOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rAway(r, 4)) }, f: fn2(FloorDiv)},
	// Maximum and Minimum of operands at least 0.1 apart (no ties, no
	// kink within the finite differences).
	ruleCase{name: "maxOp", op: &maxOp, in: func(r *rand.Rand) []*Tensor {
		d := rDistinct(r, 4, 4)
		return args(SliceAxis(d, 0, 0, 3), Squeeze(SliceAxis(d, 0, 3, 4), 0))
	}, f: fn2(Maximum)},
	ruleCase{name: "minOp", op: &minOp, in: func(r *rand.Rand) []*Tensor {
		d := rDistinct(r, 4, 4)
		return args(SliceAxis(d, 0, 0, 3), Squeeze(SliceAxis(d, 0, 3, 4), 0))
	}, f: fn2(Minimum)},
	ruleCase{name: "eqOp", op: &eqOp, in: func(r *rand.Rand) []*Tensor { return args(rI(r, 0, 3, 3, 4), rI(r, 0, 3, 4)) }, f: fn2(Equal)},
	bin("neOp", &neOp, NotEqual, rF, rF), bin("ltOp", &ltOp, Less, rF, rF), bin("leOp", &leOp, LessEqual, rF, rF),
	bin("gtOp", &gtOp, Greater, rF, rF), bin("geOp", &geOp, GreaterEqual, rF, rF),
	ruleCase{name: "andOp", op: &andOp, in: func(r *rand.Rand) []*Tensor { return args(rB(r, 3, 4), rB(r, 4)) }, f: fn2(LogicalAnd)},
	ruleCase{name: "orOp", op: &orOp, in: func(r *rand.Rand) []*Tensor { return args(rB(r, 3, 4), rB(r, 4)) }, f: fn2(LogicalOr)},
	ruleCase{name: "xorOp", op: &xorOp, in: func(r *rand.Rand) []*Tensor { return args(rB(r, 3, 4), rB(r, 4)) }, f: fn2(LogicalXor)},
	ruleCase{name: "notOp", op: &notOp, in: func(r *rand.Rand) []*Tensor { return args(rB(r, 3, 4)) }, f: fn1(LogicalNot)},
	ruleCase{name: "isNaNOp", op: &isNaNOp, in: func(r *rand.Rand) []*Tensor { return args(Log(rF(r, 3, 4))) }, f: fn1(IsNaN)},
	ruleCase{name: "isFiniteOp", op: &isFiniteOp, in: func(r *rand.Rand) []*Tensor { return args(Div(rI1(r), rF(r, 3, 4))) }, f: fn1(IsFinite)},
	ruleCase{name: "whereOp", op: &whereOp, in: func(r *rand.Rand) []*Tensor { return args(rB(r, 3, 4), rF(r, 3, 4), rF(r, 4)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Where(x[0], x[1], x[2])} }},
	ruleCase{name: "asTypeOp", op: &asTypeOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: fn1(func(x *Tensor) *Tensor { return AsType(MulScalar(x, 3), Int32) })},
	// Rounding to bfloat16 is piecewise constant: no finite differences,
	// and the transpose check to bfloat16's precision.
	ruleCase{name: "convertOp", op: &convertOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: fn1(func(x *Tensor) *Tensor { return Convert(x, BFloat16) }), noFD: true, tTol: 1e-2},
)

// rClampIn is inside (-0.85, 0.85) or outside ±1.15: at least 0.15 from
// the kinks of Clamp(x, -1, 1).
func rClampIn(r *rand.Rand, shape ...int) *Tensor {
	d := make([]float32, numel(shape))
	for i := range d {
		v := 0.85 * (2*r.Float64() - 1)
		if r.IntN(2) == 0 {
			v = math.Copysign(1.15+0.85*r.Float64(), v)
		}
		d[i] = float32(v)
	}
	return FromFloat32(d, shape...)
}

// rI1 is an int-valued float32 numerator with zeros (Inf and NaN after a
// division).
func rI1(r *rand.Rand) *Tensor { return AsType(rI(r, -1, 2, 3, 4), Float32) }

var _ = addRuleCases(
	ruleCase{name: "sumOp", op: &sumOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4, 5)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Sum(x[0], 1), SumKeep(x[0], 0, 2), Sum(x[0])} }},
	ruleCase{name: "maxReduceOp", op: &maxReduceOp, in: func(r *rand.Rand) []*Tensor { return args(rDistinct(r, 3, 4, 5)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Max(x[0], 1), MaxKeep(x[0], 0, 2), Max(x[0])} }},
	ruleCase{name: "minReduceOp", op: &minReduceOp, in: func(r *rand.Rand) []*Tensor { return args(rDistinct(r, 3, 4, 5)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Min(x[0], 2), MinKeep(x[0], 1)} }},
	ruleCase{name: "argOp", op: &argOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4, 5)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{ArgMax(x[0], 1), ArgMin(x[0], -1), ArgMaxKeep(x[0], 0)} }},
	ruleCase{name: "anyAllOp", op: &anyAllOp, in: func(r *rand.Rand) []*Tensor { return args(rB(r, 3, 4, 2)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Any(x[0], 1), All(x[0], 0, 2), All(x[0])} }},
	ruleCase{name: "cumsumOp", op: &cumsumOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{Cumsum(x[0], 1), CumsumExclusive(x[0], 0), CumsumReverse(x[0], 1)}
		}},
	ruleCase{name: "reshapeOp", op: &reshapeOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Reshape(x[0], 2, 6), Flatten(x[0]), ExpandDims(x[0], 1)} }},
	ruleCase{name: "broadcastOp", op: &broadcastOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 1), rI(r, 0, 9, 4)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{BroadcastTo(x[0], 2, 3, 4), BroadcastTo(x[1], 3, 4)} }},
	ruleCase{name: "transposeOp", op: &transposeOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 4)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Transpose(x[0], 2, 0, 1), T(x[0])} }},
	ruleCase{name: "matmulOp", op: &matmulOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rF(r, 4, 5), rF(r, 4)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{MatMul(x[0], x[1]), MatMul(x[2], x[1]), MatMul(x[0], x[2]), MatMulT(x[1], x[0], true, true)}
		},
		// A batched product may take another gemm path (a matrix-vector
		// product becomes a matrix product), so another summation order.
		vmapTol: 1e-6},
	ruleCase{name: "matmulToOp", op: &matmulToOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rF(r, 4, 5)) },
		f: fn2(func(a, b *Tensor) *Tensor {
			return MatMulTo(Convert(a, BFloat16), Convert(b, BFloat16), false, false, Float32)
		}), noFD: true, tTol: 1e-2},
	ruleCase{name: "matmulToOp/MatMulAs", op: &matmulToOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rF(r, 4, 5)) },
		f: fn2(func(a, b *Tensor) *Tensor {
			return MatMulAs(Convert(a, BFloat16), b, false, false, BFloat16, Float32)
		}), noFD: true, tTol: 1e-2},
)

var _ = addRuleCases(
	ruleCase{name: "softmaxOp", op: &softmaxOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Softmax(x[0], 1), Softmax(x[0], 0)} }},
	ruleCase{name: "logSoftmaxOp", op: &logSoftmaxOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{LogSoftmax(x[0], 1), LogSoftmax(x[0], 0)} }},
	ruleCase{name: "softmaxGradOp", op: &softmaxGradOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), Softmax(rF(r, 3, 4), 1)) },
		f: ap(&softmaxGradOp, 1)},
	ruleCase{name: "logSoftmaxGradOp", op: &logSoftmaxGradOp, in: func(r *rand.Rand) []*Tensor {
		return args(rF(r, 3, 4), LogSoftmax(rF(r, 3, 4), 0))
	}, f: ap(&logSoftmaxGradOp, 0)},
	ruleCase{name: "mseOp", op: &mseOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rF(r, 3, 4)) }, f: fn2(MSE)},
	ruleCase{name: "mseGradOp", op: &mseGradOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r), rF(r, 3, 4), rF(r, 3, 4)) },
		f: ap(&mseGradOp, nil)},
	ruleCase{name: "xentOp", op: &xentOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 5), rI(r, 0, 5, 3)) },
		f: ap(&xentOp, nil)},
	ruleCase{name: "xentFwdOp", op: &xentFwdOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 5), rI(r, 0, 5, 3)) },
		f: fn2(SoftmaxCrossEntropy)},
	ruleCase{name: "xentGradOp", op: &xentGradOp, in: func(r *rand.Rand) []*Tensor {
		return args(rF(r, 3), Softmax(rF(r, 3, 5), 1), rI(r, 0, 5, 3))
	}, f: ap(&xentGradOp, nil)},
	ruleCase{name: "xentProbsOp", op: &xentProbsOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 5), Softmax(rF(r, 3, 5), 1)) },
		f: ap(&xentProbsOp, nil)},
	ruleCase{name: "xentProbsFwdOp", op: &xentProbsFwdOp, in: func(r *rand.Rand) []*Tensor {
		return args(rF(r, 3, 5), Softmax(rF(r, 3, 5), 1))
	}, f: fn2(SoftmaxCrossEntropyProbs)},
	ruleCase{name: "biasActOp", op: &biasActOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rF(r, 4)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{BiasAct(x[0], x[1], ActGelu), BiasAct(x[0], x[1], ActTanh), BiasAct(x[0], x[1], ActIdentity)}
		}},
	ruleCase{name: "denseOp", op: &denseOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rF(r, 4, 5), rF(r, 5)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{MatMulBiasAct(x[0], x[1], x[2], ActTanh), MatMulBiasAct(x[0], x[1], x[2], ActIdentity)}
		}, vmapTol: 1e-6}, // the batch's rows in one product: another gemm path (avx2, go)
	ruleCase{name: "biasActBwdOp", op: &biasActBwdOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rF(r, 3, 4), rF(r, 4)) },
		f: ap(&biasActBwdOp, ActSilu)},
	ruleCase{name: "adamOp", op: &adamOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rF(r, 3, 4), rPos(r, 3, 4), rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor {
			u, m, v := AdamUpdate(x[0], x[1], x[2], x[3], testAdam)
			return []*Tensor{u, m, v}
		}},
	ruleCase{name: "adamStepOp", op: &adamStepOp, in: func(r *rand.Rand) []*Tensor {
		return args(rF(r, 3, 4), rF(r, 3, 4), rF(r, 3, 4), rPos(r, 3, 4))
	}, f: func(x []*Tensor) []*Tensor {
		p, m, v := AdamStep(x[0], x[1], x[2], x[3], testAdam)
		return []*Tensor{p, m, v}
	}},
	ruleCase{name: "adamStepsOp", op: &adamStepsOp, in: func(r *rand.Rand) []*Tensor {
		return args(rF(r, 3, 4), rF(r, 3, 4), rF(r, 3, 4), rPos(r, 3, 4), rF(r, 5), rF(r, 5), rF(r, 5), rPos(r, 5))
	}, f: func(x []*Tensor) []*Tensor {
		c2 := testAdam
		c2.WD = 0
		two := func(i int) []*Tensor { return []*Tensor{x[i], x[4+i]} }
		p, m, v := AdamSteps(two(0), two(1), two(2), two(3), []AdamCoeffs{testAdam, c2})
		return []*Tensor{p[0], m[0], v[0], p[1], m[1], v[1]}
	}},
	ruleCase{name: "sgdStepOp", op: &sgdStepOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rF(r, 3, 4), rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor {
			p, t := SGDStep(x[0], x[1], x[2], 0.9, -0.1, true)
			return []*Tensor{p, t}
		}},
)

var testAdam = AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 1.5, C2: 2, Eps: 1e-8, WD: 0.01, Post: -0.1}

var _ = addRuleCases(
	ruleCase{name: "concatOp", op: &concatOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 2), rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Concat(1, x[0], x[1]), Stack(0, x[0], x[0])} }},
	ruleCase{name: "splitOp", op: &splitOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 5)) },
		f: func(x []*Tensor) []*Tensor { return append(SplitSizes(x[0], 1, []int{2, 3}), Unstack(x[0], 0)...) }},
	ruleCase{name: "takeOp", op: &takeOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 5, 4), rI(r, -5, 5, 3)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Take(x[0], x[1], 0), Take(x[0], Reshape(x[1], 3, 1), 0)} }},
	ruleCase{name: "takeAlongOp", op: &takeAlongOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 5), rI(r, -5, 5, 3, 2)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{TakeAlongAxis(x[0], x[1], 1), TakeAlongAxis(x[0], SliceAxis(x[1], 1, 0, 1), 1)}
		}},
	ruleCase{name: "takeAlongGradOp", op: &takeAlongGradOp, in: func(r *rand.Rand) []*Tensor { return args(rI(r, -5, 5, 3, 2), rF(r, 3, 2)) },
		f: ap(&takeAlongGradOp, &takeAlongParams{axis: 1, xShape: []int{3, 5}, outShape: []int{3, 2}})},
	ruleCase{name: "takeGradOp", op: &takeGradOp, in: func(r *rand.Rand) []*Tensor { return args(rI(r, -4, 4, 5), rF(r, 3, 5)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{takeGrad(x[1], x[0], []int{3, 4}, 1)} }},
	ruleCase{name: "oneHotOp", op: &oneHotOp, in: func(r *rand.Rand) []*Tensor { return args(rI(r, -1, 5, 3)) },
		f: fn1(func(x *Tensor) *Tensor { return OneHot(x, 4) })},
	ruleCase{name: "scatterAddOp", op: &scatterAddOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 5, 3), rI(r, -5, 5, 4), rF(r, 4, 3)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{ScatterAdd(x[0], x[1], x[2], 0), ScatterAdd(T(x[0]), x[1], T(x[2]), 1)}
		}},
	ruleCase{name: "segmentSumOp", op: &segmentSumOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 5, 3), rI(r, -1, 5, 5)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{SegmentSum(x[0], x[1], 4)} }},
	ruleCase{name: "segmentTakeOp", op: &segmentTakeOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 4, 3), rI(r, -1, 5, 5)) },
		f: ap(&segmentTakeOp, nil)},
	ruleCase{name: "sliceOp", op: &sliceOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 4, 5)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{Slice(x[0], []int{1, 0}, []int{3, 4}), SliceAxis(x[0], -1, 1, 3)}
		}},
	ruleCase{name: "dusOp", op: &dusOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 4, 5), rF(r, 2, 3)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{DynamicUpdateSlice(x[0], x[1], []int{1, -4})} }},
	ruleCase{name: "flipOp", op: &flipOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Flip(x[0], 1), Flip(x[0])} }},
	ruleCase{name: "rollOp", op: &rollOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Roll(x[0], 1, 1), Roll(x[0], -1, 0)} }},
	ruleCase{name: "padOp", op: &padOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Pad(x[0], [][2]int{{1, 0}, {2, 1}}, 0.5)} }},
)

var _ = addRuleCases(
	ruleCase{name: "argSortOp", op: &argSortOp, in: func(r *rand.Rand) []*Tensor { return args(rI(r, 0, 3, 3, 5)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{ArgSort(x[0], 1, false), ArgSort(x[0], 0, true)} }},
	ruleCase{name: "sortOp", op: &sortOp, in: func(r *rand.Rand) []*Tensor { return args(rDistinct(r, 3, 5)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Sort(x[0], 1, false), Sort(x[0], 0, true)} }},
	ruleCase{name: "topKOp", op: &topKOp, in: func(r *rand.Rand) []*Tensor { return args(rDistinct(r, 3, 5)) },
		f: func(x []*Tensor) []*Tensor {
			v, i := TopK(x[0], 2)
			return []*Tensor{v, i}
		}},
	ruleCase{name: "lexSortOp", op: &lexSortOp, in: func(r *rand.Rand) []*Tensor { return args(rI(r, 0, 2, 6), rB(r, 6), rI(r, 0, 3, 6)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{LexSort(x...), LexSort(x[2])} }},
	ruleCase{name: "srtGatherOp", op: &srtGatherOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 5), rI(r, 0, 5, 3, 2)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{srtGather(x[0], x[1], 1)} }},
	ruleCase{name: "srtScatterAddOp", op: &srtScatterAddOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 2), rI(r, 0, 5, 3, 2)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{srtScatterAdd(x[0], x[1], 1, 5)} }},
	ruleCase{name: "bincountOp", op: &bincountOp, in: func(r *rand.Rand) []*Tensor { return args(rI(r, 0, 6, 7), rF(r, 7)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{Bincount(x[0], x[1], 5), Bincount(x[0], nil, 4)} }},
	ruleCase{name: "srtBinGatherOp", op: &srtBinGatherOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 5), rI(r, 0, 7, 6)) },
		f: ap(&srtBinGatherOp, nil)},
	ruleCase{name: "raggedDotOp", op: &raggedDotOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 6, 3), rF(r, 2, 3, 4), rGroups(r)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{RaggedDot(x[0], x[1], x[2]), raggedDot(x[0], Transpose(x[1], 0, 2, 1), x[2], true)}
		}},
	ruleCase{name: "raggedOuterOp", op: &raggedOuterOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 6, 3), rF(r, 6, 4), rGroups(r)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{raggedOuter(x[0], x[1], x[2], 2)} }},
	// The grouped products in bfloat16 (rounding: no finite differences).
	ruleCase{name: "raggedDotOp/RaggedDotAs", op: &raggedDotOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 6, 3), rF(r, 2, 3, 4), rGroups(r)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{RaggedDotAs(x[0], x[1], x[2], BFloat16), raggedDotIn(x[0], Transpose(x[1], 0, 2, 1), x[2], true, BFloat16)}
		}, noFD: true, tTol: 1e-2},
	ruleCase{name: "raggedOuterOp/bf16", op: &raggedOuterOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 6, 3), rF(r, 6, 4), rGroups(r)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{Apply(raggedOuterOp, &raggedOuterParams{groups: 2, compute: BFloat16}, x[0], x[1], x[2])}
		}, noFD: true, tTol: 1e-2},
	ruleCase{name: "nameOp", op: &nameOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: fn1(func(x *Tensor) *Tensor { return Named(x, "h") })},
	ruleCase{name: "pvaryOp", op: &pvaryOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: fn1(func(x *Tensor) *Tensor { return Vary(x, testEnv{}.Local(1)) })},
	// A checkpoint differentiated inside the function: per-example
	// gradients through it under Vmap, its program under forward mode.
	ruleCase{name: "rematOp", op: &rematOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rF(r, 4)) },
		f: func(x []*Tensor) []*Tensor {
			tr := NewTrace()
			w := tr.Leaf(x[1])
			y := Remat(func(in []*Tensor) []*Tensor { return []*Tensor{Tanh(MatMul(in[0], in[1]))} }, nil, x[0], w)[0]
			loss := Sum(Square(y))
			g := Backward(tr, []*Tensor{loss}, []*Tensor{OnesLike(loss)}, []*Tensor{w}, false)[0]
			return []*Tensor{tr.Primal(y), g}
		},
		vmapTol: 1e-6}, // the products inside, as matmulOp's
)

// Keys held in tensors: a sampler, Split and FoldIn on each example's
// key (and the sampler's operand, Gamma's shape).
var _ = addRuleCases(
	ruleCase{name: "rngOp", op: &rngOp, in: func(r *rand.Rand) []*Tensor { return args(rKey(r), rPos(r, 3)) },
		f: func(x []*Tensor) []*Tensor {
			k := Key{t: x[0]}
			return []*Tensor{Normal(k, 3, 2), Gamma(k, x[1]), Uniform(k), RandInt(k, 0, 9, 4)}
		}},
	ruleCase{name: "keySplitOp", op: &keySplitOp, in: func(r *rand.Rand) []*Tensor { return args(rKey(r)) },
		f: func(x []*Tensor) []*Tensor {
			ks := Key{t: x[0]}.Split(3)
			a, b := ks[1].Split2()
			return []*Tensor{ks[0].t, ks[2].t, a.t, b.t}
		}},
	ruleCase{name: "keyFoldOp", op: &keyFoldOp, in: func(r *rand.Rand) []*Tensor { return args(rKey(r)) },
		f: func(x []*Tensor) []*Tensor { return []*Tensor{FoldIn(Key{t: x[0]}, 7).t} }},
)

// rKey returns a random key's words, i32[2].
func rKey(r *rand.Rand) *Tensor {
	return FromInt32([]int32{int32(r.Uint32()), int32(r.Uint32())}, 2)
}

// rGroups returns two group sizes of 6 rows or fewer.
func rGroups(r *rand.Rand) *Tensor {
	a := r.IntN(4)
	return FromInt32([]int32{int32(a), int32(r.IntN(7 - a))}, 2)
}

// testEnv is a shard.Map environment of one axis, "i", over one device.
type testEnv struct{}

func (testEnv) AxisNames() []string                  { return []string{"i"} }
func (e testEnv) Local(mask uint64) *Local           { return &Local{Env: e, Mask: mask} }
func (testEnv) PsumMask(x *Tensor, _ uint64) *Tensor { return x }

// TestRulesCoverEveryOp: every *Op variable of the package has a case, a
// batching rule, and a JVP rule if it is differentiable.
func TestRulesCoverEveryOp(t *testing.T) {
	byName := map[string]ruleCase{}
	for _, c := range ruleCases {
		byName[c.name] = c
	}
	for _, name := range opVars(t) {
		if name == "leafOp" {
			continue // not an op: the mark of a trace's independent variables
		}
		c, ok := byName[name]
		if !assert.Truef(t, ok, "op %s has no rule case: add one with addRuleCases (see ad_rules_test.go)", name) {
			continue
		}
		op := *c.op
		assert.Truef(t, op.Batch != nil, "op %s (%q) has no batching rule (Op.Batch)", name, op.Name)
		assert.Truef(t, !op.differentiable() || op.JVP != nil, "op %s (%q) is differentiable but has no JVP rule (Op.JVP)", name, op.Name)
	}
}

// TestVmapRules: for every case, Vmap over each operand alone (at every
// axis position), over all operands at once (first and last axis),
// equals the loop over the examples; no op falls back to the loop.
func TestVmapRules(t *testing.T) {
	for _, c := range ruleCases {
		t.Run(c.name, func(t *testing.T) {
			const b = 3
			r := rand.New(rand.NewPCG(7, uint64(len(c.name))))
			ex := make([][]*Tensor, b)
			for j := range ex {
				ex[j] = c.in(r)
			}
			n := len(ex[0])
			var configs [][]int // per operand: -1 unbatched, else the axis of the batch
			for i := range n {
				for ax := 0; ax <= len(ex[0][i].shape); ax++ {
					cfg := slices.Repeat([]int{-1}, n)
					cfg[i] = ax
					configs = append(configs, cfg)
				}
			}
			first, last := make([]int, n), make([]int, n)
			for i := range n {
				last[i] = len(ex[0][i].shape)
			}
			configs = append(configs, first, last)
			for _, cfg := range configs {
				checkVmapCase(t, c, ex, cfg)
			}
		})
	}
}

// checkVmapCase compares Vmap of c.f over the operands batched as cfg
// says with the loop over the examples ex.
func checkVmapCase(t *testing.T, c ruleCase, ex [][]*Tensor, cfg []int) {
	t.Helper()
	b := len(ex)
	// The loop: unbatched operands are example 0's.
	var want [][]*Tensor
	for j := range b {
		xs := make([]*Tensor, len(cfg))
		for i, ax := range cfg {
			xs[i] = ex[0][i]
			if ax >= 0 {
				xs[i] = ex[j][i]
			}
		}
		want = append(want, c.f(xs))
	}
	bt := NewBatchTrace(b)
	bt.Strict()
	xs := make([]*Tensor, len(cfg))
	for i, ax := range cfg {
		xs[i] = ex[0][i]
		if ax >= 0 {
			col := make([]*Tensor, b)
			for j := range b {
				col[j] = ex[j][i]
			}
			xs[i] = bt.Batched(Stack(ax, col...), ax)
		}
	}
	outs := c.f(xs)
	require.Len(t, outs, len(want[0]))
	for k, o := range outs {
		got := bt.Unbatched(o, 0)
		col := make([]*Tensor, b)
		for j := range b {
			col[j] = want[j][k]
		}
		ref := Stack(0, col...)
		msg := fmt.Sprintf("%s: output %d, operands batched at %v", c.name, k, cfg)
		require.Equal(t, ref.dtype, got.dtype, msg)
		require.Equal(t, ref.shape, got.shape, msg)
		requireSameValues(t, ref, got, c.vmapTol, msg)
	}
}

// requireSameValues compares two host tensors of one dtype and shape: bit
// for bit (NaNs equal) if tol is 0, else within tol relative to the
// largest magnitude.
func requireSameValues(t *testing.T, want, got *Tensor, tol float64, msg string) {
	t.Helper()
	w, g := want.Float64s(), got.Float64s()
	scale := 0.0
	for _, v := range w {
		scale = max(scale, math.Abs(v))
	}
	for i := range w {
		if w[i] == g[i] || (math.IsNaN(w[i]) && math.IsNaN(g[i])) {
			continue
		}
		if tol > 0 && math.Abs(w[i]-g[i]) <= tol*max(scale, 1e-30) {
			continue
		}
		t.Fatalf("%s: element %d: loop %v, vmap %v (of %v)", msg, i, w[i], g[i], got)
	}
}

// TestJVPRules: for every case of a differentiable op, the tangents
// forward mode computes (for each float operand alone and for all at
// once) equal the transpose of the VJP and finite differences, and the
// primal results equal the plain call's bit for bit.
func TestJVPRules(t *testing.T) {
	for _, c := range ruleCases {
		if !(*c.op).differentiable() {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(11, uint64(len(c.name))))
			x := c.in(r)
			var fl []int
			for i, v := range x {
				if v.dtype.IsFloat() {
					fl = append(fl, i)
				}
			}
			sets := [][]int{fl}
			if len(fl) > 1 {
				for _, i := range fl {
					sets = append(sets, []int{i})
				}
			}
			for _, set := range sets {
				tans := make([]*Tensor, len(x))
				for _, i := range set {
					tans[i] = rF(r, x[i].shape...)
				}
				checkJVPCase(t, c, x, tans, r)
			}
		})
	}
}

// checkJVPCase checks the tangents of c.f at x for tangents tans (nil for
// operands without one).
func checkJVPCase(t *testing.T, c ruleCase, x, tans []*Tensor, r *rand.Rand) {
	t.Helper()
	msg := fmt.Sprintf("%s, tangents of operands %v", c.name, nonNil(tans))
	jt := NewJVPTrace()
	duals := make([]*Tensor, len(x))
	for i := range x {
		duals[i] = jt.Dual(x[i], tans[i])
	}
	outs := c.f(duals)
	plain := c.f(x)
	tout := make([]*Tensor, len(outs))
	for k, o := range outs {
		requireSameValues(t, plain[k], jt.Primal(o), 0, msg+": primal")
		tout[k] = jt.Tangent(o)
	}

	// <J·t, u> = <t, Jᵀ·u>.
	tr := NewTrace()
	leaves := make([]*Tensor, len(x))
	var wrt []*Tensor
	for i, v := range x {
		leaves[i] = v
		if tans[i] != nil {
			leaves[i] = tr.Leaf(v)
			wrt = append(wrt, leaves[i])
		}
	}
	var ys, us []*Tensor
	lhs, scale := 0.0, 0.0
	for k, y := range c.f(leaves) {
		if tout[k] == nil || !y.TracedBy(tr) {
			continue
		}
		u := rF(r, y.shape...)
		if y.dtype != Float32 {
			u = Convert(u, y.dtype)
		}
		ys, us = append(ys, y), append(us, u)
		d, s := dot64(tout[k], u)
		lhs, scale = lhs+d, scale+s
	}
	cots := Backward(tr, ys, us, wrt, false)
	rhs := 0.0
	j := 0
	for i := range x {
		if tans[i] != nil {
			d, s := dot64(tans[i], cots[j])
			rhs, scale = rhs+d, scale+s
			j++
		}
	}
	tol := c.tTol
	if tol == 0 {
		tol = 1e-5
	}
	require.InDeltaf(t, lhs, rhs, tol*max(scale, 1e-30), "%s: <J·t, u> = %v but <t, Jᵀ·u> = %v", msg, lhs, rhs)
	if !c.noFD {
		checkFD(t, c, x, tans, tout, msg)
	}
}

// checkFD compares the tangents tout of c.f at x with Richardson-extrapolated
// central differences along tans.
func checkFD(t *testing.T, c ruleCase, x, tans, tout []*Tensor, msg string) {
	t.Helper()
	const h = 1e-2
	at := func(s float32) []*Tensor {
		xs := make([]*Tensor, len(x))
		for i, v := range x {
			xs[i] = v
			if tans[i] != nil {
				xs[i] = Add(v, MulScalar(tans[i], s))
			}
		}
		return c.f(xs)
	}
	p1, m1, p2, m2 := at(h), at(-h), at(h/2), at(-h/2)
	tol := c.fdTol
	if tol == 0 {
		tol = 2e-3
	}
	for k, tk := range tout {
		if tk == nil {
			continue
		}
		a, b, cc, d, g := p1[k].Float64s(), m1[k].Float64s(), p2[k].Float64s(), m2[k].Float64s(), tk.Float64s()
		big, fbig := 1.0, 0.0
		for i := range g {
			big = max(big, math.Abs(g[i]))
			fbig = max(fbig, math.Abs(a[i]), math.Abs(b[i]))
		}
		noise := 50 * 6e-8 * fbig / h
		for i := range g {
			d1 := (a[i] - b[i]) / (2 * h)
			d2 := (cc[i] - d[i]) / h
			fd := (4*d2 - d1) / 3
			if math.Abs(fd-g[i]) > tol*big+noise {
				t.Fatalf("%s: output %d element %d: finite differences %v, JVP %v", msg, k, i, fd, g[i])
			}
		}
	}
}

// dot64 returns Σ a·b in float64 and Σ |a·b|.
func dot64(a, b *Tensor) (float64, float64) {
	x, y := a.Float64s(), b.Float64s()
	s, m := 0.0, 0.0
	for i := range x {
		s += x[i] * y[i]
		m += math.Abs(x[i] * y[i])
	}
	return s, m
}

func nonNil(ts []*Tensor) []int {
	var out []int
	for i, x := range ts {
		if x != nil {
			out = append(out, i)
		}
	}
	return out
}
