package tensor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gonox/gonox/internal/box"
)

// contiguousStrides returns row-major strides (in elements) for shape.
func contiguousStrides(shape []int) []int { return box.Strides(shape) }

// normAxis resolves a possibly negative axis of x, panicking with the op name
// if it is out of range.
func normAxis(op string, x *Tensor, axis int) int {
	r := len(x.shape)
	a := axis
	if a < 0 {
		a += r
	}
	if a < 0 || a >= r {
		panic(fmt.Sprintf("%s: axis %d out of range for %v", op, axis, x))
	}
	return a
}

// normAxes resolves a list of axes; an empty list means all axes. Duplicates
// panic. The result is sorted.
func normAxes(op string, x *Tensor, axes []int) []int {
	if len(axes) == 0 {
		all := make([]int, len(x.shape))
		for i := range all {
			all[i] = i
		}
		return all
	}
	out := make([]int, len(axes))
	for i, a := range axes {
		out[i] = normAxis(op, x, a)
	}
	slices.Sort(out)
	for i := 1; i < len(out); i++ {
		if out[i] == out[i-1] {
			panic(fmt.Sprintf("%s: axis %d repeated in %v for %v", op, out[i], axes, x))
		}
	}
	return out
}

// broadcastShapes returns the NumPy broadcast of the operand shapes or panics
// naming op and the operands.
func broadcastShapes(op, sym string, xs ...*Tensor) []int {
	r := 0
	for _, x := range xs {
		r = max(r, len(x.shape))
	}
	out := make([]int, r)
	for i := range out {
		out[i] = 1
	}
	for _, x := range xs {
		off := r - len(x.shape)
		for i, d := range x.shape {
			o := out[off+i]
			switch {
			case o == d || d == 1:
			case o == 1:
				out[off+i] = d
			default:
				panic(fmt.Sprintf("%s: %s: shapes do not broadcast (dim %d: %d vs %d)",
					op, operands(sym, xs...), i-len(x.shape), o, d))
			}
		}
	}
	return out
}

// operands renders operands for error messages: "f32[3,4] + f32[5]", or
// "f32[3,4], f32[5]" for sym "" or ",".
func operands(sym string, xs ...*Tensor) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = x.String()
	}
	if sym == "" || sym == "," {
		return strings.Join(parts, ", ")
	}
	return strings.Join(parts, " "+sym+" ")
}

// broadcastStrides returns the strides with which to read x when it is
// broadcast to shape out: 0 along broadcast dimensions.
func broadcastStrides(xshape, out []int) []int {
	st := make([]int, len(out))
	xs := contiguousStrides(xshape)
	off := len(out) - len(xshape)
	for i := range xshape {
		if xshape[i] != 1 || out[off+i] == 1 {
			st[off+i] = xs[i]
		}
	}
	return st
}

func sameShape(a, b []int) bool { return slices.Equal(a, b) }
