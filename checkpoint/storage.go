package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/tensor"
)

// FloatStorage is the element format float32 leaves are stored in, in a
// checkpoint (StoreFloatsAs) or a safetensors file (ExportFloatsAs).
// Narrowing rounds to nearest, ties to even; NaN stays NaN and ±Inf
// stays ±Inf; float16 overflows to ±Inf beyond 65504 and keeps small
// values as subnormals. Reading widens, which is exact, so a float32 leaf
// restored from bfloat16 storage holds the bfloat16-rounded values
// exactly.
type FloatStorage uint8

const (
	// AsFloat32 stores float32 as it is, bit for bit (the default).
	AsFloat32 FloatStorage = iota
	// AsBFloat16 stores the upper half of the float32 after rounding (8
	// exponent bits, 7 mantissa bits): half the bytes, the range of
	// float32, about 3 significant decimal digits.
	AsBFloat16
	// AsFloat16 stores IEEE 754 binary16 (5 exponent, 10 mantissa bits):
	// half the bytes, about 3.3 digits, range ±65504.
	AsFloat16
	// AsFloat64 widens to float64 (exact); safetensors files only.
	AsFloat64
)

// String returns the safetensors name of the format: "F32", "BF16",
// "F16" or "F64".
func (s FloatStorage) String() string {
	switch s {
	case AsFloat32:
		return "F32"
	case AsBFloat16:
		return "BF16"
	case AsFloat16:
		return "F16"
	case AsFloat64:
		return "F64"
	}
	return fmt.Sprintf("FloatStorage(%d)", uint8(s))
}

// size returns the bytes of one stored element, or 0 for an unknown s.
func (s FloatStorage) size() int {
	switch s {
	case AsFloat32:
		return 4
	case AsBFloat16, AsFloat16:
		return 2
	case AsFloat64:
		return 8
	}
	return 0
}

// manifestName is the name a checkpoint manifest records the storage
// under ("" for float32, which is not recorded).
func (s FloatStorage) manifestName() string {
	switch s {
	case AsBFloat16:
		return "bfloat16"
	case AsFloat16:
		return "float16"
	}
	return ""
}

var storageNames = map[string]FloatStorage{"bfloat16": AsBFloat16, "float16": AsFloat16}

// appendStored appends the float32 words ws (bit patterns) in format s,
// little-endian.
func appendStored(buf []byte, s FloatStorage, ws []uint32) []byte {
	switch s {
	case AsFloat32:
		for _, v := range ws {
			buf = binary.LittleEndian.AppendUint32(buf, v)
		}
	case AsBFloat16:
		for _, v := range ws {
			buf = binary.LittleEndian.AppendUint16(buf, uint16(half.FromFloat32BF(math.Float32frombits(v))))
		}
	case AsFloat16:
		for _, v := range ws {
			buf = binary.LittleEndian.AppendUint16(buf, uint16(half.FromFloat32(math.Float32frombits(v))))
		}
	case AsFloat64:
		for _, v := range ws {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(float64(math.Float32frombits(v))))
		}
	default:
		panic(fmt.Sprintf("checkpoint: unknown %v", s))
	}
	return buf
}

// widen16Inverse returns the 16-bit pattern of float32 bits v rounded to
// storage s (AsBFloat16 or AsFloat16).
func widen16Inverse(s FloatStorage, v uint32) uint16 {
	if s == AsBFloat16 {
		return uint16(half.FromFloat32BF(math.Float32frombits(v)))
	}
	return uint16(half.FromFloat32(math.Float32frombits(v)))
}

// widen16 returns the float32 bit pattern of a stored 16-bit element.
func widen16(s FloatStorage, v uint16) uint32 {
	if s == AsBFloat16 {
		return uint32(v) << 16
	}
	return math.Float32bits(half.Float16(v).Float32())
}

// maxRoundsBelowInf is the float64 midpoint between the largest float32
// and 2^128: with ties to even (the largest float32 has an odd mantissa)
// it and every larger magnitude round to infinity.
const maxRoundsBelowInf = 0x1.ffffffp127

// float64To32 rounds a float64 to the nearest float32, ties to even,
// magnitudes from maxRoundsBelowInf up to ±Inf, tiny ones to float32
// subnormals or ±0, NaN to a quiet NaN. Go's conversion rounds that way
// for values in range; overflow is made explicit because the language
// leaves it to the implementation.
func float64To32(v float64) float32 {
	if v >= maxRoundsBelowInf {
		return float32(math.Inf(1))
	}
	if v <= -maxRoundsBelowInf {
		return float32(math.Inf(-1))
	}
	if v != v {
		return math.Float32frombits(uint32(math.Float64bits(v)>>32)&0x80000000 | 0x7fc00000 | uint32(math.Float64bits(v)>>29)&0x3fffff)
	}
	return float32(v)
}

// converter returns how elements stored in the safetensors dtype file
// become elements of a target of dtype target: the stored size and a
// function writing the elements of src (little-endian, a whole number of
// them) into the target's storage from element at on. ok is false for a
// conversion this package does not do. This is the one place that knows
// which file dtypes go into which tensor dtypes.
func converter(file string, target tensor.DType) (size int, conv func(y *tensor.Tensor, at int, src []byte) error, ok bool) {
	switch target {
	case tensor.Float32:
		switch file {
		case "F32":
			return 4, func(y *tensor.Tensor, at int, src []byte) error {
				dst := y.RawFloat32()[at:]
				for i := range len(src) / 4 {
					dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
				}
				return nil
			}, true
		case "BF16", "F16":
			s := AsBFloat16
			if file == "F16" {
				s = AsFloat16
			}
			return 2, func(y *tensor.Tensor, at int, src []byte) error {
				dst := y.RawFloat32()[at:]
				for i := range len(src) / 2 {
					dst[i] = math.Float32frombits(widen16(s, binary.LittleEndian.Uint16(src[2*i:])))
				}
				return nil
			}, true
		case "F64":
			return 8, func(y *tensor.Tensor, at int, src []byte) error {
				dst := y.RawFloat32()[at:]
				for i := range len(src) / 8 {
					dst[i] = float64To32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
				}
				return nil
			}, true
		}
	case tensor.BFloat16, tensor.Float16:
		to := AsBFloat16
		if target == tensor.Float16 {
			to = AsFloat16
		}
		switch file {
		case to.String():
			// The leaf's own format: a copy.
			return 2, func(y *tensor.Tensor, at int, src []byte) error {
				dst := y.RawUint16()[at:]
				for i := range len(src) / 2 {
					dst[i] = binary.LittleEndian.Uint16(src[2*i:])
				}
				return nil
			}, true
		case "F32":
			return 4, func(y *tensor.Tensor, at int, src []byte) error {
				dst := y.RawUint16()[at:]
				for i := range len(src) / 4 {
					dst[i] = widen16Inverse(to, binary.LittleEndian.Uint32(src[4*i:]))
				}
				return nil
			}, true
		case "BF16", "F16":
			// The other 16-bit format: widened exactly, rounded once.
			from := AsBFloat16
			if file == "F16" {
				from = AsFloat16
			}
			return 2, func(y *tensor.Tensor, at int, src []byte) error {
				dst := y.RawUint16()[at:]
				for i := range len(src) / 2 {
					dst[i] = widen16Inverse(to, widen16(from, binary.LittleEndian.Uint16(src[2*i:])))
				}
				return nil
			}, true
		}
	case tensor.Int32:
		if file == "I32" {
			return 4, func(y *tensor.Tensor, at int, src []byte) error {
				dst := y.RawInt32()[at:]
				for i := range len(src) / 4 {
					dst[i] = int32(binary.LittleEndian.Uint32(src[4*i:]))
				}
				return nil
			}, true
		}
	case tensor.Float64:
		switch file {
		case "F64":
			return 8, func(y *tensor.Tensor, at int, src []byte) error {
				dst := y.RawFloat64()[at:]
				for i := range len(src) / 8 {
					dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:]))
				}
				return nil
			}, true
		case "F32":
			return 4, func(y *tensor.Tensor, at int, src []byte) error {
				dst := y.RawFloat64()[at:]
				for i := range len(src) / 4 {
					dst[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:])))
				}
				return nil
			}, true
		}
	case tensor.Int64:
		if file == "I64" {
			return 8, func(y *tensor.Tensor, at int, src []byte) error {
				dst := y.RawInt64()[at:]
				for i := range len(src) / 8 {
					dst[i] = int64(binary.LittleEndian.Uint64(src[8*i:]))
				}
				return nil
			}, true
		}
	case tensor.Uint8:
		if file == "U8" {
			return 1, func(y *tensor.Tensor, at int, src []byte) error {
				copy(y.RawUint8()[at:], src)
				return nil
			}, true
		}
	case tensor.Bool:
		if file == "BOOL" {
			return 1, func(y *tensor.Tensor, at int, src []byte) error {
				dst := y.RawBool()[at:]
				for i, v := range src {
					if v > 1 {
						return fmt.Errorf("bool element %d holds byte %d", at+i, v)
					}
					dst[i] = v == 1
				}
				return nil
			}, true
		}
	}
	return 0, nil, false
}

// supportedConversions is said when a conversion is not supported.
const supportedConversions = "F32, BF16, F16 and F64 are read into float32, F32, BF16 and F16 into bfloat16 and float16, F64 and F32 into float64, I32 into int32, I64 into int64, U8 into uint8, BOOL into bool"

// isHalf reports whether dt is one of the 16-bit float dtypes.
func isHalf(dt tensor.DType) bool { return dt == tensor.BFloat16 || dt == tensor.Float16 }

// storageOf returns the 16-bit storage of a half dtype.
func storageOf(dt tensor.DType) FloatStorage {
	if dt == tensor.Float16 {
		return AsFloat16
	}
	return AsBFloat16
}
