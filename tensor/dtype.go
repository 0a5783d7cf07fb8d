package tensor

import "fmt"

// DType is the element type of a tensor.
type DType uint8

// The element types. The zero DType is invalid, so a zero Tensor is easy to spot.
const (
	// Float32 is IEEE-754 single precision, the type of parameters and activations.
	Float32 DType = iota + 1
	// Int32 holds ids, indices and counts.
	Int32
	// Bool holds masks, the results of comparisons.
	Bool
)

// String returns the JAX name of the type: "float32", "int32" or "bool".
func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Int32:
		return "int32"
	case Bool:
		return "bool"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Abbrev returns the short name used in type notation: "f32", "i32" or "bool".
func (d DType) Abbrev() string {
	switch d {
	case Float32:
		return "f32"
	case Int32:
		return "i32"
	case Bool:
		return "bool"
	}
	return d.String()
}

// Size returns the number of bytes of one element.
func (d DType) Size() int {
	switch d {
	case Float32, Int32:
		return 4
	case Bool:
		return 1
	}
	return 0
}

// IsFloat reports whether d is a floating-point ("inexact") type, the kind
// that carries gradients.
func (d DType) IsFloat() bool { return d == Float32 }

// valid reports whether d is one of the defined types.
func (d DType) valid() bool { return d >= Float32 && d <= Bool }
