package tensor

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/tensor/internal/vec"
	"github.com/gonox/gonox/tensor/internal/vec/f64"
)

// maxFastRank is the rank up to which broadcast loops keep their
// bookkeeping on the stack.
const maxFastRank = 8

// bdim is one (merged) dimension of a broadcast loop: its size and the
// element strides of the output and of operands a and b.
type bdim struct{ n, so, sa, sb int }

// mergeDims returns the dimensions of out, innermost first, with size-1
// dimensions dropped and adjacent dimensions that are contiguous for every
// operand merged, appended to buf.
func mergeDims(buf []bdim, out, sa, sb []int) []bdim {
	so := 1
	for i := len(out) - 1; i >= 0; i-- {
		n := out[i]
		if n == 1 {
			continue
		}
		d := bdim{n, so, sa[i], sb[i]}
		so *= n
		if k := len(buf) - 1; k >= 0 {
			p := buf[k]
			if d.so == p.so*p.n && d.sa == p.sa*p.n && d.sb == p.sb*p.n {
				buf[k] = bdim{p.n * n, p.so, p.sa, p.sb}
				continue
			}
		}
		buf = append(buf, d)
	}
	return buf
}

// broadcastLoop walks the elements of out (row-major) with operands read
// through strides sa and sb (0 along broadcast dims). Adjacent dimensions
// that are contiguous for every operand are merged first, so the common
// cases reach fn as a few long runs. fn gets the offsets of a run of n
// elements in out, a and b, and the element strides of a and b within the
// run.
func broadcastLoop(out, sa, sb []int, fn func(o, a, b, n, da, db int)) {
	if numel(out) == 0 {
		return
	}
	var buf [maxFastRank]bdim
	dims := mergeDims(buf[:0], out, sa, sb)
	loopRuns(dims, 0, numRuns(dims), fn)
}

// numRuns returns the number of inner runs of merged dims.
func numRuns(dims []bdim) int {
	r := 1
	for _, d := range dims[min(1, len(dims)):] {
		r *= d.n
	}
	return r
}

// loopRuns calls fn on runs r0 to r1-1 of merged dims (innermost first).
func loopRuns(dims []bdim, r0, r1 int, fn func(o, a, b, n, da, db int)) {
	if len(dims) == 0 {
		if r0 < r1 {
			fn(0, 0, 0, 1, 0, 0)
		}
		return
	}
	in, outer := dims[0], dims[1:]
	var ibuf [maxFastRank]int
	idx := ibuf[:0]
	if len(outer) > len(ibuf) {
		idx = make([]int, 0, len(outer))
	}
	oo, oa, ob := 0, 0, 0
	rem := r0
	for _, d := range outer {
		i := rem % d.n
		rem /= d.n
		idx = append(idx, i)
		oo += i * d.so
		oa += i * d.sa
		ob += i * d.sb
	}
	for r := r0; r < r1; r++ {
		fn(oo, oa, ob, in.n, in.sa, in.sb)
		for k := range outer {
			d := &outer[k]
			idx[k]++
			oo += d.so
			oa += d.sa
			ob += d.sb
			if idx[k] < d.n {
				break
			}
			oo -= d.so * d.n
			oa -= d.sa * d.n
			ob -= d.sb * d.n
			idx[k] = 0
		}
	}
}

// stridesInto writes into buf the strides with which to read an operand of
// shape xshape broadcast to out (0 along broadcast dimensions).
func stridesInto(buf []int, xshape, out []int) []int {
	st := buf[:0]
	if len(out) > cap(buf) {
		st = make([]int, 0, len(out))
	}
	st = st[:len(out)]
	off := len(out) - len(xshape)
	acc := 1
	for i := len(out) - 1; i >= 0; i-- {
		st[i] = 0
		if j := i - off; j >= 0 {
			if xshape[j] != 1 || out[i] == 1 {
				st[i] = acc
			}
			acc *= xshape[j]
		}
	}
	return st
}

// kernels2 holds the inner loops of a binary op for one element type:
// vector-vector, vector-scalar and scalar-vector.
type kernels2[T any] struct {
	vv func(d, a, b []T)
	vs func(d, a []T, b T)
	sv func(d []T, a T, b []T)
}

func runKernel2[T any](k *kernels2[T], dst, a, b []T, o, ia, ib, n, da, db int) {
	switch {
	case da == 1 && db == 1:
		k.vv(dst[o:o+n], a[ia:ia+n], b[ib:ib+n])
	case da == 1:
		k.vs(dst[o:o+n], a[ia:ia+n], b[ib])
	case db == 1:
		k.sv(dst[o:o+n], a[ia], b[ib:ib+n])
	default:
		k.vs(dst[o:o+1], a[ia:ia+1], b[ib])
		for j := 1; j < n; j++ {
			dst[o+j] = dst[o]
		}
	}
}

// run2 computes a binary op with broadcasting: one kernel call per run of
// the merged loop, the runs (or, for a single run, its pieces) split over
// goroutines when the tensor is large.
func run2[T any](k *kernels2[T], dst, a, b []T, shape, ashape, bshape []int, local bool) {
	if len(dst) == 0 {
		return
	}
	var sab, sbb [maxFastRank]int
	sa, sb := stridesInto(sab[:], ashape, shape), stridesInto(sbb[:], bshape, shape)
	var buf [maxFastRank]bdim
	dims := mergeDims(buf[:0], shape, sa, sb)
	runs := numRuns(dims)
	if serial(len(dst)*costCheap, local) {
		loopRuns(dims, 0, runs, func(o, ia, ib, n, da, db int) {
			runKernel2(k, dst, a, b, o, ia, ib, n, da, db)
		})
		return
	}
	run2Parallel(k, dst, a, b, slices.Clone(dims), runs, local)
}

// run2Parallel is run2's parallel path, dims the runs' dimensions in
// memory of their own: the closures parallelFor runs keep dims, which
// would otherwise move run2's stack buffer to the heap at every call.
func run2Parallel[T any](k *kernels2[T], dst, a, b []T, dims []bdim, runs int, local bool) {
	if runs == 1 && len(dims) == 1 {
		in := dims[0]
		parallelFor(in.n, costCheap, 8, local, func(lo, hi int) {
			runKernel2(k, dst, a, b, lo, lo*in.sa, lo*in.sb, hi-lo, in.sa, in.sb)
		})
		return
	}
	inner := len(dst) / runs
	parallelFor(runs, inner*costCheap, 1, local, func(lo, hi int) {
		loopRuns(dims, lo, hi, func(o, ia, ib, n, da, db int) {
			runKernel2(k, dst, a, b, o, ia, ib, n, da, db)
		})
	})
}

// mk2 builds the three inner loops from a scalar function (for the rarely
// used ops; the arithmetic ones have vec kernels).
func mk2[T any](f func(x, y T) T) kernels2[T] {
	return kernels2[T]{
		vv: func(d, a, b []T) {
			b = b[:len(a)]
			d = d[:len(a)]
			for i := range a {
				d[i] = f(a[i], b[i])
			}
		},
		vs: func(d, a []T, b T) {
			d = d[:len(a)]
			for i := range a {
				d[i] = f(a[i], b)
			}
		},
		sv: func(d []T, a T, b []T) {
			d = d[:len(b)]
			for i := range b {
				d[i] = f(a, b[i])
			}
		},
	}
}

// binaryDef describes an elementwise binary op.
type binaryDef struct {
	name string // "tensor.Add"
	sym  string // "+" for messages
	f32  kernels2[float32]
	f64  kernels2[float64]
	i32  *kernels2[int32] // nil if not defined for int32
	i64  *kernels2[int64] // nil if not defined for int64
	// intDiv: the int32 op divides by its second operand, which must not
	// hold a zero.
	intDiv bool
}

// binaryParams holds the broadcast result shape of a binary op. A nil
// *binaryParams means the result has the shape of the first operand, the
// common case (same shapes, a scalar or a bias as second operand), which
// then costs no allocation.
type binaryParams struct{ shape []int }

func binaryShape(in []*Tensor, p any) []int {
	if bp, _ := p.(*binaryParams); bp != nil {
		return bp.shape
	}
	return in[0].shape
}

// binaryImpl computes an elementwise binary op with broadcasting.
func binaryImpl(d *binaryDef) func(in []*Tensor, p any) *Tensor {
	return func(in []*Tensor, p any) *Tensor {
		a, b := in[0], in[1]
		shape := binaryShape(in, p)
		out := newOutUninit(a.dtype, shape)
		local := isLocal(a, b)
		switch a.dtype {
		case Float32:
			run2(&d.f32, out.f32(), a.f32(), b.f32(), shape, a.shape, b.shape, local)
		case Int32:
			run2(d.i32, out.i32(), a.i32(), b.i32(), shape, a.shape, b.shape, local)
		case Float64:
			run2(&d.f64, out.f64(), a.f64(), b.f64(), shape, a.shape, b.shape, local)
		case Int64:
			run2(d.i64, out.i64(), a.i64(), b.i64(), shape, a.shape, b.shape, local)
		}
		return out
	}
}

// checkBinary validates operands and returns the broadcast shape.
func checkBinary(d *binaryDef, a, b *Tensor) []int {
	if a.dtype != b.dtype {
		panic(fmt.Sprintf("%s: %s: dtypes differ; convert one with tensor.AsType", d.name, operands(d.sym, a, b)))
	}
	switch {
	case a.dtype.IsFloat():
	case a.dtype == Int32 && d.i32 != nil:
	case a.dtype == Int64 && d.i64 != nil:
	default:
		panic(fmt.Sprintf("%s: %s: not defined for %v", d.name, operands(d.sym, a, b), a.dtype))
	}
	if fitsShape(b.shape, a.shape) {
		return a.shape // no allocation in the common cases
	}
	return broadcastShapes(d.name, d.sym, a, b)
}

// fitsShape reports whether an operand of shape small broadcasts to big
// without changing it.
func fitsShape(small, big []int) bool {
	off := len(big) - len(small)
	if off < 0 {
		return false
	}
	for i, d := range small {
		if d != 1 && d != big[off+i] {
			return false
		}
	}
	return true
}

// unbroadcast sums g over the dimensions along which an operand of the
// given shape was broadcast, returning a tensor of that shape.
func unbroadcast(g *Tensor, shape []int) *Tensor {
	if sameShape(g.shape, shape) {
		return g
	}
	var axes []int
	lead := len(g.shape) - len(shape)
	for i := range g.shape {
		if i < lead || (shape[i-lead] == 1 && g.shape[i] != 1) {
			axes = append(axes, i)
		}
	}
	s := g
	if len(axes) > 0 {
		s = Sum(g, axes...)
	}
	return Reshape(s, shape...)
}

// unbroadcastTemp is unbroadcast of a temporary g that no one else holds
// (a VJP's product before the sum over broadcast axes): when the sum is a
// new tensor, g's storage goes back to the allocator cache at once instead
// of to the collector (a LayerNorm scale's gradient makes one such
// activation-sized temporary a step).
func unbroadcastTemp(g *Tensor, shape []int) *Tensor {
	r := unbroadcast(g, shape)
	if r != g && g.node == nil && g.layout() == nil {
		Donate(g)
	}
	return r
}

var (
	addDef = &binaryDef{name: "tensor.Add", sym: "+",
		f64: kernels2[float64]{f64.AddVV, f64.AddVS, func(d []float64, a float64, b []float64) { f64.AddVS(d, b, a) }},
		i64: ptr(mk2(func(x, y int64) int64 { return x + y })),
		f32: kernels2[float32]{vec.AddVV, vec.AddVS, func(d []float32, a float32, b []float32) { vec.AddVS(d, b, a) }},
		i32: ptr(mk2(func(x, y int32) int32 { return x + y }))}
	subDef = &binaryDef{name: "tensor.Sub", sym: "-",
		f64: kernels2[float64]{f64.SubVV, f64.SubVS, f64.SubSV},
		i64: ptr(mk2(func(x, y int64) int64 { return x - y })),
		f32: kernels2[float32]{vec.SubVV, vec.SubVS, vec.SubSV},
		i32: ptr(mk2(func(x, y int32) int32 { return x - y }))}
	mulDef = &binaryDef{name: "tensor.Mul", sym: "*",
		f64: kernels2[float64]{f64.MulVV, f64.MulVS, func(d []float64, a float64, b []float64) { f64.MulVS(d, b, a) }},
		i64: ptr(mk2(func(x, y int64) int64 { return x * y })),
		f32: kernels2[float32]{vec.MulVV, vec.MulVS, func(d []float32, a float32, b []float32) { vec.MulVS(d, b, a) }},
		i32: ptr(mk2(func(x, y int32) int32 { return x * y }))}
	// The int32 kernels of Div, Rem and FloorDiv never see a zero divisor:
	// binary checks for one first.
	divDef = &binaryDef{name: "tensor.Div", sym: "/", intDiv: true,
		f64: kernels2[float64]{f64.DivVV, f64.DivVS, f64.DivSV},
		i64: ptr(mk2(func(x, y int64) int64 { return x / y })),
		f32: kernels2[float32]{vec.DivVV, vec.DivVS, vec.DivSV},
		i32: ptr(mk2(func(x, y int32) int32 { return x / y }))}
	remDef = &binaryDef{name: "tensor.Rem", sym: "%", intDiv: true,
		f64: mk2(math.Mod),
		i64: ptr(mk2(func(x, y int64) int64 { return x % y })),
		f32: mk2(func(x, y float32) float32 { return float32(math.Mod(float64(x), float64(y))) }),
		i32: ptr(mk2(func(x, y int32) int32 { return x % y }))}
	floorDivDef = &binaryDef{name: "tensor.FloorDiv", sym: "//", intDiv: true,
		f64: mk2(func(x, y float64) float64 { return math.Floor(x / y) }),
		i64: ptr(mk2(floorDivInt[int64])),
		f32: mk2(func(x, y float32) float32 { return float32(math.Floor(float64(x) / float64(y))) }),
		i32: ptr(mk2(func(x, y int32) int32 {
			q := x / y
			if (x%y != 0) && ((x < 0) != (y < 0)) {
				q--
			}
			return q
		}))}
	maxDef = &binaryDef{name: "tensor.Maximum", sym: ",",
		f64: kernels2[float64]{f64.MaxVV, mk2(maxFloat[float64]).vs, mk2(maxFloat[float64]).sv},
		i64: ptr(mk2(func(x, y int64) int64 { return max(x, y) })),
		f32: kernels2[float32]{vec.MaxVV, mk2(maxF32).vs, mk2(maxF32).sv},
		i32: ptr(mk2(func(x, y int32) int32 { return max(x, y) }))}
	minDef = &binaryDef{name: "tensor.Minimum", sym: ",",
		f64: kernels2[float64]{f64.MinVV, mk2(minFloat[float64]).vs, mk2(minFloat[float64]).sv},
		i64: ptr(mk2(func(x, y int64) int64 { return min(x, y) })),
		f32: kernels2[float32]{vec.MinVV, mk2(minF32).vs, mk2(minF32).sv},
		i32: ptr(mk2(func(x, y int32) int32 { return min(x, y) }))}
	powDef = &binaryDef{name: "tensor.Pow", sym: "**",
		f64: mk2(math.Pow),
		f32: mk2(func(x, y float32) float32 { return float32(math.Pow(float64(x), float64(y))) })}
)

func ptr[T any](v T) *T { return &v }

func maxF32(x, y float32) float32 {
	if x != x || x > y {
		return x
	}
	return y
}

func minF32(x, y float32) float32 {
	if x != x || x < y {
		return x
	}
	return y
}

// binaryOp builds the op of a binary elementwise function with its VJP,
// residuals, sharding family (elementwise, or linear) and traits, its
// JVP rule (nil for an op that is not differentiable), and its batching
// rule: the public function on the aligned batches (elementwiseBatch).
func binaryOp(d *binaryDef, vjp func(g *Tensor, in []*Tensor, out *Tensor, p any) []*Tensor, jvp func(prim, tan, outs []*Tensor, p any) []*Tensor, save SaveMask, fam ShardFamily, tr Traits) *Op {
	name := lowerFirst(d.name[len("tensor."):])
	tr.Types |= TypesFloat64 | TypesInt64 // checkBinary refuses the dtypes d has no kernel for
	op := &Op{Name: name, Impl: binaryImpl(d), VJP: vjp, JVP: jvp, Save: save, Sharding: broadcastSharding(name, fam), Traits: tr}
	op.Batch = elementwiseBatch(func(x []*Tensor) *Tensor { return binary(d, op, x[0], x[1]) })
	return op
}

// binaryOpNeed is binaryOp with a VJP that skips unwanted cotangents.
func binaryOpNeed(d *binaryDef, vjp func(g *Tensor, in []*Tensor, out *Tensor, p any, need uint64) []*Tensor, jvp func(prim, tan, outs []*Tensor, p any) []*Tensor, save SaveMask, fam ShardFamily, tr Traits) *Op {
	name := lowerFirst(d.name[len("tensor."):])
	tr.Types |= TypesFloat64 | TypesInt64
	op := &Op{Name: name, Impl: binaryImpl(d), VJPNeed: vjp, JVP: jvp, Save: save, Sharding: broadcastSharding(name, fam), Traits: tr}
	op.Batch = elementwiseBatch(func(x []*Tensor) *Tensor { return binary(d, op, x[0], x[1]) })
	return op
}

// broadcastSharding is the sharding rule of a broadcasting op whose params are
// a *binaryParams (the result shape when it is not the first operand's):
// the family fam, and on blocks the params of the blocks' broadcast.
func broadcastSharding(name string, fam ShardFamily) ShardingRule {
	return ShardingRule{Family: fam, Block: func(_ any, blocks []*Tensor) any {
		return binaryParamsFor(broadcastShapes(name, ",", blocks...), blocks[0])
	}}
}

// toShapeOf returns the tangent t broadcast to the shape of out (t itself
// if it has it already).
func toShapeOf(t, out *Tensor) *Tensor {
	if t == nil || sameShape(t.shape, out.shape) {
		return t
	}
	return BroadcastTo(t, out.shape...)
}

// one1 returns a one-element slice holding t.
func one1(t *Tensor) []*Tensor { return []*Tensor{t} }

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	b := []byte(s)
	if b[0] >= 'A' && b[0] <= 'Z' {
		b[0] += 'a' - 'A'
	}
	return string(b)
}

var addOp, subOp, mulOp, divOp, remOp, floorDivOp, maxOp, minOp, powOp *Op

// binaryTraits are the traits of the differentiable binary ops. Their VJPs
// return the cotangent itself, or results of ops that allocate (products,
// sums, negations, selects) and reshapes of those: the backward pass may
// own and recycle them (ad_backward.go).
var binaryTraits = Traits{Reuse: FreshVJP}

func init() {
	addOp = binaryOpNeed(addDef, func(g *Tensor, in []*Tensor, _ *Tensor, _ any, need uint64) []*Tensor {
		res := make([]*Tensor, 2)
		if Wants(need, 0) {
			res[0] = unbroadcast(g, in[0].shape)
		}
		if Wants(need, 1) {
			res[1] = unbroadcast(g, in[1].shape)
		}
		return res
	}, func(_, t, outs []*Tensor, _ any) []*Tensor {
		return one1(toShapeOf(addTangents(t[0], t[1]), outs[0]))
	}, 0, ShardLinear, binaryTraits)
	subOp = binaryOpNeed(subDef, func(g *Tensor, in []*Tensor, _ *Tensor, _ any, need uint64) []*Tensor {
		res := make([]*Tensor, 2)
		if Wants(need, 0) {
			res[0] = unbroadcast(g, in[0].shape)
		}
		if Wants(need, 1) {
			res[1] = unbroadcastTemp(Neg(g), in[1].shape)
		}
		return res
	}, func(_, t, outs []*Tensor, _ any) []*Tensor {
		switch {
		case t[1] == nil:
			return one1(toShapeOf(t[0], outs[0]))
		case t[0] == nil:
			return one1(toShapeOf(Neg(t[1]), outs[0]))
		}
		return one1(toShapeOf(Sub(t[0], t[1]), outs[0]))
	}, 0, ShardLinear, binaryTraits)
	mulOp = binaryOpNeed(mulDef, func(g *Tensor, in []*Tensor, _ *Tensor, _ any, need uint64) []*Tensor {
		res := make([]*Tensor, 2)
		if Wants(need, 0) {
			res[0] = unbroadcastTemp(Mul(g, in[1]), in[0].shape)
		}
		if Wants(need, 1) {
			res[1] = unbroadcastTemp(Mul(g, in[0]), in[1].shape)
		}
		return res
	}, func(x, t, outs []*Tensor, _ any) []*Tensor {
		var ta, tb *Tensor
		if t[0] != nil {
			ta = Mul(t[0], x[1])
		}
		if t[1] != nil {
			tb = Mul(x[0], t[1])
		}
		return one1(toShapeOf(addTangents(ta, tb), outs[0]))
	}, SaveAllInputs, ShardElementwise, binaryTraits)
	divOp = binaryOpNeed(divDef, func(g *Tensor, in []*Tensor, out *Tensor, _ any, need uint64) []*Tensor {
		// d(a/b)/da = 1/b; d(a/b)/db = -a/b² = -out/b.
		res := make([]*Tensor, 2)
		ga := Div(g, in[1])
		if Wants(need, 0) {
			res[0] = unbroadcast(ga, in[0].shape)
		}
		if Wants(need, 1) {
			res[1] = unbroadcast(Neg(Mul(ga, out)), in[1].shape)
		}
		return res
	}, func(x, t, outs []*Tensor, _ any) []*Tensor {
		// d(a/b) = (da - out·db)/b.
		num := t[0]
		if t[1] != nil {
			if num == nil {
				num = Neg(Mul(outs[0], t[1]))
			} else {
				num = Sub(num, Mul(outs[0], t[1]))
			}
		}
		return one1(toShapeOf(Div(num, x[1]), outs[0]))
	}, SaveInputs(1)|SaveOutput, ShardElementwise, binaryTraits)
	remOp = binaryOp(remDef, nil, nil, 0, ShardElementwise, Traits{})
	floorDivOp = binaryOp(floorDivDef, nil, nil, 0, ShardElementwise, Traits{})
	maxOp = binaryOp(maxDef, func(g *Tensor, in []*Tensor, out *Tensor, _ any) []*Tensor {
		return minMaxVJP(g, in, out)
	}, minMaxJVP, SaveAllInputs|SaveOutput, ShardElementwise, binaryTraits)
	minOp = binaryOp(minDef, func(g *Tensor, in []*Tensor, out *Tensor, _ any) []*Tensor {
		return minMaxVJP(g, in, out)
	}, minMaxJVP, SaveAllInputs|SaveOutput, ShardElementwise, binaryTraits)
	powOp = binaryOp(powDef, func(g *Tensor, in []*Tensor, out *Tensor, _ any) []*Tensor {
		// As in JAX: d(a^b)/da = b·a^(b-1), but 0 where b == 0 (not
		// 0·0^-1 = NaN at a == 0); d(a^b)/db = a^b·log a with a == 0
		// replaced by 1 inside the log, so that neither this derivative
		// nor the derivative of it (through the unselected branch of a
		// Where) is NaN.
		a, b := in[0], in[1]
		zero := Scalar(0)
		ga := Mul(g, Where(Equal(b, zero), zero, Mul(b, Pow(a, Sub(b, Scalar(1))))))
		la := Log(Where(Equal(a, zero), Scalar(1), a))
		gb := Mul(g, Mul(out, la))
		return []*Tensor{unbroadcast(ga, a.shape), unbroadcast(gb, b.shape)}
	}, func(x, t, outs []*Tensor, _ any) []*Tensor {
		// The VJP's factors, times the tangents.
		a, b, out := x[0], x[1], outs[0]
		zero := Scalar(0)
		var ta, tb *Tensor
		if t[0] != nil {
			ta = Mul(t[0], Where(Equal(b, zero), zero, Mul(b, Pow(a, Sub(b, Scalar(1))))))
		}
		if t[1] != nil {
			tb = Mul(t[1], Mul(out, Log(Where(Equal(a, zero), Scalar(1), a))))
		}
		return one1(toShapeOf(addTangents(ta, tb), out))
	}, SaveAllInputs|SaveOutput, ShardElementwise, binaryTraits)
}

// minMaxJVP is the JVP of Maximum and Minimum: the tangent of the operand
// selected, the mean of both on ties (as minMaxVJP splits the cotangent),
// 0 where the result is NaN.
func minMaxJVP(x, t, outs []*Tensor, _ any) []*Tensor {
	out := outs[0]
	ma := AsType(Equal(x[0], out), out.dtype)
	mb := AsType(Equal(x[1], out), out.dtype)
	tot := Maximum(Add(ma, mb), Scalar(1))
	var ta, tb *Tensor
	if t[0] != nil {
		ta = Mul(t[0], Div(ma, tot))
	}
	if t[1] != nil {
		tb = Mul(t[1], Div(mb, tot))
	}
	return one1(toShapeOf(addTangents(ta, tb), out))
}

// minMaxVJP sends the cotangent to the operand that was selected; ties split
// it evenly, as JAX does. Where the result is NaN neither operand equals it
// and both get 0 (not 0/0).
func minMaxVJP(g *Tensor, in []*Tensor, out *Tensor) []*Tensor {
	ma := AsType(Equal(in[0], out), out.dtype)
	mb := AsType(Equal(in[1], out), out.dtype)
	tot := Maximum(Add(ma, mb), Scalar(1)) // 1 or 2 (a tie), 1 where NaN
	return []*Tensor{
		unbroadcast(Mul(g, Div(ma, tot)), in[0].shape),
		unbroadcast(Mul(g, Div(mb, tot)), in[1].shape),
	}
}

func binary(d *binaryDef, op *Op, a, b *Tensor) *Tensor {
	a, b = weakScalars(a, b)
	shape := checkBinary(d, a, b)
	if d.intDiv && numel(shape) > 0 && (a.dtype == Int32 && slices.Contains(b.i32(), 0) || a.dtype == Int64 && slices.Contains(b.i64(), 0)) {
		// Every element of b is read when the result is not empty.
		panic(fmt.Sprintf("%s: %s: integer division by zero", d.name, operands(d.sym, a, b)))
	}
	return Apply(op, binaryParamsFor(shape, a), a, b)
}

// binaryParamsFor returns the params of a binary op with result shape:
// nil when it is the first operand's shape.
func binaryParamsFor(shape []int, a *Tensor) *binaryParams {
	if sameShape(shape, a.shape) {
		return nil
	}
	return &binaryParams{shape}
}

// Add returns a + b elementwise, with NumPy broadcasting.
func Add(a, b *Tensor) *Tensor {
	checkNil("tensor.Add", "a b", a, b)
	return binary(addDef, addOp, a, b)
}

// Sub returns a - b elementwise, with broadcasting.
func Sub(a, b *Tensor) *Tensor {
	checkNil("tensor.Sub", "a b", a, b)
	return binary(subDef, subOp, a, b)
}

// Mul returns a * b elementwise, with broadcasting.
func Mul(a, b *Tensor) *Tensor {
	checkNil("tensor.Mul", "a b", a, b)
	return binary(mulDef, mulOp, a, b)
}

// Div returns a / b elementwise, with broadcasting. For int32 it truncates
// toward zero (like Go and lax.div) and panics on division by zero.
func Div(a, b *Tensor) *Tensor {
	checkNil("tensor.Div", "a b", a, b)
	return binary(divDef, divOp, a, b)
}

// Rem returns the remainder of a / b with the sign of a (Go's %, C's fmod).
// It is not differentiable.
func Rem(a, b *Tensor) *Tensor {
	checkNil("tensor.Rem", "a b", a, b)
	return binary(remDef, remOp, a, b)
}

// FloorDiv returns floor(a / b) elementwise (Python's //). It is not
// differentiable.
func FloorDiv(a, b *Tensor) *Tensor {
	checkNil("tensor.FloorDiv", "a b", a, b)
	return binary(floorDivDef, floorDivOp, a, b)
}

// Maximum returns the elementwise maximum (NaN if either is NaN). Where
// a == b the gradient is split evenly.
func Maximum(a, b *Tensor) *Tensor {
	checkNil("tensor.Maximum", "a b", a, b)
	return binary(maxDef, maxOp, a, b)
}

// Minimum returns the elementwise minimum.
func Minimum(a, b *Tensor) *Tensor {
	checkNil("tensor.Minimum", "a b", a, b)
	return binary(minDef, minOp, a, b)
}

// Pow returns a raised to the power b elementwise (float32 only).
func Pow(a, b *Tensor) *Tensor {
	checkNil("tensor.Pow", "a b", a, b)
	return binary(powDef, powOp, a, b)
}

// AddScalar returns x + s for a float32 x.
func AddScalar(x *Tensor, s float32) *Tensor {
	checkNil("tensor.AddScalar", "x", x)
	return Add(x, Scalar(s))
}

// MulScalar returns x * s for a float32 x.
func MulScalar(x *Tensor, s float32) *Tensor {
	checkNil("tensor.MulScalar", "x", x)
	return Mul(x, Scalar(s))
}
