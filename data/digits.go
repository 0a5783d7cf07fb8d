package data

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"sync"

	"github.com/gonox/gonox/tensor"
)

// The digits data set: scikit-learn's copy of the UCI test set, compressed
// CSV (64 pixels 0..16 and the label on each of 1,797 lines). Its origin
// and license (CC BY 4.0, attribution required) are in digits.LICENSE.txt.
//
//go:embed digits.csv.gz
var digitsCSVGZ []byte

// Facts about the digits data set.
const (
	DigitsRows     = 1797 // examples
	DigitsFeatures = 64   // pixels of an 8x8 image, row-major
	DigitsClasses  = 10   // digits 0..9
)

var digitsOnce = sync.OnceValues(func() (*InMemory, error) { return parseDigits(digitsCSVGZ) })

// Digits returns the 1,797 handwritten digits of the UCI "Optical Recognition
// of Handwritten Digits" test set, the data of scikit-learn's load_digits,
// embedded in the module so that it works offline: features f32[1797,64]
// (8x8 images in row-major order, the counts 0..16 scaled to [0,1] by
// dividing by 16) and labels i32[1797] in 0..9. The data is parsed once;
// every call returns the same (immutable) tensors.
//
// Attribution: E. Alpaydin and C. Kaynak (1998), Optical Recognition of
// Handwritten Digits, UCI Machine Learning Repository,
// https://doi.org/10.24432/C50P49, CC BY 4.0. See digits.LICENSE.txt in this
// package's directory.
func Digits() *InMemory {
	d, err := digitsOnce()
	if err != nil {
		panic(err) // the embedded file is part of the program; tests parse it
	}
	return d
}

// DigitsSplit returns the digits shuffled with key and split into a training
// set and a test set holding the fraction testFrac of the examples
// (InMemory.Split): the same key always gives the same split. With
// testFrac 0.2 that is 1,438 training and 359 test examples.
func DigitsSplit(key tensor.Key, testFrac float64) (train, test *InMemory) {
	return Digits().Split(key, testFrac)
}

// parseDigits parses the gzipped CSV.
func parseDigits(gz []byte) (*InMemory, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("data: embedded digits.csv.gz: %w", err)
	}
	csv, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("data: embedded digits.csv.gz: %w", err)
	}
	x := make([]float32, 0, DigitsRows*DigitsFeatures)
	y := make([]int32, 0, DigitsRows)
	line := 0
	for len(csv) > 0 {
		line++
		end := bytes.IndexByte(csv, '\n')
		if end < 0 {
			end = len(csv)
		}
		row := bytes.TrimSuffix(csv[:end], []byte("\r"))
		csv = csv[min(end+1, len(csv)):]
		if len(row) == 0 {
			continue
		}
		fields := bytes.Split(row, []byte(","))
		if len(fields) != DigitsFeatures+1 {
			return nil, fmt.Errorf("data: embedded digits.csv.gz: line %d has %d fields, want %d", line, len(fields), DigitsFeatures+1)
		}
		for j, f := range fields {
			v, ok := smallUint(f)
			lim := 16
			if j == DigitsFeatures {
				lim = DigitsClasses - 1
			}
			if !ok || v > lim {
				return nil, fmt.Errorf("data: embedded digits.csv.gz: line %d field %d is %q, want an integer 0..%d", line, j+1, f, lim)
			}
			if j < DigitsFeatures {
				x = append(x, float32(v)/16)
			} else {
				y = append(y, int32(v))
			}
		}
	}
	if len(y) != DigitsRows {
		return nil, fmt.Errorf("data: embedded digits.csv.gz: %d rows, want %d", len(y), DigitsRows)
	}
	return &InMemory{X: tensor.WrapFloat32(x, DigitsRows, DigitsFeatures), Y: tensor.WrapInt32(y, DigitsRows)}, nil
}

// smallUint parses a short decimal integer.
func smallUint(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 3 {
		return 0, false
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = 10*v + int(c-'0')
	}
	return v, true
}
