package shard

import (
	"unsafe"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/tensor"
)

// Collectives on bfloat16 and float16 blocks: see "bfloat16 and
// float16" in doc.go. tensor.Op.NativeHalf keeps Apply from widening
// their blocks; the sums widen here.

// isHalf reports whether dt is bfloat16 or float16.
func isHalf(dt tensor.DType) bool { return dt == tensor.BFloat16 || dt == tensor.Float16 }

// widenHalf writes the 16-bit elements src of dtype dt to dst as float32.
func widenHalf(dt tensor.DType, dst []float32, src []uint16) {
	if len(src) == 0 {
		return
	}
	if dt == tensor.BFloat16 {
		half.ToFloat32sBF(dst, unsafe.Slice((*half.BFloat16)(unsafe.Pointer(&src[0])), len(src)))
	} else {
		half.ToFloat32s(dst, unsafe.Slice((*half.Float16)(unsafe.Pointer(&src[0])), len(src)))
	}
}

// narrowHalf rounds src to dtype dt into dst (to nearest, ties to even).
func narrowHalf(dt tensor.DType, dst []uint16, src []float32) {
	if len(src) == 0 {
		return
	}
	if dt == tensor.BFloat16 {
		half.FromFloat32sBF(unsafe.Slice((*half.BFloat16)(unsafe.Pointer(&dst[0])), len(dst)), src)
	} else {
		half.FromFloat32s(unsafe.Slice((*half.Float16)(unsafe.Pointer(&dst[0])), len(dst)), src)
	}
}
