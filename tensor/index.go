package tensor

import "fmt"

// Indexing and data movement.
//
// The ops in index.go, slice.go, pad.go, concat.go and scatter.go move
// elements around without computing on them (ScatterAdd and SegmentSum
// add). They follow jax.numpy and jax.lax:
//
//   - Slice, SliceAxis, DynamicSlice, DynamicSliceAxis and
//     DynamicUpdateSlice cut out or overwrite a box; the dynamic forms clamp
//     their start indices so the box fits, as XLA does, after wrapping a
//     negative start once (start + dim), as jax.lax does.
//   - Concat, Split, SplitSizes, Stack and Unstack join and cut along an axis.
//   - Pad, Repeat, Tile, Flip and Roll rearrange or repeat elements.
//   - Take, TakeAlongAxis and OneHot read at int32 indices (gathers);
//     ScatterAdd and SegmentSum add at indices (scatters).
//
// Every one of them works on Float32, Int32 and Bool tensors (ScatterAdd and
// SegmentSum on Float32 and Int32), is differentiable in its float operands,
// and copies contiguous runs with copy() where the layout allows.
//
// Index semantics are NumPy's where NumPy has an opinion: a negative index i
// into a dimension of size n means i+n, and an index outside [-n, n) is a
// programmer error that panics naming the index and where it was found
// (jnp.take would instead fill or clip silently, which hides bugs).
// SegmentSum and OneHot follow JAX instead: ids outside [0, n) are dropped
// (they contribute nothing, and give an all-zero row for OneHot).

// axisSplit returns the product of the dimensions before axis, the size of
// axis and the product of the dimensions after it: the shape viewed as
// [outer, n, inner].
func axisSplit(shape []int, axis int) (outer, n, inner int) {
	return numel(shape[:axis]), shape[axis], numel(shape[axis+1:])
}

// boxCopy copies the box of shape box that starts at sstart in src (of shape
// sshape) to the position dstart in dst (of shape dshape). The trailing
// dimensions that the box spans fully in both arrays are merged into one
// contiguous run, moved with copy().
func boxCopy[T any](dst []T, dshape, dstart []int, src []T, sshape, sstart, box []int) {
	if numel(box) == 0 {
		return
	}
	r := len(box)
	ds, ss := contiguousStrides(dshape), contiguousStrides(sshape)
	do, so := 0, 0
	for i := 0; i < r; i++ {
		do += dstart[i] * ds[i]
		so += sstart[i] * ss[i]
	}
	// Dimensions [k, r) form the contiguous run.
	k, run := r, 1
	if r > 0 {
		k = r - 1
		run = box[k]
		for k > 0 && box[k] == dshape[k] && box[k] == sshape[k] {
			k--
			run *= box[k]
		}
	}
	if k == 0 {
		copy(dst[do:do+run], src[so:so+run])
		return
	}
	idx := make([]int, k)
	for {
		copy(dst[do:do+run], src[so:so+run])
		j := k - 1
		for ; j >= 0; j-- {
			idx[j]++
			do += ds[j]
			so += ss[j]
			if idx[j] < box[j] {
				break
			}
			do -= ds[j] * box[j]
			so -= ss[j] * box[j]
			idx[j] = 0
		}
		if j < 0 {
			return
		}
	}
}

// boxCopyT is boxCopy on tensors of one dtype.
func boxCopyT(dst *Tensor, dstart []int, src *Tensor, sstart, box []int) {
	switch src.dtype {
	case Float32:
		boxCopy(dst.f32(), dst.shape, dstart, src.f32(), src.shape, sstart, box)
	case Int32:
		boxCopy(dst.i32(), dst.shape, dstart, src.i32(), src.shape, sstart, box)
	case Bool:
		boxCopy(dst.b(), dst.shape, dstart, src.b(), src.shape, sstart, box)
	case BFloat16, Float16:
		boxCopy(dst.u16(), dst.shape, dstart, src.u16(), src.shape, sstart, box)
	case Float64:
		boxCopy(dst.f64(), dst.shape, dstart, src.f64(), src.shape, sstart, box)
	case Int64:
		boxCopy(dst.i64(), dst.shape, dstart, src.i64(), src.shape, sstart, box)
	case Uint8:
		boxCopy(dst.u8(), dst.shape, dstart, src.u8(), src.shape, sstart, box)
	}
}

// cloneTensor returns a new tensor holding a copy of x's data.
func cloneTensor(x *Tensor) *Tensor {
	out := newTensor(x.dtype, x.shape)
	switch x.dtype {
	case Float32:
		copy(out.f32(), x.f32())
	case Int32:
		copy(out.i32(), x.i32())
	case Bool:
		copy(out.b(), x.b())
	case BFloat16, Float16:
		copy(out.u16(), x.u16())
	case Float64:
		copy(out.f64(), x.f64())
	case Int64:
		copy(out.i64(), x.i64())
	case Uint8:
		copy(out.u8(), x.u8())
	}
	return out
}

// unravel returns the multi-index of flat position i in shape.
func unravel(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
	}
	return idx
}

// checkIndices panics unless indices is an int32 tensor whose values all lie
// in [-n, n). what names the op and its operands for the message.
func checkIndices(what func() string, indices *Tensor, n int) *Tensor {
	if indices.dtype == Int64 && indices.layout() == nil && indices.xv() == nil {
		// An index into an axis fits int32 (a dimension is an int32 count
		// of the kernels): checked, then converted.
		for i, v := range indices.i64() {
			if v < int64(-n) || v >= int64(n) {
				panic(fmt.Sprintf("%s: index %d at position %v out of range [%d, %d)",
					what(), v, unravel(i, indices.shape), -n, n))
			}
		}
		return AsType(indices, Int32)
	}
	if indices.dtype != Int32 {
		panic(fmt.Sprintf("%s: indices must be int32 or int64, got %v", what(), indices.dtype))
	}
	if indices.layout() != nil {
		return indices // Apply refuses sharded operands with its own message
	}
	for i, v := range indices.i32() {
		if int(v) < -n || int(v) >= n {
			panic(fmt.Sprintf("%s: index %d at position %v out of range [%d, %d)",
				what(), v, unravel(i, indices.shape), -n, n))
		}
	}
	return indices
}

// wrapIndex maps a NumPy index in [-n, n) to [0, n).
func wrapIndex(v int32, n int) int {
	i := int(v)
	if i < 0 {
		i += n
	}
	return i
}

// ---------------------------------------------------------------------------
// Take

type takeParams struct {
	axis     int
	outShape []int
}

var takeOp *Op

func init() {
	takeOp = &Op{
		Name:     "take",
		Sharding: ShardingRule{Family: ShardTake, Params: func(p any) OpParams { return OpParams{Axes: []int{p.(*takeParams).axis}} }},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*takeParams)
			x, idx := in[0], in[1]
			out := newOutUninit(x.dtype, p.outShape) // every element gathered
			outer, n, inner := axisSplit(x.shape, p.axis)
			if x.dtype == Float32 && outer == 1 && inner >= rowsMin {
				gatherRowsF32(out.f32(), x.f32(), idx.i32(), n, inner, false, isLocal(x, idx))
				return out
			}
			switch x.dtype {
			case Float32:
				takeKernel(out.f32(), x.f32(), idx.i32(), outer, n, inner)
			case Int32:
				takeKernel(out.i32(), x.i32(), idx.i32(), outer, n, inner)
			case Float64:
				takeKernel(out.f64(), x.f64(), idx.i32(), outer, n, inner)
			case Int64:
				takeKernel(out.i64(), x.i64(), idx.i32(), outer, n, inner)
			case Uint8:
				takeKernel(out.u8(), x.u8(), idx.i32(), outer, n, inner)
			case Bool:
				takeKernel(out.b(), x.b(), idx.i32(), outer, n, inner)
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			p := pp.(*takeParams)
			return []*Tensor{takeGrad(g, in[1], in[0].shape, p.axis), nil}
		},
		Save: SaveInputs(1),
		JVP:  linearJVP(&takeOp),
		// With batched indices and a batch of x, the examples' x are laid
		// end to end along axis and each example's indices offset to its
		// own (a gather of the batch, no loop).
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			a := pp.(*takeParams).axis
			x, idx := in[0], in[1]
			switch {
			case !batched[1]:
				return one1(Take(x, idx, a+1))
			case !batched[0]:
				return one1(moveAxis(Take(x, idx, a), a, 0))
			}
			n := x.shape[a+1]
			flat := mergeBatchInto(x, a)
			return one1(moveAxis(Take(flat, batchOffsets("tensor.Take", idx, n), a), a, 0))
		},
		// The VJP scatters g into a new tensor (takeGrad).
		Traits: Traits{Types: TypesAll, Reuse: FreshVJP},
	}
}

// takeKernel gathers along the middle axis of src viewed as [outer, n, inner]:
// dst[o, j, :] = src[o, idx[j], :].
func takeKernel[T any](dst, src []T, idx []int32, outer, n, inner int) {
	m := len(idx)
	for o := 0; o < outer; o++ {
		s := src[o*n*inner : (o+1)*n*inner]
		d := dst[o*m*inner : (o+1)*m*inner]
		if inner == 1 {
			for j, v := range idx {
				d[j] = s[wrapIndex(v, n)]
			}
			continue
		}
		for j, v := range idx {
			k := wrapIndex(v, n) * inner
			copy(d[j*inner:(j+1)*inner], s[k:k+inner])
		}
	}
}

// Take gathers slices of x along axis at the given int32 indices, like
// jnp.take(x, indices, axis): the result has shape
// x.shape[:axis] + indices.shape + x.shape[axis+1:]. A negative index counts
// from the end of the axis; an index outside [-n, n) panics, naming the
// index and its position in indices. Indices may repeat; the gradient then
// accumulates (it is a ScatterAdd into zeros).
func Take(x, indices *Tensor, axis int) *Tensor {
	checkNil("tensor.Take", "x indices", x, indices)
	what := func() string {
		return fmt.Sprintf("tensor.Take: %s along axis %d", operands("", x, indices), axis)
	}
	a := normAxisFor(what, x, axis)
	indices = checkIndices(what, indices, x.shape[a])
	out := make([]int, 0, len(x.shape)-1+len(indices.shape))
	out = append(out, x.shape[:a]...)
	out = append(out, indices.shape...)
	out = append(out, x.shape[a+1:]...)
	return Apply(takeOp, &takeParams{axis: a, outShape: out}, x, indices)
}

// normAxisFor resolves a possibly negative axis of x, panicking with the
// message prefix what().
func normAxisFor(what func() string, x *Tensor, axis int) int {
	r := len(x.shape)
	a := axis
	if a < 0 {
		a += r
	}
	if a < 0 || a >= r {
		panic(fmt.Sprintf("%s: axis out of range for rank %d", what(), r))
	}
	return a
}

// ---------------------------------------------------------------------------
// TakeAlongAxis

type takeAlongParams struct {
	axis     int
	xShape   []int
	outShape []int
}

var takeAlongOp *Op

func init() {
	takeAlongOp = &Op{
		Name: "take_along_axis",
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*takeAlongParams)
			x, idx := in[0], in[1]
			out := newOutUninit(x.dtype, p.outShape) // every element gathered
			if out.Size() == 0 {
				return out
			}
			w := newAlongWalk(x.shape, idx.shape, p.outShape, p.axis)
			switch x.dtype {
			case Float32:
				takeAlongKernel(out.f32(), x.f32(), idx.i32(), w)
			case Int32:
				takeAlongKernel(out.i32(), x.i32(), idx.i32(), w)
			case Float64:
				takeAlongKernel(out.f64(), x.f64(), idx.i32(), w)
			case Int64:
				takeAlongKernel(out.i64(), x.i64(), idx.i32(), w)
			case Uint8:
				takeAlongKernel(out.u8(), x.u8(), idx.i32(), w)
			case Bool:
				takeAlongKernel(out.b(), x.b(), idx.i32(), w)
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			p := pp.(*takeAlongParams)
			return []*Tensor{Apply(takeAlongGradOp, p, in[1], g), nil}
		},
		Save: SaveInputs(1),
		JVP:  linearJVP(&takeAlongOp),
		// The batch dimension is one more broadcasting dimension.
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			x, idx := leadingBatch(in[0], batched[0]), leadingBatch(in[1], batched[1])
			return one1(TakeAlongAxis(x, idx, pp.(*takeAlongParams).axis+1))
		},
		Traits: Traits{Types: TypesAll},
	}
}

// alongWalk describes how TakeAlongAxis walks its output: strides in x and in
// the indices for each output dimension (0 where that operand is broadcast,
// and 0 in x along axis, which the index supplies), and the x stride of axis.
type alongWalk struct {
	oshape     []int
	xs, is     []int
	axisStride int
	n          int // size of x along axis
}

func newAlongWalk(xshape, ishape, oshape []int, axis int) *alongWalk {
	w := &alongWalk{oshape: oshape, n: xshape[axis]}
	xst, ist := contiguousStrides(xshape), contiguousStrides(ishape)
	w.xs = make([]int, len(oshape))
	w.is = make([]int, len(oshape))
	for d := range oshape {
		if d != axis && xshape[d] != 1 {
			w.xs[d] = xst[d]
		}
		if ishape[d] != 1 {
			w.is[d] = ist[d]
		}
	}
	w.axisStride = xst[axis]
	return w
}

// each calls fn for every run of the last output dimension with the output,
// x and indices offsets of its first element.
func (w *alongWalk) each(fn func(o, xb, ib int)) {
	r := len(w.oshape)
	last := w.oshape[r-1]
	idx := make([]int, r-1)
	o, xb, ib := 0, 0, 0
	for {
		fn(o, xb, ib)
		o += last
		j := r - 2
		for ; j >= 0; j-- {
			idx[j]++
			xb += w.xs[j]
			ib += w.is[j]
			if idx[j] < w.oshape[j] {
				break
			}
			xb -= w.xs[j] * w.oshape[j]
			ib -= w.is[j] * w.oshape[j]
			idx[j] = 0
		}
		if j < 0 {
			return
		}
	}
}

func takeAlongKernel[T any](dst, src []T, idx []int32, w *alongWalk) {
	r := len(w.oshape)
	last, dx, di := w.oshape[r-1], w.xs[r-1], w.is[r-1]
	w.each(func(o, xb, ib int) {
		d := dst[o : o+last]
		for j := range d {
			d[j] = src[xb+j*dx+wrapIndex(idx[ib+j*di], w.n)*w.axisStride]
		}
	})
}

func takeAlongGradKernel[T float32 | int32 | float64 | int64](dst, g []T, idx []int32, w *alongWalk) {
	r := len(w.oshape)
	last, dx, di := w.oshape[r-1], w.xs[r-1], w.is[r-1]
	w.each(func(o, xb, ib int) {
		s := g[o : o+last]
		for j, v := range s {
			dst[xb+j*dx+wrapIndex(idx[ib+j*di], w.n)*w.axisStride] += v
		}
	})
}

// takeAlongGradOp is the transpose of TakeAlongAxis in x: it adds g into
// zeros of x's shape at the positions TakeAlongAxis read (summing over
// dimensions along which x was broadcast). Inputs: indices, g.
var takeAlongGradOp *Op

func init() {
	takeAlongGradOp = &Op{
		Name: "take_along_axis_grad",
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*takeAlongParams)
			idx, g := in[0], in[1]
			out := newTensor(g.dtype, p.xShape)
			if g.Size() == 0 {
				return out
			}
			w := newAlongWalk(p.xShape, idx.shape, p.outShape, p.axis)
			switch g.dtype {
			case Float32:
				takeAlongGradKernel(out.f32(), g.f32(), idx.i32(), w)
			case Int32:
				takeAlongGradKernel(out.i32(), g.i32(), idx.i32(), w)
			case Float64:
				takeAlongGradKernel(out.f64(), g.f64(), idx.i32(), w)
			case Int64:
				takeAlongGradKernel(out.i64(), g.i64(), idx.i32(), w)
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			p := pp.(*takeAlongParams)
			return []*Tensor{nil, TakeAlongAxis(g, in[0], p.axis)}
		},
		Save: SaveInputs(0),
		JVP:  linearJVP(&takeAlongGradOp),
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			p := pp.(*takeAlongParams)
			n := batchSize(in, batched)
			q := &takeAlongParams{axis: p.axis + 1, xShape: append([]int{n}, p.xShape...), outShape: append([]int{n}, p.outShape...)}
			return one1(Apply(takeAlongGradOp, q, leadingBatch(in[0], batched[0]), materialize(in[1], batched[1], n)))
		},
		Traits: Traits{Types: TypesFloat64 | TypesInt64},
	}
}

// TakeAlongAxis picks, along axis, the elements of x at the int32 indices,
// like jnp.take_along_axis: indices has the rank of x, and
// out[..., i, ...] = x[..., indices[..., i, ...], ...]. The dimensions other
// than axis broadcast against each other (NumPy rules), so indices of shape
// [B, 1] pick one element per row of an x of shape [B, V]. The result has
// indices.shape[axis] along axis and the broadcast size elsewhere. Negative
// indices count from the end; indices outside [-n, n) panic.
func TakeAlongAxis(x, indices *Tensor, axis int) *Tensor {
	checkNil("tensor.TakeAlongAxis", "x indices", x, indices)
	what := func() string {
		return fmt.Sprintf("tensor.TakeAlongAxis: %s along axis %d", operands("", x, indices), axis)
	}
	if len(indices.shape) != len(x.shape) {
		panic(fmt.Sprintf("%s: indices must have the rank of x (%d), got %d", what(), len(x.shape), len(indices.shape)))
	}
	a := normAxisFor(what, x, axis)
	out := make([]int, len(x.shape))
	for d := range out {
		xd, id := x.shape[d], indices.shape[d]
		switch {
		case d == a:
			out[d] = id
		case xd == id || id == 1:
			out[d] = xd
		case xd == 1:
			out[d] = id
		default:
			panic(fmt.Sprintf("%s: dims %d and %d at axis %d do not broadcast", what(), xd, id, d))
		}
	}
	indices = checkIndices(what, indices, x.shape[a])
	return Apply(takeAlongOp, &takeAlongParams{axis: a, xShape: x.Shape(), outShape: out}, x, indices)
}

// ---------------------------------------------------------------------------
// OneHot

var oneHotOp *Op

func init() {
	oneHotOp = &Op{
		Name:     "one_hot",
		Sharding: ShardingRule{Family: ShardOneHot, Params: func(p any) OpParams { return OpParams{N: p.(int)} }},
		Impl: func(in []*Tensor, pp any) *Tensor {
			n := pp.(int)
			idx := in[0]
			shape := append(append(make([]int, 0, len(idx.shape)+1), idx.shape...), n)
			out := newTensor(Float32, shape)
			d := out.f32()
			for i, v := range idx.i32() {
				if v >= 0 && int(v) < n {
					d[i*n+int(v)] = 1
				}
			}
			return out
		},
		Batch: sameOpBatch(&oneHotOp),
	}
}

// OneHot returns the float32 one-hot encoding of int32 indices over n
// classes, like jax.nn.one_hot: the result has shape indices.shape + [n],
// with a 1 at each index. An index outside [0, n), negative ones included,
// gives a row of zeros. It is not differentiable (its input is an integer).
func OneHot(indices *Tensor, n int) *Tensor {
	checkNil("tensor.OneHot", "indices", indices)
	if indices.dtype != Int32 {
		panic(fmt.Sprintf("tensor.OneHot: %v into %d classes: indices must be int32", indices, n))
	}
	if n < 0 {
		panic(fmt.Sprintf("tensor.OneHot: %v into %d classes: negative class count", indices, n))
	}
	return Apply(oneHotOp, n, indices)
}
