package tensor

// This file adds two toy ops exactly as "How to write an op" (doc.go) says
// an op is added: it stands for the op's own file (softsign.go), and
// op_recipe_test.go for its test. Nothing else in the package knows them:
// the tests there prove that the declaration alone makes them work traced
// and untraced, differentiated twice, on bfloat16 and float16 operands,
// with the backward pass reusing buffers as the traits allow, on placed
// tensors by the sharding rule they declare, under Vmap and in forward
// mode. The rule cases at the end of this file put them through the tests
// every op of the package passes (ad_rules_test.go).

import (
	"fmt"
	"math"
	"math/rand/v2"
)

var softsignOp, softsignPartsOp *Op

func init() {
	softsignOp = &Op{
		Name: "softsign",
		Impl: func(in []*Tensor, _ any) *Tensor {
			x := in[0]
			out := newOutUninit(Float32, x.shape) // every element written
			for i, v := range x.f32() {
				out.f32()[i] = v / (1 + float32(math.Abs(float64(v))))
			}
			return out
		},
		// d/dx x/(1+|x|) = 1/(1+|x|)², built from ops.
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			d := Add(Scalar(1), Abs(in[0]))
			return []*Tensor{Div(g, Mul(d, d))}
		},
		Save: SaveInputs(0),
		// Each element from the element at the same position.
		Sharding: ShardingRule{Family: ShardElementwise},
		// The tangent: dy = dx/(1+|x|)², built from ops.
		JVP: func(x, t, _ []*Tensor, _ any) []*Tensor {
			d := Add(Scalar(1), Abs(x[0]))
			return []*Tensor{Div(t[0], Mul(d, d))}
		},
		// Elementwise, no params: the op runs on the whole batch as it is.
		Batch: func(in []*Tensor, _ []bool, p any) []*Tensor {
			return []*Tensor{Apply(softsignOp, p, in[0])}
		},
		// Div allocates the cotangent it returns.
		Traits: Traits{Reuse: FreshVJP},
	}

	// softsign_parts: y = x/(1+|x|) and r = 1/(1+|x|), two results. It
	// declares no traits: half operands are widened like a single-output
	// op's, and the backward pass reuses nothing around its VJP. Both
	// results are elementwise in x.
	softsignPartsOp = &Op{
		Name: "softsign_parts",
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			x := in[0]
			y, r := newOutUninit(Float32, x.shape), newOutUninit(Float32, x.shape)
			for i, v := range x.f32() {
				r.f32()[i] = 1 / (1 + float32(math.Abs(float64(v))))
				y.f32()[i] = v * r.f32()[i]
			}
			return []*Tensor{y, r}, nil
		},
		// dy/dx = r², dr/dx = -sign(x)·r².
		VJPN: func(gs, in, outs []*Tensor, _, _ any) []*Tensor {
			r2 := Mul(outs[1], outs[1])
			var gx *Tensor
			if gs[0] != nil {
				gx = Mul(gs[0], r2)
			}
			if gs[1] != nil {
				gr := Neg(Mul(gs[1], Mul(Sign(in[0]), r2)))
				if gx == nil {
					gx = gr
				} else {
					gx = Add(gx, gr)
				}
			}
			return []*Tensor{gx}
		},
		Save:     SaveInputs(0) | SaveOutput,
		Sharding: ShardingRule{Family: ShardElementwise},
		// dy = r²·dx, dr = -sign(x)·r²·dx.
		JVP: func(x, t, outs []*Tensor, _ any) []*Tensor {
			r2 := Mul(outs[1], outs[1])
			dy := Mul(r2, t[0])
			return []*Tensor{dy, Neg(Mul(Sign(x[0]), dy))}
		},
		Batch: func(in []*Tensor, _ []bool, p any) []*Tensor {
			return ApplyN(softsignPartsOp, p, in[0])
		},
	}
}

// The rule cases of the toy ops (see ruleCase): one example's operands
// and the function applying the op.
var _ = addRuleCases(
	ruleCase{name: "softsignOp", op: &softsignOp, in: func(r *rand.Rand) []*Tensor { return args(rAway(r, 3, 4)) },
		f: fn1(Softsign)},
	ruleCase{name: "softsignPartsOp", op: &softsignPartsOp, in: func(r *rand.Rand) []*Tensor { return args(rAway(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor {
			y, r := SoftsignParts(x[0])
			return []*Tensor{y, r}
		}},
)

// Softsign returns x/(1+|x|) elementwise (jax.nn.soft_sign) for a float
// tensor x.
func Softsign(x *Tensor) *Tensor {
	checkNil("tensor.Softsign", "x", x)
	if !x.dtype.IsFloat() {
		panic(fmt.Sprintf("tensor.Softsign: %v: not defined for %v", x, x.dtype))
	}
	return Apply(softsignOp, nil, x)
}

// SoftsignParts returns x/(1+|x|) and 1/(1+|x|) for a float tensor x.
func SoftsignParts(x *Tensor) (y, r *Tensor) {
	checkNil("tensor.SoftsignParts", "x", x)
	if !x.dtype.IsFloat() {
		panic(fmt.Sprintf("tensor.SoftsignParts: %v: not defined for %v", x, x.dtype))
	}
	out := ApplyN(softsignPartsOp, nil, x)
	return out[0], out[1]
}
