package checkpoint

import (
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gonox/gonox/tensor"
	"github.com/klauspost/compress/zstd"
)

// Each shard is stored as a sequence of independent zstd frames, one per
// chunk of chunkBytes raw bytes (the last one shorter). Before compression a
// chunk's elements are byte-shuffled: the least significant byte of every
// element first, then the next, and so on (HDF5's and Blosc's shuffle
// filter). Sign and exponent bytes of float32 weights vary little from one
// element to the next, mantissa bytes are nearly random; grouped together,
// the first compress well and the second cost zstd almost nothing.

// defaultChunkBytes is the raw size of a frame: large enough for zstd to
// find the exponents' redundancy, small enough that restoring a block needs
// to decode little more than it uses, and that several goroutines can share
// the decoding of one shard.
const defaultChunkBytes = 1 << 20

// maxChunkBytes bounds the chunk size a manifest may declare, and so the
// memory one frame may decode to.
const maxChunkBytes = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum returns the CRC-32C of b, computed with the SSE4.2 (or ARMv8)
// instruction where the CPU has it.
func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

var (
	encOnce sync.Once
	encoder *zstd.Encoder
	decOnce sync.Once
	decoder *zstd.Decoder
)

// zstdEncoder returns the shared encoder. EncodeAll is safe for concurrent
// use; the encoder keeps up to GOMAXPROCS compression states. SpeedFastest
// was measured to compress shuffled float32 weights within 1% of
// SpeedDefault's ratio at 1.5 to 2 times the speed (see BenchmarkCodec).
func zstdEncoder() *zstd.Encoder {
	encOnce.Do(func() {
		var err error
		encoder, err = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderCRC(true))
		if err != nil {
			panic("checkpoint: zstd encoder: " + err.Error())
		}
	})
	return encoder
}

// zstdDecoder returns the shared decoder. It refuses frames that would
// decode to more than maxChunkBytes, so a hostile frame cannot make a
// restore allocate without bound.
func zstdDecoder() *zstd.Decoder {
	decOnce.Do(func() {
		var err error
		decoder, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderMaxMemory(maxChunkBytes),
			zstd.WithDecoderLowmem(false))
		if err != nil {
			panic("checkpoint: zstd decoder: " + err.Error())
		}
	})
	return decoder
}

// words returns the storage of a host tensor as 32-bit words (float32 and
// int32) or bytes (bool), without copying.
func words(x *tensor.Tensor) (w []uint32, b []byte) {
	switch x.DType() {
	case tensor.Float32:
		f := x.RawFloat32()
		if len(f) == 0 {
			return []uint32{}, nil
		}
		return unsafe.Slice((*uint32)(unsafe.Pointer(&f[0])), len(f)), nil
	case tensor.Int32:
		f := x.RawInt32()
		if len(f) == 0 {
			return []uint32{}, nil
		}
		return unsafe.Slice((*uint32)(unsafe.Pointer(&f[0])), len(f)), nil
	case tensor.Bool:
		f := x.RawBool()
		if len(f) == 0 {
			return nil, []byte{}
		}
		return nil, unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f))
	}
	panic(fmt.Sprintf("checkpoint: unsupported dtype %v", x.DType()))
}

// shuffle4 writes the bytes of src grouped by significance into dst, which
// has 4*len(src) bytes: the least significant bytes of all words, then the
// second, third and most significant ones. The result is the same on every
// platform, whatever its byte order.
func shuffle4(dst []byte, src []uint32) {
	n := len(src)
	b0, b1, b2, b3 := dst[:n:n], dst[n:2*n:2*n], dst[2*n:3*n:3*n], dst[3*n:4*n:4*n]
	for i, v := range src {
		b0[i] = byte(v)
		b1[i] = byte(v >> 8)
		b2[i] = byte(v >> 16)
		b3[i] = byte(v >> 24)
	}
}

// unshuffle4 undoes shuffle4: src has 4*len(dst) bytes.
func unshuffle4(dst []uint32, src []byte) {
	n := len(dst)
	b0, b1, b2, b3 := src[:n:n], src[n:2*n:2*n], src[2*n:3*n:3*n], src[3*n:4*n:4*n]
	for i := range dst {
		dst[i] = uint32(b0[i]) | uint32(b1[i])<<8 | uint32(b2[i])<<16 | uint32(b3[i])<<24
	}
}

// encodeChunk shuffles and compresses one chunk: either words (4-byte
// elements) or bytes (1-byte elements, stored as they are). scratch is a
// buffer of at least the chunk's raw size; the frame is appended to out.
func encodeChunk(out, scratch []byte, w []uint32, b []byte) []byte {
	raw := b
	if w != nil {
		raw = scratch[:4*len(w)]
		shuffle4(raw, w)
	}
	return zstdEncoder().EncodeAll(raw, out)
}

// decodeChunk decompresses one frame into scratch (which it may grow) and
// unshuffles it into w or b, which have the chunk's element count. It
// returns scratch for reuse. Bool chunks must hold only 0 and 1 bytes.
func decodeChunk(frame, scratch []byte, w []uint32, b []byte) ([]byte, error) {
	want := len(b)
	if w != nil {
		want = 4 * len(w)
	}
	raw, err := zstdDecoder().DecodeAll(frame, scratch[:0])
	if err != nil {
		return scratch, fmt.Errorf("zstd: %w", err)
	}
	if len(raw) != want {
		return raw, fmt.Errorf("frame decodes to %d bytes, want %d", len(raw), want)
	}
	if w != nil {
		unshuffle4(w, raw)
		return raw, nil
	}
	for i, v := range raw {
		if v > 1 {
			return raw, fmt.Errorf("bool element %d holds byte %d", i, v)
		}
	}
	copy(b, raw)
	return raw, nil
}
