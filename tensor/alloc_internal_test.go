package tensor

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gonox/gonox/internal/devices"
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
		require.Nil(t, x.f32())
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
		// x is fresh storage of made's class (from the cache it could be
		// a leftover of a class above, which y must not reach), and a y
		// that took other storage is not donated: storage left in the
		// cache by earlier checks and tests (or a round whose x the pool
		// dropped under -race) is used up, one a round, instead of served
		// again to every round's y.
		for range 20 { // sync.Pool may drop what it is given
			cacheEnabled = false
			x := newOut(Float32, []int{made})
			cacheEnabled = true
			id := storage(x)
			Donate(x)
			y := newOut(Float32, []int{asked})
			if storage(y) == id {
				require.Len(t, y.f32(), asked)
				require.Equal(t, make([]float32, asked), y.f32(), "recycled storage is zeroed by newOut")
				return true
			}
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

// The free lists number the classes above 1024 elements in order, one
// number per class.
func TestClassIndex(t *testing.T) {
	prev := classIndex(capFor(1025)) - 1
	for c := capFor(1025); c <= 1<<22; c = capFor(c + 1) {
		i := classIndex(c)
		require.Equal(t, prev+1, i, "class %d", c)
		require.Equal(t, c, classSize(i))
		prev = i
	}
	assert.Less(t, classIndex(1<<62), maxClasses)
}

// Every class the sync.Pools serve (cacheMinElems up to listMinElems)
// has a slot of its own in the pools' array, in order of size.
func TestPoolSlots(t *testing.T) {
	prev := -1
	for c := cacheMinElems; c < listMinElems; c = capFor(c + 1) {
		i := poolSlot(c)
		require.Greater(t, i, prev, "class %d", c)
		require.Less(t, i, poolSlots, "class %d", c)
		prev = i
	}
	assert.Equal(t, poolSlots-1, prev, "no slot unused at the end")
}

// Large storage is served best fit: the smallest free buffer of the
// asked size's class or of one up to twice as large, the last given
// first; never a larger one; and the lists count the bytes they hold.
func TestFreeListsBestFit(t *testing.T) {
	var l freeLists
	buf := func(n int) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(make([]float32, n))) }
	a, b, c, d := buf(24576), buf(32768), buf(32768), buf(65536)
	l.give(a, 24576, 4)
	l.give(b, 32768, 4)
	l.give(c, 32768, 4)
	l.give(d, 65536, 4)
	assert.Equal(t, int64(4*(24576+2*32768+65536)), l.held.Load())
	take := func(n int) (unsafe.Pointer, int) { return l.take(capFor(n)) }
	p, size := take(20000)
	assert.Equal(t, a, p, "the smallest that fits")
	assert.Equal(t, 24576, size)
	p, _ = take(20000)
	assert.Equal(t, c, p, "the last given of a class first")
	p, _ = take(20000)
	assert.Equal(t, b, p)
	p, _ = take(20000)
	assert.Nil(t, p, "65536 is more than twice 20480")
	p, size = take(40000)
	assert.Equal(t, d, p)
	assert.Equal(t, 65536, size)
	assert.Zero(t, l.held.Load())
	p, _ = take(1 << 20)
	assert.Nil(t, p)
}

// Storage nobody took for a whole collection cycle goes back to the
// collector: a buffer survives the cycle in which it was given and is
// dropped at the end of the next one, unless taken (and given) meanwhile.
func TestFreeListsAge(t *testing.T) {
	var l freeLists
	a := unsafe.Pointer(unsafe.SliceData(make([]float32, 32768)))
	b := unsafe.Pointer(unsafe.SliceData(make([]float32, 32768)))
	dropped := cacheDropped.Load()
	l.give(a, 32768, 4)
	l.give(b, 32768, 4)
	l.age()
	p, _ := l.take(32768)
	require.Equal(t, b, p)
	l.give(b, 32768, 4) // used again in the new cycle
	l.age()
	assert.Equal(t, int64(4*32768), cacheDropped.Load()-dropped, "a, unused for a cycle, is dropped")
	assert.Equal(t, int64(4*32768), l.held.Load())
	p, _ = l.take(32768)
	assert.Equal(t, b, p)
	p, _ = l.take(32768)
	assert.Nil(t, p)
}

// Through the allocator: donated large storage serves a smaller size up to
// half its own, and ReadCacheStats counts fresh allocations and the bytes
// the cache holds.
func TestLargeStorageReusedAcrossSizes(t *testing.T) {
	defer func(on bool) { cacheEnabled = on }(cacheEnabled)
	cacheEnabled = true
	x := newOut(Float32, []int{40000}) // class 40960
	id := storage(x)
	s0 := ReadCacheStats()
	Donate(x)
	s1 := ReadCacheStats()
	assert.Equal(t, int64(4*40960), s1.HeldBytes-s0.HeldBytes)
	y := newOut(Float32, []int{21000})
	assert.Same(t, id, storage(y), "half the size reuses it")
	require.Equal(t, make([]float32, 21000), y.f32(), "recycled storage is zeroed by newOut")
	s2 := ReadCacheStats()
	assert.Equal(t, s1.Fresh, s2.Fresh)
	assert.Equal(t, s1.Hits+1, s2.Hits)
	Donate(y)
	z := newOut(Float32, []int{19000})
	assert.NotSame(t, id, storage(z), "less than half the size does not")
	assert.Equal(t, s2.Fresh+1, ReadCacheStats().Fresh)
	Donate(z)
}

// A training step that recycles its intermediates (a MoE-like dispatch:
// gather, scale, segment sum, matmul, cross-entropy) takes no fresh large
// storage once its sizes have been seen: every cotangent the backward pass
// makes, SegmentSum's and the cross-entropy's included, goes back to the
// cache.
func TestRecyclingStepTakesNoFreshStorage(t *testing.T) {
	defer func(on bool) { cacheEnabled = on }(cacheEnabled)
	cacheEnabled = true
	const n, d, k = 256, 128, 2
	x0 := Normal(NewKey(1), n, d)
	w0 := Normal(NewKey(2), d, d)
	src := make([]int, n*k)
	for i := range src {
		src[i] = i / k
	}
	idx := FromInts(src)
	labels := FromInts(src[:n])
	step := func() {
		tr := NewTrace()
		tr.RecycleIntermediates()
		x, w := tr.Leaf(x0), tr.Leaf(w0)
		h := Mul(Take(x, idx, 0), Scalar(0.5))
		y := MatMul(SegmentSum(h, idx, n), w)
		loss := Sum(SoftmaxCrossEntropy(y, labels))
		g := Backward(tr, []*Tensor{loss}, []*Tensor{OnesLike(loss)}, []*Tensor{x, w}, false)
		Donate(g...)
	}
	step()
	step()
	var fresh int64
	for range 3 {
		before := freshBytes.Load()
		step()
		fresh = max(fresh, freshBytes.Load()-before)
	}
	assert.Less(t, fresh, int64(4*listMinElems), "fresh bytes in a step")
}

// The pacer starts a collection cycle when the heap has grown past its
// slack since the last one, and none when it has not or when the collector
// ran on its own since the last check.
func TestPaceCollector(t *testing.T) {
	if !pacing {
		t.Skip("GONOX_GCPACE=off")
	}
	live := make([]byte, 128<<20) // the collector's own goal is then 256 MiB
	runtime.GC()
	n0 := paced.Load()
	paceCollector()
	assert.Equal(t, n0, paced.Load(), "a cycle with no garbage")
	garbage := makeGarbage
	garbage()
	PaceCollector() // the entry package shard calls mid-step
	assert.Equal(t, n0+1, paced.Load(), "no cycle after 48 MiB of garbage")
	garbage()
	runtime.GC() // the collector ran on its own since the last check
	garbage()
	paceCollector()
	assert.Equal(t, n0+1, paced.Load(), "a cycle although the collector ran since the last check")
	runtime.KeepAlive(live)
}

// makeGarbage leaves 48 MiB of garbage.
func makeGarbage() {
	var keep [][]byte
	for range 48 {
		keep = append(keep, make([]byte, 1<<20))
	}
	runtime.KeepAlive(keep)
}

// On a device goroutine of shard.Map the end of a backward pass only
// records that the pacer's check is due; PaceDeferred, which shard calls
// once every device returned, runs it, once, with a slack of a quarter of
// the live heap.
func TestPaceDeferred(t *testing.T) {
	if !pacing {
		t.Skip("GONOX_GCPACE=off")
	}
	live := make([]byte, 128<<20)
	runtime.GC()
	paceCollector() // the check after the collector's own cycle does nothing
	n0 := paced.Load()
	PaceDeferred()
	assert.Equal(t, n0, paced.Load(), "a cycle with nothing deferred")
	makeGarbage()
	devices.Enter(1)
	paceAfterBackward()
	assert.Equal(t, n0, paced.Load(), "a cycle on a device goroutine")
	devices.Exit(1)
	PaceDeferred()
	assert.Equal(t, n0+1, paced.Load(), "no deferred cycle after 48 MiB of garbage")
	PaceDeferred()
	assert.Equal(t, n0+1, paced.Load(), "a second cycle for one deferred check")
	// The deferred check's slack is a quarter of the live heap (32 MiB
	// here), not an eighth.
	garbage := func(mib int) {
		var keep [][]byte
		for range mib {
			keep = append(keep, make([]byte, 1<<20))
		}
		runtime.KeepAlive(keep)
	}
	garbage(24)
	devices.Enter(1)
	paceAfterBackward()
	devices.Exit(1)
	PaceDeferred()
	assert.Equal(t, n0+1, paced.Load(), "a deferred cycle after 24 MiB of garbage over 128 MiB live")
	garbage(24)
	devices.Enter(1)
	paceAfterBackward()
	devices.Exit(1)
	PaceDeferred()
	assert.Equal(t, n0+2, paced.Load(), "no deferred cycle after 48 MiB of garbage")
	runtime.KeepAlive(live)
}

// Storage of every dtype is recycled as float32's is: donated large
// storage (the free lists, counted in HeldBytes) serves the next
// allocation of the dtype's element type, by newOut zeroed and by
// newOutUninit as it was left (poisoned under the test hook), and small
// storage (a sync.Pool class) serves some; bfloat16 and float16 share
// their storage.
func TestEveryDTypeRecycled(t *testing.T) {
	defer SetAllocCache(true, false)()
	for _, c := range []struct {
		dt, other DType
		elem      int
	}{
		{Float32, Float32, 4}, {Int32, Int32, 4}, {Float64, Float64, 8}, {BFloat16, Float16, 2},
		{Float16, BFloat16, 2}, {Int64, Int64, 8}, {Uint8, Uint8, 1}, {Bool, Bool, 1},
	} {
		t.Run(c.dt.String(), func(t *testing.T) {
			const n = 40000 // class 40960
			x := newOut(c.dt, []int{n})
			id := x.rec.base
			require.NotNil(t, id)
			// The storage is of class 40960 elements or, when an earlier
			// test left one in the cache, a larger buffer it may take
			// (best fit, up to twice the class).
			held := x.data.c
			require.True(t, held >= 40960 && held <= 2*40960, "storage of %d elements", held)
			s0 := ReadCacheStats()
			Donate(x)
			s1 := ReadCacheStats()
			assert.Equal(t, int64(c.elem*held), s1.HeldBytes-s0.HeldBytes, "held bytes")
			y := newOut(c.other, []int{n - 1000})
			assert.Equal(t, id, y.rec.base, "the donated storage is reused")
			s2 := ReadCacheStats()
			assert.Equal(t, s1.Hits+1, s2.Hits)
			assert.Equal(t, s1.Fresh, s2.Fresh)
			assert.Equal(t, s0.HeldBytes, s2.HeldBytes)
			for i := range y.Size() {
				require.Zero(t, y.at(i), "newOut zeroes recycled storage")
			}
			func() {
				defer SetAllocCache(true, true)()
				Donate(y)
				z := newOutUninit(c.dt, []int{n})
				assert.Equal(t, id, z.rec.base, "newOutUninit reuses it")
				assert.NotZero(t, z.at(n-1), "poisoned")
				Donate(z)
			}()
			// Small storage: a sync.Pool may drop what it holds (a
			// collection cycle, the race detector), but not every time.
			hits := CacheHits()
			for range 8 {
				Donate(newOut(c.dt, []int{300}))
			}
			assert.Greater(t, CacheHits(), hits, "small storage is reused")
		})
	}
}
