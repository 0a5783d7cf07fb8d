package workers

import "sync/atomic"

// Chunks hands out the chunk numbers [0, n) of one region, each once, to
// the goroutines running it. The first goroutine to ask (Front) takes them
// from the front, the others from the back, so that when the goroutines
// compute at the same pace the first one computes the first part of the
// data and the others the last part, region after region: on two cores
// each core then mostly reads what it wrote itself in the region before
// (an elementwise op, a row op or a product over rows reading another
// one's result), from its own cache. A counter handing out chunks in
// order gave each core a different, random half every region, and the
// memory-bound kernels ran 20-40% slower at two threads than at one. The
// chunks a goroutine computes do not change a kernel's bits: its chunk
// boundaries do not depend on who computes them.
//
// The caller of Run is usually the first (it calls work at once, and a
// spinning worker joins a few hundred nanoseconds later); after a region
// that woke a parked worker, the worker may be.
type Chunks struct {
	span  atomic.Uint64 // the next front chunk (low 32 bits), the end of those left (high 32)
	first atomic.Bool
}

// Reset makes c hand out [0, n) (n < 2³²) from the next call of Front on.
// It must not run concurrently with Front or Next.
func (c *Chunks) Reset(n int) {
	c.span.Store(uint64(n) << 32)
	c.first.Store(false)
}

// Front reports whether the calling goroutine is the region's first to
// ask, which takes its chunks from the front. Each goroutine calls it
// once, before its first Next.
func (c *Chunks) Front() bool { return c.first.CompareAndSwap(false, true) }

// Next returns the next chunk from the front (or the back) and true, or
// false when every chunk has been handed out.
func (c *Chunks) Next(front bool) (int, bool) {
	for {
		s := c.span.Load()
		lo, hi := uint32(s), uint32(s>>32)
		if lo >= hi {
			return 0, false
		}
		k, ns := lo, s+1
		if !front {
			k, ns = hi-1, s-1<<32
		}
		if c.span.CompareAndSwap(s, ns) {
			return int(k), true
		}
	}
}
