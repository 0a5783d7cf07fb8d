package tensor

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor/internal/conv"
)

// WindowReduction names the reduction ReduceWindow applies to each window.
type WindowReduction uint8

const (
	// WindowMax takes the maximum (max pooling). Padding takes no part
	// (-Inf); a NaN in a window makes its maximum NaN. The gradient goes
	// to the first maximum of each window (XLA's select-and-scatter).
	WindowMax WindowReduction = iota
	// WindowSum sums (padding adds zeros).
	WindowSum
	// WindowMean divides the sum by the window's size, padding included:
	// lax.reduce_window average pooling, PyTorch's count_include_pad=True.
	WindowMean
	// WindowMeanValid divides the sum by the number of input elements the
	// window covers (count_include_pad=False).
	WindowMeanValid
)

// String returns the reduction's name as pytree.Format prints it: "max",
// "sum", "mean" or "mean (valid)".
func (r WindowReduction) String() string {
	switch r {
	case WindowMax:
		return "max"
	case WindowSum:
		return "sum"
	case WindowMean:
		return "mean"
	case WindowMeanValid:
		return "mean (valid)"
	}
	return fmt.Sprintf("WindowReduction(%d)", int(r))
}

// Window describes the windows of ReduceWindow over every dimension of its
// operand, as lax.reduce_window's window_dimensions, window_strides,
// padding and window_dilation. Per-dimension slices have one entry per
// dimension of the operand; nil Strides and Dilation mean 1.
type Window struct {
	Dims     []int
	Strides  []int
	Padding  Padding
	Dilation []int
}

// windowParams are the static parameters of the window ops: the windows
// over the dimensions from first on (the ones before are batch
// dimensions, whole); in is the operand's shape there (the reductions'
// transposes need it).
type windowParams struct {
	first                    int
	size, stride, lo, hi, dl []int
	adaptive                 []int
	in                       []int
}

// window returns the kernel's Window for an operand of shape shape.
func (p *windowParams) window(shape []int) *conv.Window {
	w := &conv.Window{Shape: slices.Clone(shape)}
	pad := func(v []int, def int) []int {
		if v == nil {
			return nil
		}
		out := make([]int, len(shape))
		for d := range out {
			out[d] = def
		}
		copy(out[p.first:], v)
		return out
	}
	if p.adaptive != nil {
		w.AdaptiveOut = slices.Clone(shape)
		copy(w.AdaptiveOut[p.first:], p.adaptive)
		return w
	}
	w.Size, w.Stride = pad(p.size, 1), pad(p.stride, 1)
	w.PadLo, w.PadHi, w.Dilation = pad(p.lo, 0), pad(p.hi, 0), pad(p.dl, 1)
	return w
}

// inShape is the operand's shape given a result of shape out (batch
// dimensions from out, windowed ones from the params).
func (p *windowParams) inShape(out []int) []int {
	return append(slices.Clone(out[:p.first]), p.in...)
}

var windowMaxOp, windowSumOp, windowSumTOp, selectScatterOp, selectGatherOp *Op

func init() {
	windowMaxOp = &Op{
		Name: "reduce_window_max",
		// The VJP returns results of ops that allocate them.
		Traits: Traits{Reuse: FreshVJP, Types: TypesFloat64},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*windowParams)
			x := in[0]
			if x.dtype == Float64 {
				return windowMaxImpl64(p, x)
			}
			w := p.window(x.shape)
			y := newOutUninit(Float32, w.Out())
			arg := scratchI32(len(y.f32()))
			conv.MaxForward(w, y.f32(), arg, x.f32(), threads(x))
			i32Cache.put(arg)
			return y
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			return []*Tensor{Apply(selectScatterOp, pp, in[0], g)}
		},
		Save: SaveInputs(0),
		// The tangent at each window's maximum.
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			return []*Tensor{Apply(selectGatherOp, pp, x[0], t[0])}
		},
		Batch:    windowBatch(&windowMaxOp),
		Sharding: windowSharding,
	}
	// select_and_scatter: (x, g) -> dx, g added at each window's first
	// maximum of x.
	selectScatterOp = &Op{
		Name: "select_and_scatter",
		// The VJP returns results of ops that allocate them.
		Traits: Traits{Reuse: FreshVJP, Types: TypesFloat64},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*windowParams)
			x, g := in[0], in[1]
			if x.dtype == Float64 {
				return selectScatter64(p, x, g)
			}
			w := p.window(x.shape)
			dx := newOutUninit(Float32, x.shape)
			if conv.SelectScatter(w, dx.f32(), x.f32(), g.f32(), threads(x, g)) {
				return dx // one pass (2×2 windows at stride 2)
			}
			arg, y := scratchI32(g.Size()), scratchF32(g.Size())
			conv.MaxForward(w, y, arg, x.f32(), threads(x, g))
			conv.MaxBackward(w, dx.f32(), arg, g.f32(), threads(x, g))
			i32Cache.put(arg)
			f32Cache.put(y)
			return dx
		},
		VJPNeed: func(gg *Tensor, in []*Tensor, _ *Tensor, pp any, need uint64) []*Tensor {
			// Piecewise constant in x; linear in g.
			res := make([]*Tensor, 2)
			if Wants(need, 0) {
				res[0] = ZerosLike(in[0])
			}
			if Wants(need, 1) {
				res[1] = Apply(selectGatherOp, pp, in[0], gg)
			}
			return res
		},
		Save: SaveInputs(0),
		// Linear in g, piecewise constant in x.
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			if t[1] == nil {
				return []*Tensor{nil}
			}
			return []*Tensor{Apply(selectScatterOp, pp, x[0], t[1])}
		},
		Batch:    windowBatch(&selectScatterOp),
		Sharding: windowSharding,
	}
	// select_and_gather: (x, h) -> h at each window's first maximum of x
	// (the transpose of select_and_scatter in its second operand).
	selectGatherOp = &Op{
		Name: "select_and_gather",
		// The VJP returns results of ops that allocate them.
		Traits: Traits{Reuse: FreshVJP, Types: TypesFloat64},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*windowParams)
			x, h := in[0], in[1]
			if x.dtype == Float64 {
				return selectGather64(p, x, h)
			}
			w := p.window(x.shape)
			out := w.Out()
			arg, m := scratchI32(numel(out)), scratchF32(numel(out))
			conv.MaxForward(w, m, arg, x.f32(), threads(x, h))
			y := newOutUninit(Float32, out)
			conv.MaxGather(w, y.f32(), arg, h.f32(), threads(x, h))
			i32Cache.put(arg)
			f32Cache.put(m)
			return y
		},
		VJPNeed: func(gg *Tensor, in []*Tensor, _ *Tensor, pp any, need uint64) []*Tensor {
			res := make([]*Tensor, 2)
			if Wants(need, 0) {
				res[0] = ZerosLike(in[0])
			}
			if Wants(need, 1) {
				res[1] = Apply(selectScatterOp, pp, in[0], gg)
			}
			return res
		},
		Save: SaveInputs(0),
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			if t[1] == nil {
				return []*Tensor{nil}
			}
			return []*Tensor{Apply(selectGatherOp, pp, x[0], t[1])}
		},
		Batch:    windowBatch(&selectGatherOp),
		Sharding: windowSharding,
	}
	windowSumOp = &Op{
		Name: "reduce_window_sum",
		// The VJP returns results of ops that allocate them.
		Traits: Traits{Reuse: FreshVJP, Types: TypesFloat64},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*windowParams)
			x := in[0]
			if x.dtype == Float64 {
				return windowSum64(p, x)
			}
			w := p.window(x.shape)
			y := newOutUninit(Float32, w.Out())
			conv.SumForward(w, y.f32(), x.f32(), threads(x))
			return y
		},
		VJP: func(g *Tensor, _ []*Tensor, _ *Tensor, pp any) []*Tensor {
			return []*Tensor{Apply(windowSumTOp, pp, g)}
		},
		JVP:      linearJVP(&windowSumOp),
		Batch:    windowBatch(&windowSumOp),
		Sharding: windowSharding,
	}
	// reduce_window_sum_t: the transpose of reduce_window_sum.
	windowSumTOp = &Op{
		Name: "reduce_window_sum_t",
		// The VJP returns results of ops that allocate them.
		Traits: Traits{Reuse: FreshVJP, Types: TypesFloat64},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*windowParams)
			g := in[0]
			if g.dtype == Float64 {
				return windowSumT64(p, g)
			}
			shape := p.inShape(g.shape)
			dx := newOutUninit(Float32, shape)
			conv.SumBackward(p.window(shape), dx.f32(), g.f32(), threads(g))
			return dx
		},
		VJP: func(g *Tensor, _ []*Tensor, _ *Tensor, pp any) []*Tensor {
			return []*Tensor{Apply(windowSumOp, pp, g)}
		},
		JVP:      linearJVP(&windowSumTOp),
		Batch:    windowBatch(&windowSumTOp),
		Sharding: windowSharding,
	}
}

// windowSharding: the dimensions before the windowed ones are a batch.
var windowSharding = ShardingRule{Family: ShardWindow, Params: func(p any) OpParams {
	return OpParams{N: p.(*windowParams).first}
}}

// windowBatch is the batching rule of the window ops: the batch is one
// more leading dimension whose windows are single elements.
func windowBatch(op **Op) func([]*Tensor, []bool, any) []*Tensor {
	return func(in []*Tensor, batched []bool, pp any) []*Tensor {
		q := *pp.(*windowParams)
		q.first++
		return []*Tensor{applyIn(*op, &q, materializeAll(in, batched))}
	}
}

// scratchI32 and scratchF32 return storage of n elements (contents
// undefined) for a kernel's temporary, from the allocator cache when it
// has some; give it back with i32Cache.put or f32Cache.put.
func scratchI32(n int) []int32 {
	if s := i32Cache.cached(n); s != nil {
		return s
	}
	return make([]int32, n, capFor(n))
}

func scratchF32(n int) []float32 {
	if s := f32Cache.cached(n); s != nil {
		return s
	}
	return make([]float32, n, capFor(n))
}

// ReduceWindow reduces each window of x (any rank, any float dtype) to one
// value, as lax.reduce_window with the reduction r: max, sum or mean
// pooling. Windows are described per dimension of x; leading dimensions
// whose windows are single elements at stride 1 without padding (batch and
// channels, for pooling) are left as they are. The result has, per
// dimension, ⌊(in + low + high - dilation·(size-1) - 1)/stride⌋ + 1
// elements (0 if the padded input is shorter than a window).
func ReduceWindow(x *Tensor, r WindowReduction, w Window) *Tensor {
	const op = "tensor.ReduceWindow"
	checkNil(op, "x", x)
	x.mustFloat(op)
	rank := len(x.shape)
	desc := func() string { return fmt.Sprintf("%s: %v, %v windows %v", op, x, r, w.Dims) }
	if len(w.Dims) != rank {
		panic(fmt.Sprintf("%s: want %d window sizes, one per dimension", desc(), rank))
	}
	stride, dl := ones(rank), ones(rank)
	for _, s := range []struct {
		name string
		v    []int
		dst  []int
	}{{"sizes", w.Dims, nil}, {"strides", w.Strides, stride}, {"dilations", w.Dilation, dl}} {
		if s.v == nil {
			continue
		}
		if len(s.v) != rank {
			panic(fmt.Sprintf("%s: %s %v: want %d values", desc(), s.name, s.v, rank))
		}
		for d, v := range s.v {
			if v < 1 {
				panic(fmt.Sprintf("%s: %s %v: want positive values", desc(), s.name, s.v))
			}
			if s.dst != nil {
				s.dst[d] = v
			}
		}
	}
	in, dk := make([]int, rank), make([]int, rank)
	for d := range in {
		in[d] = x.shape[d]
		dk[d] = (w.Dims[d]-1)*dl[d] + 1
	}
	lo, hi := w.Padding.resolve(desc(), in, dk, stride)
	for d := range lo {
		if lo[d] < 0 || hi[d] < 0 {
			panic(fmt.Sprintf("%s: padding %v: want no negative values", desc(), w.Padding))
		}
	}
	first := 0
	for first < rank-1 && w.Dims[first] == 1 && stride[first] == 1 && lo[first] == 0 && hi[first] == 0 {
		first++
	}
	p := &windowParams{first: first, size: w.Dims[first:], stride: stride[first:], lo: lo[first:], hi: hi[first:], dl: dl[first:], in: slices.Clone(x.shape[first:])}
	return reduceWindow(x, r, p)
}

// AdaptivePool reduces the last len(out) dimensions of x to the sizes out
// with PyTorch's adaptive windows: along a dimension of size n, output t
// reduces [⌊t·n/out⌋, ⌈(t+1)·n/out⌉). r is WindowMax, WindowSum or
// WindowMean (the windows have no padding; WindowMeanValid is the same).
func AdaptivePool(x *Tensor, r WindowReduction, out ...int) *Tensor {
	const op = "tensor.AdaptivePool"
	checkNil(op, "x", x)
	x.mustFloat(op)
	rank, k := len(x.shape), len(out)
	if k < 1 || k > rank {
		panic(fmt.Sprintf("%s: %v to %v: want 1 to %d output sizes", op, x, out, rank))
	}
	for d, o := range out {
		if n := x.shape[rank-k+d]; o < 0 || (o > 0 && n == 0) {
			panic(fmt.Sprintf("%s: %v to %v: cannot make %d windows of %d elements", op, x, out, o, n))
		}
	}
	p := &windowParams{first: rank - k, adaptive: slices.Clone(out), in: slices.Clone(x.shape[rank-k:])}
	if r == WindowMeanValid {
		r = WindowMean
	}
	return reduceWindow(x, r, p)
}

func reduceWindow(x *Tensor, r WindowReduction, p *windowParams) *Tensor {
	switch r {
	case WindowMax:
		return Apply(windowMaxOp, p, x)
	case WindowSum:
		return Apply(windowSumOp, p, x)
	case WindowMean, WindowMeanValid:
		s := Apply(windowSumOp, p, x)
		counts, lead := conv.Counts(p.window(x.shape))
		shape := s.shape[lead:]
		if r == WindowMean && p.adaptive == nil {
			size := 1
			for _, v := range p.size {
				size *= v
			}
			if s.dtype == Float64 {
				return Div(s, ScalarFloat64(float64(size)))
			}
			return MulScalar(s, 1/float32(size))
		}
		// Whole numbers, exact in every float dtype up to 256.
		return Div(s, Convert(FromFloat32(counts, shape...), s.dtype))
	}
	panic(fmt.Sprintf("tensor.ReduceWindow: unknown reduction %v", r))
}
