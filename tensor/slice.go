package tensor

import (
	"fmt"
	"slices"
)

// ---------------------------------------------------------------------------
// Slice

type sliceParams struct {
	starts, limits []int
	// buf holds starts and limits up to rank 4: the params of a slice
	// are one allocation.
	buf [8]int
}

// newSliceParams returns slice params holding copies of starts and
// limits.
func newSliceParams(starts, limits []int) *sliceParams {
	p := new(sliceParams)
	p.starts = append(p.buf[:0:4], starts...)
	p.limits = append(p.buf[4:4:8], limits...)
	return p
}

var sliceOp *Op

func init() {
	sliceOp = &Op{
		Name: "slice",
		Sharding: ShardingRule{Family: ShardSlice, Params: func(pp any) OpParams {
			p := pp.(*sliceParams)
			return OpParams{Starts: slices.Clone(p.starts), Limits: slices.Clone(p.limits)}
		}},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*sliceParams)
			x := in[0]
			shape := make([]int, len(p.starts))
			for i := range shape {
				shape[i] = p.limits[i] - p.starts[i]
			}
			out := newTensor(x.dtype, shape)
			boxCopyT(out, make([]int, len(shape)), x, p.starts, shape)
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			p := pp.(*sliceParams)
			pads := make([][2]int, len(p.starts))
			for i := range pads {
				pads[i] = [2]int{p.starts[i], in[0].shape[i] - p.limits[i]}
			}
			return []*Tensor{Pad(g, pads, 0)}
		},
		JVP: linearJVP(&sliceOp),
		Batch: func(in []*Tensor, _ []bool, pp any) []*Tensor {
			p := pp.(*sliceParams)
			x := in[0]
			q := newSliceParams(append([]int{0}, p.starts...), append([]int{x.shape[0]}, p.limits...))
			return one1(Apply(sliceOp, q, x))
		},
		Traits: Traits{Half: NativeHalf, Types: TypesAll}, // copies 16-bit data as it is
	}
}

// Slice returns the box of x from starts (inclusive) to limits (exclusive)
// in every dimension, like lax.slice: the result has shape limits - starts.
// It panics unless 0 <= starts[i] <= limits[i] <= x.Dim(i). Its gradient
// pads the cotangent back to x's shape with zeros.
func Slice(x *Tensor, starts, limits []int) *Tensor {
	checkNil("tensor.Slice", "x", x)
	what := func() string {
		return fmt.Sprintf("tensor.Slice: %v from %v to %v", x, starts, limits)
	}
	r := len(x.shape)
	if len(starts) != r || len(limits) != r {
		panic(fmt.Sprintf("%s: want %d starts and %d limits", what(), r, r))
	}
	for i := range r {
		if starts[i] < 0 || starts[i] > limits[i] || limits[i] > x.shape[i] {
			panic(fmt.Sprintf("%s: axis %d: [%d, %d) is not a range within [0, %d)",
				what(), i, starts[i], limits[i], x.shape[i]))
		}
	}
	return slice(x, starts, limits)
}

// slice applies sliceOp to validated bounds; the whole of x is x itself.
func slice(x *Tensor, starts, limits []int) *Tensor {
	full := true
	for i := range starts {
		if starts[i] != 0 || limits[i] != x.shape[i] {
			full = false
			break
		}
	}
	if full {
		return x
	}
	return Apply(sliceOp, newSliceParams(starts, limits), x)
}

// SliceAxis returns x restricted to [start, limit) along axis, like
// lax.slice_in_dim. Negative start and limit count from the end of the
// axis (once: -1 is the last element). It panics unless, after that,
// 0 <= start <= limit <= x.Dim(axis).
func SliceAxis(x *Tensor, axis, start, limit int) *Tensor {
	checkNil("tensor.SliceAxis", "x", x)
	what := func() string {
		return fmt.Sprintf("tensor.SliceAxis: %v axis %d from %d to %d", x, axis, start, limit)
	}
	a := normAxisFor(what, x, axis)
	n := x.shape[a]
	s, l := start, limit
	if s < 0 {
		s += n
	}
	if l < 0 {
		l += n
	}
	if s < 0 || s > l || l > n {
		panic(fmt.Sprintf("%s: [%d, %d) is not a range within [0, %d)", what(), s, l, n))
	}
	var buf [8]int // starts and limits up to rank 4, on the stack
	starts, limits := buf[:0:4], buf[4:4:8]
	starts = append(starts, make([]int, len(x.shape))...)
	limits = append(limits, x.shape...)
	starts[a], limits[a] = s, l
	return slice(x, starts, limits)
}

// clampStart maps a dynamic start index into [0, dim-size]: a negative start
// is first wrapped once (start + dim), as jax.lax does, then the start is
// clamped so that the window fits, as XLA does.
func clampStart(start, size, dim int) int {
	if start < 0 {
		start += dim
	}
	return min(max(start, 0), dim-size)
}

// DynamicSlice returns the box of x of shape sizes starting at starts, like
// lax.dynamic_slice. Each start is adjusted so the box fits: a negative start
// counts from the end (start + dim), then the start is clamped to
// [0, dim - size]. It panics unless 0 <= sizes[i] <= x.Dim(i). The gradient
// is the cotangent padded with zeros at the adjusted position.
func DynamicSlice(x *Tensor, starts, sizes []int) *Tensor {
	checkNil("tensor.DynamicSlice", "x", x)
	what := func() string {
		return fmt.Sprintf("tensor.DynamicSlice: %v at %v size %v", x, starts, sizes)
	}
	r := len(x.shape)
	if len(starts) != r || len(sizes) != r {
		panic(fmt.Sprintf("%s: want %d starts and %d sizes", what(), r, r))
	}
	s := make([]int, r)
	l := make([]int, r)
	for i := range r {
		if sizes[i] < 0 || sizes[i] > x.shape[i] {
			panic(fmt.Sprintf("%s: axis %d: size %d is not within [0, %d]", what(), i, sizes[i], x.shape[i]))
		}
		s[i] = clampStart(starts[i], sizes[i], x.shape[i])
		l[i] = s[i] + sizes[i]
	}
	return slice(x, s, l)
}

// DynamicSliceAxis is DynamicSlice along one axis, like
// lax.dynamic_slice_in_dim: the result has size elements along axis starting
// at start (adjusted as DynamicSlice does) and all of x's other dimensions.
func DynamicSliceAxis(x *Tensor, axis, start, size int) *Tensor {
	checkNil("tensor.DynamicSliceAxis", "x", x)
	what := func() string {
		return fmt.Sprintf("tensor.DynamicSliceAxis: %v axis %d at %d size %d", x, axis, start, size)
	}
	a := normAxisFor(what, x, axis)
	n := x.shape[a]
	if size < 0 || size > n {
		panic(fmt.Sprintf("%s: size %d is not within [0, %d]", what(), size, n))
	}
	starts := make([]int, len(x.shape))
	limits := x.Shape()
	starts[a] = clampStart(start, size, n)
	limits[a] = starts[a] + size
	return slice(x, starts, limits)
}

// ---------------------------------------------------------------------------
// DynamicUpdateSlice

var dusOp *Op

func init() {
	dusOp = &Op{
		Name: "dynamic_update_slice",
		Impl: func(in []*Tensor, pp any) *Tensor {
			x, u := in[0], in[1]
			out := cloneTensor(x)
			boxCopyT(out, pp.([]int), u, make([]int, len(u.shape)), u.shape)
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			starts := pp.([]int)
			u := in[1]
			limits := make([]int, len(starts))
			for i := range limits {
				limits[i] = starts[i] + u.shape[i]
			}
			return []*Tensor{
				Apply(dusOp, starts, g, Zeros(g.dtype, u.shape...)),
				slice(g, starts, limits),
			}
		},
		JVP: linearJVP(&dusOp),
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			return applyAll(dusOp, append([]int{0}, pp.([]int)...), materializeAll(in, batched))
		},
		Traits: Traits{Types: TypesAll},
	}
}

// DynamicUpdateSlice returns x with the box at starts replaced by update,
// like lax.dynamic_update_slice. update has x's rank and dtype and fits
// within x; the starts are adjusted as DynamicSlice does (a negative start
// counts from the end, then it is clamped to [0, dim - update dim]). It is
// differentiable in x (the cotangent with the box zeroed) and in update (the
// box of the cotangent).
func DynamicUpdateSlice(x, update *Tensor, starts []int) *Tensor {
	checkNil("tensor.DynamicUpdateSlice", "x update", x, update)
	what := func() string {
		return fmt.Sprintf("tensor.DynamicUpdateSlice: %s at %v", operands("", x, update), starts)
	}
	r := len(x.shape)
	switch {
	case x.dtype != update.dtype:
		panic(fmt.Sprintf("%s: dtypes differ", what()))
	case len(update.shape) != r:
		panic(fmt.Sprintf("%s: update must have rank %d", what(), r))
	case len(starts) != r:
		panic(fmt.Sprintf("%s: want %d starts", what(), r))
	}
	s := make([]int, r)
	for i := range r {
		if update.shape[i] > x.shape[i] {
			panic(fmt.Sprintf("%s: axis %d: update dim %d > dim %d", what(), i, update.shape[i], x.shape[i]))
		}
		s[i] = clampStart(starts[i], update.shape[i], x.shape[i])
	}
	return Apply(dusOp, s, x, update)
}

// ---------------------------------------------------------------------------
// Flip

var flipOp *Op

func init() {
	flipOp = &Op{
		Name:     "flip",
		Sharding: ShardingRule{Family: ShardFlip, Params: flipParams},
		Impl: func(in []*Tensor, pp any) *Tensor {
			x, flip := in[0], pp.([]bool)
			out := newTensor(x.dtype, x.shape)
			switch x.dtype {
			case Float32:
				flipKernel(out.f32(), x.f32(), x.shape, flip)
			case Int32:
				flipKernel(out.i32(), x.i32(), x.shape, flip)
			case Float64:
				flipKernel(out.f64(), x.f64(), x.shape, flip)
			case Int64:
				flipKernel(out.i64(), x.i64(), x.shape, flip)
			case Uint8:
				flipKernel(out.u8(), x.u8(), x.shape, flip)
			case Bool:
				flipKernel(out.b(), x.b(), x.shape, flip)
			}
			return out
		},
		VJP: func(g *Tensor, _ []*Tensor, _ *Tensor, pp any) []*Tensor {
			return []*Tensor{Apply(flipOp, pp, g)}
		},
		JVP: linearJVP(&flipOp),
		Batch: func(in []*Tensor, _ []bool, pp any) []*Tensor {
			return one1(Apply(flipOp, append([]bool{false}, pp.([]bool)...), in[0]))
		},
		Traits: Traits{Types: TypesAll},
	}
}

// flipKernel writes src reversed along the dimensions where flip is set.
// Trailing dimensions that are not flipped are copied as contiguous runs.
func flipKernel[T any](dst, src []T, shape []int, flip []bool) {
	if len(dst) == 0 {
		return
	}
	r := len(shape)
	k, run := r, 1
	for k > 0 && !flip[k-1] {
		k--
		run *= shape[k]
	}
	if k == 0 {
		copy(dst, src)
		return
	}
	// Dimension k-1 is flipped: it is the inner loop; [0, k-1) are walked.
	st := contiguousStrides(shape)
	step := make([]int, k)
	so := 0
	for d := 0; d < k; d++ {
		step[d] = st[d]
		if flip[d] {
			so += (shape[d] - 1) * st[d]
			step[d] = -st[d]
		}
	}
	n, s := shape[k-1], step[k-1]
	idx := make([]int, k-1)
	o := 0
	for {
		if run == 1 {
			d := dst[o : o+n]
			for j := range d {
				d[j] = src[so+j*s]
			}
		} else {
			for j := 0; j < n; j++ {
				copy(dst[o+j*run:o+(j+1)*run], src[so+j*s:so+j*s+run])
			}
		}
		o += n * run
		j := k - 2
		for ; j >= 0; j-- {
			idx[j]++
			so += step[j]
			if idx[j] < shape[j] {
				break
			}
			so -= step[j] * shape[j]
			idx[j] = 0
		}
		if j < 0 {
			return
		}
	}
}

// Flip reverses the order of the elements of x along the given axes, like
// jnp.flip; with no axes it reverses every axis. Negative axes count from
// the end; a repeated axis panics.
func Flip(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.Flip", "x", x)
	ax := normAxes("tensor.Flip", x, axes)
	flip := make([]bool, len(x.shape))
	some := false
	for _, a := range ax {
		if x.shape[a] > 1 {
			flip[a] = true
			some = true
		}
	}
	if !some {
		return x
	}
	return Apply(flipOp, flip, x)
}

// ---------------------------------------------------------------------------
// Roll

type rollParams struct{ shift, axis int }

var rollOp *Op

func init() {
	rollOp = &Op{
		Name:     "roll",
		Sharding: ShardingRule{Family: ShardAlongAxis, Params: func(p any) OpParams { return OpParams{Axes: []int{p.(rollParams).axis}} }},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(rollParams)
			x := in[0]
			out := newTensor(x.dtype, x.shape)
			outer, n, inner := axisSplit(x.shape, p.axis)
			switch x.dtype {
			case Float32:
				rollKernel(out.f32(), x.f32(), outer, n, inner, p.shift)
			case Int32:
				rollKernel(out.i32(), x.i32(), outer, n, inner, p.shift)
			case Float64:
				rollKernel(out.f64(), x.f64(), outer, n, inner, p.shift)
			case Int64:
				rollKernel(out.i64(), x.i64(), outer, n, inner, p.shift)
			case Uint8:
				rollKernel(out.u8(), x.u8(), outer, n, inner, p.shift)
			case Bool:
				rollKernel(out.b(), x.b(), outer, n, inner, p.shift)
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			p := pp.(rollParams)
			n := in[0].shape[p.axis]
			return []*Tensor{Apply(rollOp, rollParams{n - p.shift, p.axis}, g)}
		},
		JVP: linearJVP(&rollOp),
		Batch: func(in []*Tensor, _ []bool, pp any) []*Tensor {
			p := pp.(rollParams)
			return one1(Apply(rollOp, rollParams{p.shift, p.axis + 1}, in[0]))
		},
		Traits: Traits{Types: TypesAll},
	}
}

// rollKernel rolls each [n, inner] block of src by s in [1, n) positions:
// dst[o, (i+s) mod n, :] = src[o, i, :]. Each block is two copies.
func rollKernel[T any](dst, src []T, outer, n, inner, s int) {
	blk, cut := n*inner, (n-s)*inner
	for o := 0; o < outer; o++ {
		d, x := dst[o*blk:(o+1)*blk], src[o*blk:(o+1)*blk]
		copy(d[s*inner:], x[:cut])
		copy(d[:s*inner], x[cut:])
	}
}

// Roll shifts the elements of x by shift positions along axis, wrapping
// around, like jnp.roll: out[(i + shift) mod n] = x[i]. shift may be
// negative or larger than the axis.
func Roll(x *Tensor, shift, axis int) *Tensor {
	checkNil("tensor.Roll", "x", x)
	a := normAxis("tensor.Roll", x, axis)
	n := x.shape[a]
	if n == 0 {
		return x
	}
	s := ((shift % n) + n) % n
	if s == 0 {
		return x
	}
	return Apply(rollOp, rollParams{s, a}, x)
}

// flipParams describes flip's params (which axes are flipped) as their
// list.
func flipParams(p any) OpParams {
	var axes []int
	for i, f := range p.([]bool) {
		if f {
			axes = append(axes, i)
		}
	}
	return OpParams{Axes: axes}
}
