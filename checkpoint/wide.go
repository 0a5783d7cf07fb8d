package checkpoint

import (
	"encoding/binary"
	"math"

	"github.com/gonox/gonox/tensor"
)

// isWide reports whether dt is one of the dtypes safetensors files hold
// as they are and the native format does not: Float64, Int64, Uint8.
func isWide(dt tensor.DType) bool {
	return dt == tensor.Float64 || dt == tensor.Int64 || dt == tensor.Uint8
}

// appendWide appends elements lo to hi of the Float64, Int64 or Uint8 host
// tensor x to buf, little-endian, as safetensors stores F64, I64 and U8.
func appendWide(buf []byte, x *tensor.Tensor, lo, hi int) []byte {
	if hi <= lo {
		return buf
	}
	switch x.DType() {
	case tensor.Float64:
		for _, v := range x.RawFloat64()[lo:hi] {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
		}
	case tensor.Int64:
		for _, v := range x.RawInt64()[lo:hi] {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
		}
	case tensor.Uint8:
		buf = append(buf, x.RawUint8()[lo:hi]...)
	}
	return buf
}

// transpose2 writes the transpose of the r×c row-major matrix s into d.
func transpose2[T any](d, s []T, r, c int) {
	for i := range r {
		for j := range c {
			d[j*r+i] = s[i*c+j]
		}
	}
}
