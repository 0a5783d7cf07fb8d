package tensor

import (
	"unsafe"

	"github.com/gonox/gonox/tensor/internal/workers"
)

// SetCotangentReuse switches Backward's reuse of cotangent buffers on or
// off for a test and returns a function restoring the previous setting.
func SetCotangentReuse(on bool) (restore func()) {
	old := cotangentReuse
	cotangentReuse = on
	return func() { cotangentReuse = old }
}

// CotangentReuses returns how many in-place accumulations and donations
// backward passes have made.
func CotangentReuses() int64 { return cotangentReuses.Load() }

// RematDrops returns how many cotangents checkpoints' backward passes
// have donated.
func RematDrops() int64 { return rematDrops.Load() }

// ParallelSpawned returns how many goroutines kernels have started.
func ParallelSpawned() int64 { return parallelSpawned.Load() }

// SetAllocCache switches the allocator cache on or off and the poisoning
// of recycled uninitialised storage (NaN for float32) for a test, and
// returns a function restoring the previous settings.
func SetAllocCache(on, poison bool) (restore func()) {
	oldOn, oldPoison := cacheEnabled, poisonRecycled
	cacheEnabled, poisonRecycled = on, poison
	return func() { cacheEnabled, poisonRecycled = oldOn, oldPoison }
}

// StorageID identifies t's float32 storage (0 if none): tests compare it
// to see whether storage was recycled.
func StorageID(t *Tensor) uintptr { return uintptr(unsafe.Pointer(storage(t))) }

// HolderCount returns the holder count of t's storage (-1 if it has none).
func HolderCount(t *Tensor) int {
	if t.rec == nil {
		return -1
	}
	return int(t.rec.refs.Load())
}

// PoolAsks returns how many parallel regions have asked the worker pool
// for helpers.
func PoolAsks() int64 { return workers.Asked() }
