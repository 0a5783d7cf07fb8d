package checkpoint

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gonox/gonox/tensor"
	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
)

// Each shard is stored as a sequence of independently compressed chunks of
// chunkBytes raw bytes (the last one shorter), each one zstd frame per
// byte plane. Before compression a chunk's elements are byte-shuffled: the
// least significant byte of every element first, then the next, and so on
// (HDF5's and Blosc's shuffle filter). Sign and exponent bytes of float32 weights vary little from one
// element to the next, mantissa bytes are nearly random; grouped together,
// the first compress well and the second cost zstd almost nothing.

// defaultChunkBytes is the raw size of a chunk: large enough for zstd to
// find the exponents' redundancy, small enough that restoring a block needs
// to decode little more than it uses, and that several goroutines can share
// the decoding of one shard.
const defaultChunkBytes = 1 << 20

// maxChunkBytes bounds the chunk size a manifest may declare, and so the
// memory one chunk may decode to.
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

// zstdDecoder returns the shared decoder. It refuses input that would
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
	case tensor.Float64:
		f := x.RawFloat64()
		if len(f) == 0 {
			return []uint32{}, nil
		}
		return unsafe.Slice((*uint32)(unsafe.Pointer(&f[0])), 2*len(f)), nil
	case tensor.Int64:
		f := x.RawInt64()
		if len(f) == 0 {
			return []uint32{}, nil
		}
		return unsafe.Slice((*uint32)(unsafe.Pointer(&f[0])), 2*len(f)), nil
	case tensor.Uint8:
		f := x.RawUint8()
		if len(f) == 0 {
			return nil, []byte{}
		}
		return nil, f
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

// encodeChunk shuffles and compresses one chunk of elements: words
// (4-byte elements; float says whether they are float32) or bytes (bool).
// scratch is a buffer of at least the chunk's raw size; the compressed
// chunk, a concatenation of zstd frames, is appended to out.
//
// Each byte plane of a shuffled chunk is its own zstd frame; zstd decodes
// concatenated frames as the concatenation of their contents, so a chunk
// still decodes in one call. Float32 planes are entropy-coded only (see
// entropyFrame); int32 and bool planes, where repeated runs are common
// (token ids, counters, masks), go through zstd's encoder.
func encodeChunk(out, scratch []byte, hs *huff0.Scratch, float bool, w []uint32, b []byte) []byte {
	enc := zstdEncoder()
	if w == nil {
		return enc.EncodeAll(b, out)
	}
	n := len(w)
	raw := scratch[:4*n]
	shuffle4(raw, w)
	for p := 0; p < 4; p++ {
		plane := raw[p*n : (p+1)*n]
		if float {
			out = entropyFrame(out, plane, hs)
		} else {
			out = enc.EncodeAll(plane, out)
		}
	}
	return out
}

// entropyFrame appends to out a zstd frame (RFC 8878) that holds src as
// Huffman-coded literals and no sequences: blocks of 64 KiB, each
// compressed with huff0 (the literals coder of klauspost/compress's zstd,
// whose output is zstd's literals section), stored raw when Huffman coding
// does not pay, or as an RLE block when every byte is the same.
//
// Why not zstd's encoder: the shuffled planes of float32 weights are either
// random (mantissa bytes) or a handful of distinct values (sign and
// exponent). On the latter zstd's fastest level finds a short match every
// few bytes and ran at about 60 MB/s for a ratio of 2.5 on this machine;
// entropy coding alone ran at about 450 MB/s for a ratio of 2.95, so a
// whole chunk compresses several times faster and slightly smaller (see
// BenchmarkCodec). The frames are ordinary zstd: the zstd decoder, or the
// zstd command, reads them (TestEntropyFrame checks both).
func entropyFrame(out, src []byte, hs *huff0.Scratch) []byte {
	out = append(out, 0x28, 0xb5, 0x2f, 0xfd) // magic number
	// Frame header descriptor: 4-byte Frame_Content_Size, single segment
	// (no window descriptor), no checksum, no dictionary.
	out = append(out, 2<<6|1<<5)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(src)))
	const blockSize = 64 << 10
	if len(src) == 0 {
		return appendBlockHeader(out, true, 0, 0)
	}
	for off := 0; off < len(src); off += blockSize {
		in := src[off:min(len(src), off+blockSize)]
		last := off+len(in) == len(src)
		var comp []byte
		var err error
		if len(in) >= 256 { // 4-stream literals need a few bytes per stream
			hs.Reuse = huff0.ReusePolicyNone
			comp, _, err = huff0.Compress4X(in, hs)
			// A compressed block may not be larger than the window, which
			// for a single-segment frame is the content size: huff0 can
			// return a table and streams no smaller than the input, and
			// such a block would be refused by every decoder.
			if err == nil && 5+len(comp)+1 >= len(in) {
				err = huff0.ErrIncompressible
			}
		} else {
			err = huff0.ErrIncompressible
		}
		switch {
		case err == huff0.ErrUseRLE:
			out = appendBlockHeader(out, last, 1, len(in))
			out = append(out, in[0])
		case err != nil:
			out = appendBlockHeader(out, last, 0, len(in))
			out = append(out, in...)
		default:
			// Compressed block: a literals section header for 4 Huffman
			// streams with 18-bit sizes (5 bytes), the literals, and a
			// sequences section of 0 sequences (one zero byte).
			out = appendBlockHeader(out, last, 2, 5+len(comp)+1)
			h := uint64(2) | 3<<2 | uint64(len(in))<<4 | uint64(len(comp))<<22
			out = append(out, byte(h), byte(h>>8), byte(h>>16), byte(h>>24), byte(h>>32))
			out = append(out, comp...)
			out = append(out, 0)
		}
	}
	return out
}

// appendBlockHeader appends a zstd block header: last-block flag, block
// type (0 raw, 1 RLE, 2 compressed) and size, 3 bytes little-endian.
func appendBlockHeader(out []byte, last bool, typ, size int) []byte {
	h := uint32(typ)<<1 | uint32(size)<<3
	if last {
		h |= 1
	}
	return append(out, byte(h), byte(h>>8), byte(h>>16))
}

// encodeChunkHalf narrows a chunk of float32 words to 16-bit storage s
// (AsBFloat16 or AsFloat16), shuffles the two bytes of each element into
// two planes (low bytes, then high bytes: sign, exponent and the top
// mantissa bits) and appends each plane as an entropy-coded frame.
// scratch holds at least 2*len(w) bytes.
func encodeChunkHalf(out, scratch []byte, hs *huff0.Scratch, s FloatStorage, w []uint32) []byte {
	n := len(w)
	lo, hi := scratch[:n:n], scratch[n:2*n:2*n]
	for i, v := range w {
		h := uint16(widen16Inverse(s, v))
		lo[i], hi[i] = byte(h), byte(h>>8)
	}
	out = entropyFrame(out, lo, hs)
	return entropyFrame(out, hi, hs)
}

// halves returns the storage of a bfloat16 or float16 host tensor, the
// 16-bit patterns, without copying.
func halves(x *tensor.Tensor) []uint16 {
	if x.Size() == 0 {
		return []uint16{}
	}
	return x.RawUint16()
}

// encodeChunk16 appends a chunk of 16-bit elements (a bfloat16 or float16
// leaf, stored as it is) in the layout encodeChunkHalf writes: a plane of
// low bytes and a plane of high bytes, each an entropy-coded frame.
// scratch holds at least 2*len(h) bytes.
func encodeChunk16(out, scratch []byte, hs *huff0.Scratch, h []uint16) []byte {
	n := len(h)
	lo, hi := scratch[:n:n], scratch[n:2*n:2*n]
	for i, v := range h {
		lo[i], hi[i] = byte(v), byte(v>>8)
	}
	out = entropyFrame(out, lo, hs)
	return entropyFrame(out, hi, hs)
}

// decodeChunk16 decompresses a chunk encodeChunk16 wrote into h, which has
// the chunk's element count, and returns scratch for reuse.
func decodeChunk16(frame, scratch []byte, h []uint16) ([]byte, error) {
	raw, err := zstdDecoder().DecodeAll(frame, scratch[:0])
	if err != nil {
		return scratch, fmt.Errorf("zstd: %w", err)
	}
	if len(raw) != 2*len(h) {
		return raw, fmt.Errorf("chunk decodes to %d bytes, want %d", len(raw), 2*len(h))
	}
	n := len(h)
	lo, hi := raw[:n:n], raw[n:2*n:2*n]
	for i := range h {
		h[i] = uint16(lo[i]) | uint16(hi[i])<<8
	}
	return raw, nil
}

// decodeChunk decompresses one chunk into scratch (which it may grow) and
// unshuffles it into w or b, which have the chunk's element count. It
// returns scratch for reuse. Bool chunks must hold only 0 and 1 bytes.
//
// With 16-bit storage s (AsBFloat16, AsFloat16) the chunk holds 2 bytes
// per element of w, in the planes encodeChunkHalf writes, and is widened.
func decodeChunk(frame, scratch []byte, s FloatStorage, w []uint32, b []byte) ([]byte, error) {
	want := len(b)
	if w != nil {
		want = s.size() * len(w)
	}
	raw, err := zstdDecoder().DecodeAll(frame, scratch[:0])
	if err != nil {
		return scratch, fmt.Errorf("zstd: %w", err)
	}
	if len(raw) != want {
		return raw, fmt.Errorf("chunk decodes to %d bytes, want %d", len(raw), want)
	}
	if w != nil && s.size() == 2 {
		n := len(w)
		lo, hi := raw[:n:n], raw[n:2*n:2*n]
		for i := range w {
			w[i] = widen16(s, uint16(lo[i])|uint16(hi[i])<<8)
		}
		return raw, nil
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
