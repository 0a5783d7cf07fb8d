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

// PadMode says what fills the elements PadWith adds: the modes of
// PyTorch's F.pad and of its convolutions' padding_mode.
type PadMode uint8

const (
	// PadZeros fills with zeros (PyTorch's "constant" with value 0, a
	// convolution's "zeros"); Pad fills with another constant.
	PadZeros PadMode = iota
	// PadReflect mirrors the elements next to the edge, without the edge
	// itself: [1 2 3] padded by 2 on both sides is [3 2 1 2 3 2 1]
	// (PyTorch's "reflect", NumPy's "reflect"). Padding must be below the
	// dimension's size.
	PadReflect
	// PadReplicate repeats the edge element: [1 1 1 2 3 3 3] (PyTorch's
	// "replicate", NumPy's "edge"). A padded dimension must not be empty.
	PadReplicate
	// PadCircular wraps around: [2 3 1 2 3 1 2] (PyTorch's "circular",
	// NumPy's "wrap"). Padding must not exceed the dimension's size.
	PadCircular
)

// String returns PyTorch's name of the mode: "zeros", "reflect",
// "replicate" or "circular".
func (m PadMode) String() string {
	switch m {
	case PadZeros:
		return "zeros"
	case PadReflect:
		return "reflect"
	case PadReplicate:
		return "replicate"
	case PadCircular:
		return "circular"
	}
	return fmt.Sprintf("PadMode(%d)", uint8(m))
}

// source returns the position of x's element along a dimension of n
// elements that fills position i of that dimension padded by lo in front.
func (m PadMode) source(i, lo, n int) int {
	j := i - lo
	switch m {
	case PadReflect:
		if j < 0 {
			j = -j
		}
		if j >= n {
			j = 2*(n-1) - j
		}
	case PadReplicate:
		j = min(max(j, 0), n-1)
	case PadCircular:
		j = ((j % n) + n) % n
	}
	return j
}

// PadWith adds pads[i][0] elements before and pads[i][1] elements after
// x along each dimension i, filled as mode says: PyTorch's F.pad with
// mode "reflect", "replicate" or "circular" (and "constant" 0 for
// PadZeros), on any dimensions of x, not only the last ones (PyTorch's
// pads list the last dimension first; here pads has one pair per
// dimension, the first dimension first). As in PyTorch, reflect padding
// must be below the dimension's size, circular padding at most the size,
// and replicate padding needs at least one element; a negative padding
// panics. The gradient adds each padded element's cotangent into the
// element it copies.
func PadWith(x *Tensor, pads [][2]int, mode PadMode) *Tensor {
	checkNil("tensor.PadWith", "x", x)
	what := func() string {
		return fmt.Sprintf("tensor.PadWith: %v by %v %v", x, pads, mode)
	}
	if mode > PadCircular {
		panic(fmt.Sprintf("%s: unknown mode", what()))
	}
	r := len(x.shape)
	if len(pads) != r {
		panic(fmt.Sprintf("%s: want %d (lo, hi) pairs", what(), r))
	}
	for i, lh := range pads {
		if lh[0] < 0 || lh[1] < 0 {
			panic(fmt.Sprintf("%s: axis %d: negative padding", what(), i))
		}
	}
	if mode == PadZeros {
		return Pad(x, pads, 0)
	}
	axes := identityMaps(x.shape)
	for i, lh := range pads {
		if lh == [2]int{} {
			continue
		}
		n := x.shape[i]
		switch {
		case mode == PadReflect && max(lh[0], lh[1]) >= n:
			panic(fmt.Sprintf("%s: axis %d: padding %d not below the size %d", what(), i, max(lh[0], lh[1]), n))
		case mode == PadCircular && max(lh[0], lh[1]) > n:
			panic(fmt.Sprintf("%s: axis %d: padding %d wraps around more than once (size %d)", what(), i, max(lh[0], lh[1]), n))
		case mode == PadReplicate && n == 0:
			panic(fmt.Sprintf("%s: axis %d: nothing to replicate", what(), i))
		}
		a := axisMap{n: n, m: lh[0] + n + lh[1], k: 1}
		a.idx = make([]int, a.m)
		for j := range a.idx {
			a.idx[j] = mode.source(j, lh[0], n)
		}
		axes[i] = a
	}
	if isIdentity(axes) {
		return x
	}
	return resample(x, &resampleParams{axes: axes})
}
