package checkpoint

import (
	"encoding/binary"
	"fmt"
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

// wordsPerElem returns the 32-bit words of one element of a dtype that
// words stores as words: 2 for Float64 and Int64 (two little-endian words
// each, as the host stores them), 1 for the others.
func wordsPerElem(dt tensor.DType) int {
	if dt.Size() == 8 {
		return 2
	}
	return 1
}

// decodeBytes decompresses a chunk of bytes (Uint8 elements, which take
// any value, unlike Bool's) into b and returns scratch for reuse.
func decodeBytes(frame, scratch, b []byte) ([]byte, error) {
	raw, err := zstdDecoder().DecodeAll(frame, scratch[:0])
	if err != nil {
		return scratch, fmt.Errorf("zstd: %w", err)
	}
	if len(raw) != len(b) {
		return raw, fmt.Errorf("chunk decodes to %d bytes, want %d", len(raw), len(b))
	}
	copy(b, raw)
	return raw, nil
}
