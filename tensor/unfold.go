package tensor

import (
	"fmt"
	"slices"
)

// This file holds unfold and fold, PyTorch's F.unfold (im2col) and F.fold
// (col2im): the sliding blocks of a channels-first batch laid out as
// columns, and the columns summed back into place. Each is linear and the
// other's transpose, so each is the other's VJP.

// UnfoldSpec configures Unfold and Fold: the sliding blocks' size and
// placement, PyTorch's kernel_size, dilation, padding and stride. Each has
// one value per spatial dimension or one for all; nil means 1 for
// Dilation and Stride and 0 for Padding (zeros added on both sides of each
// spatial dimension).
type UnfoldSpec struct {
	Kernel, Dilation, Padding, Stride []int
}

// unfoldParams are unfold's and fold's parameters: the geometry of one
// example's blocks.
type unfoldParams struct {
	in, kernel, dilation, pad, stride []int // per spatial dimension
	out                               []int // blocks along each spatial dimension
}

// blocks returns the number of blocks L and of kernel positions K.
func (p *unfoldParams) blocks() (l, k int) {
	l, k = 1, 1
	for d := range p.in {
		l *= p.out[d]
		k *= p.kernel[d]
	}
	return l, k
}

var unfoldOp, foldOp *Op

func init() {
	// Both ops keep the rank: unfold's columns are [N, C·K, blocks...],
	// fold's operand too. The examples are independent.
	sharding := ShardingRule{Family: ShardWindow, Params: func(any) OpParams { return OpParams{N: 1} }}
	// batch merges the Vmap dimension into the examples' and splits it
	// out of the result.
	batch := func(op **Op) func(in []*Tensor, _ []bool, pp any) []*Tensor {
		return func(in []*Tensor, _ []bool, pp any) []*Tensor {
			x := in[0]
			merged := Reshape(x, append([]int{x.shape[0] * x.shape[1]}, x.shape[2:]...)...)
			y := Apply(*op, pp, merged)
			return one1(Reshape(y, append([]int{x.shape[0], x.shape[1]}, y.shape[1:]...)...))
		}
	}
	unfoldOp = &Op{
		Name:     "unfold",
		Sharding: sharding,
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*unfoldParams)
			x := in[0]
			_, k := p.blocks()
			// [N, C·K, blocks...]: the rank of x, for the sharding rule
			// (Unfold reshapes it to [N, C·K, L]); padding taps stay 0.
			out := newOut(x.dtype, append([]int{x.shape[0], x.shape[1] * k}, p.out...))
			switch x.dtype {
			case Float32:
				unfoldKernel(out.f32(), x.f32(), p, x.shape[0]*x.shape[1], false)
			case Float64:
				unfoldKernel(out.f64(), x.f64(), p, x.shape[0]*x.shape[1], false)
			}
			return out
		},
		VJP: func(g *Tensor, _ []*Tensor, _ *Tensor, pp any) []*Tensor {
			return one1(Apply(foldOp, pp, g))
		},
		JVP:    linearJVP(&unfoldOp),
		Batch:  batch(&unfoldOp),
		Traits: Traits{Types: TypesFloat64, Reuse: FreshVJP},
	}
	foldOp = &Op{
		Name:     "fold",
		Sharding: sharding,
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*unfoldParams)
			x := in[0]
			_, k := p.blocks()
			c := x.shape[1] / k
			out := newOut(x.dtype, append([]int{x.shape[0], c}, p.in...))
			switch x.dtype {
			case Float32:
				unfoldKernel(out.f32(), x.f32(), p, x.shape[0]*c, true)
			case Float64:
				unfoldKernel(out.f64(), x.f64(), p, x.shape[0]*c, true)
			}
			return out
		},
		VJP: func(g *Tensor, _ []*Tensor, _ *Tensor, pp any) []*Tensor {
			return one1(Apply(unfoldOp, pp, g))
		},
		JVP:    linearJVP(&foldOp),
		Batch:  batch(&foldOp),
		Traits: Traits{Types: TypesFloat64, Reuse: FreshVJP},
	}
}

// unfoldKernel copies the blocks of planes images (examples × channels)
// im into the columns col (fold false), or adds the columns col into the
// images im (fold true). im is dst when folding, src when unfolding.
func unfoldKernel[T float32 | float64](dst, src []T, p *unfoldParams, planes int, fold bool) {
	l, k := p.blocks()
	nd := len(p.in)
	ist := contiguousStrides(p.in)
	ost := contiguousStrides(p.out)
	imSize := 1
	for _, n := range p.in {
		imSize *= n
	}
	kidx := make([]int, nd)
	var walk func(d, io, oo int, im, col []T)
	walk = func(d, io, oo int, im, col []T) {
		n, s, off := p.in[d], p.stride[d], kidx[d]*p.dilation[d]-p.pad[d]
		for t := range p.out[d] {
			pos := t*s + off
			if pos < 0 || pos >= n {
				continue
			}
			if d < nd-1 {
				walk(d+1, io+pos*ist[d], oo+t*ost[d], im, col)
			} else if fold {
				im[io+pos] += col[oo+t]
			} else {
				col[oo+t] = im[io+pos]
			}
		}
	}
	for pl := range planes {
		var im, cols []T
		if fold {
			im, cols = dst[pl*imSize:(pl+1)*imSize], src[pl*k*l:(pl+1)*k*l]
		} else {
			im, cols = src[pl*imSize:(pl+1)*imSize], dst[pl*k*l:(pl+1)*k*l]
		}
		for kf := range k {
			r := kf
			for d := nd - 1; d >= 0; d-- {
				kidx[d] = r % p.kernel[d]
				r /= p.kernel[d]
			}
			walk(0, 0, 0, im, cols[kf*l:(kf+1)*l])
		}
	}
}

// unfoldGeometry checks spec for nd spatial dimensions of sizes in and
// returns the parameters; what names the call in panics.
func unfoldGeometry(what func() string, spec UnfoldSpec, in []int) *unfoldParams {
	nd := len(in)
	per := func(name string, v []int, def, least int) []int {
		switch len(v) {
		case 0:
			if def < 0 {
				panic(fmt.Sprintf("%s: want a kernel size", what()))
			}
			v = []int{def}
			fallthrough
		case 1:
			out := make([]int, nd)
			for i := range out {
				out[i] = v[0]
			}
			v = out
		case nd:
			v = slices.Clone(v)
		default:
			panic(fmt.Sprintf("%s: %s %v: want 1 or %d values", what(), name, v, nd))
		}
		for _, x := range v {
			if x < least {
				panic(fmt.Sprintf("%s: %s %v: want values of at least %d", what(), name, v, least))
			}
		}
		return v
	}
	p := &unfoldParams{in: slices.Clone(in), kernel: per("kernel", spec.Kernel, -1, 1),
		dilation: per("dilation", spec.Dilation, 1, 1), pad: per("padding", spec.Padding, 0, 0),
		stride: per("stride", spec.Stride, 1, 1), out: make([]int, nd)}
	for d := range nd {
		span := p.dilation[d]*(p.kernel[d]-1) + 1
		p.out[d] = (in[d]+2*p.pad[d]-span)/p.stride[d] + 1
		if in[d]+2*p.pad[d] < span {
			panic(fmt.Sprintf("%s: spatial dimension %d: %d elements padded by %d hold no block of %d", what(), d, in[d], p.pad[d], span))
		}
	}
	return p
}

// Unfold extracts the sliding blocks of x [N, C, spatial...] (one or more
// spatial dimensions) as columns, PyTorch's F.unfold (im2col): the result
// [N, C·K, L] holds in column l the block at the l-th position (row-major
// over the spatial positions) and in row c·K + k the element at kernel
// position k (row-major) of channel c, zero where the block covers
// padding. K is the product of the kernel sizes and L the number of
// blocks, ⌊(in + 2·padding - dilation·(kernel-1) - 1)/stride⌋ + 1 along
// each spatial dimension. x is float32, float64 or half. The gradient is
// Fold of the cotangent.
func Unfold(x *Tensor, spec UnfoldSpec) *Tensor {
	checkNil("tensor.Unfold", "x", x)
	what := func() string { return fmt.Sprintf("tensor.Unfold: %v by %+v", x, spec) }
	if !x.dtype.IsFloat() {
		panic(fmt.Sprintf("tensor.Unfold: %v: not defined for %v", x, x.dtype))
	}
	if len(x.shape) < 3 {
		panic(fmt.Sprintf("%s: want [N, C, spatial...] with one or more spatial dimensions", what()))
	}
	p := unfoldGeometry(what, spec, x.shape[2:])
	y := Apply(unfoldOp, p, x)
	l, _ := p.blocks()
	return Reshape(y, y.shape[0], y.shape[1], l)
}

// Fold sums columns x [N, C·K, L] into images [N, C, size...], PyTorch's
// F.fold (col2im), the transpose of Unfold with the same spec on images
// of that size: each column's elements are added at the places of its
// block, overlapping blocks summed, elements on padding dropped. L must be
// the number of blocks of size; K the product of the kernel sizes.
func Fold(x *Tensor, size []int, spec UnfoldSpec) *Tensor {
	checkNil("tensor.Fold", "x", x)
	what := func() string { return fmt.Sprintf("tensor.Fold: %v to %v by %+v", x, size, spec) }
	if !x.dtype.IsFloat() {
		panic(fmt.Sprintf("tensor.Fold: %v: not defined for %v", x, x.dtype))
	}
	if len(x.shape) != 3 || len(size) < 1 {
		panic(fmt.Sprintf("%s: want columns [N, C·K, L] and one or more output sizes", what()))
	}
	for _, n := range size {
		if n < 1 {
			panic(fmt.Sprintf("%s: sizes must be positive", what()))
		}
	}
	p := unfoldGeometry(what, spec, size)
	l, k := p.blocks()
	if x.shape[1]%k != 0 {
		panic(fmt.Sprintf("%s: %d rows are not channels × %d kernel positions", what(), x.shape[1], k))
	}
	if x.shape[2] != l {
		panic(fmt.Sprintf("%s: %d columns, want the %d blocks %v", what(), x.shape[2], l, p.out))
	}
	return Apply(foldOp, p, Reshape(x, append([]int{x.shape[0], x.shape[1]}, p.out...)...))
}
