package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// idxBytes builds an IDX file by hand: magic 0 0 typ rank, the dims, then
// body.
func idxBytes(typ byte, dims []uint32, body []byte) []byte {
	b := []byte{0, 0, typ, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	return append(b, body...)
}

func gz(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func TestIDXHandBuilt(t *testing.T) {
	// A u8 file written byte by byte reads back as the reference values, so
	// the round trips below do not merely agree with themselves.
	raw := idxBytes(0x08, []uint32{2, 3}, []byte{0, 1, 2, 253, 254, 255})
	for _, in := range [][]byte{raw, gz(t, raw)} {
		x, err := ReadIDX(bytes.NewReader(in))
		require.NoError(t, err)
		assert.Equal(t, "i32[2,3]", x.String())
		assert.Equal(t, []int32{0, 1, 2, 253, 254, 255}, x.Int32s())
	}
	// i16 big-endian: 0x0102 = 258 and 0xFFFE = -2.
	x, err := ReadIDX(bytes.NewReader(idxBytes(0x0B, []uint32{2}, []byte{1, 2, 0xFF, 0xFE})))
	require.NoError(t, err)
	assert.Equal(t, []int32{258, -2}, x.Int32s())
	// f32 big-endian 1.5 = 0x3FC00000.
	x, err = ReadIDX(bytes.NewReader(idxBytes(0x0D, []uint32{1, 1}, []byte{0x3F, 0xC0, 0, 0})))
	require.NoError(t, err)
	assert.Equal(t, "f32[1,1]", x.String())
	assert.Equal(t, []float32{1.5}, x.Float32s())
}

func TestIDXRoundTrip(t *testing.T) {
	ints := []int32{0, 1, 100, 127, -128, -1, 255, 32767, -32768, math.MaxInt32, math.MinInt32}
	floats := []float32{0, 1.5, -2.25, 3e30, float32(math.Inf(1)), 1e-40}
	for _, tc := range []struct {
		typ  IDXType
		vals []int32
	}{
		{IDXUint8, []int32{0, 1, 7, 128, 254, 255}},
		{IDXInt8, []int32{-128, -1, 0, 1, 100, 127}},
		{IDXInt16, []int32{-32768, -2, 0, 258, 32767, 5}},
		{IDXInt32, ints[:6]},
		{IDXFloat32, nil},
		{IDXFloat64, nil},
	} {
		for _, compressed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s gzip=%v", tc.typ, compressed), func(t *testing.T) {
				var x *tensor.Tensor
				if tc.vals != nil {
					x = tensor.FromInt32(tc.vals, 3, 2, 1)
				} else {
					x = tensor.FromFloat32(floats, 2, 3)
				}
				var buf bytes.Buffer
				require.NoError(t, WriteIDX(&buf, x, tc.typ))
				assert.Equal(t, 4+4*x.Rank()+x.Size()*tc.typ.Size(), buf.Len())
				assert.Equal(t, []byte{0, 0, byte(tc.typ), byte(x.Rank())}, buf.Bytes()[:4])
				in := buf.Bytes()
				name := "x.idx"
				if compressed {
					in = gz(t, in)
					name += ".gz"
				}
				path := filepath.Join(t.TempDir(), name)
				require.NoError(t, os.WriteFile(path, in, 0o644))
				for _, read := range []func() (*tensor.Tensor, error){
					func() (*tensor.Tensor, error) { return ReadIDX(bytes.NewReader(in)) },
					func() (*tensor.Tensor, error) { return ReadIDXFile(path) },
				} {
					y, err := read()
					require.NoError(t, err)
					assert.Equal(t, x.String(), y.String())
					if tc.vals != nil {
						assert.Equal(t, x.Int32s(), y.Int32s())
					} else {
						assert.Equal(t, x.Float32s(), y.Float32s())
					}
				}
			})
		}
	}
}

func TestWriteIDXErrors(t *testing.T) {
	var buf bytes.Buffer
	err := WriteIDX(&buf, tensor.FromInt32([]int32{1, 300}), IDXUint8)
	assert.EqualError(t, err, "data.WriteIDX: i32[2]: element 1 is 300, outside the range [0,255] of 0x08 (u8)")
	err = WriteIDX(&buf, tensor.FromInt32([]int32{-129}), IDXInt8)
	assert.EqualError(t, err, "data.WriteIDX: i32[1]: element 0 is -129, outside the range [-128,127] of 0x09 (i8)")
	err = WriteIDX(&buf, tensor.FromInt32([]int32{40000}), IDXInt16)
	assert.EqualError(t, err, "data.WriteIDX: i32[1]: element 0 is 40000, outside the range [-32768,32767] of 0x0B (i16)")
	assert.PanicsWithValue(t, "data.WriteIDX: f32[2]: IDX type 0x08 (u8) needs a int32 tensor",
		func() { _ = WriteIDX(&buf, tensor.FromFloat32([]float32{1, 2}), IDXUint8) })
	assert.PanicsWithValue(t, "data.WriteIDX: i32[2]: IDX type 0x0D (f32) needs a float32 tensor",
		func() { _ = WriteIDX(&buf, tensor.FromInt32([]int32{1, 2}), IDXFloat32) })
	assert.PanicsWithValue(t, "data.WriteIDX: i32[2]: unknown IDX type 0x07",
		func() { _ = WriteIDX(&buf, tensor.FromInt32([]int32{1, 2}), 7) })
	assert.PanicsWithValue(t, "data.WriteIDX: f32[]: IDX holds 1 to 16 dimensions",
		func() { _ = WriteIDX(&buf, tensor.Scalar(1), IDXFloat32) })
	err = WriteIDX(failWriter{}, tensor.FromInt32([]int32{1}), IDXUint8)
	assert.EqualError(t, err, "disk full")
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestReadIDXErrors(t *testing.T) {
	valid := idxBytes(0x08, []uint32{2, 2}, []byte{1, 2, 3, 4})
	corruptGz := gz(t, valid)
	corruptGz[len(corruptGz)-8] ^= 0xFF // CRC-32 in the trailer
	for _, tc := range []struct {
		name     string
		in       []byte
		sentinel error
		msg      string
	}{
		{"empty", nil, ErrTruncated, "truncated: empty, no header"},
		{"short header", []byte{0, 0, 8}, ErrTruncated, "truncated: header has 3 of its 4 bytes"},
		{"bad magic", []byte("PK\x03\x04rest"), ErrBadMagic,
			"bad magic number: 0x504B0304: an IDX file starts with two zero bytes, a type code and a dimension count"},
		{"bad type", idxBytes(0x07, []uint32{1}, []byte{1}), ErrUnsupportedType,
			"unsupported type code: 0x07 in magic number 0x00000701 (supported: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64)"},
		{"no dims", []byte{0, 0, 8, 0}, ErrDims, "wrong dimension count: magic number 0x00000800 gives 0 dimensions, want 1 to 16"},
		{"too many dims", []byte{0, 0, 8, 17}, ErrDims, "wrong dimension count: magic number 0x00000811 gives 17 dimensions, want 1 to 16"},
		{"dims cut", []byte{0, 0, 8, 3, 0, 0, 0, 1, 0, 0}, ErrTruncated, "truncated: header ends after 1 of its 3 dimension sizes"},
		{"data cut", valid[:len(valid)-1], ErrTruncated, "truncated: shape [2 2] of 0x08 (u8) needs 4 bytes of data, only 3 follow the header"},
		{"data cut gzip", gz(t, valid[:len(valid)-3]), ErrTruncated, "truncated: shape [2 2] of 0x08 (u8) needs 4 bytes of data, only 1 follow the header"},
		{"trailing", append(append([]byte{}, valid...), 9, 9), ErrTrailingData,
			"trailing data: 2 byte(s) after the 4 bytes of data that shape [2 2] of 0x08 (u8) needs"},
		{"huge", idxBytes(0x08, []uint32{60000, 60000}, nil), ErrTooLarge,
			"too large: shape [60000 60000] has more than the 1073741824 elements allowed"},
		{"overflowing", idxBytes(0x0E, []uint32{math.MaxUint32, math.MaxUint32, math.MaxUint32}, nil), ErrTooLarge,
			"too large: shape [4294967295 4294967295 4294967295] has more than the 1073741824 elements allowed"},
		{"claims a GiB, holds 3 bytes", idxBytes(0x0D, []uint32{1 << 28}, []byte{1, 2, 3}), ErrTruncated,
			"truncated: shape [268435456] of 0x0D (f32) needs 1073741824 bytes of data, only 3 follow the header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ReadIDX(bytes.NewReader(tc.in))
			require.Error(t, err)
			assert.Nil(t, x)
			assert.ErrorIs(t, err, tc.sentinel)
			var ie *IDXError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, "input", ie.File)
			assert.EqualError(t, err, "data: IDX file input: "+tc.msg)
		})
	}
	t.Run("gzip checksum", func(t *testing.T) {
		_, err := ReadIDX(bytes.NewReader(corruptGz))
		assert.ErrorIs(t, err, gzip.ErrChecksum)
		assert.EqualError(t, err, "data: IDX file input: gzip: gzip: invalid checksum")
	})
	t.Run("gzip header", func(t *testing.T) {
		_, err := ReadIDX(bytes.NewReader([]byte{0x1f, 0x8b, 1}))
		assert.EqualError(t, err, "data: IDX file input: gzip: unexpected EOF")
	})
	t.Run("file names the path", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "bad.idx")
		require.NoError(t, os.WriteFile(path, []byte{1, 2, 3, 4}, 0o644))
		_, err := ReadIDXFile(path)
		assert.EqualError(t, err, "data: IDX file "+path+": bad magic number: 0x01020304: an IDX file starts with two zero bytes, a type code and a dimension count")
		_, err = ReadIDXFile(path + ".missing")
		assert.ErrorIs(t, err, os.ErrNotExist)
		assert.ErrorContains(t, err, "data: IDX file "+path+".missing: stat ")
	})
	t.Run("zero-size dims", func(t *testing.T) {
		x, err := ReadIDX(bytes.NewReader(idxBytes(0x08, []uint32{math.MaxUint32, 0}, nil)))
		require.NoError(t, err)
		assert.Equal(t, 0, x.Size())
	})
}

// writeMNISTFiles writes a small MNIST-style set of four files into dir:
// n training and m test images of 2x3 pixels, with pixel (i, j) of image k
// equal to k+j and label k%10.
func writeMNISTFiles(t *testing.T, dir string, n, m int, compress bool) {
	for _, f := range []struct {
		img, lab string
		count    int
	}{{TrainImagesFile, TrainLabelsFile, n}, {TestImagesFile, TestLabelsFile, m}} {
		pix := make([]byte, 0, f.count*6)
		labs := make([]byte, f.count)
		for k := range f.count {
			for j := range 6 {
				pix = append(pix, byte(k+j))
			}
			labs[k] = byte(k % 10)
		}
		img := idxBytes(0x08, []uint32{uint32(f.count), 2, 3}, pix)
		lab := idxBytes(0x08, []uint32{uint32(f.count)}, labs)
		ext := ""
		if compress {
			img, lab, ext = gz(t, img), gz(t, lab), ".gz"
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, f.img+ext), img, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f.lab+ext), lab, 0o644))
	}
}

func TestLoadFashionMNISTSmall(t *testing.T) {
	for _, compress := range []bool{true, false} {
		t.Run(fmt.Sprint("gzip=", compress), func(t *testing.T) {
			dir := t.TempDir()
			writeMNISTFiles(t, dir, 12, 5, compress)
			train, test, err := LoadFashionMNIST(dir)
			require.NoError(t, err)
			assert.Equal(t, "f32[12,2,3]", train.X.String())
			assert.Equal(t, "i32[12]", train.Y.String())
			assert.Equal(t, "f32[5,2,3]", test.X.String())
			assert.InDelta(t, (4.0+5)/255, train.X.At(4, 1, 2), 1e-7)
			assert.Equal(t, []int32{0, 1, 2, 3, 4}, test.Y.Int32s())
			tr2, _, err := LoadMNIST(dir)
			require.NoError(t, err)
			assert.Equal(t, train.X.Float32s(), tr2.X.Float32s())
		})
	}
}

func TestLoadFashionMNISTErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere")
	_, _, err := LoadFashionMNIST(missing)
	assert.EqualError(t, err, "data: Fashion-MNIST: directory "+missing+" does not exist: install Debian's dataset-fashion-mnist package (files in /usr/share/datasets/fashion-mnist) or download the four files of github.com/zalandoresearch/fashion-mnist into it")

	dir := t.TempDir()
	_, _, err = LoadMNIST(dir)
	assert.EqualError(t, err, "data: MNIST: no train-images-idx3-ubyte.gz (or train-images-idx3-ubyte) in "+dir+": put the four MNIST files (train-images-idx3-ubyte.gz and so on) into it")

	file := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, _, err = LoadMNIST(file)
	assert.EqualError(t, err, "data: MNIST: "+file+" is not a directory")

	// One file of the four is missing.
	dir = t.TempDir()
	writeMNISTFiles(t, dir, 3, 2, true)
	require.NoError(t, os.Remove(filepath.Join(dir, TestLabelsFile+".gz")))
	_, _, err = LoadFashionMNIST(dir)
	assert.ErrorContains(t, err, "data: Fashion-MNIST: no t10k-labels-idx1-ubyte.gz (or t10k-labels-idx1-ubyte) in "+dir)

	// Count mismatch, wrong rank, wrong type, label out of range, corrupt file.
	for _, tc := range []struct {
		name     string
		file     string
		content  []byte
		sentinel error
		msg      string // after "data: IDX file <dir>/"
	}{
		{"count mismatch", TrainLabelsFile, idxBytes(8, []uint32{2}, []byte{1, 2}), ErrCountMismatch,
			TrainImagesFile + ".gz: image/label count mismatch: 3 images but 2 labels in " + filepath.Join("DIR", TrainLabelsFile+".gz")},
		{"images rank", TrainImagesFile, idxBytes(8, []uint32{3, 6}, make([]byte, 18)), ErrDims,
			TrainImagesFile + ".gz: wrong dimension count: images need 3 dimension(s) (count, rows, columns), file has 2: [3 6]"},
		{"labels rank", TestLabelsFile, idxBytes(8, []uint32{2, 1}, make([]byte, 2)), ErrDims,
			TestLabelsFile + ".gz: wrong dimension count: labels need 1 dimension(s) (count), file has 2: [2 1]"},
		{"images type", TrainImagesFile, idxBytes(0x0D, []uint32{3, 1, 1}, make([]byte, 12)), ErrUnsupportedType,
			TrainImagesFile + ".gz: unsupported type code: images must be unsigned bytes 0x08 (u8), file has 0x0D (f32)"},
		{"label range", TrainLabelsFile, idxBytes(8, []uint32{3}, []byte{1, 10, 2}), ErrLabelRange,
			TrainLabelsFile + ".gz: label out of range: label 10 of example 1 is not a class 0..9"},
		{"truncated", TrainImagesFile, idxBytes(8, []uint32{3, 2, 3}, make([]byte, 17)), ErrTruncated,
			TrainImagesFile + ".gz: truncated: shape [3 2 3] of 0x08 (u8) needs 18 bytes of data, only 17 follow the header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeMNISTFiles(t, dir, 3, 2, true)
			require.NoError(t, os.WriteFile(filepath.Join(dir, tc.file+".gz"), gz(t, tc.content), 0o644))
			_, _, err := LoadFashionMNIST(dir)
			assert.ErrorIs(t, err, tc.sentinel)
			assert.EqualError(t, err, "data: IDX file "+filepath.Join(dir, strings.ReplaceAll(tc.msg, "DIR", dir)))
		})
	}
}

// TestFashionMNISTInstalled checks the real data when Debian's package is
// installed (apt-get install dataset-fashion-mnist).
func TestFashionMNISTInstalled(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 30 MB")
	}
	if _, err := os.Stat(FashionMNISTDir); err != nil {
		t.Skip("dataset-fashion-mnist is not installed")
	}
	train, test, err := LoadFashionMNIST(FashionMNISTDir)
	require.NoError(t, err)
	assert.Equal(t, "f32[60000,28,28]", train.X.String())
	assert.Equal(t, "i32[60000]", train.Y.String())
	assert.Equal(t, "f32[10000,28,28]", test.X.String())
	assert.Equal(t, "i32[10000]", test.Y.String())
	// Fashion-MNIST is balanced: 6,000 and 1,000 of each class.
	for c := range 10 {
		assert.Equal(t, 6000, train.ClassCounts(10)[c])
		assert.Equal(t, 1000, test.ClassCounts(10)[c])
	}
	// The first training image is an ankle boot, the first test image too
	// (the zalandoresearch README's label list starts 9, 0, 0, 3; the test
	// set starts 9, 2, 1, 1).
	assert.Equal(t, []int32{9, 0, 0, 3, 0}, train.Y.Int32s()[:5])
	assert.Equal(t, []int32{9, 2, 1, 1, 6}, test.Y.Int32s()[:5])
	mn, mx := tensor.Min(train.X).Item(), tensor.Max(train.X).Item()
	assert.Equal(t, 0.0, mn)
	assert.Equal(t, 1.0, mx)
}
