package gemm

import (
	"runtime"
	"sync/atomic"
)

// sharedPanels are the packed A panels of one parallel Sgemm or Dgemm whose
// goroutines split C by columns, so that each needs every row of A: A is
// packed once (in groups of panelGroup row tiles, each by the goroutine
// that reaches it first) instead of once per block of columns. A goroutine
// that finds a group being packed packs the next free group meanwhile, and
// each one packs a group ahead of the one it computes, so the goroutines
// share the packing and rarely wait.
//
// The panels of k block pc start at buf[pc*rows:] (rows = m+MR, the
// layout packABlock gives rows [0,m)), the tile at row ir at
// buf[pc*rows+ir*kc:]. state[b*groups+g] is 0 (not packed), 1 (being
// packed) or 2 (packed) for group g of k block b.
type sharedPanels[T elem] struct {
	buf    []T
	state  []atomic.Int32
	rows   int // m + MR
	groups int // groups per k block
	kcMax  int // KC
}

// panelGroup is the number of row tiles packed as one unit of sharedPanels.
const panelGroup = 8

// sharedPanelsMax bounds, in elements, the A panels shared by a parallel
// call (all of A, plus padding); larger problems pack per block of columns.
const sharedPanelsMax = 8 << 20

// sharesA reports whether a parallel call that splits C by columns should
// pack A once for all its goroutines: whether run packs A for p.
func (ks *kernelSet[T]) sharesA(p *problem[T]) bool {
	return !ks.readsBInPlace(p) && !ks.useTransposed(p) && ks.packAPays(p)
}

// newSharedPanels returns empty shared panels for p, or nil when A is too
// large to be packed whole.
func newSharedPanels[T elem](ks *kernelSet[T], p *problem[T]) *sharedPanels[T] {
	rows := p.m + ks.mr
	if rows*p.k > sharedPanelsMax {
		return nil
	}
	sh := ks.pools.shared.Get().(*sharedPanels[T])
	if cap(sh.buf) < rows*p.k {
		sh.buf = alignedFloats[T](rows * p.k)
	}
	sh.buf = sh.buf[:rows*p.k]
	sh.rows, sh.kcMax = rows, ks.kc
	// The row tiles of run are MR high except the last one or two
	// (tileRows): a group must end where a tile ends, so the last group
	// takes in a boundary that would fall among the last 2·MR rows.
	rowsPer := panelGroup * ks.mr
	sh.groups = (p.m + rowsPer - 1) / rowsPer
	if sh.groups > 1 && (sh.groups-1)*rowsPer > p.m-ks.mr {
		sh.groups--
	}
	n := sh.groups * ((p.k + ks.kc - 1) / ks.kc)
	if cap(sh.state) < n {
		sh.state = make([]atomic.Int32, n)
	}
	sh.state = sh.state[:n]
	for i := range sh.state {
		sh.state[i].Store(0)
	}
	return sh
}

// putSharedPanels returns sh (if not nil) to the pools of ks's element
// type (buffers of up to sharedPanelsMax elements), as the workspaces are,
// so that steady-state calls do not allocate.
func putSharedPanels[T elem](ks *kernelSet[T], sh *sharedPanels[T]) {
	if sh != nil {
		ks.pools.shared.Put(sh)
	}
}

// block returns the panels of the k block starting at pc.
func (sh *sharedPanels[T]) block(pc int) []T {
	return sh.buf[pc*sh.rows:]
}

// ensure makes sure the group holding row ir of k block pc (depth kc) is
// packed, packing it or others as described at sharedPanels, and returns
// the first row past that group.
func (sh *sharedPanels[T]) ensure(ks *kernelSet[T], p *problem[T], pc, kc, ir int) int {
	rowsPer := panelGroup * ks.mr
	g := min(ir/rowsPer, sh.groups-1)
	base := (pc / sh.kcMax) * sh.groups
	for {
		st := &sh.state[base+g]
		if st.Load() == 2 {
			break
		}
		if st.CompareAndSwap(0, 1) {
			sh.pack(ks, p, pc, kc, g)
			st.Store(2)
			break
		}
		// Another goroutine is packing it: pack a later group meanwhile.
		if !sh.packNext(ks, p, pc, kc, base, g+1) {
			runtime.Gosched()
		}
	}
	// Keep one group ahead.
	sh.packNext(ks, p, pc, kc, base, g+1)
	if g == sh.groups-1 {
		return p.m
	}
	return (g + 1) * rowsPer
}

// packNext packs the first group from g on (at most two groups ahead) that
// nobody has claimed, reporting whether it packed one.
func (sh *sharedPanels[T]) packNext(ks *kernelSet[T], p *problem[T], pc, kc, base, g int) bool {
	for h := g; h < min(g+2, sh.groups); h++ {
		st := &sh.state[base+h]
		if st.Load() == 0 && st.CompareAndSwap(0, 1) {
			sh.pack(ks, p, pc, kc, h)
			st.Store(2)
			return true
		}
	}
	return false
}

// pack packs group g of the k block at pc.
func (sh *sharedPanels[T]) pack(ks *kernelSet[T], p *problem[T], pc, kc, g int) {
	rowsPer := panelGroup * ks.mr
	r0, r1 := g*rowsPer, (g+1)*rowsPer
	if g == sh.groups-1 {
		r1 = p.m
	}
	ks.packABlock(sh.buf[pc*sh.rows+r0*kc:], p, r0, r1, pc, kc)
}
