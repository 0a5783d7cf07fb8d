package tensor

import (
	"fmt"
	"math"
)

// cmpDef describes a comparison returning a bool mask.
type cmpDef struct {
	name, sym string
	f32       func(a, b float32) bool
	i32       func(a, b int32) bool
	b         func(a, b bool) bool // nil: not defined for bool
}

func runCmp[T any](f func(a, b T) bool, dst []bool, a, b []T, shape, sa, sb []int) {
	broadcastLoop(shape, sa, sb, func(o, ia, ib, n, da, db int) {
		d := dst[o : o+n]
		if da == 1 && db == 1 {
			x, y := a[ia:ia+n], b[ib:ib+n]
			for j := range d {
				d[j] = f(x[j], y[j])
			}
			return
		}
		for j := range d {
			d[j] = f(a[ia+j*da], b[ib+j*db])
		}
	})
}

func cmpOp(d *cmpDef) *Op {
	name := lowerFirst(d.name[len("tensor."):])
	var op *Op
	op = &Op{
		Name:     name,
		Sharding: broadcastSharding(name, ShardElementwise),
		Impl: func(in []*Tensor, p any) *Tensor {
			a, b := in[0], in[1]
			shape := binaryShape(in, p)
			out := newOut(Bool, shape)
			var sab, sbb [maxFastRank]int
			sa, sb := stridesInto(sab[:], a.shape, shape), stridesInto(sbb[:], b.shape, shape)
			switch a.dtype {
			case Float32:
				runCmp(d.f32, out.b(), a.f32(), b.f32(), shape, sa, sb)
			case Int32:
				runCmp(d.i32, out.b(), a.i32(), b.i32(), shape, sa, sb)
			case Float64:
				runCmp(cmpFunc[float64](d), out.b(), a.f64(), b.f64(), shape, sa, sb)
			case Int64:
				runCmp(cmpFunc[int64](d), out.b(), a.i64(), b.i64(), shape, sa, sb)
			case Uint8:
				runCmp(cmpFunc[uint8](d), out.b(), a.u8(), b.u8(), shape, sa, sb)
			case Bool:
				runCmp(d.b, out.b(), a.b(), b.b(), shape, sa, sb)
			}
			return out
		},
		Batch: elementwiseBatch(func(x []*Tensor) *Tensor { return compare(d, op, x[0], x[1]) }),
	}
	if d.f32 != nil {
		op.Traits.Types = TypesAll
	}
	return op
}

// cmpFunc returns the comparison of d for T (Float64, Int64, Uint8).
func cmpFunc[T float64 | int64 | uint8](d *cmpDef) func(a, b T) bool {
	switch d.sym {
	case "==":
		return func(a, b T) bool { return a == b }
	case "!=":
		return func(a, b T) bool { return a != b }
	case "<":
		return func(a, b T) bool { return a < b }
	case "<=":
		return func(a, b T) bool { return a <= b }
	case ">":
		return func(a, b T) bool { return a > b }
	case ">=":
		return func(a, b T) bool { return a >= b }
	}
	panic("tensor: no comparison " + d.sym)
}

func compare(d *cmpDef, op *Op, a, b *Tensor) *Tensor {
	a, b = weakScalars(a, b)
	if a.dtype != b.dtype {
		panic(fmt.Sprintf("%s: %s: dtypes differ; convert one with tensor.AsType", d.name, operands(d.sym, a, b)))
	}
	if a.dtype == Bool && d.b == nil {
		panic(fmt.Sprintf("%s: %s: not defined for bool", d.name, operands(d.sym, a, b)))
	}
	shape := a.shape
	if !fitsShape(b.shape, a.shape) {
		shape = broadcastShapes(d.name, d.sym, a, b)
	}
	return Apply(op, binaryParamsFor(shape, a), a, b)
}

var (
	eqDef = &cmpDef{"tensor.Equal", "==", func(a, b float32) bool { return a == b }, func(a, b int32) bool { return a == b }, func(a, b bool) bool { return a == b }}
	neDef = &cmpDef{"tensor.NotEqual", "!=", func(a, b float32) bool { return a != b }, func(a, b int32) bool { return a != b }, func(a, b bool) bool { return a != b }}
	ltDef = &cmpDef{"tensor.Less", "<", func(a, b float32) bool { return a < b }, func(a, b int32) bool { return a < b }, nil}
	leDef = &cmpDef{"tensor.LessEqual", "<=", func(a, b float32) bool { return a <= b }, func(a, b int32) bool { return a <= b }, nil}
	gtDef = &cmpDef{"tensor.Greater", ">", func(a, b float32) bool { return a > b }, func(a, b int32) bool { return a > b }, nil}
	geDef = &cmpDef{"tensor.GreaterEqual", ">=", func(a, b float32) bool { return a >= b }, func(a, b int32) bool { return a >= b }, nil}

	andDef = &cmpDef{name: "tensor.LogicalAnd", sym: "&&", b: func(a, b bool) bool { return a && b }}
	orDef  = &cmpDef{name: "tensor.LogicalOr", sym: "||", b: func(a, b bool) bool { return a || b }}
	xorDef = &cmpDef{name: "tensor.LogicalXor", sym: "^", b: func(a, b bool) bool { return a != b }}

	eqOp, neOp, ltOp, leOp, gtOp, geOp = cmpOp(eqDef), cmpOp(neDef), cmpOp(ltDef), cmpOp(leDef), cmpOp(gtDef), cmpOp(geDef)
	andOp, orOp, xorOp                 = cmpOp(andDef), cmpOp(orDef), cmpOp(xorDef)
)

// Equal returns the mask a == b (bool), with broadcasting.
func Equal(a, b *Tensor) *Tensor {
	checkNil("tensor.Equal", "a b", a, b)
	return compare(eqDef, eqOp, a, b)
}

// NotEqual returns the mask a != b.
func NotEqual(a, b *Tensor) *Tensor {
	checkNil("tensor.NotEqual", "a b", a, b)
	return compare(neDef, neOp, a, b)
}

// Less returns the mask a < b.
func Less(a, b *Tensor) *Tensor {
	checkNil("tensor.Less", "a b", a, b)
	return compare(ltDef, ltOp, a, b)
}

// LessEqual returns the mask a <= b.
func LessEqual(a, b *Tensor) *Tensor {
	checkNil("tensor.LessEqual", "a b", a, b)
	return compare(leDef, leOp, a, b)
}

// Greater returns the mask a > b.
func Greater(a, b *Tensor) *Tensor {
	checkNil("tensor.Greater", "a b", a, b)
	return compare(gtDef, gtOp, a, b)
}

// GreaterEqual returns the mask a >= b.
func GreaterEqual(a, b *Tensor) *Tensor {
	checkNil("tensor.GreaterEqual", "a b", a, b)
	return compare(geDef, geOp, a, b)
}

func logical(d *cmpDef, op *Op, a, b *Tensor) *Tensor {
	if a.dtype != Bool || b.dtype != Bool {
		panic(fmt.Sprintf("%s: %s: operands must be bool", d.name, operands(d.sym, a, b)))
	}
	return compare(d, op, a, b)
}

// LogicalAnd returns a && b for bool masks, with broadcasting.
func LogicalAnd(a, b *Tensor) *Tensor {
	checkNil("tensor.LogicalAnd", "a b", a, b)
	return logical(andDef, andOp, a, b)
}

// LogicalOr returns a || b for bool masks.
func LogicalOr(a, b *Tensor) *Tensor {
	checkNil("tensor.LogicalOr", "a b", a, b)
	return logical(orDef, orOp, a, b)
}

// LogicalXor returns a != b for bool masks.
func LogicalXor(a, b *Tensor) *Tensor {
	checkNil("tensor.LogicalXor", "a b", a, b)
	return logical(xorDef, xorOp, a, b)
}

var notOp *Op

func init() {
	notOp = &Op{
		Name:     "not",
		Sharding: ShardingRule{Family: ShardElementwise},
		Impl: func(in []*Tensor, _ any) *Tensor {
			out := newTensor(Bool, in[0].shape)
			d := out.b()
			for i, v := range in[0].b() {
				d[i] = !v
			}
			return out
		},
		Batch: sameOpBatch(&notOp),
	}
}

// LogicalNot returns !x for a bool mask.
func LogicalNot(x *Tensor) *Tensor {
	checkNil("tensor.LogicalNot", "x", x)
	if x.dtype != Bool {
		panic(fmt.Sprintf("tensor.LogicalNot: %v: operand must be bool", x))
	}
	return Apply(notOp, nil, x)
}

var isNaNOp *Op

func init() {
	isNaNOp = &Op{
		Name:     "is_nan",
		Sharding: ShardingRule{Family: ShardElementwise},
		Impl: func(in []*Tensor, _ any) *Tensor {
			out := newTensor(Bool, in[0].shape)
			d := out.b()
			for i, v := range in[0].f32() {
				d[i] = v != v
			}
			for i, v := range in[0].f64() {
				d[i] = v != v
			}
			return out
		},
		Batch:  sameOpBatch(&isNaNOp),
		Traits: Traits{Types: TypesFloat64},
	}
}

var isFiniteOp *Op

func init() {
	isFiniteOp = &Op{
		Name:     "is_finite",
		Sharding: ShardingRule{Family: ShardElementwise},
		Impl: func(in []*Tensor, _ any) *Tensor {
			out := newTensor(Bool, in[0].shape)
			d := out.b()
			for i, v := range in[0].f32() {
				d[i] = !math.IsInf(float64(v), 0) && v == v
			}
			for i, v := range in[0].f64() {
				d[i] = !math.IsInf(v, 0) && v == v
			}
			return out
		},
		Batch:  sameOpBatch(&isFiniteOp),
		Traits: Traits{Types: TypesFloat64},
	}
}

// IsNaN returns the mask of NaN elements of a float32 tensor.
func IsNaN(x *Tensor) *Tensor {
	checkNil("tensor.IsNaN", "x", x)
	x.mustFloat("tensor.IsNaN")
	return Apply(isNaNOp, nil, x)
}

// IsFinite returns the mask of elements that are neither infinite nor NaN.
func IsFinite(x *Tensor) *Tensor {
	checkNil("tensor.IsFinite", "x", x)
	x.mustFloat("tensor.IsFinite")
	return Apply(isFiniteOp, nil, x)
}

type whereParams struct{ shape []int }

var whereOp *Op

func init() {
	whereOp = &Op{
		Name: "where",
		Sharding: ShardingRule{Family: ShardElementwise, Block: func(_ any, blocks []*Tensor) any {
			return &whereParams{shape: broadcastShapes("where", ",", blocks...)}
		}},
		Impl: func(in []*Tensor, p any) *Tensor {
			c, a, b := in[0], in[1], in[2]
			shape := p.(*whereParams).shape
			var out *Tensor
			if a.dtype == Bool {
				out = newTensor(Bool, shape)
			} else {
				out = newOutUninit(a.dtype, shape) // every element is written
			}
			if out.Size() == 0 {
				return out
			}
			dims := whereDims(shape, broadcastStrides(c.shape, shape), broadcastStrides(a.shape, shape), broadcastStrides(b.shape, shape))
			runs := 1
			for _, d := range dims[1:] {
				runs *= d.n
			}
			loop := func(r0, r1 int) {
				whereRuns(dims, r0, r1, func(o, oc, oa, ob int, d wdim) {
					switch a.dtype {
					case Float32:
						whereRun(out.f32()[o:o+d.n], c.b(), a.f32(), b.f32(), oc, oa, ob, d)
					case Int32:
						whereRun(out.i32()[o:o+d.n], c.b(), a.i32(), b.i32(), oc, oa, ob, d)
					case Float64:
						whereRun(out.f64()[o:o+d.n], c.b(), a.f64(), b.f64(), oc, oa, ob, d)
					case Int64:
						whereRun(out.i64()[o:o+d.n], c.b(), a.i64(), b.i64(), oc, oa, ob, d)
					case Uint8:
						whereRun(out.u8()[o:o+d.n], c.b(), a.u8(), b.u8(), oc, oa, ob, d)
					case Bool:
						whereRun(out.b()[o:o+d.n], c.b(), a.b(), b.b(), oc, oa, ob, d)
					}
				})
			}
			total := numel(shape)
			if serial(total*costCheap, isLocal(in...)) {
				loop(0, runs)
			} else {
				parallelFor(runs, total/runs*costCheap, 1, false, loop)
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			c := in[0]
			zero := Scalar(0)
			return []*Tensor{nil,
				unbroadcast(Where(c, g, zero), in[1].shape),
				unbroadcast(Where(c, zero, g), in[2].shape)}
		},
		Save: SaveInputs(0),
		JVP: func(x, t, outs []*Tensor, _ any) []*Tensor {
			ta, tb := t[1], t[2]
			if ta == nil {
				ta = Scalar(0)
			}
			if tb == nil {
				tb = Scalar(0)
			}
			return one1(toShapeOf(Where(x[0], ta, tb), outs[0]))
		},
		Batch:  elementwiseBatch(func(x []*Tensor) *Tensor { return Where(x[0], x[1], x[2]) }),
		Traits: Traits{Types: TypesAll},
	}
}

// wdim is one (merged) dimension of Where's loop: its size and the element
// strides of the output, the condition and the two operands.
type wdim struct{ n, so, sc, sa, sb int }

// whereDims returns the dimensions of shape, innermost first, with size-1
// dimensions dropped and adjacent ones merged where every operand is
// contiguous across them (or broadcast along both), as mergeDims does for
// two operands. It returns at least one dimension.
func whereDims(shape, sc, sa, sb []int) []wdim {
	var dims []wdim
	so := 1
	for i := len(shape) - 1; i >= 0; i-- {
		n := shape[i]
		if n == 1 {
			continue
		}
		d := wdim{n, so, sc[i], sa[i], sb[i]}
		so *= n
		if k := len(dims) - 1; k >= 0 {
			p := dims[k]
			if d.so == p.so*p.n && d.sc == p.sc*p.n && d.sa == p.sa*p.n && d.sb == p.sb*p.n {
				dims[k].n *= n
				continue
			}
		}
		dims = append(dims, d)
	}
	if len(dims) == 0 {
		dims = append(dims, wdim{n: 1, so: 1})
	}
	return dims
}

// whereRuns calls fn with the offsets of runs r0 to r1-1 of the innermost
// dimension of dims in the output, the condition and the operands.
func whereRuns(dims []wdim, r0, r1 int, fn func(o, oc, oa, ob int, d wdim)) {
	in, outer := dims[0], dims[1:]
	idx := make([]int, len(outer))
	o, oc, oa, ob := 0, 0, 0, 0
	rem := r0
	for k, d := range outer {
		i := rem % d.n
		rem /= d.n
		idx[k] = i
		o, oc, oa, ob = o+i*d.so, oc+i*d.sc, oa+i*d.sa, ob+i*d.sb
	}
	for r := r0; r < r1; r++ {
		fn(o, oc, oa, ob, in)
		for k := range outer {
			d := &outer[k]
			idx[k]++
			o, oc, oa, ob = o+d.so, oc+d.sc, oa+d.sa, ob+d.sb
			if idx[k] < d.n {
				break
			}
			o, oc, oa, ob = o-d.so*d.n, oc-d.sc*d.n, oa-d.sa*d.n, ob-d.sb*d.n
			idx[k] = 0
		}
	}
}

// whereRun fills dst, one run of Where's output, from the condition and
// the operands read from offsets oc, oa and ob with d's strides (0 for a
// broadcast operand, else 1 inside a run).
func whereRun[T any](dst []T, c []bool, a, b []T, oc, oa, ob int, d wdim) {
	if d.sc == 1 && d.sa == 1 && d.sb == 1 {
		c, a, b = c[oc:oc+len(dst)], a[oa:oa+len(dst)], b[ob:ob+len(dst)]
		for j := range dst {
			if c[j] {
				dst[j] = a[j]
			} else {
				dst[j] = b[j]
			}
		}
		return
	}
	for j := range dst {
		if c[oc+j*d.sc] {
			dst[j] = a[oa+j*d.sa]
		} else {
			dst[j] = b[ob+j*d.sb]
		}
	}
}

// Where selects a where cond is true and b elsewhere, with broadcasting of
// all three operands (jnp.where). cond must be bool and a and b of one dtype.
func Where(cond, a, b *Tensor) *Tensor {
	checkNil("tensor.Where", "cond a b", cond, a, b)
	if cond.dtype != Bool {
		panic(fmt.Sprintf("tensor.Where: condition %v must be bool", cond))
	}
	a, b = weakScalars(a, b)
	if a.dtype != b.dtype {
		panic(fmt.Sprintf("tensor.Where: %s: dtypes differ", operands(",", a, b)))
	}
	shape := broadcastShapes("tensor.Where", ",", cond, a, b)
	return Apply(whereOp, &whereParams{shape}, cond, a, b)
}

var asTypeOp *Op

func init() {
	asTypeOp = &Op{
		Name:     "convert",
		Sharding: ShardingRule{Family: ShardElementwise},
		Impl: func(in []*Tensor, p any) *Tensor {
			return asTypeImpl(in[0], p.(DType))
		},
		Batch:  sameOpBatch(&asTypeOp),
		Traits: Traits{Types: TypesAll},
	}
}

// AsType converts x to dtype dt: float to int truncates toward zero
// (saturating, NaN becomes 0), int to int wraps (two's complement, as
// NumPy: 300 as uint8 is 44), nonzero becomes true, true becomes 1. It
// returns x itself when it already has type dt. Conversions between float
// dtypes (float32, float64, bfloat16, float16) are Convert's and differentiable;
// the others are not. An integer or bool converts to bfloat16 or float16
// through float32 (so an int32 beyond 2^24 is rounded twice).
func AsType(x *Tensor, dt DType) *Tensor {
	checkNil("tensor.AsType", "x", x)
	if !dt.valid() {
		panic(fmt.Sprintf("tensor.AsType: %v: invalid dtype %v", x, dt))
	}
	if x.dtype == dt {
		return x
	}
	if dt.IsFloat() && x.dtype.IsFloat() {
		return Convert(x, dt)
	}
	if dt.isHalf() {
		return Convert(Apply(asTypeOp, Float32, x), dt)
	}
	return Apply(asTypeOp, dt, x)
}
