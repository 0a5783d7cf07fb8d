package data

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVocabAppendEncode(t *testing.T) {
	v := NewVocab("abé\ufffd")
	want, err := v.Encode("béa")
	require.NoError(t, err)
	got, err := v.AppendEncode([]int32{7}, []byte("béa"))
	require.NoError(t, err)
	assert.Equal(t, append([]int32{7}, want...), got)
	// Invalid UTF-8 reads as U+FFFD, as ranging over a string does.
	got, err = v.AppendEncode(nil, []byte("a\xffb"))
	require.NoError(t, err)
	assert.Equal(t, "a\ufffdb", v.Decode(got))
	_, err = v.AppendEncode(nil, []byte("abz"))
	assert.ErrorContains(t, err, `'z' (U+007A) at byte 2`)
}
