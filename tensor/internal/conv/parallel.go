package conv

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gonox/gonox/tensor/internal/workers"
)

// parMinFlops is the smallest convolution (in multiply-adds ×2) whose work
// is split over goroutines, as in package gemm: waking an idle core costs
// tens of microseconds. Tests lower it.
var parMinFlops = float64(16 << 20)

// threadCount resolves a thread budget as gemm.Sgemm does: 1 is the
// calling goroutine, 0 or less runtime.GOMAXPROCS, n at most n and at most
// GOMAXPROCS; small problems (flops below parMinFlops) get 1.
func threadCount(threads int, flops float64) int {
	if threads == 1 || flops < parMinFlops {
		return 1
	}
	p := runtime.GOMAXPROCS(0)
	if threads <= 0 || threads > p {
		return p
	}
	return threads
}

// workspace holds one goroutine's buffers, pooled so steady-state calls do
// not allocate.
type workspace struct {
	col  []float32
	aux  []float32
	part []float32 // the kernel gradient's partial sums (taken by the calling goroutine)
	wino []float32 // the Winograd products of a block
	zero []float32 // a row of zeros (the Winograd transform's padding rows)
	// padPlan and padPlanes say that aux holds padPlanes planes of
	// padPlan's padded grid whose padding is zero (and zeros after them):
	// the next fill of the same grid copies the interior only.
	padPlan   *shiftPlan
	padPlanes int
}

var wsPool = sync.Pool{New: func() any { return new(workspace) }}

// buf returns *b resized to n floats (64-byte aligned, contents
// undefined).
func buf(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		*b = alignedFloats(n)
	}
	return (*b)[:n]
}

// alignedFloats returns a zeroed slice of n floats starting on a 64-byte
// boundary.
func alignedFloats(n int) []float32 {
	raw := make([]float32, n+16)
	off := 0
	if r := uintptr(unsafe.Pointer(&raw[0])) % 64; r != 0 {
		off = int(64-r) / 4
	}
	return raw[off : off+n : off+n]
}

// parallel calls fn(i, ws) for every i in [0, n), on up to t goroutines
// (the calling one and pooled workers of package workers) that take items
// in order as they finish the previous one, each with a workspace of its
// own. It returns when every call has returned; a panic in one is raised
// again on the caller after all have finished.
func parallel(n, t int, fn func(i int, ws *workspace)) {
	t = min(t, n)
	if t <= 1 {
		ws := wsPool.Get().(*workspace)
		for i := 0; i < n; i++ {
			fn(i, ws)
		}
		wsPool.Put(ws)
		return
	}
	var next atomic.Int64
	workers.Run(t-1, func() {
		defer func() {
			if r := recover(); r != nil {
				next.Store(int64(n)) // the others stop after their item
				panic(r)
			}
		}()
		ws := wsPool.Get().(*workspace)
		defer wsPool.Put(ws)
		for {
			i := int(next.Add(1)) - 1
			if i >= n {
				return
			}
			fn(i, ws)
		}
	})
}
