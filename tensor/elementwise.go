package tensor

import (
	"fmt"
	"math"
	"slices"
)

// broadcastLoop walks the elements of out (row-major) with operands read
// through strides sa and sb (0 along broadcast dims). Adjacent dimensions
// that are contiguous for every operand are merged first, so the common
// cases reach fn as a few long runs. fn gets the offsets of a run of n
// elements in out, a and b, and the element strides of a and b within the
// run (each 0 or 1).
func broadcastLoop(out, sa, sb []int, fn func(o, a, b, n, da, db int)) {
	total := numel(out)
	if total == 0 {
		return
	}
	// Merge dims.
	type dim struct{ n, so, sa, sb int }
	so := contiguousStrides(out)
	dims := make([]dim, 0, len(out))
	for i := range out {
		if out[i] == 1 {
			continue
		}
		d := dim{out[i], so[i], sa[i], sb[i]}
		if k := len(dims) - 1; k >= 0 {
			p := dims[k]
			if p.so == d.so*d.n && p.sa == d.sa*d.n && p.sb == d.sb*d.n {
				dims[k] = dim{p.n * d.n, d.so, d.sa, d.sb}
				continue
			}
		}
		dims = append(dims, d)
	}
	if len(dims) == 0 {
		fn(0, 0, 0, 1, 0, 0)
		return
	}
	in := dims[len(dims)-1]
	outer := dims[:len(dims)-1]
	if len(outer) == 0 {
		fn(0, 0, 0, in.n, in.sa, in.sb)
		return
	}
	idx := make([]int, len(outer))
	oo, oa, ob := 0, 0, 0
	for {
		fn(oo, oa, ob, in.n, in.sa, in.sb)
		k := len(outer) - 1
		for ; k >= 0; k-- {
			idx[k]++
			oo += outer[k].so
			oa += outer[k].sa
			ob += outer[k].sb
			if idx[k] < outer[k].n {
				break
			}
			oo -= outer[k].so * outer[k].n
			oa -= outer[k].sa * outer[k].n
			ob -= outer[k].sb * outer[k].n
			idx[k] = 0
		}
		if k < 0 {
			return
		}
	}
}

// kernels2 holds the inner loops of a binary op for one element type:
// vector-vector, vector-scalar and scalar-vector.
type kernels2[T any] struct {
	vv func(d, a, b []T)
	vs func(d, a []T, b T)
	sv func(d []T, a T, b []T)
}

func run2[T any](k kernels2[T], dst, a, b []T, shape, sa, sb []int) {
	broadcastLoop(shape, sa, sb, func(o, ia, ib, n, da, db int) {
		switch {
		case da == 1 && db == 1:
			k.vv(dst[o:o+n], a[ia:ia+n], b[ib:ib+n])
		case da == 1:
			k.vs(dst[o:o+n], a[ia:ia+n], b[ib])
		case db == 1:
			k.sv(dst[o:o+n], a[ia], b[ib:ib+n])
		default:
			k.vs(dst[o:o+n], a[ia:ia+1], b[ib])
			for j := 1; j < n; j++ {
				dst[o+j] = dst[o]
			}
		}
	})
}

// mk2 builds the three inner loops from a scalar function.
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
	i32  *kernels2[int32] // nil if not defined for int32
	// intDiv: the int32 op divides by its second operand, which must not
	// hold a zero.
	intDiv bool
}

type binaryParams struct{ shape []int }

// binaryImpl computes an elementwise binary op with broadcasting.
func binaryImpl(d *binaryDef) func(in []*Tensor, p any) *Tensor {
	return func(in []*Tensor, p any) *Tensor {
		a, b := in[0], in[1]
		shape := p.(*binaryParams).shape
		out := newTensor(a.dtype, shape)
		sa, sb := broadcastStrides(a.shape, shape), broadcastStrides(b.shape, shape)
		switch a.dtype {
		case Float32:
			run2(d.f32, out.f32, a.f32, b.f32, shape, sa, sb)
		case Int32:
			run2(*d.i32, out.i32, a.i32, b.i32, shape, sa, sb)
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
	case a.dtype == Float32:
	case a.dtype == Int32 && d.i32 != nil:
	default:
		panic(fmt.Sprintf("%s: %s: not defined for %v", d.name, operands(d.sym, a, b), a.dtype))
	}
	return broadcastShapes(d.name, d.sym, a, b)
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

var (
	addDef = &binaryDef{name: "tensor.Add", sym: "+",
		f32: mk2(func(x, y float32) float32 { return x + y }),
		i32: ptr(mk2(func(x, y int32) int32 { return x + y }))}
	subDef = &binaryDef{name: "tensor.Sub", sym: "-",
		f32: mk2(func(x, y float32) float32 { return x - y }),
		i32: ptr(mk2(func(x, y int32) int32 { return x - y }))}
	mulDef = &binaryDef{name: "tensor.Mul", sym: "*",
		f32: mk2(func(x, y float32) float32 { return x * y }),
		i32: ptr(mk2(func(x, y int32) int32 { return x * y }))}
	// The int32 kernels of Div, Rem and FloorDiv never see a zero divisor:
	// binary checks for one first.
	divDef = &binaryDef{name: "tensor.Div", sym: "/", intDiv: true,
		f32: mk2(func(x, y float32) float32 { return x / y }),
		i32: ptr(mk2(func(x, y int32) int32 { return x / y }))}
	remDef = &binaryDef{name: "tensor.Rem", sym: "%", intDiv: true,
		f32: mk2(func(x, y float32) float32 { return float32(math.Mod(float64(x), float64(y))) }),
		i32: ptr(mk2(func(x, y int32) int32 { return x % y }))}
	floorDivDef = &binaryDef{name: "tensor.FloorDiv", sym: "//", intDiv: true,
		f32: mk2(func(x, y float32) float32 { return float32(math.Floor(float64(x) / float64(y))) }),
		i32: ptr(mk2(func(x, y int32) int32 {
			q := x / y
			if (x%y != 0) && ((x < 0) != (y < 0)) {
				q--
			}
			return q
		}))}
	maxDef = &binaryDef{name: "tensor.Maximum", sym: ",",
		f32: mk2(func(x, y float32) float32 {
			if x != x || x > y {
				return x
			}
			return y
		}),
		i32: ptr(mk2(func(x, y int32) int32 { return max(x, y) }))}
	minDef = &binaryDef{name: "tensor.Minimum", sym: ",",
		f32: mk2(func(x, y float32) float32 {
			if x != x || x < y {
				return x
			}
			return y
		}),
		i32: ptr(mk2(func(x, y int32) int32 { return min(x, y) }))}
	powDef = &binaryDef{name: "tensor.Pow", sym: "**",
		f32: mk2(func(x, y float32) float32 { return float32(math.Pow(float64(x), float64(y))) })}
)

func ptr[T any](v T) *T { return &v }

func binaryOp(d *binaryDef, vjp func(g *Tensor, in []*Tensor, out *Tensor, p any) []*Tensor, save SaveMask) *Op {
	name := d.name[len("tensor."):]
	op := &Op{Name: lowerFirst(name), Impl: binaryImpl(d), VJP: vjp, Save: save}
	return op
}

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

func init() {
	addOp = binaryOp(addDef, func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		return []*Tensor{unbroadcast(g, in[0].shape), unbroadcast(g, in[1].shape)}
	}, 0)
	subOp = binaryOp(subDef, func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		return []*Tensor{unbroadcast(g, in[0].shape), unbroadcast(Neg(g), in[1].shape)}
	}, 0)
	mulOp = binaryOp(mulDef, func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
		return []*Tensor{unbroadcast(Mul(g, in[1]), in[0].shape), unbroadcast(Mul(g, in[0]), in[1].shape)}
	}, SaveAllInputs)
	divOp = binaryOp(divDef, func(g *Tensor, in []*Tensor, out *Tensor, _ any) []*Tensor {
		// d(a/b)/da = 1/b; d(a/b)/db = -a/b² = -out/b.
		ga := Div(g, in[1])
		return []*Tensor{unbroadcast(ga, in[0].shape), unbroadcast(Neg(Mul(ga, out)), in[1].shape)}
	}, SaveInputs(1)|SaveOutput)
	remOp = binaryOp(remDef, nil, 0)
	floorDivOp = binaryOp(floorDivDef, nil, 0)
	maxOp = binaryOp(maxDef, func(g *Tensor, in []*Tensor, out *Tensor, _ any) []*Tensor {
		return minMaxVJP(g, in, out)
	}, SaveAllInputs|SaveOutput)
	minOp = binaryOp(minDef, func(g *Tensor, in []*Tensor, out *Tensor, _ any) []*Tensor {
		return minMaxVJP(g, in, out)
	}, SaveAllInputs|SaveOutput)
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
	}, SaveAllInputs|SaveOutput)
}

// minMaxVJP sends the cotangent to the operand that was selected; ties split
// it evenly, as JAX does. Where the result is NaN neither operand equals it
// and both get 0 (not 0/0).
func minMaxVJP(g *Tensor, in []*Tensor, out *Tensor) []*Tensor {
	ma := AsType(Equal(in[0], out), Float32)
	mb := AsType(Equal(in[1], out), Float32)
	tot := Maximum(Add(ma, mb), Scalar(1)) // 1 or 2 (a tie), 1 where NaN
	return []*Tensor{
		unbroadcast(Mul(g, Div(ma, tot)), in[0].shape),
		unbroadcast(Mul(g, Div(mb, tot)), in[1].shape),
	}
}

func binary(d *binaryDef, op *Op, a, b *Tensor) *Tensor {
	shape := checkBinary(d, a, b)
	if d.intDiv && a.dtype == Int32 && numel(shape) > 0 && slices.Contains(b.i32, 0) {
		// Every element of b is read when the result is not empty.
		panic(fmt.Sprintf("%s: %s: integer division by zero", d.name, operands(d.sym, a, b)))
	}
	return Apply(op, &binaryParams{shape}, a, b)
}

// Add returns a + b elementwise, with NumPy broadcasting.
func Add(a, b *Tensor) *Tensor { return binary(addDef, addOp, a, b) }

// Sub returns a - b elementwise, with broadcasting.
func Sub(a, b *Tensor) *Tensor { return binary(subDef, subOp, a, b) }

// Mul returns a * b elementwise, with broadcasting.
func Mul(a, b *Tensor) *Tensor { return binary(mulDef, mulOp, a, b) }

// Div returns a / b elementwise, with broadcasting. For int32 it truncates
// toward zero (like Go and lax.div) and panics on division by zero.
func Div(a, b *Tensor) *Tensor { return binary(divDef, divOp, a, b) }

// Rem returns the remainder of a / b with the sign of a (Go's %, C's fmod).
// It is not differentiable.
func Rem(a, b *Tensor) *Tensor { return binary(remDef, remOp, a, b) }

// FloorDiv returns floor(a / b) elementwise (Python's //). It is not
// differentiable.
func FloorDiv(a, b *Tensor) *Tensor { return binary(floorDivDef, floorDivOp, a, b) }

// Maximum returns the elementwise maximum (NaN if either is NaN). Where
// a == b the gradient is split evenly.
func Maximum(a, b *Tensor) *Tensor { return binary(maxDef, maxOp, a, b) }

// Minimum returns the elementwise minimum.
func Minimum(a, b *Tensor) *Tensor { return binary(minDef, minOp, a, b) }

// Pow returns a raised to the power b elementwise (float32 only).
func Pow(a, b *Tensor) *Tensor { return binary(powDef, powOp, a, b) }

// AddScalar returns x + s for a float32 x.
func AddScalar(x *Tensor, s float32) *Tensor { return Add(x, Scalar(s)) }

// MulScalar returns x * s for a float32 x.
func MulScalar(x *Tensor, s float32) *Tensor { return Mul(x, Scalar(s)) }
