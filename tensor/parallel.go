package tensor

import (
	"runtime"
	"sync/atomic"

	"github.com/gonox/gonox/tensor/internal/vec"
	"github.com/gonox/gonox/tensor/internal/workers"
)

// Large elementwise, reduction and softmax kernels split their work over
// runtime.GOMAXPROCS goroutines; small ones, and every kernel computing on
// a block inside shard.Map (an operand with a Local mark), run on the
// calling goroutine. The other goroutines are package workers' pooled
// workers (started on first use, at most GOMAXPROCS-1, each exiting after
// workers.IdleExit without work): the one exception to "no goroutine
// outlives the call that started it".
// Every split gives the same bits as the serial loop: elementwise kernels
// are independent per element, row kernels per row, and float64 sums are
// cut into blocks of a fixed size (vec.SumBlock) whatever the split.

// parallelMinWork is the work, in elements weighted by cost, from which a
// kernel splits (measured on a 2-core Zen 5 VM: below about 256K simple
// elements starting and joining goroutines costs more than it saves).
// Tests lower it to exercise the parallel paths on small tensors.
var parallelMinWork = 1 << 18

// parallelSpawned counts the helpers kernels have asked for, through
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
	// chunksPerProc chunks a goroutine, handed out dynamically (spread),
	// but none under parallelMinWork/8 of work.
	nc := min(chunksPerProc*p, max(p, work/(parallelMinWork/8)), n)
	bounds := func(c int) int {
		b := n * c / nc
		if c < nc {
			b &^= align - 1
		}
		return b
	}
	spreadOn(p, nc, bounds, fn)
}

// chunksPerProc is how many chunks parallelFor cuts per goroutine: a
// goroutine that starts late (the OS waking an idle core takes tens of
// microseconds, more on a busy machine) then finds its share done by the
// others instead of making them wait for it.
const chunksPerProc = 4

// spread calls fn on the chunks [bound(c), bound(c+1)) for c in [0, p),
// on p goroutines: spreadOn(p, p, bound, fn).
func spread(p int, bound func(c int) int, fn func(lo, hi int)) {
	spreadOn(p, p, bound, fn)
}

// spreadOn calls fn on the chunks [bound(c), bound(c+1)) for c in [0,
// nc), on the calling goroutine and up to p-1 pooled workers (package
// workers), each taking the next chunk not yet taken until none is left
// (the first from the front, the others from the back: workers.Chunks),
// and returns when all have finished. A panic in a chunk is raised again on
// the caller once every chunk has finished, so a failing kernel fails its
// op (which shard.Map then reports as the device's error) instead of the
// process.
func spreadOn(p, nc int, bound func(c int) int, fn func(lo, hi int)) {
	var chunks workers.Chunks
	chunks.Reset(nc)
	parallelSpawned.Add(int64(p - 1))
	workers.Run(p-1, func() {
		front := chunks.Front()
		for {
			c, ok := chunks.Next(front)
			if !ok {
				return
			}
			if lo, hi := bound(c), bound(c+1); lo < hi {
				fn(lo, hi)
			}
		}
	})
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
		if x.local() != nil {
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

// Beside calls host, a function of Go values only (it must call no
// tensor operation and touch nothing the caller's next operations touch),
// on one of the worker goroutines the kernels split their work on, while
// the calling goroutine goes on with tensor operations, and returns wait,
// which returns once host has returned. Call wait before using what host
// computes; every Beside must be followed by its wait. If no worker takes
// host by then, wait calls it on the calling goroutine; so it does when
// like is a block inside shard.Map (a device computes on its own
// goroutine) or GOMAXPROCS is 1. like is only read for that mark: any
// tensor of the caller's computation will do. A panic in host is raised
// again by wait (inside shard.Map it then fails the device, and the Map
// call, as any panic of fn does).
//
// Beside panics if like or host is nil (or like donated); wait panics if
// called a second time. A wait never called blocks nobody, but host may
// then never run, and a panic of host is lost.
//
// It lets a layer overlap its host work (nn.MoE's routing: which choices
// an expert keeps, the dispatch's indices) with small tensor operations
// that do not need it, so that at two threads the second core does not
// wait through both (docs/performance.md, "The MoE step at two threads, op
// by op").
func Beside(like *Tensor, host func()) (wait func()) {
	const op = "tensor.Beside"
	checkNil(op, "like", like)
	if like.local() != nil {
		return workers.Later(op, host)
	}
	return workers.Go(op, host)
}
