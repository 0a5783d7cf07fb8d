package data

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpticks(t *testing.T) {
	s := Opticks()
	sum := sha256.Sum256([]byte(s))
	assert.Equal(t, "d4a9ac22462b35e7821a4f2706c211093da678620a8f9997989ee7cf8d507bbd", hex.EncodeToString(sum[:]))
	assert.Equal(t, 567038, utf8.RuneCountInString(s))
	assert.Equal(t, 91, NewVocab(s).Size())
	assert.Contains(t, s, "OPTICKS:")
}

func TestGunzipTextErrors(t *testing.T) {
	_, err := gunzipText("x.gz", []byte("not gzip"))
	require.ErrorContains(t, err, "data: x.gz:")
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte{0xff, 0xfe})
	require.NoError(t, zw.Close())
	_, err = gunzipText("y.gz", b.Bytes())
	require.EqualError(t, err, "data: y.gz: not valid UTF-8")
	_, err = gunzipText("z.gz", b.Bytes()[:b.Len()-4])
	require.ErrorContains(t, err, "data: z.gz:")
}
