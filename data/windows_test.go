package data

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// shardIDs returns the token ids of shard k: distinct per shard.
func shardIDs(k, n int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32((k*1000 + i*31) % 997)
	}
	return ids
}

// TestTokenWindowsShards: windows over three shards are those of Text over
// each shard's ids, numbered shard by shard, never spanning two shards.
func TestTokenWindowsShards(t *testing.T) {
	dir := t.TempDir()
	lens := []int{50, 8, 33} // the second shard is too short for a window of 8
	var paths []string
	var texts []*Text
	for k, n := range lens {
		ids := shardIDs(k, n)
		paths = append(paths, writeTokens(t, dir, "shard"+string(rune('a'+k))+".tok", Uint16, 997, ids))
		texts = append(texts, NewText(ids, 8, 3))
	}
	d, err := OpenTokenWindows(paths, 8, 3)
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, texts[0].Len()+texts[1].Len()+texts[2].Len(), d.Len())
	assert.Equal(t, 0, texts[1].Len())
	assert.Equal(t, 997, d.Vocab())
	var want []Batch
	for _, tx := range texts {
		for i := range tx.Len() {
			b, _ := tx.Batch([]int{i})
			want = append(want, b)
		}
	}
	idx := []int{0, d.Len() - 1, 14, 13, 5, 5}
	got, err := d.Batch(idx)
	require.NoError(t, err)
	assert.Equal(t, []int{6, 8}, got.X.Shape())
	for r, ix := range idx {
		assert.Equal(t, want[ix].X.Ints(), tensor.SliceAxis(got.X, 0, r, r+1).Ints(), "row %d (window %d)", r, ix)
		assert.Equal(t, want[ix].Y.Ints(), tensor.SliceAxis(got.Y, 0, r, r+1).Ints(), "row %d (window %d)", r, ix)
	}
	k, off := d.Locate(texts[0].Len())
	assert.Equal(t, 2, k)
	assert.Equal(t, int64(0), off)
	k, off = d.Locate(texts[0].Len() - 1)
	assert.Equal(t, 0, k)
	assert.Equal(t, int64(3*(texts[0].Len()-1)), off)
	assert.Panics(t, func() { d.Locate(d.Len()) })
}

func TestTokenWindowsErrors(t *testing.T) {
	dir := t.TempDir()
	a := writeTokens(t, dir, "a.tok", Uint16, 100, make([]int32, 20))
	b := writeTokens(t, dir, "b.tok", Uint16, 200, make([]int32, 20))
	_, err := OpenTokenWindows([]string{a, b}, 4, 4)
	assert.ErrorContains(t, err, "shards must share one")
	_, err = OpenTokenWindows([]string{a, dir + "/missing.tok"}, 4, 4)
	assert.ErrorContains(t, err, "missing.tok")
	assert.Panics(t, func() { _, _ = OpenTokenWindows([]string{a}, 0, 4) })
}
