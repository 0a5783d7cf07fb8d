package data

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime/debug"

	"github.com/gonox/gonox/tensor"
)

// The header of an image file: 48 bytes, little-endian.
//
//	[0:8]   magic "GONOXIMG"
//	[8:12]  version, 1
//	[12:16] bytes per value: 1 (uint8) or 2 (uint16)
//	[16:24] number of records N
//	[24:36] height, width, channels (uint32 each)
//	[36:40] number of classes: every label is below it
//	[40:48] zero
//
// N records follow, each a uint32 label then the H×W×C values of the image
// in row-major order (channels last).
const (
	imageMagic      = "GONOXIMG"
	imageVersion    = 1
	imageHeaderSize = 48
)

// ImageFile is a dataset of labelled images stored as uint8 or uint16
// records in a file, opened by mapping it into memory (see TokenFile), for
// image datasets larger than memory: only the records a batch asks for are
// read. Example i is image i as X f32[H,W,C] scaled to [0,1] (divided by
// 255 or 65535) and its label as Y, so a batch of B examples is X
// f32[B,H,W,C] and Y i32[B]. Labels are checked against the number of
// classes as they are read. Batch may be called from several goroutines at
// once. CreateImages writes such a file.
type ImageFile struct {
	mappedFile
	typ           UintType
	n             int
	h, w, c       int
	classes       int
	record, start int64
}

// OpenImages opens an image file written by CreateImages. A file that is
// not a regular file, has a wrong header, or is shorter or longer than its
// header says is an error naming the file.
func OpenImages(path string) (*ImageFile, error) {
	f, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	d, err := parseImageHeader(f, size)
	if err != nil {
		f.Close()
		return nil, &FileError{File: path, Offset: -1, Err: err}
	}
	if d.mappedFile, err = mapOpen(path, f, size); err != nil {
		return nil, err
	}
	return d, nil
}

func parseImageHeader(f io.ReaderAt, size int64) (*ImageFile, error) {
	var h [imageHeaderSize]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		return nil, fmt.Errorf("%w: %d bytes is shorter than the %d-byte header of an image file", ErrTruncated, size, imageHeaderSize)
	}
	if string(h[:8]) != imageMagic {
		return nil, fmt.Errorf("%w %q: not a gonox image file (want %q)", ErrBadMagic, h[:8], imageMagic)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != imageVersion {
		return nil, fmt.Errorf("%w: version %d (this reader knows %d)", ErrBadMagic, v, imageVersion)
	}
	typ := UintType(binary.LittleEndian.Uint32(h[12:]))
	if typ != Uint8 && typ != Uint16 {
		return nil, fmt.Errorf("%w: %d bytes per value", ErrUnsupportedType, binary.LittleEndian.Uint32(h[12:]))
	}
	n := binary.LittleEndian.Uint64(h[16:])
	hh, ww, cc := binary.LittleEndian.Uint32(h[24:]), binary.LittleEndian.Uint32(h[28:]), binary.LittleEndian.Uint32(h[32:])
	classes := binary.LittleEndian.Uint32(h[36:])
	if hh == 0 || ww == 0 || cc == 0 || classes == 0 || classes > math.MaxInt32 {
		return nil, fmt.Errorf("image %d×%d×%d with %d classes: every size must be positive", hh, ww, cc, classes)
	}
	hw := uint64(hh) * uint64(ww) // below 2^64
	pixels := hw * uint64(cc)     // below 2^62 when hw <= 2^30
	if hw > MaxIDXElements || pixels > MaxIDXElements {
		return nil, fmt.Errorf("%w: an image of %d×%d×%d values", ErrTooLarge, hh, ww, cc)
	}
	record := 4 + pixels*uint64(typ)
	body := uint64(size - imageHeaderSize)
	switch {
	case n > body/record:
		return nil, fmt.Errorf("%w: the header declares %d records of %d bytes but %d bytes follow it", ErrTruncated, n, record, body)
	case n*record < body:
		return nil, fmt.Errorf("%w: %d bytes after the %d records the header declares", ErrTrailingData, body-n*record, n)
	}
	return &ImageFile{typ: typ, n: int(n), h: int(hh), w: int(ww), c: int(cc), classes: int(classes),
		record: int64(record), start: imageHeaderSize}, nil
}

// Len returns the number of images.
func (d *ImageFile) Len() int { return d.n }

// Shape returns the height, width and channels of the images.
func (d *ImageFile) Shape() (h, w, c int) { return d.h, d.w, d.c }

// Classes returns the number of classes: every label is below it.
func (d *ImageFile) Classes() int { return d.classes }

// Type returns the integer type of the values.
func (d *ImageFile) Type() UintType { return d.typ }

// Batch reads the images at indices as X f32[B,H,W,C] in [0,1] and their
// labels as Y i32[B]. A label not below Classes(), or a file that shrank
// while mapped, is an error naming the file and the offset. It panics,
// naming the index, if one is outside [0, Len()).
func (d *ImageFile) Batch(indices []int) (b Batch, err error) {
	px := d.h * d.w * d.c
	x := make([]float32, len(indices)*px)
	y := make([]int32, len(indices))
	scale := float32(1 / float64(d.typ.max()))
	var at int64
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverFault(&err, d.path, &at)
	var scratch []byte
	for i, ix := range indices {
		if ix < 0 || ix >= d.n {
			panic(fmt.Sprintf("data.ImageFile.Batch: index %d (position %d) out of range [0,%d) of %s", ix, i, d.n, d.path))
		}
		at = d.start + int64(ix)*d.record
		rec, err := d.bytes(&scratch, at, d.record)
		if err != nil {
			return Batch{}, err
		}
		label := binary.LittleEndian.Uint32(rec)
		if label >= uint32(d.classes) {
			return Batch{}, fileErr(d.path, at, "%w: image %d has label %d, not below the %d classes", ErrLabelRange, ix, label, d.classes)
		}
		y[i] = int32(label)
		dst := x[i*px : (i+1)*px]
		if d.typ == Uint8 {
			for k, v := range rec[4:] {
				dst[k] = float32(v) * scale
			}
		} else {
			for k := range dst {
				dst[k] = float32(binary.LittleEndian.Uint16(rec[4+2*k:])) * scale
			}
		}
	}
	return Batch{X: tensor.WrapFloat32(x, len(indices), d.h, d.w, d.c), Y: tensor.WrapInt32(y, len(indices)), Indices: indices}, nil
}

// ImageWriter writes an image file (see ImageFile) one record at a time,
// in bounded memory, under a temporary name that Close renames into place.
// Make one with CreateImages.
type ImageWriter struct {
	w        *fileWriter
	typ      UintType
	h, wd, c int
	classes  int
	n        int64
	buf      []byte
}

// CreateImages starts an image file at path of images h×w×c of type typ
// (Uint8 or Uint16) labelled with classes classes. It panics on a size that
// is not positive or a type other than Uint8 and Uint16.
func CreateImages(path string, typ UintType, h, w, c, classes int) (*ImageWriter, error) {
	if typ != Uint8 && typ != Uint16 {
		panic(fmt.Sprintf("data.CreateImages: %v: want Uint8 or Uint16", typ))
	}
	if h < 1 || w < 1 || c < 1 || classes < 1 || int64(h)*int64(w)*int64(c) > MaxIDXElements || int64(classes) > math.MaxInt32 {
		panic(fmt.Sprintf("data.CreateImages: images %d×%d×%d with %d classes", h, w, c, classes))
	}
	iw := &ImageWriter{typ: typ, h: h, wd: w, c: c, classes: classes}
	fw, err := createFile(path, iw.header())
	if err != nil {
		return nil, err
	}
	iw.w = fw
	return iw, nil
}

func (iw *ImageWriter) header() []byte {
	h := make([]byte, imageHeaderSize)
	copy(h, imageMagic)
	binary.LittleEndian.PutUint32(h[8:], imageVersion)
	binary.LittleEndian.PutUint32(h[12:], uint32(iw.typ))
	binary.LittleEndian.PutUint64(h[16:], uint64(iw.n))
	binary.LittleEndian.PutUint32(h[24:], uint32(iw.h))
	binary.LittleEndian.PutUint32(h[28:], uint32(iw.wd))
	binary.LittleEndian.PutUint32(h[32:], uint32(iw.c))
	binary.LittleEndian.PutUint32(h[36:], uint32(iw.classes))
	return h
}

// Len returns the number of images written so far.
func (iw *ImageWriter) Len() int64 { return iw.n }

// WriteUint8 appends an image of uint8 values (H×W×C, channels last) with
// its label. A label outside [0, classes) is an error. It panics if the
// file is not of Uint8 or pixels has the wrong length.
func (iw *ImageWriter) WriteUint8(label int, pixels []uint8) error {
	iw.checkImage("WriteUint8", Uint8, len(pixels))
	return iw.write(label, pixels)
}

// WriteUint16 appends an image of uint16 values with its label, as
// WriteUint8.
func (iw *ImageWriter) WriteUint16(label int, pixels []uint16) error {
	iw.checkImage("WriteUint16", Uint16, len(pixels))
	return iw.write(label, pixels)
}

func (iw *ImageWriter) checkImage(what string, typ UintType, n int) {
	if iw.typ != typ || n != iw.h*iw.wd*iw.c {
		panic(fmt.Sprintf("data.ImageWriter.%s: %d values for a file of %v images %d×%d×%d", what, n, iw.typ, iw.h, iw.wd, iw.c))
	}
}

func (iw *ImageWriter) write(label int, pixels any) error {
	if label < 0 || label >= iw.classes {
		return fmt.Errorf("data: ImageWriter: %s: label %d of image %d outside [0,%d)", iw.w.path, label, iw.n, iw.classes)
	}
	iw.buf = binary.LittleEndian.AppendUint32(iw.buf[:0], uint32(label))
	switch p := pixels.(type) {
	case []uint8:
		iw.buf = append(iw.buf, p...)
	case []uint16:
		iw.buf = appendUints(iw.buf, p, Uint16)
	}
	if err := iw.w.write(iw.buf); err != nil {
		return err
	}
	iw.n++
	return nil
}

// Close completes the file (the header gets the count), syncs it and
// renames it to its path.
func (iw *ImageWriter) Close() error { return iw.w.close(iw.header()) }

// Discard abandons the file, leaving the path as it was.
func (iw *ImageWriter) Discard() { iw.w.discard() }
