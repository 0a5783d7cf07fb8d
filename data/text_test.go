package data

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVocab(t *testing.T) {
	v := NewVocab("hello, wörld")
	assert.Equal(t, 10, v.Size())
	assert.Equal(t, []rune{' ', ',', 'd', 'e', 'h', 'l', 'o', 'r', 'w', 'ö'}, v.Chars())
	id, ok := v.ID('l')
	assert.True(t, ok)
	assert.Equal(t, int32(5), id)
	_, ok = v.ID('z')
	assert.False(t, ok)

	ids, err := v.Encode("hello")
	require.NoError(t, err)
	assert.Equal(t, []int32{4, 3, 5, 5, 6}, ids)
	assert.Equal(t, "wörld, hello"[1:], v.Decode(mustEncode(t, v, "wörld, hello"[1:])))

	_, err = v.Encode("hello wörld!")
	assert.EqualError(t, err, `data: Vocab.Encode: character '!' (U+0021) at byte 12 is not in the vocabulary of 10 characters`)
	assert.PanicsWithValue(t, "data.Vocab.Decode: id 10 (position 1) out of range [0,10)", func() { v.Decode([]int32{0, 10}) })

	// Invalid UTF-8 reads as U+FFFD consistently.
	bad := NewVocab("a\xffb")
	assert.Equal(t, []rune{'a', 'b', '\uFFFD'}, bad.Chars())
	assert.Equal(t, []int32{0, 2, 1}, mustEncode(t, bad, "a\xffb"))
	assert.Equal(t, 0, NewVocab("").Size())
}

func mustEncode(t *testing.T, v *Vocab, s string) []int32 {
	t.Helper()
	ids, err := v.Encode(s)
	require.NoError(t, err)
	return ids
}

func TestTextWindows(t *testing.T) {
	text := "abcdefghij" // ids 0..9
	v := NewVocab(text)
	ids := mustEncode(t, v, text)
	for _, tc := range []struct {
		window, stride int
		starts         []int
	}{
		{3, 1, []int{0, 1, 2, 3, 4, 5, 6}},
		{3, 2, []int{0, 2, 4, 6}},
		{3, 3, []int{0, 3, 6}},
		{4, 3, []int{0, 3}},
		{9, 1, []int{0}},
		{10, 1, nil},
		{1, 5, []int{0, 5}},
	} {
		t.Run(fmt.Sprintf("window=%d,stride=%d", tc.window, tc.stride), func(t *testing.T) {
			d := NewText(ids, tc.window, tc.stride)
			require.Equal(t, len(tc.starts), d.Len())
			assert.Equal(t, tc.window, d.Window())
			all := seq(d.Len())
			b, err := d.Batch(all)
			require.NoError(t, err)
			assert.Equal(t, []int{len(all), tc.window}, b.X.Shape())
			assert.Equal(t, []int{len(all), tc.window}, b.Y.Shape())
			x, y := b.X.Int32s(), b.Y.Int32s()
			for i, s := range tc.starts {
				assert.Equal(t, text[s:s+tc.window], v.Decode(x[i*tc.window:(i+1)*tc.window]), "input %d", i)
				assert.Equal(t, text[s+1:s+tc.window+1], v.Decode(y[i*tc.window:(i+1)*tc.window]), "target %d", i)
			}
		})
	}
	d := NewText(ids, 3, 2)
	b, err := d.Batch([]int{3, 0, 3})
	require.NoError(t, err)
	assert.Equal(t, "ghiabcghi", v.Decode(b.X.Int32s()))
	assert.Equal(t, "hijbcdhij", v.Decode(b.Y.Int32s()))
	assert.Equal(t, []int{3, 0, 3}, b.Indices)

	// NewText copies its input.
	ids[0] = 9
	b, _ = d.Batch([]int{0})
	assert.Equal(t, "abc", v.Decode(b.X.Int32s()))

	assert.PanicsWithValue(t, "data.Text.Batch: index 4 (position 0) out of range [0,4)", func() { _, _ = d.Batch([]int{4}) })
	assert.PanicsWithValue(t, "data.NewText: window 0 and stride 1 must be positive", func() { NewText(ids, 0, 1) })
	assert.PanicsWithValue(t, "data.NewText: window 2 and stride 0 must be positive", func() { NewText(ids, 2, 0) })
	assert.Equal(t, 0, NewText(nil, 2, 1).Len())
}
