package data

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestImageFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	const n, h, w, c = 7, 3, 2, 3
	// uint8
	p8 := filepath.Join(dir, "u8.img")
	iw, err := CreateImages(p8, Uint8, h, w, c, 10)
	require.NoError(t, err)
	for i := range n {
		px := make([]uint8, h*w*c)
		for k := range px {
			px[k] = uint8(i*40 + k)
		}
		require.NoError(t, iw.WriteUint8(i%10, px))
	}
	assert.ErrorContains(t, iw.WriteUint8(10, make([]uint8, h*w*c)), "label 10 of image 7 outside [0,10)")
	assert.Panics(t, func() { _ = iw.WriteUint8(0, make([]uint8, 5)) })
	assert.Panics(t, func() { _ = iw.WriteUint16(0, make([]uint16, h*w*c)) })
	require.NoError(t, iw.Close())
	d, err := OpenImages(p8)
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, n, d.Len())
	hh, ww, cc := d.Shape()
	assert.Equal(t, []int{h, w, c, 10}, []int{hh, ww, cc, d.Classes()})
	b, err := d.Batch([]int{6, 2})
	require.NoError(t, err)
	assert.Equal(t, []int{2, h, w, c}, b.X.Shape())
	assert.Equal(t, []int{6, 2}, b.Y.Ints())
	x := b.X.Float32s()
	for k := range h * w * c {
		assert.InDelta(t, float64(uint8(6*40+k))/255, x[k], 1e-7)
		assert.InDelta(t, float64(2*40+k)/255, x[h*w*c+k], 1e-7)
	}
	assert.Panics(t, func() { _, _ = d.Batch([]int{7}) })

	// uint16
	p16 := filepath.Join(dir, "u16.img")
	iw, err = CreateImages(p16, Uint16, 1, 2, 1, 3)
	require.NoError(t, err)
	require.NoError(t, iw.WriteUint16(2, []uint16{0, 65535}))
	require.NoError(t, iw.WriteUint16(1, []uint16{32768, 1}))
	require.NoError(t, iw.Close())
	d16, err := OpenImages(p16)
	require.NoError(t, err)
	defer d16.Close()
	b, err = d16.Batch([]int{1, 0})
	require.NoError(t, err)
	assert.Equal(t, []float32{32768.0 / 65535, 1.0 / 65535, 0, 1}, b.X.Float32s())
	assert.Equal(t, []int{1, 2}, b.Y.Ints())
}

func TestImageFileHostile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.img")
	iw, err := CreateImages(good, Uint8, 2, 2, 1, 2)
	require.NoError(t, err)
	require.NoError(t, iw.WriteUint8(1, []uint8{1, 2, 3, 4}))
	require.NoError(t, iw.WriteUint8(0, []uint8{5, 6, 7, 8}))
	require.NoError(t, iw.Close())
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	require.Len(t, data, 48+2*8)
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), data...)) }
	for _, c := range []struct {
		name string
		data []byte
		msg  string
	}{
		{"short", data[:20], "shorter than the 48-byte header"},
		{"magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), "not a gonox image file"},
		{"truncated", data[:len(data)-1], "declares 2 records of 8 bytes but 15 bytes follow"},
		{"trailing", append(append([]byte(nil), data...), 0), "1 bytes after the 2 records"},
		{"type", edit(func(b []byte) []byte { b[12] = 4; return b }), "4 bytes per value"},
		{"zero size", edit(func(b []byte) []byte { b[24] = 0; return b }), "every size must be positive"},
		{"huge count", edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[16:], 1<<60); return b }), "declares 1152921504606846976 records"},
		{"huge image", edit(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[24:], 1<<31); return b }), "too large"},
	} {
		path := filepath.Join(dir, "bad.img")
		require.NoError(t, os.WriteFile(path, c.data, 0o644))
		_, err := OpenImages(path)
		if assert.Error(t, err, c.name) {
			assert.Contains(t, err.Error(), path, c.name)
			assert.Contains(t, err.Error(), c.msg, c.name)
		}
	}
	// A label beyond the classes: an error at Batch naming the record.
	path := filepath.Join(dir, "label.img")
	require.NoError(t, os.WriteFile(path, edit(func(b []byte) []byte { b[48+8] = 2; return b }), 0o644))
	d, err := OpenImages(path)
	require.NoError(t, err)
	defer d.Close()
	_, err = d.Batch([]int{0, 1})
	assert.ErrorIs(t, err, ErrLabelRange)
	assert.EqualError(t, err, "data: "+path+": at byte 56: label out of range: image 1 has label 2, not below the 2 classes")
	_, err = OpenImages(dir)
	assert.ErrorIs(t, err, ErrNotRegular)
}
