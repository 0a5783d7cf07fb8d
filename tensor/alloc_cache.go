package tensor

import (
	"math"
	"math/bits"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gonox/gonox/internal/devices"
)

// The allocator cache (see "Donation" in doc.go).
//
// Donated storage waits in the cache of its element type for the next
// allocation that fits: float32, int32, float64, int64, uint8, bool, and
// the 16-bit storage of bfloat16 and float16 (one cache for both). Small storage (below listMinElems elements) sits in
// a sync.Pool per size class: its fast path is per P and lock-free, and the
// collector drains it when a size stops being used. Large storage, which is
// what a training step's memory is made of, sits in best-fit free lists
// instead: an allocation takes the smallest free buffer of its class or of
// one of the classes up to twice its size, so that values whose sizes
// change from step to step (a mixture of experts' tokens per expert) reuse
// each other's storage instead of asking the collector for more, and the
// cache counts the bytes it holds (ReadCacheStats). Storage nobody took in
// a whole collection cycle goes back to the collector, as a sync.Pool's
// would: the cache needs no bound to tune and cannot keep dead memory for
// ever.

// cacheMinElems is the smallest storage the cache keeps: below it an
// allocation costs no more than a pool round trip.
const cacheMinElems = 16

// listMinElems is the smallest class kept in the best-fit free lists
// (64 KiB of float32).
const listMinElems = 1 << 14

// listUpClasses is how many classes above its own a large allocation looks
// in: 16 classes make one doubling, so a buffer serves sizes down to half
// its own.
const listUpClasses = 16

// sizeCache is the allocator cache of one element type. Small sizes find
// their class's sync.Pool by index (poolSlot) in an array allocated on
// first use; a new class's pool is made under mu.
type sizeCache[E any] struct {
	mu     sync.Mutex
	pools  atomic.Pointer[[poolSlots]atomic.Pointer[sync.Pool]]
	hits   atomic.Int64
	lists  freeLists
	poison E // what recycled storage holds under poisonRecycled
}

// The caches of each element type, poisoned with a NaN where the type
// has one (0xFFFF is a NaN in bfloat16 and in float16).
var (
	f32Cache  = sizeCache[float32]{poison: float32(math.NaN())}
	i32Cache  = sizeCache[int32]{poison: math.MinInt32}
	f64Cache  = sizeCache[float64]{poison: math.NaN()}
	u16Cache  = sizeCache[uint16]{poison: 0xFFFF}
	i64Cache  = sizeCache[int64]{poison: math.MinInt64}
	u8Cache   = sizeCache[uint8]{poison: 0xFF}
	boolCache = sizeCache[bool]{poison: true}
)

// cacheCounts lists the hit counter and free lists of every cache.
var cacheCounts = [...]struct {
	hits  *atomic.Int64
	lists *freeLists
}{
	{&f32Cache.hits, &f32Cache.lists}, {&i32Cache.hits, &i32Cache.lists}, {&f64Cache.hits, &f64Cache.lists},
	{&u16Cache.hits, &u16Cache.lists}, {&i64Cache.hits, &i64Cache.lists}, {&u8Cache.hits, &u8Cache.lists},
	{&boolCache.hits, &boolCache.lists},
}

// cacheEnabled switches the allocator cache off (tests compare both ways);
// poisonRecycled makes every uninitialised allocation served from the
// cache return NaN garbage (tests check that ops overwrite it all).
var (
	cacheEnabled   = true
	poisonRecycled = false
)

// Storage comes in size classes, so that values whose sizes change from
// step to step (a mixture of experts' tokens per expert, a last batch
// that is shorter) still find storage to reuse: up to 1024 elements each
// size is its own class, above that the classes of (2^k, 2^(k+1)] are 16
// evenly spaced sizes, so storage is at most 1/16 larger than asked for.
// The allocator gives fresh storage the capacity of its class (capFor),
// and the cache files storage under the largest class its capacity holds
// (classOf), from which it serves any size of that class.

// capFor returns the size of the smallest class that holds n elements.
func capFor(n int) int {
	if n <= 1024 {
		return n
	}
	step := 1 << (bits.Len(uint(n-1)) - 5)
	return (n + step - 1) / step * step
}

// classOf returns the size of the largest class that c elements hold.
func classOf(c int) int {
	if c <= 1024 {
		return c
	}
	step := 1 << (bits.Len(uint(c)) - 5)
	if c&(c-1) == 0 {
		return c // 2^k is the last class of (2^(k-1), 2^k]
	}
	return c / step * step
}

// get returns cached storage of n elements (contents undefined), or nil.
func (c *sizeCache[E]) get(n int) []E {
	if n < cacheMinElems || !cacheEnabled {
		return nil
	}
	size := capFor(n)
	if size >= listMinElems {
		p, class := c.lists.take(size)
		if p == nil {
			return nil
		}
		c.hits.Add(1)
		return unsafe.Slice((*E)(p), class)[:n]
	}
	pools := c.pools.Load()
	if pools == nil {
		return nil
	}
	// The size's class, else one of the next classUpTries above it
	// (storage at most ~1/8 larger than asked for).
	for range classUpTries + 1 {
		if size >= listMinElems {
			return nil
		}
		if p := pools[poolSlot(size)].Load(); p != nil {
			if v, _ := p.Get().(unsafe.Pointer); v != nil {
				c.hits.Add(1)
				return unsafe.Slice((*E)(v), size)[:n]
			}
		}
		if size <= 1024 {
			return nil // small sizes are classes of their own: no waste
		}
		size = capFor(size + 1)
	}
	return nil
}

// cached returns recycled storage of n elements, filled with c.poison
// under the test hook (contents undefined otherwise), or nil.
func (c *sizeCache[E]) cached(n int) []E {
	s := c.get(n)
	if s != nil && poisonRecycled {
		for i := range s {
			s[i] = c.poison
		}
	}
	return s
}

// alloc returns storage of n elements, from the cache if it has some of
// that size class (zeroed if zero says so) or else fresh (zero, with the
// capacity of its class, see capFor).
func (c *sizeCache[E]) alloc(n int, zero bool) []E {
	if s := c.cached(n); s != nil {
		if zero {
			clear(s)
		}
		return s
	}
	s := make([]E, n, capFor(n))
	var e E
	size := int(unsafe.Sizeof(e))
	countFresh(cap(s) * size)
	if n*size >= hugeThreshold {
		adviseHuge(unsafe.Pointer(unsafe.SliceData(s)), cap(s)*size)
	}
	return s
}

// classUpTries is how many classes above its own a small allocation looks
// in.
const classUpTries = 2

// put gives s to the cache, under the class its capacity holds.
func (c *sizeCache[E]) put(s []E) {
	n := classOf(cap(s))
	if n < cacheMinElems || !cacheEnabled {
		return
	}
	var e E
	if n >= listMinElems {
		c.lists.give(unsafe.Pointer(unsafe.SliceData(s)), n, int(unsafe.Sizeof(e)))
		return
	}
	c.pool(n).Put(unsafe.Pointer(unsafe.SliceData(s)))
}

// pool returns the sync.Pool of class n (below listMinElems), making it
// if need be.
func (c *sizeCache[E]) pool(n int) *sync.Pool {
	i := poolSlot(n)
	if pools := c.pools.Load(); pools != nil {
		if p := pools[i].Load(); p != nil {
			return p
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pools := c.pools.Load()
	if pools == nil {
		pools = new([poolSlots]atomic.Pointer[sync.Pool])
		c.pools.Store(pools)
	}
	p := pools[i].Load()
	if p == nil {
		p = &sync.Pool{}
		pools[i].Store(p)
	}
	return p
}

// poolSlots is the number of slots poolSlot numbers: a class of its own
// for each size up to 1024, then those of classIndex below listMinElems.
const poolSlots = 1024 + listClassLo - smallClassLo

// smallClassLo and listClassLo are the classIndex numbers of the first
// class above 1024 elements and of listMinElems.
const (
	smallClassLo = 11*16 + 1025>>(11-5) - 17
	listClassLo  = 14*16 + listMinElems>>(14-5) - 17
)

// poolSlot numbers the classes below listMinElems: a size up to 1024 is
// its own slot, a larger class follows from classIndex. A map lookup
// (the cache's index before) cost more than the rest of a hit.
func poolSlot(n int) int {
	if n <= 1024 {
		return n
	}
	return 1024 + classIndex(n) - smallClassLo
}

// classIndex numbers the classes above 1024 elements in order of size:
// class c of (2^(k-1), 2^k] is a multiple (17 … 32) of 2^(k-5).
func classIndex(c int) int {
	k := bits.Len(uint(c - 1))
	return k*16 + c>>(k-5) - 17
}

// classSize is the size of the class numbered i (the inverse of
// classIndex).
func classSize(i int) int {
	k := i / 16
	return (i%16 + 17) << (k - 5)
}

// maxClasses bounds the class numbers of storage the lists keep (sizes up
// to 2^63 elements).
const maxClasses = 64 * 16

// freeLists holds free storage of listMinElems elements or more, a LIFO
// list per class, with a bitmap of the classes that have some. The lists
// are allocated when first given storage: the caches are package
// variables, which the collector reads on every cycle, and their 1024
// slice headers each (7 caches, 170 KB) were about half the package
// variables with pointers of a test binary, read even where no storage
// is large enough for the lists (a small model's step).
type freeLists struct {
	mu    sync.Mutex
	lists *[maxClasses][]freeBuf
	full  [maxClasses / 64]uint64
	held  atomic.Int64 // bytes in the lists
	cycle uint32       // collection cycles seen (see watchCycles)
}

// freeBuf is a free buffer and the collection cycle in which it was given.
type freeBuf struct {
	p     unsafe.Pointer
	bytes int
	cycle uint32
}

// take returns the most recently given buffer of the smallest class from
// size (a class) up to listUpClasses above it that has one, and that
// class's size; nil if none has.
func (l *freeLists) take(size int) (unsafe.Pointer, int) {
	lo := classIndex(size)
	hi := min(lo+listUpClasses, maxClasses-1)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := lo; i <= hi; {
		w := l.full[i/64] >> (i % 64)
		if w == 0 {
			i = (i/64 + 1) * 64
			continue
		}
		i += bits.TrailingZeros64(w)
		if i > hi {
			break
		}
		list := l.lists[i]
		b := list[len(list)-1]
		list[len(list)-1] = freeBuf{}
		l.lists[i] = list[:len(list)-1]
		if len(list) == 1 {
			l.full[i/64] &^= 1 << (i % 64)
		}
		l.held.Add(-int64(b.bytes))
		return b.p, classSize(i)
	}
	return nil, 0
}

// give files p, storage of class size (elements of elem bytes).
func (l *freeLists) give(p unsafe.Pointer, size, elem int) {
	i := classIndex(size)
	if i >= maxClasses {
		return
	}
	watchCyclesOnce.Do(watchCycles)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lists == nil {
		l.lists = new([maxClasses][]freeBuf)
	}
	l.lists[i] = append(l.lists[i], freeBuf{p: p, bytes: size * elem, cycle: l.cycle})
	l.full[i/64] |= 1 << (i % 64)
	l.held.Add(int64(size * elem))
}

// age drops the buffers given before the last collection cycle that
// nobody took since, and starts a new cycle.
func (l *freeLists) age() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.full {
		for bitsLeft := l.full[w]; bitsLeft != 0; bitsLeft &= bitsLeft - 1 {
			i := w*64 + bits.TrailingZeros64(bitsLeft)
			kept := l.lists[i][:0]
			for _, b := range l.lists[i] {
				if b.cycle == l.cycle {
					kept = append(kept, b)
				} else {
					l.held.Add(-int64(b.bytes))
					cacheDropped.Add(int64(b.bytes))
				}
			}
			clear(l.lists[i][len(kept):])
			l.lists[i] = kept
			if len(kept) == 0 {
				l.full[w] &^= 1 << (i % 64)
			}
		}
	}
	l.cycle++
}

// watchCyclesOnce starts watchCycles when the lists are first given
// storage.
var watchCyclesOnce sync.Once

// watchCycles ages the free lists once per collection cycle: a cleanup
// (runtime.AddCleanup) on an object nothing references runs after the
// cycle that finds it unreachable, and arms the next one.
func watchCycles() {
	sentinel := &struct{ _ [32]byte }{} // not a tiny allocation: collected alone
	runtime.AddCleanup(sentinel, func(struct{}) {
		for _, c := range cacheCounts {
			c.lists.age()
		}
		watchCycles()
	}, struct{}{})
}

// Counters of storage the allocator asked the collector for, and of
// storage the cache gave back to it (ReadCacheStats).
var (
	freshAllocs, freshBytes, cacheDropped atomic.Int64
)

// countFresh counts a fresh allocation of bytes.
func countFresh(bytes int) {
	freshAllocs.Add(1)
	freshBytes.Add(int64(bytes))
}

// CacheStats are counters of the allocator cache since the process
// started: the storage of every dtype together.
type CacheStats struct {
	// Hits counts allocations the cache served with donated storage.
	Hits int64
	// Fresh counts allocations it could not serve, which took new
	// storage from the collector, and FreshBytes their bytes.
	Fresh, FreshBytes int64
	// HeldBytes is the storage of at least 16384 elements (64 KiB of
	// float32, 32 KiB of bfloat16) the cache holds now, waiting to be
	// reused (smaller storage waits in sync.Pools, which count nothing).
	HeldBytes int64
	// DroppedBytes is the storage the cache gave back to the collector
	// because nobody took it for a whole collection cycle.
	DroppedBytes int64
	// PacedCycles counts the collection cycles the allocator started
	// (see "Pacing the collector" in alloc_cache.go).
	PacedCycles int64
}

// ReadCacheStats returns the allocator cache's counters: a figure for
// benchmarks, tests and memory reports (examples/moe prints them).
func ReadCacheStats() CacheStats {
	s := CacheStats{
		Fresh:        freshAllocs.Load(),
		FreshBytes:   freshBytes.Load(),
		DroppedBytes: cacheDropped.Load(),
		PacedCycles:  paced.Load(),
	}
	for _, c := range cacheCounts {
		s.Hits += c.hits.Load()
		s.HeldBytes += c.lists.held.Load()
	}
	return s
}

// Pacing the collector.
//
// Storage the cache holds is live to the collector, which by default (GOGC
// 100) lets the heap grow to twice what it found live before it collects
// again: with the whole working set of a training step in the cache, the
// garbage a step leaves (graph nodes, headers, the storage of values
// nobody donated) could then grow to the size of that working set. At the
// end of a backward pass that recycles its intermediates
// (Trace.RecycleIntermediates), a training step's natural end, the
// allocator starts a collection cycle once the heap has grown since the
// last one by more than an eighth of what that cycle found live (and by
// 16 MiB at least), unless the collector ran since the previous check (a
// step that leaves that much garbage paces the collector itself, and a
// cycle every step would cost more than it saves; the check itself runs
// at most once a millisecond). Garbage then stays a
// fraction of the working set, for the CPU time of one cycle every few
// steps (marking cached storage costs nothing: it holds no pointers). The
// cycle (runtime.GC) runs on the goroutine that called Backward, which it
// holds up for a few milliseconds (a goroutine of its own would outlive
// the call); on a device goroutine of shard.Map the check waits until
// every device has returned (PaceDeferred): there the cycle stalls no
// device, stops no running kernel, and finds the devices' graphs dead
// (examples/moe's dp_ep: a cycle's mark 7-9 → ~1 ms). GONOX_GCPACE=off in the environment switches the pacing off;
// the GOGC and GOMEMLIMIT settings are never changed.

// pacing is false under GONOX_GCPACE=off; pacingNow guards against a
// second cycle while one the pacer started runs (backward passes of
// several devices end at once); paced counts the cycles.
var (
	pacing     = os.Getenv("GONOX_GCPACE") != "off"
	pacingNow  atomic.Bool
	paced      atomic.Int64
	paceCycles atomic.Uint64 // collection cycles at the last check
)

// paceSlack is the heap growth beyond the live heap that the pacer lets
// pass: live/paceFraction, and paceMinBytes at least.
const (
	paceFraction = 8
	paceMinBytes = 16 << 20
)

// paceFractionDeferred is paceFraction for the check after a shard.Map
// call (PaceDeferred): a quarter of the live heap. The simulated devices
// of a Map leave each a graph's worth of small objects a step
// (examples/moe's dp_ep: ~12 MB a step on 8 devices against ~4 MB for the
// same model on one device), which an eighth of its ~150 MB live heap
// paced every 1-2 steps; every cycle there also sweeps the whole heap on
// the host with the other processors idle (runtime.GC's sweep yields
// after each span, and each yield wakes an idle processor's thread).
const paceFractionDeferred = 4

// PaceCollector runs a collection cycle if the heap grew by more than an
// eighth of the live heap (and 16 MiB) since the last cycle, as the end
// of a backward pass that recycles its intermediates does (see
// ReadCacheStats' PacedCycles). It is for code that drops large storage
// to the collector in the middle of a step, so that the garbage does not
// grow to the size of the live heap before the collector runs on its
// own: package shard calls it after each cross-process reduce-scatter
// and prefetched gather of an FSDP step. It stands back when the
// collector ran on its own since the previous check, and does nothing
// under GONOX_GCPACE=off.
func PaceCollector() { paceCollector() }

// paceInterval is the least time between two checks of the pacer at the
// end of backward passes (paceAfterBackward): a check reads the runtime's
// metrics, about a microsecond, which a small model's step (tens of
// microseconds) would pay every step; in a millisecond such steps leave
// far less garbage than the pacer's slack.
const paceInterval = time.Millisecond

// paceEpoch and paceLast time the pacer's checks at the end of backward
// passes: paceLast is the last one's time since paceEpoch.
var (
	paceEpoch = time.Now()
	paceLast  atomic.Int64
)

// paceDeferred records that a backward pass ended on a device goroutine
// of shard.Map while the pacer's check was due (see PaceDeferred).
var paceDeferred atomic.Bool

// paceAfterBackward is paceCollector at the end of a backward pass that
// recycles its intermediates, at most once per paceInterval. On a device
// goroutine of shard.Map it only records that the check is due:
// runtime.GC holds its caller up through the whole cycle, and the other
// devices would soon wait for that one at their next collective (and the
// cycle's first stop for the assembly kernels they run); shard runs the
// check once every device has returned (PaceDeferred).
func paceAfterBackward() {
	if devices.Running() {
		if pacing {
			paceDeferred.Store(true)
		}
		return
	}
	now := int64(time.Since(paceEpoch))
	last := paceLast.Load()
	if now-last < int64(paceInterval) || !paceLast.CompareAndSwap(last, now) {
		return
	}
	paceCollector()
}

// PaceDeferred runs the pacer's check (PaceCollector) if a backward pass
// that recycles its intermediates ended on a device goroutine since the
// last call: package shard calls it when every device goroutine of a Map
// has returned, where the cycle holds up no device and its marking has
// every core. It does nothing otherwise, at the cost of an atomic load.
func PaceDeferred() {
	if paceDeferred.Load() && paceDeferred.Swap(false) {
		paceCollectorWith(paceFractionDeferred)
	}
}

// paceCollector starts a collection cycle if the heap grew past the
// pacer's slack since the last one (see "Pacing the collector").
func paceCollector() { paceCollectorWith(paceFraction) }

// paceCollectorWith is paceCollector with a slack of live/fraction (and
// paceMinBytes at least).
func paceCollectorWith(fraction uint64) {
	if !pacing || !pacingNow.CompareAndSwap(false, true) {
		return
	}
	defer pacingNow.Store(false)
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	for _, x := range s {
		if x.Value.Kind() != metrics.KindUint64 {
			return
		}
	}
	live, now, cycles := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
	if cycles != paceCycles.Swap(cycles) {
		// The collector ran since the last check: the steps leave
		// garbage enough to pace it themselves.
		return
	}
	if now > live+max(live/fraction, paceMinBytes) {
		paced.Add(1)
		runtime.GC()
		paceCycles.Store(cycles + 1)
	}
}
