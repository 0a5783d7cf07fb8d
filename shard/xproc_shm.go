package shard

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// shmLimit is the largest segment, in bytes per process, a shared group
// allocates: larger collectives go through it in rounds (two fences a
// round, under a microsecond each), so a model of any size costs at most
// this much shared memory per group and process.
const shmLimit = 16 << 20

// shmGroup is a Group whose collectives go through shared memory.
type shmGroup struct {
	SharedMemoryGroup
	seg   [][]byte // every process's segment; nil before the first use
	capa  int      // bytes per process of seg
	limit int      // largest segment (shmLimit; tests lower it)
	off   bool     // Share failed: use the group's own collectives
}

// shmAsyncGroup is a shmGroup whose group also sends without blocking.
type shmAsyncGroup struct {
	*shmGroup
	AsyncGroup
}

// wrapGroup returns g with its collectives moved through shared memory if
// it is a SharedMemoryGroup, else g itself (nil stays nil).
func wrapGroup(g Group) Group {
	sg, ok := g.(SharedMemoryGroup)
	if !ok || sg == nil {
		return g
	}
	s := &shmGroup{SharedMemoryGroup: sg, limit: shmLimit}
	if ag, ok := g.(AsyncGroup); ok {
		return shmAsyncGroup{s, ag}
	}
	return s
}

// newGroup makes the transport's group of the given processes (nil if
// this process is not among them), its collectives through shared memory
// if it can share memory.
func newGroup(procs []int) Group {
	g := wrapGroup(dist.t.NewGroup(procs))
	if h := newHierGroup(g, procs); h != nil {
		return h
	}
	return g
}

// sumsInRankOrder reports whether g's all-reduce and reduce-scatter sum in
// the same order (rank order, through shared memory). Collective: every
// process of g calls it at the same point.
func sumsInRankOrder(g Group) bool {
	var s *shmGroup
	switch v := g.(type) {
	case *shmGroup:
		s = v
	case shmAsyncGroup:
		s = v.shmGroup
	case *hierGroup, hierAsyncGroup:
		return true
	default:
		return false
	}
	return s.ensure(4096)
}

// ensure makes the segments at least n bytes (at most the limit) and
// reports whether shared memory is in use. Every process calls it with
// the same n, so all take the same decisions.
func (g *shmGroup) ensure(n int) bool {
	if g.off {
		return false
	}
	n = min((n+63)&^63, g.limit)
	if n <= g.capa && g.seg != nil {
		return true
	}
	c := max(n, min(max(2*g.capa, 4096), g.limit))
	seg := g.Share(c)
	if seg == nil {
		g.off, g.seg, g.capa = true, nil, 0
		return false
	}
	if len(seg) != g.Size() {
		panic(fmt.Sprintf("shard: SharedMemoryGroup.Share returned %d segments for a group of %d processes", len(seg), g.Size()))
	}
	for q, s := range seg {
		if len(s) < c {
			panic(fmt.Sprintf("shard: SharedMemoryGroup.Share(%d) returned a segment of %d bytes for rank %d", c, len(s), q))
		}
	}
	g.seg, g.capa = seg, c
	return true
}

// segFloat32 and segInt32 view a segment's bytes as elements (64-byte
// aligned by Share, so the view is aligned).
func segFloat32(b []byte) []float32 {
	return unsafeSlice[float32](b)
}

func segInt32(b []byte) []int32 {
	return unsafeSlice[int32](b)
}

// AllreduceFloat32 combines send over the group into recv, in rounds of
// at most the segment, each a reduce-scatter and an all-gather: every
// process stores part q of its chunk into slot q of its segment; past a
// fence, process r reduces its own part r and the others' slots r (in
// rank order) into the last slot of its segment; past another, every
// process copies every reduced part into recv. Each process reads about
// 2.5 chunks and writes 2 a round; storing whole chunks and reducing
// them whole, as two processes might, reads 3 (a version that did
// measured 20–30% slower between 2 processes in BenchmarkAllreduce of
// shard/mpi during development; it is not kept).
func (g *shmGroup) AllreduceFloat32(send, recv []float32, op ReduceOp) {
	shmAllreduce(g, send, recv, op, segFloat32, g.SharedMemoryGroup.AllreduceFloat32)
}

// AllreduceInt32 is AllreduceFloat32 for int32.
func (g *shmGroup) AllreduceInt32(send, recv []int32, op ReduceOp) {
	shmAllreduce(g, send, recv, op, segInt32, g.SharedMemoryGroup.AllreduceInt32)
}

func shmAllreduce[T float32 | int32](g *shmGroup, send, recv []T, op ReduceOp, view func([]byte) []T, fallback func(send, recv []T, op ReduceOp)) {
	if len(send) != len(recv) {
		panic(fmt.Sprintf("shard: all-reduce of %d elements into %d", len(send), len(recv)))
	}
	p, r, n := g.Size(), g.Rank(), len(send)
	if n == 0 {
		return
	}
	if p == 1 {
		copy(recv, send)
		return
	}
	// Rounds of p parts of at most k elements; the segment holds a slot
	// per process (this process's part for it) and this process's
	// reduced part.
	k := (n + p - 1) / p
	if most := g.limit / 4 / (p + 1); k > most {
		k = most - most%16
	}
	if !g.ensure(4 * (p + 1) * k) {
		fallback(send, recv, op)
		return
	}
	ins := make([][]T, p)
	for lo := 0; lo < n; lo += p * k {
		mm := min(p*k, n-lo)
		mine := view(g.seg[r])
		for q := 0; q < p; q++ {
			if q != r {
				ql, qh := partOf(mm, p, q)
				copy(mine[q*k:q*k+qh-ql], send[lo+ql:lo+qh])
			}
		}
		g.Fence()
		pl, ph := partOf(mm, p, r)
		for q := range ins {
			if q == r {
				ins[q] = send[lo+pl : lo+ph]
			} else {
				ins[q] = view(g.seg[q])[r*k : r*k+ph-pl]
			}
		}
		reduceInto(mine[p*k:p*k+ph-pl], ins, op)
		g.Fence()
		for q := 0; q < p; q++ {
			ql, qh := partOf(mm, p, q)
			copy(recv[lo+ql:lo+qh], view(g.seg[q])[p*k:p*k+qh-ql])
		}
	}
	g.Fence() // every part read before anything writes the segments again
}

// partOf is the range [lo, hi) of part q of n elements split p ways, the
// first n mod p parts one longer.
func partOf(n, p, q int) (int, int) {
	base, extra := n/p, n%p
	lo := q*base + min(q, extra)
	hi := lo + base
	if q < extra {
		hi++
	}
	return lo, hi
}

// ReduceScatterFloat32 combines send over the group and leaves block r in
// process r's recv, in rounds of at most the segment: every process
// stores its chunk of each other process's block into that process's
// slot of its segment; past a fence, process r reduces its own block's
// chunk and the slots for it (in rank order) into recv.
func (g *shmGroup) ReduceScatterFloat32(send, recv []float32, op ReduceOp) {
	p, r, n := g.Size(), g.Rank(), len(recv)
	if len(send) != p*n {
		panic(fmt.Sprintf("shard: reduce-scatter of %d elements over %d processes into %d", len(send), p, n))
	}
	if n == 0 {
		return
	}
	s := n // slot, in elements
	if most := g.limit / 4 / p; s > most {
		s = most - most%16
	}
	if !g.ensure(4 * p * s) {
		g.SharedMemoryGroup.ReduceScatterFloat32(send, recv, op)
		return
	}
	ins := make([][]float32, p)
	for lo := 0; lo < n; lo += s {
		m := min(s, n-lo)
		mine := segFloat32(g.seg[r])
		for q := 0; q < p; q++ {
			if q != r {
				copy(mine[q*s:q*s+m], send[q*n+lo:q*n+lo+m])
			}
		}
		g.Fence()
		for q := range ins {
			if q == r {
				ins[q] = send[r*n+lo : r*n+lo+m]
			} else {
				ins[q] = segFloat32(g.seg[q])[r*s : r*s+m]
			}
		}
		reduceInto(recv[lo:lo+m], ins, op)
		g.Fence()
	}
}

// Allgatherv concatenates every process's send into recv, in rounds of
// at most the segment: every process stores its chunk into its segment;
// past a fence, each copies the others' into place.
func (g *shmGroup) Allgatherv(send, recv []byte, counts []int) {
	p, r := g.Size(), g.Rank()
	if len(counts) != p || len(send) != counts[r] {
		panic(fmt.Sprintf("shard: all-gather of %d bytes from rank %d with counts %v", len(send), r, counts))
	}
	off := make([]int, p+1)
	most := 0
	for q, c := range counts {
		off[q+1] = off[q] + c
		most = max(most, c)
	}
	if len(recv) != off[p] {
		panic(fmt.Sprintf("shard: all-gather of %d bytes into %d", off[p], len(recv)))
	}
	if most == 0 {
		return
	}
	if !g.ensure(most) {
		g.SharedMemoryGroup.Allgatherv(send, recv, counts)
		return
	}
	copy(recv[off[r]:off[r+1]], send)
	s := g.capa
	for lo := 0; lo < most; lo += s {
		if lo < len(send) {
			copy(g.seg[r], send[lo:min(lo+s, len(send))])
		}
		g.Fence()
		for q := 0; q < p; q++ {
			if q != r && lo < counts[q] {
				copy(recv[off[q]+lo:off[q]+min(lo+s, counts[q])], g.seg[q])
			}
		}
		g.Fence()
	}
}

// Alltoallv sends sendCounts[q] bytes of send to process q and receives
// recvCounts[q] bytes from process q: every process publishes its send
// counts in its segment's header; past a fence, all know every count and
// move the blocks in rounds through one slot per destination.
func (g *shmGroup) Alltoallv(send []byte, sendCounts []int, recv []byte, recvCounts []int) {
	p, r := g.Size(), g.Rank()
	if len(sendCounts) != p || len(recvCounts) != p {
		panic(fmt.Sprintf("shard: all-to-all with %d send and %d receive counts over %d processes", len(sendCounts), len(recvCounts), p))
	}
	sd, rd := make([]int, p+1), make([]int, p+1)
	for q := 0; q < p; q++ {
		sd[q+1] = sd[q] + sendCounts[q]
		rd[q+1] = rd[q] + recvCounts[q]
	}
	if sd[p] != len(send) || rd[p] != len(recv) {
		panic(fmt.Sprintf("shard: all-to-all of %d bytes (counts sum to %d) into %d (counts sum to %d)", len(send), sd[p], len(recv), rd[p]))
	}
	head := (8*p + 63) &^ 63
	if head+64*p > g.limit || !g.ensure(head+64*p) {
		g.SharedMemoryGroup.Alltoallv(send, sendCounts, recv, recvCounts)
		return
	}
	for q, c := range sendCounts {
		binary.LittleEndian.PutUint64(g.seg[r][8*q:], uint64(c))
	}
	g.Fence()
	most := 0
	for q := 0; q < p; q++ {
		for d := 0; d < p; d++ {
			c := int(binary.LittleEndian.Uint64(g.seg[q][8*d:]))
			if d == r && c != recvCounts[q] {
				panic(fmt.Sprintf("shard: all-to-all: process %d sends %d bytes to process %d, which expects %d", q, c, r, recvCounts[q]))
			}
			if q != d {
				most = max(most, c)
			}
		}
	}
	copy(recv[rd[r]:rd[r+1]], send[sd[r]:sd[r+1]])
	if most == 0 {
		g.Fence() // the headers read before the next call writes them
		return
	}
	s := min(most, (g.limit-head)/p) // slot, in bytes
	s = max(s&^63, min(most, 64))
	if !g.ensure(head + p*s) {
		// The headers were read; a fallback moves the data alone.
		g.SharedMemoryGroup.Alltoallv(send, sendCounts, recv, recvCounts)
		return
	}
	// The whole segment, in slots 64-byte aligned when they are that
	// large (never empty: the region holds p slots of the size asked).
	if s = (g.capa - head) / p; s >= 64 {
		s &^= 63
	}
	for lo := 0; lo < most; lo += s {
		for q := 0; q < p; q++ {
			if q != r && lo < sendCounts[q] {
				copy(g.seg[r][head+q*s:head+(q+1)*s], send[sd[q]+lo:sd[q]+min(lo+s, sendCounts[q])])
			}
		}
		g.Fence()
		for q := 0; q < p; q++ {
			if q != r && lo < recvCounts[q] {
				copy(recv[rd[q]+lo:rd[q]+min(lo+s, recvCounts[q])], g.seg[q][head+r*s:head+(r+1)*s])
			}
		}
		g.Fence()
	}
}

// reduceInto writes dst = op over ins (in order), elementwise. Sums of
// float32 go through sumFloat32, the kernel of the in-process psum, so
// both add in the same order; max and min are NaN if any input is, as
// tensor.Maximum and tensor.Minimum are.
func reduceInto[T float32 | int32](dst []T, ins [][]T, op ReduceOp) {
	n := len(dst)
	if op == ReduceSum {
		if d, ok := any(dst).([]float32); ok {
			fs := make([][]float32, len(ins))
			for i, x := range ins {
				fs[i] = any(x).([]float32)
			}
			sumFloat32(d, fs, 0, n)
			return
		}
	}
	copy(dst, ins[0][:n])
	for _, x := range ins[1:] {
		x = x[:n]
		switch op {
		case ReduceSum:
			for i, v := range x {
				dst[i] += v
			}
		case ReduceMax:
			for i, v := range x {
				if v > dst[i] || v != v {
					dst[i] = v
				}
			}
		case ReduceMin:
			for i, v := range x {
				if v < dst[i] || v != v {
					dst[i] = v
				}
			}
		default:
			panic(fmt.Sprintf("shard: unknown reduction %d", op))
		}
	}
}

// unsafeSlice views b as elements of T (b must be aligned for T).
func unsafeSlice[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}
