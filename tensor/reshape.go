package tensor

import (
	"fmt"
	"slices"
)

// view returns a tensor with x's data and a new shape (same element count).
func view(x *Tensor, shape []int) *Tensor {
	x.hold()
	return &Tensor{dtype: x.dtype, shape: shape, data: x.data, ext: x.localExt(), rec: x.rec}
}

var reshapeOp *Op

func init() {
	reshapeOp = &Op{
		Name: "reshape",
		Sharding: ShardingRule{Family: ShardReshape, Params: func(p any) OpParams {
			return OpParams{Shape: slices.Clone(p.(*reshapeParams).shape)}
		}},
		Impl: func(in []*Tensor, p any) *Tensor { return view(in[0], p.(*reshapeParams).shape) },
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			// The shape copied into the params: in[0]'s own often lives
			// in the allocation of its header (or of the node recording
			// it), and the cotangent sharing it would keep that, and the
			// storage it holds, alive.
			return []*Tensor{reshapeTo(g, in[0].shape)}
		},
		JVP: linearJVP(&reshapeOp),
		Batch: func(in []*Tensor, _ []bool, p any) []*Tensor {
			x := in[0]
			return one1(reshapeTo(x, append([]int{x.shape[0]}, p.(*reshapeParams).shape...)))
		},
		// A view: 16-bit data as it is; its VJP (a view of the cotangent)
		// computes on the device alone (SyncVJP: a shard.Map block it
		// consumed may be donated).
		Traits: Traits{Half: NativeHalf, Types: TypesAll, Placement: SyncVJP},
	}
}

// Reshape returns x with a new shape holding the same elements in the same
// row-major order. One dimension may be -1 and is then inferred. No data is
// copied.
func Reshape(x *Tensor, shape ...int) *Tensor {
	checkNil("tensor.Reshape", "x", x)
	if sameShape(shape, x.shape) {
		return x
	}
	if plainValue(x) {
		return plainView(x, "tensor.Reshape", shape)
	}
	p := new(reshapeParams)
	p.shape = resolveShape(p.buf[:0], "tensor.Reshape", x, shape)
	if sameShape(p.shape, x.shape) {
		return x
	}
	return Apply(reshapeOp, p, x)
}

// reshapeParams is reshape's params: the result's shape, up to rank 4
// in buf, in one allocation with it (a []int boxed as params would be a
// second one; another tensor's shape kept would pin the allocation it
// lives in, often that tensor's header, and so its storage).
type reshapeParams struct {
	shape []int
	buf   [4]int
}

// reshapeTo is Reshape to a shape of x's size and no -1, which it copies.
func reshapeTo(x *Tensor, shape []int) *Tensor {
	if sameShape(shape, x.shape) {
		return x
	}
	if plainValue(x) {
		return plainView(x, "tensor.Reshape", shape)
	}
	p := new(reshapeParams)
	p.shape = append(p.buf[:0], shape...)
	return Apply(reshapeOp, p, x)
}

// plainValue reports whether x is a value of no trace, level or
// placement with data: Apply would run an op on it as it is (its
// untraced path), and a reshape of it is a view.
func plainValue(x *Tensor) bool {
	return x.node == nil && (x.ext == nil || x.ext.xv == nil && x.ext.layout == nil) && !x.placeholder()
}

// plainView is Apply(reshapeOp, ...) of x (plainValue) to shape, one
// dimension of which may be -1, without the params and dispatch: the view
// reshape's Impl makes, with the shape in the header's allocation (an op
// on a device's values, a VJP's reshape of a cotangent). It returns x if
// the shape is x's.
func plainView(x *Tensor, op string, shape []int) *Tensor {
	box := &struct {
		t    Tensor
		dims [4]int
	}{}
	s := resolveShape(box.dims[:0], op, x, shape)
	if sameShape(s, x.shape) {
		return x
	}
	x.hold()
	t := &box.t
	t.dtype, t.shape, t.data, t.rec = x.dtype, s, x.data, x.rec
	t.ext = x.localExt()
	return t
}

// resolveShape appends shape to dst with its -1 dimension inferred from
// x's size, checking that it holds x's elements.
func resolveShape(dst []int, op string, x *Tensor, shape []int) []int {
	// (The messages format a copy of shape: shape itself stays on its
	// caller's stack.)
	out := append(dst, shape...)
	infer := -1
	known := 1
	for i, d := range out {
		switch {
		case d == -1 && infer == -1:
			infer = i
		case d < 0:
			panic(fmt.Sprintf("%s: %v to %v: bad dimension %d", op, x, slices.Clone(shape), d))
		default:
			known *= d
		}
	}
	if tooManyElements(out) {
		panic(fmt.Sprintf("%s: %v to %v: more elements than fit in memory", op, x, slices.Clone(shape)))
	}
	n := x.Size()
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			panic(fmt.Sprintf("%s: %v to %v: cannot infer the -1 dimension", op, x, slices.Clone(shape)))
		}
		out[infer] = n / known
	} else if known != n {
		panic(fmt.Sprintf("%s: %v to %v: %d elements do not fit %d", op, x, slices.Clone(shape), n, known))
	}
	return out
}

// Flatten returns x as a vector.
func Flatten(x *Tensor) *Tensor {
	checkNil("tensor.Flatten", "x", x)
	return Reshape(x, -1)
}

// ExpandDims inserts a dimension of size 1 at axis (which may be rank(x),
// or negative counting from the end of the result), like jnp.expand_dims.
func ExpandDims(x *Tensor, axis int) *Tensor {
	checkNil("tensor.ExpandDims", "x", x)
	r := len(x.shape) + 1
	a := axis
	if a < 0 {
		a += r
	}
	if a < 0 || a >= r {
		panic(fmt.Sprintf("tensor.ExpandDims: axis %d out of range for %v", axis, x))
	}
	p := new(reshapeParams)
	p.shape = append(append(append(p.buf[:0], x.shape[:a]...), 1), x.shape[a:]...)
	return Apply(reshapeOp, p, x)
}

// Squeeze removes the given dimensions, which must have size 1; with no
// axes it removes every dimension of size 1.
func Squeeze(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.Squeeze", "x", x)
	var shape []int
	if len(axes) == 0 {
		for _, d := range x.shape {
			if d != 1 {
				shape = append(shape, d)
			}
		}
	} else {
		ax := normAxes("tensor.Squeeze", x, axes)
		for _, a := range ax {
			if x.shape[a] != 1 {
				panic(fmt.Sprintf("tensor.Squeeze: %v: dimension %d has size %d, not 1", x, a, x.shape[a]))
			}
		}
		for i, d := range x.shape {
			if !containsInt(ax, i) {
				shape = append(shape, d)
			}
		}
	}
	return Reshape(x, shape...)
}

var broadcastOp *Op

func init() {
	broadcastOp = &Op{
		Name:     "broadcast",
		Sharding: ShardingRule{Family: ShardBroadcast, Params: shapeParams},
		Impl: func(in []*Tensor, p any) *Tensor {
			x, shape := in[0], p.([]int)
			out := newOutUninit(x.dtype, shape) // every element written
			sx := broadcastStrides(x.shape, shape)
			broadcastLoop(shape, sx, sx, func(o, a, _, n, da, _ int) {
				switch x.dtype {
				case Float32:
					broadcastRun(out.f32(), x.f32(), o, a, n, da)
				case Int32:
					broadcastRun(out.i32(), x.i32(), o, a, n, da)
				case Float64:
					broadcastRun(out.f64(), x.f64(), o, a, n, da)
				case Int64:
					broadcastRun(out.i64(), x.i64(), o, a, n, da)
				case Uint8:
					broadcastRun(out.u8(), x.u8(), o, a, n, da)
				case Bool:
					broadcastRun(out.b(), x.b(), o, a, n, da)
				}
			})
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{unbroadcast(g, in[0].shape)}
		},
		JVP: linearJVP(&broadcastOp),
		Batch: func(in []*Tensor, batched []bool, p any) []*Tensor {
			shape := p.([]int)
			x := alignBatch(in, batched, len(shape))[0]
			return one1(BroadcastTo(x, append([]int{x.shape[0]}, shape...)...))
		},
		Traits: Traits{Types: TypesAll},
	}
}

// broadcastRun writes one run of n elements of a broadcast: a copy of
// src[a:a+n] if the source advances with the output (da == 1), else n
// copies of src[a].
func broadcastRun[T any](dst, src []T, o, a, n, da int) {
	if da == 1 {
		copy(dst[o:o+n], src[a:a+n])
	} else {
		fill(dst[o:o+n], src[a])
	}
}

func fill[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// BroadcastTo returns x broadcast to shape by NumPy rules (the result holds
// its own copy of the data).
func BroadcastTo(x *Tensor, shape ...int) *Tensor {
	checkNil("tensor.BroadcastTo", "x", x)
	checkShape("tensor.BroadcastTo", shape)
	target := &Tensor{dtype: x.dtype, shape: shape}
	got := broadcastShapes("tensor.BroadcastTo", "to", x, target)
	if !sameShape(got, shape) {
		panic(fmt.Sprintf("tensor.BroadcastTo: %v cannot be broadcast to %v", x, shape))
	}
	if sameShape(x.shape, shape) {
		return x
	}
	return Apply(broadcastOp, append([]int(nil), shape...), x)
}

var transposeOp *Op

func init() {
	transposeOp = &Op{
		Name:     "transpose",
		Sharding: ShardingRule{Family: ShardTranspose, Params: func(p any) OpParams { return OpParams{Perm: slices.Clone(p.([]int))} }},
		Impl: func(in []*Tensor, p any) *Tensor {
			x, perm := in[0], p.([]int)
			shape := make([]int, len(perm))
			for i, a := range perm {
				shape[i] = x.shape[a]
			}
			var out *Tensor
			if x.dtype == Bool {
				out = newTensor(x.dtype, shape)
			} else {
				out = newOutUninit(x.dtype, shape) // every element is written
			}
			xs := contiguousStrides(x.shape)
			src := make([]int, len(perm)) // stride in x of each output dim
			for i, a := range perm {
				src[i] = xs[a]
			}
			dst := contiguousStrides(shape)
			// Walk the output in order; da is the x stride of the innermost
			// (merged) output dimension.
			broadcastLoop(shape, src, dst, func(o, a, _, n, da, _ int) {
				copyRun(out, x, o, a, n, da)
			})
			return out
		},
		VJP: func(g *Tensor, _ []*Tensor, _ *Tensor, p any) []*Tensor {
			perm := p.([]int)
			inv := make([]int, len(perm))
			for i, a := range perm {
				inv[a] = i
			}
			return []*Tensor{Transpose(g, inv...)}
		},
		JVP: linearJVP(&transposeOp),
		Batch: func(in []*Tensor, _ []bool, p any) []*Tensor {
			return one1(Transpose(in[0], append([]int{0}, shiftAxes(p.([]int))...)...))
		},
		Traits: Traits{Reuse: FreshVJP, Types: TypesAll}, // a transposed copy of g, or a view of g (settle checks)
	}
}

func copyRun(out, x *Tensor, o, a, n, step int) {
	if step == 1 {
		switch x.dtype {
		case Float32:
			copy(out.f32()[o:o+n], x.f32()[a:a+n])
		case Int32:
			copy(out.i32()[o:o+n], x.i32()[a:a+n])
		case Float64:
			copy(out.f64()[o:o+n], x.f64()[a:a+n])
		case Int64:
			copy(out.i64()[o:o+n], x.i64()[a:a+n])
		case Uint8:
			copy(out.u8()[o:o+n], x.u8()[a:a+n])
		case Bool:
			copy(out.b()[o:o+n], x.b()[a:a+n])
		}
		return
	}
	switch x.dtype {
	case Float32:
		dst, src := out.f32()[o:o+n], x.f32()
		for j := range dst {
			dst[j] = src[a+j*step]
		}
	case Int32:
		dst, src := out.i32()[o:o+n], x.i32()
		for j := range dst {
			dst[j] = src[a+j*step]
		}
	case Float64:
		dst, src := out.f64()[o:o+n], x.f64()
		for j := range dst {
			dst[j] = src[a+j*step]
		}
	case Int64:
		dst, src := out.i64()[o:o+n], x.i64()
		for j := range dst {
			dst[j] = src[a+j*step]
		}
	case Uint8:
		dst, src := out.u8()[o:o+n], x.u8()
		for j := range dst {
			dst[j] = src[a+j*step]
		}
	case Bool:
		dst, src := out.b()[o:o+n], x.b()
		for j := range dst {
			dst[j] = src[a+j*step]
		}
	}
}

// Transpose permutes the dimensions of x: dimension i of the result is
// dimension perm[i] of x. With no perm it reverses the dimensions.
func Transpose(x *Tensor, perm ...int) *Tensor {
	checkNil("tensor.Transpose", "x", x)
	r := len(x.shape)
	if len(perm) == 0 {
		perm = make([]int, r)
		for i := range perm {
			perm[i] = r - 1 - i
		}
	}
	if len(perm) != r {
		panic(fmt.Sprintf("tensor.Transpose: %v: permutation %v has %d entries, want %d", x, perm, len(perm), r))
	}
	p := make([]int, r)
	seen := make([]bool, r)
	for i, a := range perm {
		if a < 0 {
			a += r
		}
		if a < 0 || a >= r || seen[a] {
			panic(fmt.Sprintf("tensor.Transpose: %v: %v is not a permutation", x, perm))
		}
		seen[a] = true
		p[i] = a
	}
	identity := true
	for i, a := range p {
		if a != i {
			identity = false
		}
	}
	if identity {
		return x
	}
	return Apply(transposeOp, p, x)
}

// T transposes the last two dimensions of x (matrix transpose).
func T(x *Tensor) *Tensor {
	checkNil("tensor.T", "x", x)
	r := len(x.shape)
	if r < 2 {
		panic(fmt.Sprintf("tensor.T: %v has fewer than 2 dimensions", x))
	}
	perm := make([]int, r)
	for i := range perm {
		perm[i] = i
	}
	perm[r-2], perm[r-1] = r-1, r-2
	return Transpose(x, perm...)
}
