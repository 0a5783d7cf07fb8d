package tensor

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/gonox/gonox/tensor/internal/vec"
)

type reduceParams struct {
	axes []int // sorted, normalised
	keep bool
	// outShape is the result shape; keepShape has 1 at reduced axes.
	outShape, keepShape []int
	// buf holds keepShape and outShape up to rank 4 (one allocation for
	// the params of a reduction: every device's step runs ~100).
	buf [8]int
}

func newReduceParams(op string, x *Tensor, axes []int, keep bool) *reduceParams {
	ax := normAxes(op, x, axes)
	p := &reduceParams{axes: ax, keep: keep}
	p.keepShape = append(p.buf[:0:4], x.shape...)
	for _, a := range ax {
		p.keepShape[a] = 1
	}
	if keep {
		p.outShape = p.keepShape
	} else {
		p.outShape = p.buf[4:4:8]
		for i, d := range x.shape {
			if !containsInt(ax, i) {
				p.outShape = append(p.outShape, d)
			}
		}
	}
	return p
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// reduceLoop walks x with the output (keep-shape) as a broadcast operand.
// fn gets a run of n input elements starting at xi and the output offset o;
// do is 1 when the run maps to n consecutive outputs, 0 when it maps to one.
func reduceLoop(xshape, keepShape []int, fn func(xi, o, n, do int)) {
	so := broadcastStrides(keepShape, xshape)
	sx := contiguousStrides(xshape)
	broadcastLoop(xshape, so, sx, func(_, o, xi, n, do, _ int) { fn(xi, o, n, do) })
}

var sumOp *Op

// reduceShape classifies a reduction: the reduced axes are a suffix of the
// shape (rows of n elements, each summed into one output), a prefix
// (columns: m rows accumulated into n outputs) or neither.
func reduceShape(shape, axes []int) (prefix, suffix bool, m, n int) {
	r := len(shape)
	k := len(axes)
	suffix, prefix = true, true
	for i, a := range axes {
		if a != r-k+i {
			suffix = false
		}
		if a != i {
			prefix = false
		}
	}
	split := r - k // rows of a suffix reduction
	if prefix && !suffix {
		split = k
	}
	return prefix, suffix, numel(shape[:split]), numel(shape[split:])
}

var f64Pool = sync.Pool{New: func() any { return new([]float64) }}

// sumF32 sums x over the axes of p into out, accumulating in float64.
func sumF32(x *Tensor, p *reduceParams, out []float32) {
	local := x.local() != nil
	src := x.f32()
	prefix, suffix, m, n := reduceShape(x.shape, p.axes)
	switch {
	case len(src) == 0:
		return
	case suffix:
		// out[r] = Σ row r: rows in parallel, or the blocks of one row.
		if m == 1 {
			if serial(n*costCheap, local) {
				out[0] = float32(vec.SumF64(src))
			} else {
				out[0] = float32(blockSum(n, local, func(lo, hi int) float64 { return vec.SumBlocks(src[lo:hi]) }))
			}
			return
		}
		rows := func(lo, hi int) {
			for r := lo; r < hi; r++ {
				out[r] = float32(vec.SumF64(src[r*n : (r+1)*n]))
			}
		}
		if serial(m*n*costCheap, local) {
			rows(0, m)
		} else {
			parallelFor(m, n*costCheap, 1, local, rows)
		}
		return
	case prefix:
		sumColsF32(out, src, m, n, local)
		return
	}
	if outer, m, n, ok := middleAxes(x.shape, p.axes); ok {
		sumMiddleF32(out, src, outer, m, n, local)
		return
	}
	bp, acc := f64Scratch(len(out))
	reduceLoop(x.shape, p.keepShape, func(xi, o, n, do int) {
		if do == 0 {
			acc[o] += vec.SumF64(src[xi : xi+n])
			return
		}
		vec.AccF64(acc[o:o+n], src[xi:xi+n])
	})
	vec.RoundF64(out, acc)
	f64Pool.Put(bp)
}

// middleAxes reports whether axes (sorted) are contiguous, neither a
// prefix nor a suffix of shape, and returns the sizes of the axes before
// them, of them, and after them.
func middleAxes(shape, axes []int) (outer, m, n int, ok bool) {
	if len(axes) == 0 || axes[0] == 0 || axes[len(axes)-1] == len(shape)-1 {
		return 0, 0, 0, false
	}
	for i, a := range axes {
		if a != axes[0]+i {
			return 0, 0, 0, false
		}
	}
	a0, a1 := axes[0], axes[len(axes)-1]+1
	return numel(shape[:a0]), numel(shape[a0:a1]), numel(shape[a1:]), true
}

// sumMiddleF32 sums contiguous axes in the middle (a batch of biases'
// gradients under Vmap): src is outer blocks of m rows of n, out gets each
// block's column sums, a prefix reduction per block in the broadcast
// loop's order (the same bits), without its calls.
func sumMiddleF32(out, src []float32, outer, m, n int, local bool) {
	bp, acc := f64Scratch(len(out))
	if serial(len(src)*costCheap, local) {
		sumBlocks(out, src, acc, m, n, 0, outer) // no closure to allocate
	} else {
		parallelFor(outer, m*n*costCheap, 1, local, func(lo, hi int) { sumBlocks(out, src, acc, m, n, lo, hi) })
	}
	f64Pool.Put(bp)
}

// sumBlocks sums blocks [lo, hi) of m rows of n (src) into out and acc,
// each a prefix reduction (sumCols).
func sumBlocks(out, src []float32, acc []float64, m, n, lo, hi int) {
	for o := lo; o < hi; o++ {
		sumCols(out[o*n:(o+1)*n], src[o*m*n:(o+1)*m*n], acc[o*n:(o+1)*n], m, n, 0, n)
	}
}

// sumColsF32 sets out[j] = Σ_i src[i*n+j] for the m rows of src, each
// column summed in float64 in row order and rounded once (a sum over
// leading axes, a bias's gradient); columns are split over goroutines.
func sumColsF32(out, src []float32, m, n int, local bool) {
	bp, acc := f64Scratch(n)
	if serial(m*n*costCheap, local) {
		sumCols(out, src, acc, m, n, 0, n) // no closure to allocate
	} else {
		parallelFor(n, m*costCheap, 8, local, func(lo, hi int) { sumCols(out, src, acc, m, n, lo, hi) })
	}
	f64Pool.Put(bp)
}

// sumCols is sumColsF32 on columns [lo, hi), accumulating in acc.
func sumCols(out, src []float32, acc []float64, m, n, lo, hi int) {
	if m > 0 {
		if lo += vec.SumCols(out[lo:hi], src[lo:], m, n); lo == hi { // the same sums, in registers
			return
		}
	}
	for i := 0; i < m; i++ {
		vec.AccF64(acc[lo:hi], src[i*n+lo:i*n+hi])
	}
	vec.RoundF64(out[lo:hi], acc[lo:hi])
}

// f64Scratch returns n zeroed float64 accumulators from f64Pool, and the
// pool's slice to put back once done.
func f64Scratch(n int) (*[]float64, []float64) {
	bp := f64Pool.Get().(*[]float64)
	if cap(*bp) < n {
		*bp = make([]float64, n)
	}
	acc := (*bp)[:n]
	clear(acc)
	return bp, acc
}

func init() {
	sumOp = &Op{
		Name:     "reduce_sum",
		Sharding: reduceSharding("reduce_sum", ShardReduceSum),
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*reduceParams)
			x := in[0]
			out := newOut(x.dtype, p.outShape)
			switch x.dtype {
			case Float32:
				sumF32(x, p, out.f32())
			case Int32:
				reduceLoop(x.shape, p.keepShape, func(xi, o, n, do int) {
					src := x.i32()[xi : xi+n]
					if do == 0 {
						var s int32
						for _, v := range src {
							s += v
						}
						out.i32()[o] += s
						return
					}
					dst := out.i32()[o : o+n]
					for j, v := range src {
						dst[j] += v
					}
				})
			case Float64:
				sumWide(out.f64(), x.f64(), x.shape, p.keepShape)
			case Int64:
				sumWide(out.i64(), x.i64(), x.shape, p.keepShape)
			}
			return out
		},
		// The VJP broadcasts g into a new tensor (or returns g itself).
		Traits: Traits{Types: TypesFloat64 | TypesInt64, Reuse: FreshVJP},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			p := pp.(*reduceParams)
			if prefix, _, _, _ := reduceShape(in[0].shape, p.axes); prefix && !p.keep {
				// Leading axes: g broadcasts as it is.
				return []*Tensor{BroadcastTo(g, in[0].shape...)}
			}
			return []*Tensor{BroadcastTo(Reshape(g, p.keepShape...), in[0].shape...)}
		},
		JVP:   linearJVP(&sumOp),
		Batch: reduceBatch(&sumOp),
	}
}

// reduceBatch is the batching rule of the reductions whose params are
// reduceParams: the same axes, past the batch dimension.
func reduceBatch(op **Op) func([]*Tensor, []bool, any) []*Tensor {
	return func(in []*Tensor, _ []bool, pp any) []*Tensor {
		p := pp.(*reduceParams)
		q, rc := p.batched(in[0].shape[0])
		rc.args[0] = in[0]
		return rc.call(*op, q, 1)
	}
}

// batched returns the params of the reduction p of one example for a
// batch of n examples in front (what newReduceParams computes for the
// batch, the axes past the batch dimension), in one allocation with the
// memory of the rule's call: a Vmap's rule makes one per reduction.
func (p *reduceParams) batched(n int) (*reduceParams, *ruleCall) {
	r, k, o := len(p.axes), len(p.keepShape)+1, len(p.outShape)+1
	buf := &struct {
		p    reduceParams
		rc   ruleCall
		ints [12]int
	}{}
	ints := buf.ints[:]
	if r+k+o > len(ints) {
		ints = make([]int, r+k+o)
	}
	axes, keep, out := ints[:r:r], ints[r:r+k:r+k], ints[r+k:r+k+o:r+k+o]
	for i, a := range p.axes {
		axes[i] = a + 1
	}
	keep[0], out[0] = n, n
	copy(keep[1:], p.keepShape)
	copy(out[1:], p.outShape)
	if p.keep {
		out = keep
	}
	buf.p = reduceParams{axes: axes, keep: p.keep, outShape: out, keepShape: keep}
	return &buf.p, &buf.rc
}

func reduce(op *Op, name string, x *Tensor, axes []int, keep bool, ints bool) *Tensor {
	if !x.dtype.IsFloat() && !(ints && (x.dtype == Int32 || x.dtype == Int64)) {
		panic(fmt.Sprintf("%s: %v: not defined for %v", name, x, x.dtype))
	}
	return Apply(op, newReduceParams(name, x, axes, keep), x)
}

// Sum sums x over the given axes (all axes if none), removing them.
// Negative axes count from the end. Float sums accumulate in float64.
func Sum(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.Sum", "x", x)
	return reduce(sumOp, "tensor.Sum", x, axes, false, true)
}

// SumKeep is Sum keeping the reduced axes with size 1 (keepdims=True).
func SumKeep(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.SumKeep", "x", x)
	return reduce(sumOp, "tensor.SumKeep", x, axes, true, true)
}

func reducedCount(x *Tensor, axes []int, op string) int {
	n := 1
	for _, a := range normAxes(op, x, axes) {
		n *= x.shape[a]
	}
	return n
}

// Mean averages x over the given axes (all if none).
func Mean(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.Mean", "x", x)
	x.mustFloat("tensor.Mean")
	n := reducedCount(x, axes, "tensor.Mean") // validates axes under this name
	if x.dtype.isHalf() {
		// One rounding, of the float32 mean.
		return Convert(Mean(Convert(x, Float32), axes...), x.dtype)
	}
	if x.dtype == Float64 {
		return mulConst(Sum(x, axes...), 1/float64(n))
	}
	return MulScalar(Sum(x, axes...), 1/float32(n))
}

// MeanKeep is Mean with keepdims.
func MeanKeep(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.MeanKeep", "x", x)
	x.mustFloat("tensor.MeanKeep")
	n := reducedCount(x, axes, "tensor.MeanKeep")
	if x.dtype.isHalf() {
		return Convert(MeanKeep(Convert(x, Float32), axes...), x.dtype)
	}
	if x.dtype == Float64 {
		return mulConst(SumKeep(x, axes...), 1/float64(n))
	}
	return MulScalar(SumKeep(x, axes...), 1/float32(n))
}

func chooserOp(name string, fam ShardFamily, better func(a, b float32) bool, init float32, ibetter func(a, b int32) bool, iinit int32) *Op {
	var op *Op
	op = &Op{
		Name:     name,
		Sharding: reduceSharding(name, fam),
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*reduceParams)
			x := in[0]
			out := newOut(x.dtype, p.outShape)
			switch x.dtype {
			case Float32:
				if chooseF32(x, p, out.f32(), init < 0) {
					break
				}
				d := out.f32()
				for i := range d {
					d[i] = init
				}
				xs := x.f32()
				reduceLoop(x.shape, p.keepShape, func(xi, o, n, do int) {
					for j, v := range xs[xi : xi+n] {
						if better(v, d[o+j*do]) || v != v {
							d[o+j*do] = v
						}
					}
				})
			case Int32:
				d := out.i32()
				for i := range d {
					d[i] = iinit
				}
				xs := x.i32()
				reduceLoop(x.shape, p.keepShape, func(xi, o, n, do int) {
					for j, v := range xs[xi : xi+n] {
						if ibetter(v, d[o+j*do]) {
							d[o+j*do] = v
						}
					}
				})
			case Float64:
				chooseWide(out.f64(), x.f64(), x.shape, p.keepShape, init < 0, math.Inf(int(math.Copysign(1, float64(init)))))
			case Int64:
				iv := int64(math.MaxInt64)
				if init < 0 {
					iv = math.MinInt64
				}
				chooseWide(out.i64(), x.i64(), x.shape, p.keepShape, init < 0, iv)
			}
			return out
		},
		Traits: Traits{Types: TypesFloat64 | TypesInt64},
		VJP: func(g *Tensor, in []*Tensor, out *Tensor, pp any) []*Tensor {
			// The cotangent goes to the elements equal to the result, split
			// evenly among ties.
			p := pp.(*reduceParams)
			x := in[0]
			ob := Reshape(out, p.keepShape...)
			mask := AsType(Equal(x, ob), g.dtype)
			count := SumKeep(mask, p.axes...)
			gk := Reshape(g, p.keepShape...)
			return []*Tensor{Mul(mask, Div(gk, count))}
		},
		// The mean of the tangents of the elements equal to the result.
		JVP: func(x, t, outs []*Tensor, pp any) []*Tensor {
			p := pp.(*reduceParams)
			mask := AsType(Equal(x[0], Reshape(outs[0], p.keepShape...)), t[0].dtype)
			s := Div(SumKeep(Mul(mask, t[0]), p.axes...), SumKeep(mask, p.axes...))
			return one1(Reshape(s, p.outShape...))
		},
		Save:  SaveInputs(0) | SaveOutput,
		Batch: reduceBatch(&op),
	}
	return op
}

var (
	maxReduceOp = chooserOp("reduce_max", ShardReduceMax, func(a, b float32) bool { return a > b }, float32(math.Inf(-1)),
		func(a, b int32) bool { return a > b }, math.MinInt32)
	minReduceOp = chooserOp("reduce_min", ShardReduceMin, func(a, b float32) bool { return a < b }, float32(math.Inf(1)),
		func(a, b int32) bool { return a < b }, math.MaxInt32)
)

// chooseF32 computes max (isMax) or min reductions over a suffix or a
// prefix of the axes with vec kernels; it reports false for other axes.
func chooseF32(x *Tensor, p *reduceParams, out []float32, isMax bool) bool {
	prefix, suffix, m, n := reduceShape(x.shape, p.axes)
	src := x.f32()
	switch {
	case len(src) == 0:
		return false
	case suffix:
		for r := 0; r < m; r++ {
			if isMax {
				out[r] = vec.MaxF32(src[r*n : (r+1)*n])
			} else {
				out[r] = vec.MinF32(src[r*n : (r+1)*n])
			}
		}
		return true
	case prefix:
		copy(out, src[:n])
		for i := 1; i < m; i++ {
			if isMax {
				vec.MaxAcc(out, src[i*n:(i+1)*n])
			} else {
				vec.MinAcc(out, src[i*n:(i+1)*n])
			}
		}
		return true
	}
	return false
}

func mustNonEmpty(name string, x *Tensor, axes []int) {
	for _, a := range normAxes(name, x, axes) {
		if x.shape[a] == 0 {
			panic(fmt.Sprintf("%s: %v: reduction over empty axis %d has no identity", name, x, a))
		}
	}
}

// Max returns the maximum over the given axes (all if none). NaN wins. The
// gradient is split evenly among the elements equal to the maximum.
func Max(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.Max", "x", x)
	mustNonEmpty("tensor.Max", x, axes)
	return reduce(maxReduceOp, "tensor.Max", x, axes, false, true)
}

// MaxKeep is Max with keepdims.
func MaxKeep(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.MaxKeep", "x", x)
	mustNonEmpty("tensor.MaxKeep", x, axes)
	return reduce(maxReduceOp, "tensor.MaxKeep", x, axes, true, true)
}

// Min returns the minimum over the given axes (all if none).
func Min(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.Min", "x", x)
	mustNonEmpty("tensor.Min", x, axes)
	return reduce(minReduceOp, "tensor.Min", x, axes, false, true)
}

// MinKeep is Min with keepdims.
func MinKeep(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.MinKeep", "x", x)
	mustNonEmpty("tensor.MinKeep", x, axes)
	return reduce(minReduceOp, "tensor.MinKeep", x, axes, true, true)
}

// LogSumExp returns log(sum(exp(x))) over the given axes, computed stably
// (the maximum is subtracted first). Rows that are all -Inf give -Inf.
func LogSumExp(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.LogSumExp", "x", x)
	return logSumExp("tensor.LogSumExp", x, axes, false)
}

// LogSumExpKeep is LogSumExp with keepdims.
func LogSumExpKeep(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.LogSumExpKeep", "x", x)
	return logSumExp("tensor.LogSumExpKeep", x, axes, true)
}

func logSumExp(name string, x *Tensor, axes []int, keep bool) *Tensor {
	x.mustFloat(name)
	mustNonEmpty(name, x, axes)
	var r *Tensor
	switch ax := normAxes(name, x, axes); {
	case len(ax) == 1 && x.dtype != Float64:
		// One axis: the fused op (bfloat16 and float16 widened by Apply,
		// the float32 result rounded once).
		r = Apply(logSumExpOp, ax[0], x)
	case x.dtype.isHalf(): // one rounding, of the float32 result
		return Convert(logSumExp(name, Convert(x, Float32), axes, keep), x.dtype)
	default:
		m := StopGradient(MaxKeep(x, axes...))
		m = Where(IsFinite(m), m, ZerosLike(m))
		r = Add(Log(SumKeep(Exp(Sub(x, m)), axes...)), m)
	}
	if keep {
		return r
	}
	p := newReduceParams(name, x, axes, false)
	return Reshape(r, p.outShape...)
}

// logSumExpOp is LogSumExpKeep over one axis (its params) of float32 data,
// as one op: one sweep over each lane (the maximum, then the exponentials
// summed in float64) instead of about ten ops with their temporaries
// forward and as many backward (the MoE router's z-loss: [2048, 8] a
// layer, ~0.3 ms a step of ops too small to split). Its VJP is the
// softmax along the axis times the cotangent.
var logSumExpOp *Op

func init() {
	logSumExpOp = &Op{
		Name: "log_sum_exp",
		Sharding: ShardingRule{Family: ShardAlongAxisReduce, Params: func(pp any) OpParams {
			return OpParams{Axes: []int{pp.(int)}, KeepDims: true}
		}},
		Impl: func(in []*Tensor, pp any) *Tensor { return logSumExpImpl(in[0], pp.(int)) },
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			s := softmaxAlong(in[0], pp.(int))
			if scaleRowsInPlace(s, g, in[0]) {
				return one1(s)
			}
			return one1(Mul(g, s))
		},
		Save: SaveInputs(0),
		// dy = Σ softmax(x)·dx along the axis.
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			return one1(SumKeep(Mul(softmaxAlong(x[0], pp.(int)), t[0]), pp.(int)))
		},
		Batch:  axisBatch(&logSumExpOp),
		Traits: Traits{Reuse: FreshVJP},
	}
}

// scaleRowsInPlace computes Mul(g, s) over s for a fresh float32 s of
// rows along its last axis and g of one element a row (LogSumExp's VJP
// over the last axis, the MoE router's z-loss: one pass and one op less
// than the broadcast product), when s's header is its storage's only
// holder and nothing is traced, and reports whether it did. Each element
// is the product Mul rounds, so the bits are Mul's.
func scaleRowsInPlace(s, g, x *Tensor) bool {
	last := len(s.shape) - 1
	if last < 0 || higherOrder(g, x) || !markedOperand(s) || !markedOperand(g) || !markedOver(s, g) ||
		s.rec == nil || s.rec.refs.Load() != 1 || g.shape[last] != 1 || !sameShape(g.shape[:last], s.shape[:last]) {
		return false
	}
	n := s.shape[last]
	ys, gs := s.f32(), g.f32()
	rows := func(lo, hi int) {
		if n <= xentShort {
			// Short rows (the MoE router's z-loss over 8 experts): the
			// products in one loop, not a kernel call a row.
			for r := lo; r < hi; r++ {
				row, g := ys[r*n:(r+1)*n:(r+1)*n], gs[r]
				for j, v := range row {
					row[j] = v * g
				}
			}
			return
		}
		for r := lo; r < hi; r++ {
			vec.MulVS(ys[r*n:(r+1)*n], ys[r*n:(r+1)*n], gs[r])
		}
	}
	if serial(len(ys)*costCheap, isLocal(s, g)) {
		rows(0, len(gs))
	} else {
		parallelFor(len(gs), n*costCheap, 1, false, rows)
	}
	return true
}

// softmaxAlong is Softmax(x, axis) computed along the last axis, x's axis
// moved there and back: Softmax's sharding rule covers a sharded axis only
// when it is the last one. (e^(x - LogSumExp) needs no move but loses
// |LogSumExp|·2⁻²⁴ to the rounding of the float32 result.)
func softmaxAlong(x *Tensor, axis int) *Tensor {
	last := len(x.shape) - 1
	return moveAxis(Softmax(moveAxis(x, axis, last), last), last, axis)
}

// logSumExpImpl computes log Σ exp(x) along axis (kept, of size 1) of
// float32 x: the float32 maximum m of each lane (NaN if any element is),
// then m + log Σ e^(x-m) in float64, rounded once. A lane whose maximum is
// not finite gives that maximum: -Inf for a lane of -Inf, +Inf for one
// holding +Inf, NaN for one holding NaN (as the composition gives).
func logSumExpImpl(x *Tensor, axis int) *Tensor {
	shape := slices.Clone(x.shape)
	shape[axis] = 1
	out := newOutUninit(Float32, shape)
	outer, n, inner := srtLanes(x.shape, axis)
	lanes := outer * inner
	xs, ys := x.f32(), out.f32()
	if inner == 1 && n <= xentShort {
		srtParallel(lanes, lanes*n*8, x.local(), func(lo, hi int) {
			logSumExpShortRows(ys[lo:hi], xs[lo*n:hi*n], n)
		})
		return out
	}
	srtParallel(lanes, lanes*n*8, x.local(), func(lo, hi int) {
		for l := lo; l < hi; l++ {
			b := (l/inner)*n*inner + l%inner
			if inner == 1 {
				ys[l] = logSumExpRow(xs[b : b+n])
				continue
			}
			m := float32(math.Inf(-1))
			for j := b; j < b+n*inner; j += inner {
				if v := xs[j]; v > m || v != v {
					m = v
					if v != v {
						break
					}
				}
			}
			if math.IsInf(float64(m), 0) || m != m {
				ys[l] = m
				continue
			}
			s := 0.0
			for j := b; j < b+n*inner; j += inner {
				s += softmaxExp(float64(xs[j]) - float64(m))
			}
			ys[l] = float32(float64(m) + math.Log(s))
		}
	})
	return out
}

// logSumExpShortRows sets ys[r] = logSumExpRow of row r of xs (rows of
// n ≤ xentShort elements), with its bits: the maxima and sums of a block
// of rows from one vec.ExpShiftRows call (the MoE router's z-loss over 8
// experts spent most of its time in two kernel calls a row).
func logSumExpShortRows(ys, xs []float32, n int) {
	var ms [xentBlock]float32
	var sums [xentBlock]float64
	var scratch [xentBlock * xentShort]float32
	for r := 0; r < len(ys); r += xentBlock {
		e := min(r+xentBlock, len(ys))
		vec.ExpShiftRows(scratch[:(e-r)*n], xs[r*n:e*n], n, ms[:e-r], sums[:e-r])
		for i, m := range ms[:e-r] {
			if math.IsInf(float64(m), 0) || m != m {
				ys[r+i] = m
				continue
			}
			ys[r+i] = float32(float64(m) + math.Log(sums[i]))
		}
	}
}

// logSumExpRow is log Σ exp(row) of a contiguous lane (logSumExpImpl).
func logSumExpRow(row []float32) float32 {
	m := vec.MaxF32(row)
	if math.IsInf(float64(m), 0) || m != m {
		return m
	}
	return float32(float64(m) + math.Log(vec.SumExpShift(row, m)))
}

type argParams struct {
	axis int
	keep bool
	max  bool
}

var argOp *Op

func init() {
	argOp = &Op{
		Name: "argminmax",
		Sharding: ShardingRule{Family: ShardAlongAxisReduce, Params: func(pp any) OpParams {
			p := pp.(argParams)
			return OpParams{Axes: []int{p.axis}, KeepDims: p.keep}
		}},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(argParams)
			x := in[0]
			outer := numel(x.shape[:p.axis])
			n := x.shape[p.axis]
			inner := numel(x.shape[p.axis+1:])
			shape := append([]int(nil), x.shape...)
			if p.keep {
				shape[p.axis] = 1
			} else {
				shape = append(shape[:p.axis], shape[p.axis+1:]...)
			}
			out := newTensor(Int32, shape)
			for o := 0; o < outer; o++ {
				for i := 0; i < inner; i++ {
					best := 0
					bv := x.at(o*n*inner + i)
					for k := 1; k < n; k++ {
						v := x.at((o*n+k)*inner + i)
						if bv != bv { // NaN already chosen
							break
						}
						if v != v || (p.max && v > bv) || (!p.max && v < bv) {
							best, bv = k, v
						}
					}
					out.i32()[o*inner+i] = int32(best)
				}
			}
			return out
		},
		Batch: func(in []*Tensor, _ []bool, pp any) []*Tensor {
			p := pp.(argParams)
			p.axis++
			return []*Tensor{Apply(argOp, p, in[0])}
		},
		Traits: Traits{Types: TypesAll},
	}
}

func argReduce(name string, x *Tensor, axis int, keep, isMax bool) *Tensor {
	if x.dtype == Bool {
		panic(fmt.Sprintf("%s: %v: not defined for bool", name, x))
	}
	a := normAxis(name, x, axis)
	if x.shape[a] == 0 {
		panic(fmt.Sprintf("%s: %v: axis %d is empty", name, x, axis))
	}
	return Apply(argOp, argParams{a, keep, isMax}, x)
}

// ArgMax returns the int32 index of the maximum along axis (the first one
// on ties; NaN counts as the maximum). It is not differentiable.
func ArgMax(x *Tensor, axis int) *Tensor {
	checkNil("tensor.ArgMax", "x", x)
	return argReduce("tensor.ArgMax", x, axis, false, true)
}

// ArgMaxKeep is ArgMax keeping the axis with size 1.
func ArgMaxKeep(x *Tensor, axis int) *Tensor {
	checkNil("tensor.ArgMaxKeep", "x", x)
	return argReduce("tensor.ArgMaxKeep", x, axis, true, true)
}

// ArgMin returns the int32 index of the minimum along axis.
func ArgMin(x *Tensor, axis int) *Tensor {
	checkNil("tensor.ArgMin", "x", x)
	return argReduce("tensor.ArgMin", x, axis, false, false)
}

var anyAllOp *Op

func init() {
	anyAllOp = &Op{
		Name: "reduce_or_and",
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*anyAllParams)
			x := in[0]
			out := newTensor(Bool, p.r.outShape)
			d := out.b()
			for i := range d {
				d[i] = p.all
			}
			xs := x.b()
			reduceLoop(x.shape, p.r.keepShape, func(xi, o, n, do int) {
				for j, v := range xs[xi : xi+n] {
					if p.all {
						d[o+j*do] = d[o+j*do] && v
					} else {
						d[o+j*do] = d[o+j*do] || v
					}
				}
			})
			return out
		},
		Batch: func(in []*Tensor, _ []bool, pp any) []*Tensor {
			p := pp.(*anyAllParams)
			x := in[0]
			q := &anyAllParams{newReduceParams("tensor.Any", x, shiftAxes(p.r.axes), p.r.keep), p.all}
			return []*Tensor{Apply(anyAllOp, q, x)}
		},
	}
}

type anyAllParams struct {
	r   *reduceParams
	all bool
}

// Any reports, over the given axes (all if none), whether any element of a
// bool mask is true.
func Any(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.Any", "x", x)
	x.mustDType("tensor.Any", Bool)
	return Apply(anyAllOp, &anyAllParams{newReduceParams("tensor.Any", x, axes, false), false}, x)
}

// All reports whether every element over the given axes is true.
func All(x *Tensor, axes ...int) *Tensor {
	checkNil("tensor.All", "x", x)
	x.mustDType("tensor.All", Bool)
	return Apply(anyAllOp, &anyAllParams{newReduceParams("tensor.All", x, axes, false), true}, x)
}

// reduceSharding is the sharding rule of a reduction (params
// *reduceParams) named name: the family fam, its axes described, and on
// blocks the params of the block's reduction.
func reduceSharding(name string, fam ShardFamily) ShardingRule {
	return ShardingRule{
		Family: fam,
		Params: func(pp any) OpParams {
			p := pp.(*reduceParams)
			return OpParams{Axes: slices.Clone(p.axes), KeepDims: p.keep}
		},
		Block: func(pp any, blocks []*Tensor) any {
			p := pp.(*reduceParams)
			return newReduceParams(name, blocks[0], p.axes, p.keep)
		},
	}
}
