package data

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func TestDigits(t *testing.T) {
	// The embedded file is the one documented in digits.LICENSE.txt.
	sum := sha256.Sum256(digitsCSVGZ)
	assert.Equal(t, "46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a", hex.EncodeToString(sum[:]))

	d := Digits()
	assert.Same(t, d, Digits(), "parsed once")
	assert.Equal(t, "f32[1797,64]", d.X.String())
	assert.Equal(t, "i32[1797]", d.Y.String())
	assert.Equal(t, 1797, d.Len())
	// scikit-learn: np.bincount(load_digits().target)
	assert.Equal(t, []int{178, 182, 177, 183, 181, 182, 181, 179, 174, 180}, d.ClassCounts(10))

	// load_digits().data[0] and .target[:3], and the last row's label.
	first := []float32{0, 0, 5, 13, 9, 1, 0, 0, 0, 0, 13, 15, 10, 15, 5, 0, 0, 3, 15, 2, 0, 11, 8, 0, 0, 4, 12, 0, 0, 8, 8, 0,
		0, 5, 8, 0, 0, 9, 8, 0, 0, 4, 11, 0, 1, 12, 7, 0, 0, 2, 14, 5, 10, 12, 0, 0, 0, 0, 6, 13, 10, 0, 0, 0}
	for i := range first {
		first[i] /= 16
	}
	assert.Equal(t, first, d.X.Float32s()[:64])
	assert.Equal(t, []int32{0, 1, 2}, d.Y.Int32s()[:3])
	assert.Equal(t, 8.0, d.Y.At(1796))
	assert.Equal(t, 10.0/16, d.X.At(1796, 2)) // last row: 0,0,10,14,...
	assert.Equal(t, 14.0/16, d.X.At(1796, 3))
	// Every pixel is a count 0..16 scaled by 1/16: the total of the counts is
	// 561718 (sum of the CSV's 64 pixel columns).
	var total float64
	for _, v := range d.X.Float32s() {
		assert.True(t, v >= 0 && v <= 1)
		total += float64(v) * 16
	}
	assert.Equal(t, 561718.0, total)
	assert.Equal(t, 0.0, tensor.Min(d.X).Item())
	assert.Equal(t, 1.0, tensor.Max(d.X).Item())
}

func TestDigitsSplit(t *testing.T) {
	key := tensor.NewKey(0)
	train, test := DigitsSplit(key, 0.2)
	assert.Equal(t, 1438, train.Len())
	assert.Equal(t, 359, test.Len())
	train2, test2 := DigitsSplit(key, 0.2)
	assert.Equal(t, train.X.Float32s(), train2.X.Float32s())
	assert.Equal(t, test.Y.Int32s(), test2.Y.Int32s())
	other, _ := DigitsSplit(tensor.NewKey(1), 0.2)
	assert.NotEqual(t, train.Y.Int32s(), other.Y.Int32s())
	// The two sides partition the classes' counts.
	tr, te := train.ClassCounts(10), test.ClassCounts(10)
	for c, n := range []int{178, 182, 177, 183, 181, 182, 181, 179, 174, 180} {
		assert.Equal(t, n, tr[c]+te[c])
		assert.Greater(t, te[c], 20, "class %d is represented in the test split", c)
	}
}

func TestParseDigitsErrors(t *testing.T) {
	z := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write([]byte(s))
		require.NoError(t, w.Close())
		return b.Bytes()
	}
	row := "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
	_, err := parseDigits([]byte("nope"))
	assert.EqualError(t, err, "data: embedded digits.csv.gz: unexpected EOF")
	_, err = parseDigits(z("1,2,3\n"))
	assert.EqualError(t, err, "data: embedded digits.csv.gz: line 1 has 3 fields, want 65")
	_, err = parseDigits(z(row + "3\n" + row + "10\n"))
	assert.EqualError(t, err, `data: embedded digits.csv.gz: line 2 field 65 is "10", want an integer 0..9`)
	_, err = parseDigits(z(row[:len(row)-2] + "17,3"))
	assert.EqualError(t, err, `data: embedded digits.csv.gz: line 1 field 64 is "17", want an integer 0..16`)
	_, err = parseDigits(z(row + "3\r\n\n" + row + "4"))
	assert.EqualError(t, err, "data: embedded digits.csv.gz: 2 rows, want 1797")
}
