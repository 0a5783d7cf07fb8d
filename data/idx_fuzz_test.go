package data

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gonox/gonox/tensor"
)

// FuzzReadIDX feeds arbitrary bytes to the IDX reader. It must never panic,
// every error must be an *IDXError naming the input, and whatever it
// accepts must describe itself consistently and write back to the same
// bytes. The seed corpus in testdata/fuzz/FuzzReadIDX holds valid files of
// every type (plain and gzipped) and broken ones of every kind.
func FuzzReadIDX(f *testing.F) {
	f.Add(idxBytes(0x08, []uint32{2, 2}, []byte{1, 2, 3, 4}))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := decodeIDX(bytes.NewReader(in), "fuzz")
		x, err2 := ReadIDX(bytes.NewReader(in))
		if (err == nil) != (err2 == nil) {
			t.Fatalf("decodeIDX error %v but ReadIDX error %v", err, err2)
		}
		if err != nil {
			var ie *IDXError
			if !errors.As(err, &ie) || ie.File != "fuzz" || !strings.HasPrefix(err.Error(), "data: IDX file fuzz: ") {
				t.Fatalf("error %q (%T) does not name the file", err, err)
			}
			return
		}
		size := 1
		for _, n := range d.dims {
			size *= n
		}
		if got := x.Shape(); len(got) != len(d.dims) || x.Size() != size || len(d.data) != size*d.typ.Size() {
			t.Fatalf("shape %v of %d elements, header dims %v, %d data bytes of type %s", got, x.Size(), d.dims, len(d.data), d.typ)
		}
		var out bytes.Buffer
		if err := WriteIDX(&out, x, d.typ); err != nil {
			t.Fatalf("WriteIDX of what ReadIDX accepted: %v", err)
		}
		gzipped := len(in) >= 2 && in[0] == 0x1f && in[1] == 0x8b
		if !gzipped && d.typ != IDXFloat64 && !bytes.Equal(out.Bytes(), in) {
			t.Fatalf("round trip changed the bytes:\n in %x\nout %x", in, out.Bytes())
		}
		y, err := ReadIDX(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatalf("reading back what WriteIDX wrote: %v", err)
		}
		if x.String() != y.String() || !sameBits(x, y) {
			t.Fatalf("round trip changed %v into %v", x, y)
		}
	})
}

// sameBits compares the elements of two tensors bit for bit (NaNs included).
func sameBits(a, b *tensor.Tensor) bool {
	if a.DType() == tensor.Int32 {
		return slices.Equal(a.Int32s(), b.Int32s())
	}
	av, bv := a.Float32s(), b.Float32s()
	if len(av) != len(bv) {
		return false
	}
	for i := range av {
		if math.Float32bits(av[i]) != math.Float32bits(bv[i]) {
			return false
		}
	}
	return true
}
