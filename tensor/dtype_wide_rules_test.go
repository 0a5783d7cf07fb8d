package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Float64 for every op, through the rule cases of ad_rules_test.go (one
// or more per op variable): each case runs on its operands with every
// float32 operand converted to float64. The op either takes float64 or
// panics naming itself and an operand in type notation (f64[...]); the ops
// that panic are exactly noFloat64Ops. Where it takes float64,
//
//   - the results equal the float32 case's within float32 rounding (the
//     same function), in float64 where the float32 case gives float32;
//   - the gradient, for a differentiable op, equals central differences
//     of the float64 function within 1e-8 relative to its scale (a
//     derivative to 8 digits needs a forward pass correct to ~15: a
//     float32 computation anywhere on the path fails it).

// noFloat64Ops lists the ops of this package that do not take float64,
// with the reason. An op leaving or joining the list fails the test.
var noFloat64Ops = map[string]string{
	"attentionOp":             "fused float32 kernel (FlashAttention); DotProductAttention composes float64 from primitives",
	"attentionBwdOp":          "fused float32 kernel",
	"attentionOp/bf16":        "products in bfloat16 of float32 operands (DotProductAttentionAs)",
	"attentionBwdOp/bf16":     "products in bfloat16 of float32 operands",
	"biasActBwdOp":            "fused float32 kernel; BiasAct composes float64 from primitives",
	"channelAffineBwdOp":      "fused float32 kernel; ChannelAffine composes float64 from primitives",
	"channelAffineGradOp":     "fused float32 sums; ChannelAffine composes float64 from primitives",
	"channelAffine2Op":        "fused float32 kernel (batch_norm's input gradient); BatchNorm composes float64 from primitives",
	"layerNormOp":             "fused float32 kernel; LayerNorm composes float64 from primitives",
	"layerNormBwdOp":          "fused float32 kernel",
	"actPartsOp":              "fused float32 kernel; ActMatMul and ActRaggedDot compose float64 from primitives",
	"mseGradOp":               "fused float32 kernel; MSE composes float64 from primitives",
	"matmulToOp/MatMulAs":     "mixed float32/half operands computed in a half dtype; float64 products use MatMul",
	"xentOp":                  "fused float32 kernel; SoftmaxCrossEntropy composes float64 from primitives",
	"xentGradOp":              "fused float32 kernel",
	"xentProbsOp":             "fused float32 kernel; SoftmaxCrossEntropyProbs composes float64 from primitives",
	"raggedDotOp":             "float32 grouped gemm; RaggedDot composes float64 from MatMul (not under Vmap or on placed group sizes)",
	"raggedOuterOp":           "float32 grouped gemm",
	"raggedDotOp/RaggedDotAs": "float32 operands computed in a half dtype; float64 products use RaggedDot",
	"raggedOuterOp/bf16":      "float32 operands computed in a half dtype (RaggedDotAs's weight gradient)",
	"actProductOp/As":         "float32 operands computed in a half dtype; float64 products use ActMatMul and ActRaggedDot",
	"segmentWeightedTakeOp":   "fused float32 kernel; SegmentWeightedSum's VJP composes float64 from primitives",
	"softsignOp":              "the toy op of the recipe test, float32 only",
	"softsignPartsOp":         "the toy op of the recipe test, float32 only",
}

// float64Draws lists the ops whose float64 results are other numbers than
// their float32 ones by design: the samplers draw float64 values from
// 64-bit words, as JAX's do. Their results are checked for shape and
// dtype only (random_f64_test.go checks their distributions): a result
// is float64 where it depends on a float64 operand (Gamma's), else as
// it was (Normal's float32).
var float64Draws = map[string]bool{"rngOp": true}

// to64 converts the float32 operands among xs to float64.
func to64(xs []*Tensor) []*Tensor {
	out := make([]*Tensor, len(xs))
	for i, x := range xs {
		if x.dtype == Float32 {
			x = Convert(x, Float64)
		}
		out[i] = x
	}
	return out
}

// callRecover calls f, returning its panic message if it panics.
func callRecover(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

func TestFloat64EveryOp(t *testing.T) {
	without := map[string]string{}
	var with []string
	for _, c := range ruleCases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(64, uint64(len(c.name))))
			x32 := c.in(r)
			x64 := to64(x32)
			var outs []*Tensor
			if msg := callRecover(func() { outs = c.f(x64) }); msg != "" {
				assert.True(t, strings.Contains(msg, "f64[") || strings.Contains(msg, "float64"),
					"%s: the panic must name the float64 operand: %s", c.name, msg)
				without[c.name] = msg
				return
			}
			want := c.f(x32)
			require.Len(t, outs, len(want))
			for k, o := range outs {
				w := want[k]
				require.Equal(t, w.shape, o.shape, "%s: result %d", c.name, k)
				if float64Draws[c.name] {
					require.Contains(t, []DType{w.dtype, Float64}, o.dtype, "%s: result %d", c.name, k)
					continue
				}
				requireClose32(t, w, o, fmt.Sprintf("%s: result %d", c.name, k))
			}
			if (*c.op).differentiable() && !c.noFD {
				if msg := callRecover(func() { checkGrad64(t, c, x64, r) }); msg != "" {
					assert.True(t, strings.Contains(msg, "f64[") || strings.Contains(msg, "float64"),
						"%s: the panic must name the float64 operand: %s", c.name, msg)
					without[c.name] = "gradient: " + msg
					return
				}
			}
			with = append(with, c.name)
		})
	}
	var names []string
	for n := range without {
		names = append(names, n)
	}
	sort.Strings(names)
	sort.Strings(with)
	t.Logf("ops with float64 (%d): %s", len(with), strings.Join(with, " "))
	for _, n := range names {
		t.Logf("without float64: %s: %s", n, without[n])
	}
	got := map[string]bool{}
	for n := range without {
		got[n] = true
	}
	want := map[string]bool{}
	for n := range noFloat64Ops {
		want[n] = true
	}
	assert.Equal(t, want, got, "the ops without float64")
}

// requireClose32 checks that got (float64 compute) equals want (float32
// compute) within float32 rounding.
func requireClose32(t *testing.T, want, got *Tensor, msg string) {
	t.Helper()
	w, g := want.Float64s(), got.Float64s()
	scale := 0.0
	for _, v := range w {
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			scale = max(scale, math.Abs(v))
		}
	}
	for i := range w {
		if w[i] == g[i] || (math.IsNaN(w[i]) && math.IsNaN(g[i])) {
			continue
		}
		if math.Abs(w[i]-g[i]) <= 1e-5*max(scale, 1) {
			continue
		}
		t.Fatalf("%s: element %d: float32 %v, float64 %v", msg, i, w[i], g[i])
	}
}

// checkGrad64 compares the VJP of c.f at the float64 operands x with
// central differences along a random direction of the float operands,
// each result weighted by a random cotangent: <∇F, t> against
// (F(x+εt) - F(x-εt))/2ε, extrapolated (Richardson) from ε and ε/2.
func checkGrad64(t *testing.T, c ruleCase, x []*Tensor, r *rand.Rand) {
	t.Helper()
	tr := NewTrace()
	leaves := make([]*Tensor, len(x))
	tans := make([]*Tensor, len(x))
	var wrt []*Tensor
	for i, v := range x {
		leaves[i] = v
		if v.dtype == Float64 {
			leaves[i] = tr.Leaf(v)
			wrt = append(wrt, leaves[i])
			tans[i] = Convert(rF(r, v.shape...), Float64)
		}
	}
	if len(wrt) == 0 {
		return
	}
	var ys, us []*Tensor
	cot := map[int]*Tensor{}
	for k, y := range c.f(leaves) {
		if y.dtype != Float64 || !y.TracedBy(tr) {
			continue
		}
		u := Convert(rF(r, y.shape...), Float64)
		ys, us = append(ys, y), append(us, u)
		cot[k] = u
	}
	if len(ys) == 0 {
		return
	}
	grads := Backward(tr, ys, us, wrt, false)
	analytic, scale := 0.0, 0.0
	j := 0
	for i := range x {
		if tans[i] != nil {
			if grads[j] != nil {
				require.Equal(t, Float64, grads[j].dtype, "%s: the cotangent of operand %d", c.name, i)
				d, s := dot64(tans[i], grads[j])
				analytic, scale = analytic+d, scale+s
			}
			j++
		}
	}
	proj := func(eps float64) float64 {
		in := make([]*Tensor, len(x))
		for i, v := range x {
			in[i] = v
			if tans[i] != nil {
				in[i] = Add(v, Mul(tans[i], ScalarFloat64(eps)))
			}
		}
		s := 0.0
		for k, y := range c.f(in) {
			if u, ok := cot[k]; ok {
				d, _ := dot64(y, u)
				s += d
			}
		}
		return s
	}
	const eps = 1e-4
	d1 := (proj(eps) - proj(-eps)) / (2 * eps)
	d2 := (proj(eps/2) - proj(-eps/2)) / eps
	numeric := (4*d2 - d1) / 3
	tol := 1e-8 * max(scale, 1)
	assert.InDelta(t, numeric, analytic, tol, "%s: <gradient, t> against finite differences in float64 (scale %g)", c.name, scale)
}

// The public functions whose float64 path is a float64 kernel of its own
// or a composition of other ops (the fused float32 kernels aside): each
// equals its float32 result within float32 rounding and its gradient
// float64 central differences, over the configurations that take
// different paths.
func TestFloat64Composed(t *testing.T) {
	conv := func(x, w []int, spec ConvSpec) func(r *rand.Rand) []*Tensor {
		return func(r *rand.Rand) []*Tensor { return args(rF(r, x...), rF(r, w...)) }
	}
	convF := func(spec ConvSpec) func(x []*Tensor) []*Tensor {
		return func(x []*Tensor) []*Tensor { return []*Tensor{Conv(x[0], x[1], spec)} }
	}
	convSpecs := []struct {
		name string
		x, w []int
		spec ConvSpec
	}{
		{"conv SAME stride 2", []int{1, 2, 7, 8}, []int{3, 2, 3, 2}, ConvSpec{Strides: []int{2, 2}, Padding: SamePadding}},
		{"conv VALID dilated", []int{2, 2, 9, 8}, []int{2, 2, 3, 2}, ConvSpec{Padding: ValidPadding, RhsDilation: []int{2, 3}}},
		{"conv groups", []int{2, 6, 5, 5}, []int{9, 2, 2, 3}, ConvSpec{Groups: 3}},
		{"conv input dilation", []int{1, 2, 4, 3}, []int{2, 2, 3, 3}, ConvSpec{LhsDilation: []int{2, 3}, Padding: Pads([2]int{2, 2}, [2]int{1, 1})}},
		{"conv negative padding", []int{1, 2, 8}, []int{3, 2, 3}, ConvSpec{Padding: Pads([2]int{-1, -2})}},
		{"conv 3-D", []int{1, 2, 4, 3, 4}, []int{2, 2, 3, 2, 3}, ConvSpec{Padding: SamePadding}},
	}
	var cases []ruleCase
	for _, c := range convSpecs {
		cases = append(cases, ruleCase{name: c.name, in: conv(c.x, c.w, c.spec), f: convF(c.spec)})
	}
	mask := func(r *rand.Rand) *Tensor {
		m := rB(r, 2, 1, 5, 6)
		return LogicalOr(m, Reshape(FromBool([]bool{true, false, false, false, false, false}), 1, 1, 1, 6)) // key 0 always visible
	}
	cases = append(cases,
		ruleCase{name: "attention", in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 5, 2, 3), rF(r, 2, 6, 2, 3), rF(r, 2, 6, 2, 4)) },
			f: func(x []*Tensor) []*Tensor { return []*Tensor{DotProductAttention(x[0], x[1], x[2], nil, 0, false)} }},
		ruleCase{name: "attention causal", in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 5, 2, 3), rF(r, 2, 5, 2, 3), rF(r, 2, 5, 2, 4)) },
			f: func(x []*Tensor) []*Tensor { return []*Tensor{DotProductAttention(x[0], x[1], x[2], nil, 0.7, true)} }},
		ruleCase{name: "attention masked", in: func(r *rand.Rand) []*Tensor {
			return args(rF(r, 2, 5, 2, 3), rF(r, 2, 6, 2, 3), rF(r, 2, 6, 2, 4), mask(r))
		}, f: func(x []*Tensor) []*Tensor { return []*Tensor{DotProductAttention(x[0], x[1], x[2], x[3], 0, false)} }},
		ruleCase{name: "ragged dot", in: func(r *rand.Rand) []*Tensor { return args(rF(r, 7, 3), rF(r, 3, 3, 4), FromInt32([]int32{2, 0, 4})) },
			f: func(x []*Tensor) []*Tensor { return []*Tensor{RaggedDot(x[0], x[1], x[2])} }},
		ruleCase{name: "MSE", in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4), rF(r, 3, 4)) }, f: fn2(MSE)},
		ruleCase{name: "SoftmaxCrossEntropy", in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 5), rI(r, 0, 5, 3)) },
			f: fn2(SoftmaxCrossEntropy)},
		ruleCase{name: "SoftmaxCrossEntropyProbs", in: func(r *rand.Rand) []*Tensor {
			p := Softmax(rF(r, 3, 5), 1)
			return args(rF(r, 3, 5), Mul(p, AsType(Greater(p, Scalar(0.1)), Float32))) // some zeros
		}, f: fn2(SoftmaxCrossEntropyProbs)},
	)
	windows := []struct {
		name string
		r    WindowReduction
		w    Window
	}{
		{"max pool 2x2", WindowMax, Window{Dims: []int{1, 1, 2, 2}, Strides: []int{1, 1, 2, 2}}},
		{"max SAME strided dilated", WindowMax, Window{Dims: []int{1, 1, 3, 2}, Strides: []int{1, 1, 2, 1}, Dilation: []int{1, 1, 1, 2}, Padding: SamePadding}},
		{"sum padded", WindowSum, Window{Dims: []int{1, 2, 3, 3}, Padding: Pads([2]int{0, 0}, [2]int{0, 1}, [2]int{1, 1}, [2]int{2, 0})}},
		{"mean", WindowMean, Window{Dims: []int{1, 1, 3, 2}, Strides: []int{1, 1, 2, 2}}},
		{"mean valid padded", WindowMeanValid, Window{Dims: []int{1, 1, 3, 3}, Padding: SamePadding}},
	}
	for _, c := range windows {
		cases = append(cases, ruleCase{name: "ReduceWindow " + c.name, in: func(r *rand.Rand) []*Tensor { return args(rDistinct(r, 2, 3, 7, 6)) },
			f: func(x []*Tensor) []*Tensor { return []*Tensor{ReduceWindow(x[0], c.r, c.w)} }})
	}
	for _, r := range []WindowReduction{WindowMax, WindowMean} {
		cases = append(cases, ruleCase{name: "AdaptivePool " + r.String(), in: func(rr *rand.Rand) []*Tensor { return args(rDistinct(rr, 2, 3, 7, 5)) },
			f: func(x []*Tensor) []*Tensor { return []*Tensor{AdaptivePool(x[0], r, 3, 4)} }})
	}
	for a := range numActivations {
		cases = append(cases, ruleCase{name: "BiasAct " + a.String(), in: func(r *rand.Rand) []*Tensor { return args(rAway(r, 3, 4), rF(r, 4)) },
			f: func(x []*Tensor) []*Tensor { return []*Tensor{BiasAct(x[0], x[1], a)} }})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(64, uint64(len(c.name))))
			x32 := c.in(r)
			x64 := to64(x32)
			outs, want := c.f(x64), c.f(x32)
			for k, o := range outs {
				require.Equal(t, Float64, o.dtype, "%s: result %d", c.name, k)
				requireClose32(t, want[k], o, fmt.Sprintf("%s: result %d", c.name, k))
			}
			checkGrad64(t, c, x64, r)
		})
	}
}
