package tensor

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// Large elementwise, reduction and softmax kernels split their work over
// runtime.GOMAXPROCS goroutines; small ones, and every kernel computing on
// a block inside shard.Map (an operand with a Local mark), run on the
// calling goroutine. No goroutine outlives the kernel that starts it.
// Every split gives the same bits as the serial loop: elementwise kernels
// are independent per element, row kernels per row, and float64 sums are
// cut into blocks of a fixed size (vec.SumBlock) whatever the split.

// parallelMinWork is the work, in elements weighted by cost, from which a
// kernel splits (measured on a 2-core Zen 5 VM: below about 256K simple
// elements starting and joining goroutines costs more than it saves).
// Tests lower it to exercise the parallel paths on small tensors.
var parallelMinWork = 1 << 18

// parallelSpawned counts the goroutines kernels have started, through
// parallelFor or srtParallel (tests).
var parallelSpawned atomic.Int64

// Per-element costs, relative to an add.
const (
	costCheap = 1 // add, mul, copy, compare
	costMath  = 4 // exp, tanh, sigmoid, GELU (AVX2)
	costSlow  = 16
)

// parallelFor calls fn on contiguous chunks covering [0, n), on several
// goroutines when n·cost reaches parallelMinWork and local is false.
// Chunk boundaries are multiples of align (a power of two, or 1).
func parallelFor(n, cost, align int, local bool, fn func(lo, hi int)) {
	p := runtime.GOMAXPROCS(0)
	work := n * cost
	if local || p < 2 || n < 2 || work < parallelMinWork {
		fn(0, n)
		return
	}
	p = min(p, max(2, work/(parallelMinWork/2)))
	bounds := func(c int) int {
		b := n * c / p
		if c < p {
			b &^= align - 1
		}
		return b
	}
	spread(p, bounds, fn)
}

// spread calls fn on the chunks [bound(c), bound(c+1)) for c in [0, p):
// chunk 0 on the calling goroutine, every other non-empty one on a
// goroutine of its own, and returns when all have finished. A panic in a
// chunk is raised again on the caller once every chunk has finished, so a
// failing kernel fails its op (which shard.Map then reports as the
// device's error) instead of the process, and leaves no goroutine behind.
func spread(p int, bound func(c int) int, fn func(lo, hi int)) {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		fault any
	)
	run := func(lo, hi int) {
		defer func() {
			if r := recover(); r != nil {
				once.Do(func() { fault = r })
			}
		}()
		fn(lo, hi)
	}
	for c := 1; c < p; c++ {
		lo, hi := bound(c), bound(c+1)
		if lo >= hi {
			continue
		}
		wg.Add(1)
		parallelSpawned.Add(1)
		go func() {
			defer wg.Done()
			run(lo, hi)
		}()
	}
	if lo, hi := bound(0), bound(1); lo < hi {
		run(lo, hi)
	}
	wg.Wait()
	if fault != nil {
		panic(fault)
	}
}

// serial reports whether a kernel of the given work runs on the calling
// goroutine. Callers test it before building the closure parallelFor
// takes, which escapes to the heap.
func serial(work int, local bool) bool {
	return local || work < parallelMinWork || runtime.GOMAXPROCS(0) < 2
}

// isLocal reports whether any operand is a block inside shard.Map.
func isLocal(xs ...*Tensor) bool {
	for _, x := range xs {
		if x.local != nil {
			return true
		}
	}
	return false
}

// blockSum returns the in-order float64 sum of f over the vec.SumBlock-long
// blocks of [0, n), computing blocks on several goroutines: the same bits
// as a serial vec.SumF64-style sum.
func blockSum(n int, local bool, f func(lo, hi int) float64) float64 {
	nb := (n + vec.SumBlock - 1) / vec.SumBlock
	parts := make([]float64, nb)
	parallelFor(nb, vec.SumBlock*costCheap, 1, local, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			parts[i] = f(i*vec.SumBlock, min((i+1)*vec.SumBlock, n))
		}
	})
	s := 0.0
	for _, p := range parts {
		s += p
	}
	return s
}
