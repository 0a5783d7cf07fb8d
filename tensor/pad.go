package tensor

import (
	"fmt"
	"math"
	"slices"
)

type padParams struct {
	lo, hi []int
	value  float64
}

var padOp *Op

func init() {
	padOp = &Op{
		Name: "pad",
		Sharding: ShardingRule{Family: ShardPad, Params: func(pp any) OpParams {
			p := pp.(*padParams)
			return OpParams{Lo: slices.Clone(p.lo), Hi: slices.Clone(p.hi)}
		}},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*padParams)
			x := in[0]
			shape := make([]int, len(x.shape))
			for i, d := range x.shape {
				shape[i] = p.lo[i] + d + p.hi[i]
			}
			out := newTensor(x.dtype, shape)
			if p.value != 0 && out.Size() > x.Size() {
				switch x.dtype {
				case Float32:
					fill(out.f32(), float32(p.value))
				case Int32:
					fill(out.i32(), int32(p.value))
				case Bool:
					fill(out.b(), true)
				default:
					fillWide("tensor.Pad", out, p.value)
				}
			}
			boxCopyT(out, p.lo, x, make([]int, len(x.shape)), x.shape)
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			p := pp.(*padParams)
			limits := make([]int, len(p.lo))
			for i := range limits {
				limits[i] = p.lo[i] + in[0].shape[i]
			}
			return []*Tensor{slice(g, p.lo, limits)}
		},
		// Padding with a constant: the tangent is padded with zeros.
		JVP: func(_, t, _ []*Tensor, pp any) []*Tensor {
			p := pp.(*padParams)
			return one1(Apply(padOp, &padParams{p.lo, p.hi, 0}, t[0]))
		},
		Batch: func(in []*Tensor, _ []bool, pp any) []*Tensor {
			p := pp.(*padParams)
			return one1(Apply(padOp, &padParams{append([]int{0}, p.lo...), append([]int{0}, p.hi...), p.value}, in[0]))
		},
		Traits: Traits{Types: TypesAll},
	}
}

// Pad adds pads[i][0] elements before and pads[i][1] elements after x along
// each dimension i, all equal to value, like jnp.pad with mode "constant".
// value is converted to x's dtype (nonzero is true for Bool) and must be a
// whole number in int32 range for Int32. Negative padding panics. The
// gradient slices the cotangent back to x's box.
func Pad(x *Tensor, pads [][2]int, value float64) *Tensor {
	checkNil("tensor.Pad", "x", x)
	what := func() string {
		return fmt.Sprintf("tensor.Pad: %v by %v with %v", x, pads, value)
	}
	r := len(x.shape)
	if len(pads) != r {
		panic(fmt.Sprintf("%s: want %d (lo, hi) pairs", what(), r))
	}
	if x.dtype == Int32 && (value != math.Trunc(value) || value > math.MaxInt32 || value < math.MinInt32) {
		panic(fmt.Sprintf("%s: value is not an int32", what()))
	}
	p := &padParams{lo: make([]int, r), hi: make([]int, r), value: value}
	zero := true
	for i, lh := range pads {
		if lh[0] < 0 || lh[1] < 0 {
			panic(fmt.Sprintf("%s: axis %d: negative padding", what(), i))
		}
		p.lo[i], p.hi[i] = lh[0], lh[1]
		zero = zero && lh == [2]int{}
	}
	if zero {
		return x
	}
	return Apply(padOp, p, x)
}
