package tensor

import (
	"fmt"
	"math"
	"strconv"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/tensor/internal/vec"
)

// BFloat16 and Float16: storage types with float32 compute.
//
// A bf16 or f16 tensor stores 16-bit values (Tensor.u16()). Ops compute on
// them in float32 and round on store, in one place: Apply (callImpl in
// apply.go) widens the half operands of an op to float32, runs the op's
// float32 implementation and rounds its float32 results to the operands'
// dtype (round to nearest even; NaN and ±Inf kept; float16 overflow gives
// ±Inf). So every reduction (Sum, Mean, softmax's normaliser, the
// contraction of a matmul, the unbroadcast of a gradient) accumulates in
// float32 or float64 and rounds once. The backward pass does the same for
// the VJPs (callVJP): cotangents are widened, the float32 VJP runs, and
// each input's cotangent is rounded to that input's dtype, so a bf16 value
// gets a bf16 cotangent, as in JAX. An op chooses this with its
// Traits.Half (WidenHalf, the default, or NativeHalf).
//
// The result dtype of such an op: the operands' dtype when every float
// operand has the same half dtype; float32 when float operands of
// different dtypes meet (JAX's promotion of bf16 with f16 or f32; most
// public ops reject mixed dtypes before that, as they reject float32 with
// int32). Non-float results (comparisons, argmax) keep their dtype.
//
// Ops with half kernels of their own declare NativeHalf and skip the
// widening: Convert, and matmul (bfloat16 operands run the AVX-512 BF16
// gemm where the CPU has it; see matmul_bf16.go).
//
// Cost of the generic path: two conversions per operand and one per
// result, memory-bound, at 40–80 GB/s per core with the vector kernels
// (BenchmarkConvert in tensor/internal/vec); BenchmarkHalfElementwise
// measures it against float32.

// isHalf reports whether d is BFloat16 or Float16.
func (d DType) isHalf() bool { return d == BFloat16 || d == Float16 }

// halfAt returns element i of a half tensor, widened.
func halfAt(t *Tensor, i int) float32 {
	if t.dtype == BFloat16 {
		return half.BFloat16(t.u16()[i]).Float32()
	}
	return half.Float16(t.u16()[i]).Float32()
}

// roundHalf rounds v to dt (BFloat16 or Float16), returning its bits.
func roundHalf(dt DType, v float32) uint16 {
	if dt == BFloat16 {
		return uint16(half.FromFloat32BF(v))
	}
	return uint16(half.FromFloat32(v))
}

// fillHalf sets every element of the half tensor t to v, rounded.
func fillHalf(t *Tensor, v float64) {
	h := roundHalf(t.dtype, float32(v))
	for i := range t.u16() {
		t.u16()[i] = h
	}
}

// formatHalf prints element i of a half tensor. With no precision and %g
// it prints the shortest decimal that reads back as the same half value
// (bf16 0.1 prints as 0.1, not as the float32 0.10009766).
func formatHalf(t *Tensor, i int, verb byte, prec int) string {
	v := halfAt(t, i)
	f := float64(v)
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	if prec >= 0 || verb != 'g' {
		return strconv.FormatFloat(f, verb, prec, 32)
	}
	want := t.u16()[i]
	for p := 1; p < 9; p++ {
		r, err := strconv.ParseFloat(strconv.FormatFloat(f, 'e', p-1, 32), 64)
		if err == nil && roundHalf(t.dtype, float32(r)) == want {
			// r is the shortest decimal: print it as %g prints a float
			// (300, not 3e+02).
			return strconv.FormatFloat(r, 'g', -1, 64)
		}
	}
	return strconv.FormatFloat(f, 'g', -1, 32)
}

// FromBits16 returns a tensor of dtype dt (BFloat16 or Float16) holding a
// copy of bits, the raw 16-bit patterns (as stored in safetensors and
// PyTorch files). With no shape the tensor is 1-D.
func FromBits16(dt DType, bits []uint16, shape ...int) *Tensor {
	if !dt.isHalf() {
		panic(fmt.Sprintf("tensor.FromBits16: dtype %v is not bfloat16 or float16", dt))
	}
	return hostTensor("tensor.FromBits16", dt, raw(append([]uint16{}, bits...)), shape)
}

// Bits16 returns a copy of the raw 16-bit patterns of a bfloat16 or
// float16 tensor. A sharded tensor is gathered first.
func (t *Tensor) Bits16() []uint16 {
	if !t.dtype.isHalf() {
		panic(fmt.Sprintf("Tensor.Bits16: %v is %v, want bfloat16 or float16", t, t.dtype))
	}
	return append([]uint16(nil), t.host("Tensor.Bits16").u16()...)
}

// RawUint16 returns the storage of a bfloat16 or float16 host tensor
// without copying. The slice is read-only (see RawFloat32).
func (t *Tensor) RawUint16() []uint16 {
	if !t.dtype.isHalf() {
		panic(fmt.Sprintf("Tensor.RawUint16: %v is %v, want bfloat16 or float16", t, t.dtype))
	}
	t.mustHost("Tensor.RawUint16")
	t.mustHaveData("Tensor.RawUint16")
	t.pin()
	return t.u16()
}

// widenInto writes the half tensor x, widened, into dst.
func widenInto(dst []float32, x *Tensor) {
	conv := vec.F32FromBF16
	if x.dtype == Float16 {
		conv = vec.F32FromF16
	}
	src := x.u16()
	if serial(len(dst)*costCheap, x.local() != nil) {
		conv(dst, src)
		return
	}
	parallelFor(len(dst), costCheap, 16, false, func(lo, hi int) { conv(dst[lo:hi], src[lo:hi]) })
}

// narrowInto rounds src into dst, the storage of a tensor of dtype dt.
func narrowInto(dst []uint16, dt DType, src []float32, local bool) {
	conv := vec.BF16FromF32
	if dt == Float16 {
		conv = vec.F16FromF32
	}
	if serial(len(dst)*costCheap, local) {
		conv(dst, src)
		return
	}
	parallelFor(len(dst), costCheap, 16, false, func(lo, hi int) { conv(dst[lo:hi], src[lo:hi]) })
}

// WidenBits16 writes the bfloat16 or float16 (dt) bit patterns src to dst
// as float32, exactly, with Convert's vector kernels, on the calling
// goroutine: for packages that move half data and compute on it in
// float32 (package shard's sums). It panics unless dt is a half dtype and
// the lengths are equal.
func WidenBits16(dst []float32, dt DType, src []uint16) {
	if !dt.isHalf() || len(dst) != len(src) {
		panic(fmt.Sprintf("tensor.WidenBits16: %d float32 from %d %v", len(dst), len(src), dt))
	}
	if dt == BFloat16 {
		vec.F32FromBF16(dst, src)
	} else {
		vec.F32FromF16(dst, src)
	}
}

// RoundBits16 rounds src to dt (bfloat16 or float16) into dst as Convert
// does (to nearest, ties to even, NaN kept), on the calling goroutine. It
// panics unless dt is a half dtype and the lengths are equal.
func RoundBits16(dst []uint16, dt DType, src []float32) {
	if !dt.isHalf() || len(dst) != len(src) {
		panic(fmt.Sprintf("tensor.RoundBits16: %d %v from %d float32", len(dst), dt, len(src)))
	}
	if dt == BFloat16 {
		vec.BF16FromF32(dst, src)
	} else {
		vec.F16FromF32(dst, src)
	}
}

// widen returns the half host tensor x as a new float32 tensor with the
// same block mark.
func widen(x *Tensor) *Tensor {
	out := newOutUninit(Float32, x.shape)
	widenInto(out.f32(), x)
	out.ext = x.localExt()
	return out
}

// narrow returns the float32 host tensor x rounded to dt.
func narrow(x *Tensor, dt DType) *Tensor {
	out := newOutUninit(dt, x.shape) // every element is written
	narrowInto(out.u16(), dt, x.f32(), x.local() != nil)
	out.ext = x.localExt()
	return out
}

var convertOp *Op

func init() {
	convertOp = &Op{
		Name:     "convert",
		Sharding: ShardingRule{Family: ShardElementwise},
		Impl: func(in []*Tensor, p any) *Tensor {
			x, dt := in[0], p.(DType)
			out := convertFloat(x, dt)
			out.ext = x.localExt()
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{Convert(g, in[0].dtype)}
		},
		JVP:    linearJVP(&convertOp),
		Batch:  sameOpBatch(&convertOp),
		Traits: Traits{Half: NativeHalf, Types: TypesFloat64}, // its own conversion kernels
	}
}

// Convert returns x converted to the floating-point dtype dt (Float32,
// Float64, BFloat16 or Float16), like JAX's lax.convert_element_type.
// Float64 to a half dtype rounds through float32 (twice). Narrowing
// rounds to nearest, ties to even; NaN stays NaN (top payload bits kept),
// ±Inf stays ±Inf, values beyond float16's range become ±Inf and tiny
// ones subnormals or ±0. Widening is exact. It returns x itself when x
// already has dtype dt. Convert is differentiable: the cotangent is
// converted back to x's dtype. Use AsType for conversions to and from
// integers and booleans.
func Convert(x *Tensor, dt DType) *Tensor {
	checkNil("tensor.Convert", "x", x)
	if !x.dtype.IsFloat() || !dt.IsFloat() {
		panic(fmt.Sprintf("tensor.Convert: %v to %v: both dtypes must be float32, float64, bfloat16 or float16 (use tensor.AsType)", x, dt))
	}
	if x.dtype == dt {
		return x
	}
	if x.layout() != nil && x.node == nil {
		return x.layout().MapBlocks(x, func(b *Tensor) *Tensor { return Convert(b, dt) })
	}
	// A traced placed tensor goes through Apply, which records the node
	// (MapBlocks would cut the gradient) and hands the blockwise
	// conversion to the placer: a sharded float32 parameter is converted
	// shard by shard, before any gather.
	return Apply(convertOp, dt, x)
}

// sameFloat reports whether a and b are floats of one dtype.
func sameFloat(a, b *Tensor) bool { return a.dtype.IsFloat() && a.dtype == b.dtype }

// floatMismatch returns the panic message for operands that are not
// floats of one dtype: head followed by want if one is not a float at
// all, or by the advice to convert if both are floats of different types.
func floatMismatch(head, want string, a, b *Tensor) string {
	if a.dtype.IsFloat() && b.dtype.IsFloat() {
		return head + ": dtypes differ; convert one with tensor.Convert"
	}
	return head + ": " + want
}

// mustFloat panics, naming op, if t is not a float tensor.
func (t *Tensor) mustFloat(op string) {
	if !t.dtype.IsFloat() {
		panic(fmt.Sprintf("%s: %v is %v, want a float dtype (float32, float64, bfloat16, float16)", op, t, t.dtype))
	}
}

// weakScalars gives a float32 scalar (rank 0) operand of a binary op the
// dtype of a bfloat16, float16 or float64 other operand, as JAX does with
// a Python scalar: x·Scalar(0.5) on a bf16 x is bf16, on an f64 x f64;
// an int32 scalar (ScalarInt) next to an int64 operand is int64. (A differentiated scalar gets
// its cotangent in float32 through Convert.) Any other pair is returned
// as it is.
func weakScalars(a, b *Tensor) (*Tensor, *Tensor) {
	switch {
	case b.dtype == Float32 && len(b.shape) == 0 && a.dtype == Float64:
		return a, Convert(b, Float64)
	case a.dtype == Float32 && len(a.shape) == 0 && b.dtype == Float64:
		return Convert(a, Float64), b
	case b.dtype == Int32 && len(b.shape) == 0 && a.dtype == Int64:
		return a, AsType(b, Int64)
	case a.dtype == Int32 && len(a.shape) == 0 && b.dtype == Int64:
		return AsType(a, Int64), b
	case b.dtype == Float32 && len(b.shape) == 0 && a.dtype.isHalf():
		return a, Convert(b, a.dtype)
	case a.dtype == Float32 && len(a.shape) == 0 && b.dtype.isHalf():
		return Convert(a, b.dtype), b
	}
	return a, b
}

// WrapUint16 returns a tensor of dtype dt (BFloat16 or Float16) that uses
// bits as its storage, without copying (see WrapFloat32).
func WrapUint16(dt DType, bits []uint16, shape ...int) *Tensor {
	if !dt.isHalf() {
		panic(fmt.Sprintf("tensor.WrapUint16: dtype %v is not bfloat16 or float16", dt))
	}
	if bits == nil {
		bits = []uint16{}
	}
	return hostTensor("tensor.WrapUint16", dt, raw(bits), shape)
}
