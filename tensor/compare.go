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
	return &Op{
		Name: lowerFirst(d.name[len("tensor."):]),
		Impl: func(in []*Tensor, p any) *Tensor {
			a, b := in[0], in[1]
			shape := binaryShape(in, p)
			out := newOut(Bool, shape)
			var sab, sbb [maxFastRank]int
			sa, sb := stridesInto(sab[:], a.shape, shape), stridesInto(sbb[:], b.shape, shape)
			switch a.dtype {
			case Float32:
				runCmp(d.f32, out.b, a.f32, b.f32, shape, sa, sb)
			case Int32:
				runCmp(d.i32, out.b, a.i32, b.i32, shape, sa, sb)
			case Bool:
				runCmp(d.b, out.b, a.b, b.b, shape, sa, sb)
			}
			return out
		},
	}
}

func compare(d *cmpDef, op *Op, a, b *Tensor) *Tensor {
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
		Name: "not",
		Impl: func(in []*Tensor, _ any) *Tensor {
			out := newTensor(Bool, in[0].shape)
			for i, v := range in[0].b {
				out.b[i] = !v
			}
			return out
		},
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
		Name: "is_nan",
		Impl: func(in []*Tensor, _ any) *Tensor {
			out := newTensor(Bool, in[0].shape)
			for i, v := range in[0].f32 {
				out.b[i] = v != v
			}
			return out
		},
	}
}

var isFiniteOp *Op

func init() {
	isFiniteOp = &Op{
		Name: "is_finite",
		Impl: func(in []*Tensor, _ any) *Tensor {
			out := newTensor(Bool, in[0].shape)
			for i, v := range in[0].f32 {
				out.b[i] = !math.IsInf(float64(v), 0) && v == v
			}
			return out
		},
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
		Impl: func(in []*Tensor, p any) *Tensor {
			c, a, b := in[0], in[1], in[2]
			shape := p.(*whereParams).shape
			out := newTensor(a.dtype, shape)
			sc := broadcastStrides(c.shape, shape)
			sa := broadcastStrides(a.shape, shape)
			sb := broadcastStrides(b.shape, shape)
			idx := make([]int, len(shape))
			total := numel(shape)
			oc, oa, ob := 0, 0, 0
			for o := 0; o < total; o++ {
				sel := c.b[oc]
				switch a.dtype {
				case Float32:
					if sel {
						out.f32[o] = a.f32[oa]
					} else {
						out.f32[o] = b.f32[ob]
					}
				case Int32:
					if sel {
						out.i32[o] = a.i32[oa]
					} else {
						out.i32[o] = b.i32[ob]
					}
				case Bool:
					if sel {
						out.b[o] = a.b[oa]
					} else {
						out.b[o] = b.b[ob]
					}
				}
				for k := len(shape) - 1; k >= 0; k-- {
					idx[k]++
					oc += sc[k]
					oa += sa[k]
					ob += sb[k]
					if idx[k] < shape[k] {
						break
					}
					oc -= sc[k] * shape[k]
					oa -= sa[k] * shape[k]
					ob -= sb[k] * shape[k]
					idx[k] = 0
				}
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
		Name: "convert",
		Impl: func(in []*Tensor, p any) *Tensor {
			x, dt := in[0], p.(DType)
			out := newTensor(dt, x.shape)
			for i := range out.Size() {
				v := x.at(i)
				switch dt {
				case Float32:
					out.f32[i] = float32(v)
				case Int32:
					switch {
					case v != v:
						out.i32[i] = 0
					case v >= math.MaxInt32:
						out.i32[i] = math.MaxInt32
					case v <= math.MinInt32:
						out.i32[i] = math.MinInt32
					default:
						out.i32[i] = int32(v) // truncates toward zero
					}
				case Bool:
					out.b[i] = v != 0
				}
			}
			return out
		},
	}
}

// AsType converts x to dtype dt: float to int truncates toward zero
// (saturating, NaN becomes 0), nonzero becomes true, true becomes 1. It
// returns x itself when it already has type dt. Conversions between float
// dtypes (float32, bfloat16, float16) are Convert's and differentiable;
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
