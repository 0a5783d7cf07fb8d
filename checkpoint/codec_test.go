package checkpoint

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/gonox/gonox/tensor"
	"github.com/klauspost/compress/huff0"
	"github.com/stretchr/testify/require"
)

func TestShuffle(t *testing.T) {
	// Bytes grouped by significance: all least significant bytes first.
	src := []uint32{0x04030201, 0x08070605, 0x0c0b0a09}
	dst := make([]byte, 12)
	shuffle4(dst, src)
	require.Equal(t, []byte{1, 5, 9, 2, 6, 10, 3, 7, 11, 4, 8, 12}, dst)
	back := make([]uint32, 3)
	unshuffle4(back, dst)
	require.Equal(t, src, back)
}

func TestEntropyFrame(t *testing.T) {
	w, _ := words(tensor.MulScalar(tensor.Normal(tensor.NewKey(3), 1<<18), 0.02))
	shuffled := make([]byte, 4*len(w))
	shuffle4(shuffled, w)
	exponents := shuffled[3*len(w):]
	// Bytes just compressible enough for huff0 to return a table and
	// streams, but not smaller than the input once the block headers are
	// added: such a block must be stored raw, or no decoder accepts it.
	barely := make([]byte, 8192)
	r := rand.New(rand.NewPCG(8192, 34))
	for i := range barely {
		if r.Float64() >= 0.017 {
			barely[i] = byte(r.IntN(256))
		}
	}
	cases := []struct {
		name string
		src  []byte
	}{
		{"empty", []byte{}},
		{"one byte", []byte{7}},
		{"tiny", []byte("abcabcabc")},
		{"constant (RLE)", bytes.Repeat([]byte{0x3c}, 100000)},
		{"random mantissas (raw)", shuffled[:len(w)]},
		{"exponents (huffman)", exponents},
		{"exactly one block", exponents[:64<<10]},
		{"one block and a byte", exponents[:64<<10+1]},
		{"short last block", exponents[:64<<10+200]},
		{"barely compressible (raw)", barely},
	}
	zstdCmd, _ := exec.LookPath("zstd")
	var hs huff0.Scratch
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frame := entropyFrame(nil, c.src, &hs)
			got, err := zstdDecoder().DecodeAll(frame, nil)
			require.NoError(t, err)
			require.Equal(t, len(c.src), len(got))
			require.True(t, bytes.Equal(c.src, got))
			if c.name == "exponents (huffman)" {
				ratio := float64(len(c.src)) / float64(len(frame))
				require.Greater(t, ratio, 2.0, "the exponent plane of weights compresses")
			}
			if zstdCmd == "" {
				t.Log("zstd command not found: reference decoder not checked")
				return
			}
			cmd := exec.Command(zstdCmd, "-d", "-c", "-q")
			cmd.Stdin = bytes.NewReader(frame)
			out, err := cmd.Output()
			require.NoError(t, err, "the reference zstd decoder refuses the frame")
			require.True(t, bytes.Equal(c.src, out))
		})
	}
}

// TestChunkCodec round-trips chunks of every dtype through encodeChunk
// and decodeChunk, and checks a float32 chunk compresses better than
// plain zstd manages.
func TestChunkCodec(t *testing.T) {
	weights := tensor.MulScalar(tensor.Normal(tensor.NewKey(9), 1<<18), 0.02)
	ids := tensor.RandInt(tensor.NewKey(10), 0, 50000, 1<<16)
	mask := tensor.Less(tensor.Uniform(tensor.NewKey(11), 1000), tensor.Scalar(0.3))
	special := tensor.FromFloat32(append(special, 0, 1, float32(math.NaN())))
	var hs huff0.Scratch
	for _, x := range []*tensor.Tensor{weights, ids, mask, special, tensor.Zeros(tensor.Float32, 5000)} {
		w, b := words(x)
		scratch := make([]byte, x.Bytes())
		frame := encodeChunk(nil, scratch, &hs, x.DType() == tensor.Float32, w, b)
		y := tensor.Zeros(x.DType(), x.Shape()...)
		yw, yb := words(y)
		_, err := decodeChunk(frame, nil, AsFloat32, yw, yb)
		require.NoError(t, err, "%v", x)
		require.Equal(t, leafBits(x), leafBits(y), "%v", x)
		if x == weights {
			plain := zstdEncoder().EncodeAll(leBytes(w), nil)
			t.Logf("weights: shuffled %.3fx, plain zstd %.3fx", float64(x.Bytes())/float64(len(frame)), float64(x.Bytes())/float64(len(plain)))
			require.Less(t, len(frame), len(plain)*95/100, "shuffling must beat plain zstd")
		}
	}
	// A frame that lies about its content is an error, not a panic.
	w, _ := words(weights)
	frame := encodeChunk(nil, make([]byte, weights.Bytes()), &hs, true, w, nil)
	_, err := decodeChunk(frame, nil, AsFloat32, make([]uint32, len(w)-1), nil)
	require.ErrorContains(t, err, "decodes to")
	_, err = decodeChunk([]byte("not zstd at all"), nil, AsFloat32, make([]uint32, 4), nil)
	require.Error(t, err)
	_, err = decodeChunk(zstdEncoder().EncodeAll([]byte{0, 1, 2}, nil), nil, AsFloat32, nil, make([]byte, 3))
	require.ErrorContains(t, err, "bool element 2")
}

func leBytes(w []uint32) []byte {
	out := make([]byte, 4*len(w))
	for i, v := range w {
		out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return out
}
