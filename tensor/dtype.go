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
	// BFloat16 is bfloat16 (8 exponent bits like float32, 8 bits of
	// precision), a storage type: ops compute in float32 and round on
	// store (see dtype_half.go and Convert).
	BFloat16
	// Float16 is IEEE-754 half precision (5 exponent bits, 11 bits of
	// precision, largest finite value 65504), a storage type like BFloat16.
	Float16
)

// String returns the JAX name of the type: "float32", "int32", "bool",
// "bfloat16" or "float16".
func (d DType) String() string {
	switch d {
	case BFloat16:
		return "bfloat16"
	case Float16:
		return "float16"
	case Float32:
		return "float32"
	case Int32:
		return "int32"
	case Bool:
		return "bool"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Abbrev returns the short name used in type notation: "f32", "i32",
// "bool", "bf16" or "f16".
func (d DType) Abbrev() string {
	switch d {
	case BFloat16:
		return "bf16"
	case Float16:
		return "f16"
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
	case BFloat16, Float16:
		return 2
	}
	return 0
}

// IsFloat reports whether d is a floating-point ("inexact") type, the kind
// that carries gradients: Float32, BFloat16 or Float16.
func (d DType) IsFloat() bool { return d == Float32 || d == BFloat16 || d == Float16 }

// valid reports whether d is one of the defined types.
func (d DType) valid() bool { return d >= Float32 && d <= Float16 }
