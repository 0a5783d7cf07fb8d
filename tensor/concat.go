package tensor

import (
	"fmt"
	"slices"
)

// ---------------------------------------------------------------------------
// Concat

type concatParams struct {
	axis  int
	shape []int
}

var concatOp *Op

func init() {
	concatOp = &Op{
		Name:     "concatenate",
		Sharding: ShardingRule{Family: ShardConcat, Params: func(p any) OpParams { return OpParams{Axes: []int{p.(*concatParams).axis}} }, Block: concatBlockParams},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*concatParams)
			out := newTensor(in[0].dtype, p.shape)
			if out.Size() == 0 {
				return out
			}
			outer, _, inner := axisSplit(p.shape, p.axis)
			chunks := make([]int, len(in))
			for i, x := range in {
				chunks[i] = x.shape[p.axis] * inner
			}
			switch out.dtype {
			case Float32:
				concatKernel(out.f32(), storages(in, func(x *Tensor) []float32 { return x.f32() }), chunks, outer)
			case Int32:
				concatKernel(out.i32(), storages(in, func(x *Tensor) []int32 { return x.i32() }), chunks, outer)
			case Float64:
				concatKernel(out.f64(), storages(in, func(x *Tensor) []float64 { return x.f64() }), chunks, outer)
			case Int64:
				concatKernel(out.i64(), storages(in, func(x *Tensor) []int64 { return x.i64() }), chunks, outer)
			case Uint8:
				concatKernel(out.u8(), storages(in, func(x *Tensor) []uint8 { return x.u8() }), chunks, outer)
			case Bool:
				concatKernel(out.b(), storages(in, func(x *Tensor) []bool { return x.b() }), chunks, outer)
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			p := pp.(*concatParams)
			sizes := make([]int, len(in))
			for i, x := range in {
				sizes[i] = x.shape[p.axis]
			}
			return ApplyN(splitOp, &splitParams{axis: p.axis, sizes: sizes}, g)
		},
		JVP: linearJVP(&concatOp),
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			p := pp.(*concatParams)
			xs := materializeAll(in, batched)
			q := &concatParams{axis: p.axis + 1, shape: append([]int{xs[0].shape[0]}, p.shape...)}
			return one1(applyIn(concatOp, q, xs))
		},
		Traits: Traits{Types: TypesAll},
	}
}

// storages collects the storage of tensors of one dtype.
func storages[T any](xs []*Tensor, data func(*Tensor) []T) [][]T {
	out := make([][]T, len(xs))
	for i, x := range xs {
		out[i] = data(x)
	}
	return out
}

// concatKernel interleaves, for each of outer blocks, chunks[i] elements of
// each source i into dst.
func concatKernel[T any](dst []T, srcs [][]T, chunks []int, outer int) {
	o := 0
	for b := 0; b < outer; b++ {
		for i, s := range srcs {
			c := chunks[i]
			copy(dst[o:o+c], s[b*c:(b+1)*c])
			o += c
		}
	}
}

// Concat joins tensors of one dtype and rank along axis, like
// jnp.concatenate; their other dimensions must match. Negative axes count
// from the end. One operand is returned as is. The gradient splits the
// cotangent back into the operands' sizes.
func Concat(axis int, xs ...*Tensor) *Tensor {
	checkNotNil("tensor.Concat", "xs", xs)
	what := func() string {
		return fmt.Sprintf("tensor.Concat: %s along axis %d", operands("", xs...), axis)
	}
	if len(xs) == 0 {
		panic("tensor.Concat: no operands")
	}
	x0 := xs[0]
	a := normAxisFor(what, x0, axis)
	shape := x0.Shape()
	for _, x := range xs[1:] {
		switch {
		case x.dtype != x0.dtype:
			panic(fmt.Sprintf("%s: dtypes differ", what()))
		case len(x.shape) != len(x0.shape):
			panic(fmt.Sprintf("%s: ranks differ", what()))
		}
		for d, n := range x.shape {
			if d != a && n != x0.shape[d] {
				panic(fmt.Sprintf("%s: dims %d != %d at axis %d", what(), x0.shape[d], n, d))
			}
		}
		shape[a] += x.shape[a]
	}
	if len(xs) == 1 {
		return x0
	}
	return applyIn(concatOp, &concatParams{axis: a, shape: shape}, xs)
}

// ---------------------------------------------------------------------------
// Split

type splitParams struct {
	axis    int
	sizes   []int
	squeeze bool // drop the axis from the outputs (Unstack; every size is 1)
}

var splitOp *Op

func init() {
	splitOp = &Op{
		Name: "split",
		Sharding: ShardingRule{Family: ShardAlongAxis, Params: func(pp any) OpParams {
			p := pp.(*splitParams)
			return OpParams{Axes: []int{p.axis}, N: len(p.sizes)}
		}},
		ImplN: func(in []*Tensor, pp any) ([]*Tensor, any) {
			p := pp.(*splitParams)
			x := in[0]
			outer, _, inner := axisSplit(x.shape, p.axis)
			outs := make([]*Tensor, len(p.sizes))
			chunks := make([]int, len(p.sizes))
			for i, n := range p.sizes {
				shape := slices.Clone(x.shape)
				if p.squeeze {
					shape = slices.Delete(shape, p.axis, p.axis+1)
				} else {
					shape[p.axis] = n
				}
				outs[i] = newTensor(x.dtype, shape)
				chunks[i] = n * inner
			}
			switch x.dtype {
			case Float32:
				splitKernel(storages(outs, func(x *Tensor) []float32 { return x.f32() }), x.f32(), chunks, outer)
			case Int32:
				splitKernel(storages(outs, func(x *Tensor) []int32 { return x.i32() }), x.i32(), chunks, outer)
			case Float64:
				splitKernel(storages(outs, func(x *Tensor) []float64 { return x.f64() }), x.f64(), chunks, outer)
			case Int64:
				splitKernel(storages(outs, func(x *Tensor) []int64 { return x.i64() }), x.i64(), chunks, outer)
			case Uint8:
				splitKernel(storages(outs, func(x *Tensor) []uint8 { return x.u8() }), x.u8(), chunks, outer)
			case Bool:
				splitKernel(storages(outs, func(x *Tensor) []bool { return x.b() }), x.b(), chunks, outer)
			}
			return outs, nil
		},
		VJPN: func(gs []*Tensor, _ []*Tensor, outs []*Tensor, pp any, _ any) []*Tensor {
			p := pp.(*splitParams)
			parts := make([]*Tensor, len(gs))
			for i, g := range gs {
				if g == nil {
					g = Zeros(outs[i].dtype, outs[i].shape...)
				}
				if p.squeeze {
					g = ExpandDims(g, p.axis)
				}
				parts[i] = g
			}
			return []*Tensor{Concat(p.axis, parts...)}
		},
		JVP: linearJVP(&splitOp),
		Batch: func(in []*Tensor, _ []bool, pp any) []*Tensor {
			p := *pp.(*splitParams)
			p.axis++
			return ApplyN(splitOp, &p, in[0])
		},
		Traits: Traits{Types: TypesAll},
	}
}

// splitKernel is concatKernel's inverse.
func splitKernel[T any](dsts [][]T, src []T, chunks []int, outer int) {
	o := 0
	for b := 0; b < outer; b++ {
		for i, d := range dsts {
			c := chunks[i]
			copy(d[b*c:(b+1)*c], src[o:o+c])
			o += c
		}
	}
}

// Split cuts x along axis into n parts of equal size, like jnp.split with an
// integer count. It panics unless n > 0 divides x.Dim(axis).
func Split(x *Tensor, axis, n int) []*Tensor {
	checkNil("tensor.Split", "x", x)
	what := func() string {
		return fmt.Sprintf("tensor.Split: %v along axis %d into %d parts", x, axis, n)
	}
	a := normAxisFor(what, x, axis)
	if n <= 0 {
		panic(fmt.Sprintf("%s: the number of parts must be positive", what()))
	}
	if x.shape[a]%n != 0 {
		panic(fmt.Sprintf("%s: dim %d is not divisible by %d", what(), x.shape[a], n))
	}
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = x.shape[a] / n
	}
	return split(x, a, sizes)
}

// SplitSizes cuts x along axis into consecutive parts of the given sizes,
// which must be non-negative and add up to x.Dim(axis). (jnp.split takes
// the cut points instead; SplitSizes takes the sizes, as tf.split does.)
// The gradient concatenates the parts' cotangents, with zeros for parts
// that got none.
func SplitSizes(x *Tensor, axis int, sizes []int) []*Tensor {
	checkNil("tensor.SplitSizes", "x", x)
	what := func() string {
		return fmt.Sprintf("tensor.SplitSizes: %v along axis %d into sizes %v", x, axis, sizes)
	}
	a := normAxisFor(what, x, axis)
	total := 0
	for _, s := range sizes {
		if s < 0 {
			panic(fmt.Sprintf("%s: negative size", what()))
		}
		total += s
	}
	if total != x.shape[a] {
		panic(fmt.Sprintf("%s: sizes add up to %d, not %d", what(), total, x.shape[a]))
	}
	return split(x, a, slices.Clone(sizes))
}

func split(x *Tensor, axis int, sizes []int) []*Tensor {
	if len(sizes) == 1 {
		return []*Tensor{x}
	}
	return ApplyN(splitOp, &splitParams{axis: axis, sizes: sizes}, x)
}

// ---------------------------------------------------------------------------
// Stack and Unstack

// Stack joins tensors of one dtype and shape along a new axis, like
// jnp.stack: the result has rank r+1 and len(xs) elements along axis, which
// may be in [-(r+1), r]. It is Concat of the operands with a dimension of
// size 1 inserted (a reshape, no copy), so its gradient is Unstack's.
func Stack(axis int, xs ...*Tensor) *Tensor {
	checkNotNil("tensor.Stack", "xs", xs)
	if len(xs) == 0 {
		panic("tensor.Stack: no operands")
	}
	x0 := xs[0]
	r := len(x0.shape) + 1
	a := axis
	if a < 0 {
		a += r
	}
	if a < 0 || a >= r {
		panic(fmt.Sprintf("tensor.Stack: %s along axis %d: axis out of range for rank %d",
			operands("", xs...), axis, r))
	}
	parts := make([]*Tensor, len(xs))
	for i, x := range xs {
		if x.dtype != x0.dtype || !sameShape(x.shape, x0.shape) {
			panic(fmt.Sprintf("tensor.Stack: %s along axis %d: operands must have one dtype and shape",
				operands("", xs...), axis))
		}
		parts[i] = ExpandDims(x, a)
	}
	return Concat(a, parts...)
}

// Unstack cuts x along axis into x.Dim(axis) tensors of rank r-1, like
// list(jnp.moveaxis(x, axis, 0)): part i is x indexed by i along axis. A
// zero-size axis gives an empty slice.
func Unstack(x *Tensor, axis int) []*Tensor {
	checkNil("tensor.Unstack", "x", x)
	a := normAxis("tensor.Unstack", x, axis)
	sizes := make([]int, x.shape[a])
	for i := range sizes {
		sizes[i] = 1
	}
	return ApplyN(splitOp, &splitParams{axis: a, sizes: sizes, squeeze: true}, x)
}

// ---------------------------------------------------------------------------
// Repeat and Tile

// Repeat repeats each element of x repeats times along axis, like
// jnp.repeat(x, repeats, axis) with a scalar count: [a b] repeated twice is
// [a a b b]. repeats may be 0. It is a broadcast between two reshapes, so
// the gradient sums the cotangent over the copies.
func Repeat(x *Tensor, repeats, axis int) *Tensor {
	checkNil("tensor.Repeat", "x", x)
	a := normAxis("tensor.Repeat", x, axis)
	if repeats < 0 {
		panic(fmt.Sprintf("tensor.Repeat: %v repeated %d times along axis %d: negative count", x, repeats, axis))
	}
	if repeats == 1 {
		return x
	}
	// [..., n, 1, ...] broadcast to [..., n, repeats, ...], then merged.
	expanded := slices.Insert(x.Shape(), a+1, 1)
	target := slices.Clone(expanded)
	target[a+1] = repeats
	out := x.Shape()
	out[a] *= repeats
	return Reshape(BroadcastTo(Reshape(x, expanded...), target...), out...)
}

// Tile repeats the whole of x reps[i] times along each dimension i, like
// jnp.tile: [a b] tiled twice is [a b a b]. When reps is shorter than x's
// rank it is padded with leading 1s; when longer, x gets leading dimensions
// of size 1. Counts may be 0. Like Repeat it is a broadcast between two
// reshapes.
func Tile(x *Tensor, reps ...int) *Tensor {
	checkNil("tensor.Tile", "x", x)
	for _, r := range reps {
		if r < 0 {
			panic(fmt.Sprintf("tensor.Tile: %v by %v: negative count", x, reps))
		}
	}
	r := max(len(x.shape), len(reps))
	xs := make([]int, r)
	rp := make([]int, r)
	for i := range r {
		xs[i], rp[i] = 1, 1
	}
	copy(xs[r-len(x.shape):], x.shape)
	copy(rp[r-len(reps):], reps)
	if r == len(x.shape) && !slices.ContainsFunc(rp, func(v int) bool { return v != 1 }) {
		return x
	}
	// [1, d0, 1, d1, ...] broadcast to [r0, d0, r1, d1, ...], then merged.
	inter := make([]int, 0, 2*r)
	target := make([]int, 0, 2*r)
	out := make([]int, r)
	for i := range r {
		inter = append(inter, 1, xs[i])
		target = append(target, rp[i], xs[i])
		out[i] = rp[i] * xs[i]
	}
	return Reshape(BroadcastTo(Reshape(x, inter...), target...), out...)
}

// concatBlockParams makes concatenate's params for blocks: the result
// shape is the blocks' joined along the axis.
func concatBlockParams(pp any, blocks []*Tensor) any {
	p := pp.(*concatParams)
	shape := slices.Clone(blocks[0].shape)
	shape[p.axis] = 0
	for _, b := range blocks {
		shape[p.axis] += b.shape[p.axis]
	}
	return &concatParams{axis: p.axis, shape: shape}
}
