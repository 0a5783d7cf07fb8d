package gemm

import (
	"runtime"
	"sync/atomic"
)

// sharedB is the packed op(B) of one parallel Sgemm or Dgemm whose
// goroutines split C by rows, so that each needs all of it: B is packed once,
// the strips of each k block shared out among the goroutines that reach the
// block, instead of once per block of rows. With a few blocks of rows per
// goroutine, each packed all of B twice at two threads: a [2048,128] @
// [128,128] product spent twice one core's packing time on it, and the
// weights' packing (packB32, transpose8) was +1.3 ms of CPU a step of the
// MoE model at -cpu 2 against -cpu 1.
//
// The packed block of k block pc (depth kc) is buf[pc*width:], laid out as
// run packs it (strip s at s*NR*kc).
type sharedB[T elem] struct {
	buf    []T
	width  int // n rounded up to NR
	strips int
	next   []atomic.Int32 // per k block: the next strip to pack
	done   []atomic.Int32 // per k block: the strips packed
}

// sharedBMax bounds, in elements, the B shared by a parallel call; larger
// ones are packed per block of rows.
const sharedBMax = 4 << 20

// sharesB reports whether a parallel call that splits C by rows should pack
// B once for all its goroutines: whether run packs all of op(B) into whole
// blocks for p (not in place, not by single strips, not transposed) in one
// block of columns.
func (ks *kernelSet[T]) sharesB(p *problem[T]) bool {
	singleStrips := p.transB && p.m <= ks.directMaxM
	return !ks.readsBInPlace(p) && !singleStrips && p.n <= ks.nc && !ks.useTransposed(p)
}

// sharedBCalls counts the parallel calls that packed a shared B (tests).
var sharedBCalls atomic.Int64

// newSharedB returns unpacked shared B for p, or nil when B is too large.
func newSharedB[T elem](ks *kernelSet[T], p *problem[T]) *sharedB[T] {
	strips := (p.n + ks.nr - 1) / ks.nr
	width := strips * ks.nr
	if width*p.k > sharedBMax {
		return nil
	}
	sb := ks.pools.sharedB.Get().(*sharedB[T])
	if cap(sb.buf) < width*p.k {
		sb.buf = alignedFloats[T](width * p.k)
	}
	sb.buf = sb.buf[:width*p.k]
	sb.width, sb.strips = width, strips
	nb := (p.k + ks.kc - 1) / ks.kc
	if cap(sb.next) < nb {
		sb.next, sb.done = make([]atomic.Int32, nb), make([]atomic.Int32, nb)
	}
	sb.next, sb.done = sb.next[:nb], sb.done[:nb]
	for i := range nb {
		sb.next[i].Store(0)
		sb.done[i].Store(0)
	}
	sharedBCalls.Add(1)
	return sb
}

// putSharedB returns sb (if not nil) to the pools of ks's element type.
func putSharedB[T elem](ks *kernelSet[T], sb *sharedB[T]) {
	if sb != nil {
		ks.pools.sharedB.Put(sb)
	}
}

// block returns the packed k block at pc (depth kc), packing strips of it
// that nobody has claimed and waiting for the others.
func (sb *sharedB[T]) block(ks *kernelSet[T], p *problem[T], pc, kc int) []T {
	b := pc / ks.kc
	dst := sb.buf[pc*sb.width : pc*sb.width+kc*sb.width]
	for {
		s := int(sb.next[b].Add(1)) - 1
		if s >= sb.strips {
			break
		}
		ks.packBStrips(dst, p, pc, kc, 0, p.n, s, s+1)
		sb.done[b].Add(1)
	}
	for sb.done[b].Load() < int32(sb.strips) {
		runtime.Gosched()
	}
	return dst
}
