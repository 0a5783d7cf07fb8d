package tensor

import "math/rand/v2"

// The rule cases (ad_rules_test.go) of math.go's ops: Vmap against the
// loop, the JVP against finite differences and the VJP's transpose.

// rIn returns a generator of values uniform in [lo, hi).
func rIn(lo, hi float64) func(r *rand.Rand, shape ...int) *Tensor {
	return func(r *rand.Rand, shape ...int) *Tensor { return rU(r, lo, hi, shape...) }
}

var _ = addRuleCases(
	un("sinOp", &sinOp, Sin, rF), un("cosOp", &cosOp, Cos, rF), un("tanOp", &tanOp, Tan, rIn(-1.2, 1.2)),
	un("asinOp", &asinOp, Asin, rIn(-0.8, 0.8)), un("acosOp", &acosOp, Acos, rIn(-0.8, 0.8)), un("atanOp", &atanOp, Atan, rF),
	un("sinhOp", &sinhOp, Sinh, rF), un("coshOp", &coshOp, Cosh, rF), un("asinhOp", &asinhOp, Asinh, rF),
	un("acoshOp", &acoshOp, Acosh, rIn(1.3, 4)), un("atanhOp", &atanhOp, Atanh, rIn(-0.8, 0.8)),
	un("expm1Op", &expm1Op, Expm1, rF), un("log1pOp", &log1pOp, Log1p, rIn(-0.5, 2)),
	un("log2Op", &log2Op, Log2, rPos), un("log10Op", &log10Op, Log10, rPos), un("exp2Op", &exp2Op, Exp2, rF),
	un("erfOp", &erfOp, Erf, rF), un("erfcOp", &erfcOp, Erfc, rF), un("erfInvOp", &erfInvOp, ErfInv, rIn(-0.8, 0.8)),
	un("lgammaOp", &lgammaOp, Lgamma, rPos), un("digammaOp", &digammaOp, Digamma, rPos),
	un("polygOp", &polygOp, func(x *Tensor) *Tensor { return Polygamma(2, x) }, rPos),
	un("reciprocalOp", &reciprocalOp, Reciprocal, rPos), un("cbrtOp", &cbrtOp, Cbrt, rPos),
	ruleCase{name: "roundOp", op: &roundOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) }, f: fn1(Round), noFD: true},
	ruleCase{name: "floorOp", op: &floorOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) }, f: fn1(Floor), noFD: true},
	ruleCase{name: "ceilOp", op: &ceilOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) }, f: fn1(Ceil), noFD: true},
	ruleCase{name: "truncOp", op: &truncOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) }, f: fn1(Trunc), noFD: true},
	bin("atan2Op", &atan2Op, Atan2, rAway, rAway),
)
