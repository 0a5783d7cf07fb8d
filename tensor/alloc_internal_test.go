package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The allocator cache's size classes: every size up to 1024 is a class of
// its own; above, a class holds at most 1/16 more than asked for, the
// class storage is filed under is the one its capacity was made for, and
// storage of any capacity is filed under a class it holds.
func TestCacheSizeClasses(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{1, 1}, {17, 17}, {1024, 1024},
		{1025, 1088}, {2048, 2048}, {2049, 2176}, {3000, 3072},
		{29696, 29696}, {30208, 30720}, {30976, 31744}, {1 << 20, 1 << 20}, {784 * 1024, 819200},
	} {
		assert.Equal(t, c.want, capFor(c.n), "capFor(%d)", c.n)
		assert.Equal(t, c.want, classOf(c.want), "classOf(%d)", c.want)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		n := 1 + r.IntN(1<<24)
		c := capFor(n)
		require.GreaterOrEqual(t, c, n)
		if n > 1024 {
			require.LessOrEqual(t, 16*c, 17*n, "capFor(%d) = %d wastes more than 1/16", n, c)
		}
		require.Equal(t, c, classOf(c), "storage made for %d elements is filed elsewhere", n)
		// Storage of any capacity (the tail of a view, say) is filed
		// under a class whose every size it holds.
		k := classOf(n)
		require.LessOrEqual(t, k, n)
		require.Equal(t, k, capFor(k), "classOf(%d) = %d is not a class", n, k)
	}
}

// Storage is recycled by whichever holder lets go last, even when that is
// a node's hold on a header that was donated before (and so no longer
// has its slice): the buffer is recorded with its holder count.
func TestLastHolderRecyclesDonatedHeader(t *testing.T) {
	defer func(on bool) { cacheEnabled = on }(cacheEnabled)
	cacheEnabled = true
	recycled := false
	for range 20 { // sync.Pool may drop what it is given
		x := newOut(Float32, []int{3000})
		id := storage(x)
		x.hold() // a node saving x for its VJP
		Donate(x)
		require.Nil(t, x.f32)
		x.release() // the node, once its backward pass has run
		if storage(newOut(Float32, []int{2950})) == id {
			recycled = true
			break
		}
	}
	assert.True(t, recycled)
}

// An allocation whose own class is empty takes storage of one of the next
// two classes (at most about 1/8 larger), so that sizes that vary from
// step to step (a MoE's tokens per expert) reuse each other's storage; not
// three classes up, and never for sizes up to 1024, each a class of its
// own.
func TestCacheServesNearbyLargerClasses(t *testing.T) {
	defer func(on bool) { cacheEnabled = on }(cacheEnabled)
	cacheEnabled = true
	reused := func(made, asked int) bool {
		for range 20 { // sync.Pool may drop what it is given
			x := newOut(Float32, []int{made})
			id := storage(x)
			Donate(x)
			y := newOut(Float32, []int{asked})
			if storage(y) == id {
				require.Len(t, y.f32, asked)
				require.Equal(t, make([]float32, asked), y.f32, "recycled storage is zeroed by newOut")
				return true
			}
			Donate(y)
		}
		return false
	}
	// Classes of 3072 elements: ..., 2944, 3072, 3200, 3328, ...
	assert.True(t, reused(3072, 3000), "same class")
	assert.True(t, reused(3200, 3000), "one class up")
	assert.True(t, reused(3328, 3000), "two classes up")
	assert.False(t, reused(3456, 3000), "three classes up")
	assert.False(t, reused(1000, 990), "sizes up to 1024 are their own classes")
}
