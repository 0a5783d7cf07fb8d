package tensor

import (
	"fmt"
	"testing"
)

// tinySink keeps BenchmarkCacheSmallStorage's fresh storage from being
// optimised away.
var tinySink []float32

// BenchmarkCacheSmallStorage compares, for storage around the cache's
// minimum (cacheMinElems elements), an allocation the cache serves (a
// donation and the next allocation of that size: the sync.Pool round
// trip) with a fresh allocation of the collector (make, zeroed, and the
// garbage it leaves). Below cacheMinElems the cache keeps nothing: the
// fresh allocation is no slower. Run with
//
//	go test ./tensor -run '^$' -bench CacheSmallStorage -benchmem -cpu 1
func BenchmarkCacheSmallStorage(b *testing.B) {
	for _, n := range []int{4, 16, 64, 256} {
		b.Run(fmt.Sprintf("n=%d/cached", n), func(b *testing.B) {
			c := &sizeCache[float32]{}
			c.put(make([]float32, max(n, cacheMinElems)))
			for b.Loop() {
				s := c.alloc(max(n, cacheMinElems), false)
				c.put(s)
			}
		})
		b.Run(fmt.Sprintf("n=%d/fresh", n), func(b *testing.B) {
			for b.Loop() {
				tinySink = make([]float32, n)
			}
		})
	}
}
