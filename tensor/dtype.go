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
	// Float64 is IEEE-754 double precision, a compute type of its own for
	// scientific code and tight gradient checks (JAX with jax_enable_x64):
	// ops that declare it (Traits.Wide) compute and accumulate in float64;
	// the others panic naming the op (see dtype_wide.go).
	Float64
	// Int64 holds indices of large index spaces; index ops, comparisons
	// and integer arithmetic take it like Int32.
	Int64
	// Uint8 is a storage type for bytes (image datasets): construct,
	// move, compare and convert it; compute on it after AsType.
	Uint8
)

// String returns the JAX name of the type: "float32", "int32", "bool",
// "bfloat16", "float16", "float64", "int64" or "uint8".
func (d DType) String() string {
	switch d {
	case Float64:
		return "float64"
	case Int64:
		return "int64"
	case Uint8:
		return "uint8"
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
// "bool", "bf16", "f16", "f64", "i64" or "u8".
func (d DType) Abbrev() string {
	switch d {
	case Float64:
		return "f64"
	case Int64:
		return "i64"
	case Uint8:
		return "u8"
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
	case Bool, Uint8:
		return 1
	case BFloat16, Float16:
		return 2
	case Float64, Int64:
		return 8
	}
	return 0
}

// IsFloat reports whether d is a floating-point ("inexact") type, the kind
// that carries gradients: Float32, BFloat16, Float16 or Float64.
func (d DType) IsFloat() bool { return d == Float32 || d == BFloat16 || d == Float16 || d == Float64 }

// IsInt reports whether d is an integer type: Int32, Int64 or Uint8.
func (d DType) IsInt() bool { return d == Int32 || d == Int64 || d == Uint8 }

// valid reports whether d is one of the defined types.
func (d DType) valid() bool { return d >= Float32 && d <= Uint8 }
