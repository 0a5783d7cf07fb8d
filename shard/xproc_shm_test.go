package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeHost is the shared memory of an in-process stand-in for the
// processes of one host: goroutines as ranks, a reusable barrier as the
// fence, Go memory as the region.
type fakeHost struct {
	p       int
	mu      sync.Mutex
	cond    *sync.Cond
	arrived int
	gen     int
	broken  bool   // a rank panicked: fences panic instead of waiting
	region  []byte // the current region, p segments
	shares  int    // Share calls that made a region (counted once per call)
	refuse  bool   // Share returns nil
	mail    [][]byte
}

func newFakeHost(p int) *fakeHost {
	h := &fakeHost{p: p, mail: make([][]byte, p)}
	h.cond = sync.NewCond(&h.mu)
	return h
}

// barrier returns once all p ranks have called it; last runs once, on
// the last rank to arrive, before any rank returns.
func (h *fakeHost) barrier(last func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.broken {
		panic("fake host: another rank failed")
	}
	g := h.gen
	h.arrived++
	if h.arrived == h.p {
		if last != nil {
			last()
		}
		h.arrived = 0
		h.gen++
		h.cond.Broadcast()
		return
	}
	for g == h.gen && !h.broken {
		h.cond.Wait()
	}
	if h.broken {
		panic("fake host: another rank failed")
	}
}

func (h *fakeHost) breakAll() {
	h.mu.Lock()
	h.broken = true
	h.cond.Broadcast()
	h.mu.Unlock()
}

// fakeShared is one rank's SharedMemoryGroup on a fakeHost. Its own
// collectives (used when Share refuses) move data through a mailbox.
type fakeShared struct {
	h    *fakeHost
	rank int
}

func (f *fakeShared) Rank() int { return f.rank }
func (f *fakeShared) Size() int { return f.h.p }

func (f *fakeShared) Share(n int) [][]byte {
	f.h.barrier(func() {
		f.h.shares++
		f.h.region = nil
		if !f.h.refuse {
			// 64-byte aligned segments of n bytes each, back to back.
			buf := make([]byte, f.h.p*n+64)
			a := int(-uintptr(unsafePointer(buf)) & 63)
			f.h.region = buf[a : a+f.h.p*n]
			for i := range f.h.region {
				f.h.region[i] = 0xA5 // not zero: nothing may rely on fresh memory
			}
		}
	})
	if f.h.region == nil {
		return nil
	}
	seg := make([][]byte, f.h.p)
	for q := range seg {
		seg[q] = f.h.region[q*n : (q+1)*n : (q+1)*n]
	}
	return seg
}

func (f *fakeShared) Fence() { f.h.barrier(nil) }

// exchange posts b and returns every rank's post.
func (f *fakeShared) exchange(b []byte) [][]byte {
	f.h.mail[f.rank] = slices.Clone(b)
	f.h.barrier(nil)
	out := make([][]byte, f.h.p)
	for q := range out {
		out[q] = f.h.mail[q]
	}
	f.h.barrier(nil)
	return out
}

func (f *fakeShared) AllreduceFloat32(send, recv []float32, op ReduceOp) {
	fakeAllreduce(f, send, recv, op)
}

func (f *fakeShared) AllreduceInt32(send, recv []int32, op ReduceOp) {
	fakeAllreduce(f, send, recv, op)
}

// fakeAllreduce reduces every rank's send, posted through the mailbox.
func fakeAllreduce[T float32 | int32](f *fakeShared, send, recv []T, op ReduceOp) {
	all := f.exchange(unsafeBytes(send))
	ins := make([][]T, len(all))
	for q, b := range all {
		ins[q] = unsafeSlice[T](b)
	}
	reduceInto(recv, ins, op)
}

func (f *fakeShared) ReduceScatterFloat32(send, recv []float32, op ReduceOp) {
	all := make([]float32, len(send))
	f.AllreduceFloat32(send, all, op)
	copy(recv, all[f.rank*len(recv):])
}

func (f *fakeShared) Allgatherv(send, recv []byte, counts []int) {
	all := f.exchange(send)
	recv = recv[:0]
	for _, b := range all {
		recv = append(recv, b...)
	}
}

func (f *fakeShared) Alltoallv(send []byte, sendCounts []int, recv []byte, recvCounts []int) {
	all := f.exchange(send)
	counts := f.exchange(unsafeBytes(intsTo64(sendCounts)))
	recv = recv[:0]
	for q := range all {
		c := unsafeSlice[int64](counts[q])
		off := 0
		for d := 0; d < f.rank; d++ {
			off += int(c[d])
		}
		recv = append(recv, all[q][off:off+int(c[f.rank])]...)
	}
}

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// unsafeBytes views v's elements as bytes.
func unsafeBytes[T any](v []T) []byte {
	var z T
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(z)))
}

func intsTo64(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// onHost runs fn on p ranks of a fake host, each with its shard group
// (a shmGroup with segments of at most limit bytes), and re-raises the
// first panic.
func onHost(t *testing.T, h *fakeHost, limit int, fn func(g *shmGroup)) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]any, h.p)
	for r := 0; r < h.p; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[r] = p
					h.breakAll()
				}
			}()
			g := wrapGroup(&fakeShared{h: h, rank: r}).(*shmGroup)
			g.limit = limit
			fn(g)
		}()
	}
	wg.Wait()
	for r, e := range errs {
		if e != nil && fmt.Sprint(e) != "fake host: another rank failed" {
			panic(fmt.Sprintf("rank %d: %v", r, e))
		}
	}
}

func randFloats(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}

// TestSharedMemoryCollectives checks every collective a shared group
// moves through its region against a direct computation of what it must
// give, for groups of 1 to 8 processes, with segments small enough that
// most calls take several rounds and with the real limit.
func TestSharedMemoryCollectives(t *testing.T) {
	for _, p := range []int{1, 2, 3, 5, 8} {
		for _, limit := range []int{4096, shmLimit} {
			for _, n := range []int{0, 1, 17, 1000, 5003} {
				if testing.Short() && limit == shmLimit && n > 17 {
					continue // one round, as n=17 is; the rounds are the small limit's
				}
				t.Run(fmt.Sprintf("p=%d/limit=%d/n=%d", p, limit, n), func(t *testing.T) {
					testSharedCollectives(t, p, limit, n)
				})
			}
		}
	}
}

func testSharedCollectives(t *testing.T, p, limit, n int) {
	rng := rand.New(rand.NewPCG(uint64(p), uint64(n)))
	xs := make([][]float32, p) // rank q's operand of n·p elements
	is := make([][]int32, p)
	for q := range xs {
		xs[q] = randFloats(rng, n*p)
		is[q] = make([]int32, n*p)
		for i := range is[q] {
			is[q][i] = int32(rng.IntN(2001) - 1000)
		}
	}
	if n > 0 {
		xs[p-1][n/2] = float32(math.NaN()) // max and min must give NaN there
	}
	// Expected, element by element: sums in float64 (float32 sums agree
	// to rounding), extremes exactly.
	sum64 := make([]float64, n*p)
	hi, lo := make([]float32, n*p), make([]float32, n*p)
	isum, imax, imin := make([]int32, n*p), make([]int32, n*p), make([]int32, n*p)
	for i := range sum64 {
		hi[i], lo[i] = xs[0][i], xs[0][i]
		imax[i], imin[i] = is[0][i], is[0][i]
		for q := range xs {
			v := xs[q][i]
			sum64[i] += float64(v)
			if math.IsNaN(float64(v)) {
				hi[i], lo[i] = v, v
			} else if !math.IsNaN(float64(hi[i])) {
				hi[i] = max(hi[i], v)
				lo[i] = min(lo[i], v)
			}
			isum[i] += is[q][i]
			imax[i] = max(imax[i], is[q][i])
			imin[i] = min(imin[i], is[q][i])
		}
	}
	// Gather and all-to-all: rank q sends counts[q][d] bytes to rank d.
	counts := make([][]int, p)
	sends := make([][]byte, p)
	for q := range counts {
		counts[q] = make([]int, p)
		for d := range counts[q] {
			counts[q][d] = rng.IntN(n + 1)
			if rng.IntN(4) == 0 {
				counts[q][d] = 0
			}
		}
		sends[q] = make([]byte, 0)
		for d := range counts[q] {
			for i := 0; i < counts[q][d]; i++ {
				sends[q] = append(sends[q], byte(31*q+7*d+i))
			}
		}
	}
	h := newFakeHost(p)
	onHost(t, h, limit, func(g *shmGroup) {
		r := g.Rank()
		// All-reduce, also in place.
		got := make([]float32, n*p)
		g.AllreduceFloat32(xs[r], got, ReduceSum)
		for i, v := range got {
			if math.IsNaN(sum64[i]) {
				assert.True(t, math.IsNaN(float64(v)), "sum %d", i)
				continue
			}
			assert.InDelta(t, sum64[i], float64(v), 1e-5*(1+math.Abs(sum64[i])), "sum %d", i)
		}
		inPlace := slices.Clone(xs[r])
		g.AllreduceFloat32(inPlace, inPlace, ReduceSum)
		assert.Equal(t, bitsOf(got), bitsOf(inPlace), "in place")
		// The reduce-scatter gives this rank's part of the all-reduce,
		// bit for bit.
		part := make([]float32, n)
		g.ReduceScatterFloat32(xs[r], part, ReduceSum)
		assert.Equal(t, bitsOf(got[r*n:(r+1)*n]), bitsOf(part), "reduce-scatter vs all-reduce")
		for _, c := range []struct {
			op   ReduceOp
			want []float32
		}{{ReduceMax, hi}, {ReduceMin, lo}} {
			g.AllreduceFloat32(xs[r], got, c.op)
			assert.Equal(t, bitsOf(c.want), bitsOf(got), "op %d", c.op)
		}
		igot := make([]int32, n*p)
		for _, c := range []struct {
			op   ReduceOp
			want []int32
		}{{ReduceSum, isum}, {ReduceMax, imax}, {ReduceMin, imin}} {
			g.AllreduceInt32(is[r], igot, c.op)
			assert.Equal(t, c.want, igot, "int32 op %d", c.op)
		}
		// All-gather of each rank's row counts[r][0] bytes of sends[r].
		gc := make([]int, p)
		gwant := []byte{}
		for q := range gc {
			gc[q] = counts[q][0]
			gwant = append(gwant, sends[q][:gc[q]]...)
		}
		ggot := make([]byte, len(gwant))
		g.Allgatherv(sends[r][:gc[r]], ggot, gc)
		assert.Equal(t, gwant, ggot, "all-gather")
		// All-to-all.
		rc := make([]int, p)
		awant := []byte{}
		for q := range rc {
			rc[q] = counts[q][r]
			off := 0
			for d := 0; d < r; d++ {
				off += counts[q][d]
			}
			awant = append(awant, sends[q][off:off+rc[q]]...)
		}
		agot := make([]byte, len(awant))
		g.Alltoallv(sends[r], counts[r], agot, rc)
		assert.Equal(t, awant, agot, "all-to-all")
		if p > 1 && n > 0 {
			assert.False(t, g.off)
			assert.LessOrEqual(t, g.capa, limit)
		}
	})
}

func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// TestSharedPsumMatchesInProcess checks that a float32 sum through shared
// memory adds in the order of the in-process psum over the same blocks:
// one device per process gives the one-process result bit for bit.
func TestSharedPsumMatchesInProcess(t *testing.T) {
	const p, n = 4, 3001
	rng := rand.New(rand.NewPCG(4, 4))
	xs := make([][]float32, p)
	for q := range xs {
		xs[q] = randFloats(rng, n)
	}
	want := make([]float32, n)
	sumFloat32(want, xs, 0, n) // the in-process psum's kernel
	onHost(t, newFakeHost(p), 4096, func(g *shmGroup) {
		got := make([]float32, n)
		g.AllreduceFloat32(xs[g.Rank()], got, ReduceSum)
		assert.Equal(t, bitsOf(want), bitsOf(got))
	})
}

// TestSharedRegionGrows checks that the region is made on first use,
// grows (doubling, up to the limit) only when a call needs more, and that
// calls of every size keep giving right results across the changes.
func TestSharedRegionGrows(t *testing.T) {
	h := newFakeHost(2)
	var capas [][]int
	var mu sync.Mutex
	onHost(t, h, 1<<16, func(g *shmGroup) {
		var seen []int
		for _, n := range []int{10, 10, 3000, 10, 9000, 100000} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(g.Rank()*n + i)
			}
			got := make([]float32, n)
			g.AllreduceFloat32(x, got, ReduceSum)
			for i, v := range got {
				require.Equal(t, float32(n+2*i), v, "n=%d i=%d", n, i)
			}
			seen = append(seen, g.capa)
		}
		mu.Lock()
		capas = append(capas, seen)
		mu.Unlock()
	})
	require.Len(t, capas, 2)
	assert.Equal(t, capas[0], capas[1], "both ranks take the same decisions")
	// Each process's segment holds two slots of half the operand and its
	// reduced half: 10 elements need 64 bytes, so the first region is the
	// 4096-byte minimum; 3000 need 18000 bytes (rounded to 64), more than
	// twice that; 9000 need 54016; 100000 go in rounds through the 64 KiB
	// limit.
	assert.Equal(t, []int{4096, 4096, 18048, 18048, 54016, 1 << 16}, capas[0])
	assert.Equal(t, 4, h.shares)
}

// TestSharedFallback checks that a group whose memory cannot be had falls
// back to its own collectives, on every rank, with the same results.
func TestSharedFallback(t *testing.T) {
	h := newFakeHost(3)
	h.refuse = true
	onHost(t, h, shmLimit, func(g *shmGroup) {
		x := []float32{float32(g.Rank()), 1, 2}
		got := make([]float32, 3)
		g.AllreduceFloat32(x, got, ReduceSum)
		assert.Equal(t, []float32{3, 3, 6}, got)
		assert.True(t, g.off)
		assert.False(t, sumsInRankOrder(g))
		recv := make([]byte, 3)
		g.Alltoallv([]byte{byte(g.Rank()), 10 + byte(g.Rank()), 20 + byte(g.Rank())}, []int{1, 1, 1}, recv, []int{1, 1, 1})
		assert.Equal(t, []byte{byte(10 * g.Rank()), byte(10*g.Rank() + 1), byte(10*g.Rank() + 2)}, recv)
	})
	assert.Equal(t, 1, h.shares, "one refusal, then no more tries")
}

// TestSharedAlltoallMismatch checks that a receiver expecting another
// count than its sender sends panics naming both.
func TestSharedAlltoallMismatch(t *testing.T) {
	h := newFakeHost(2)
	require.PanicsWithValue(t, "rank 1: shard: all-to-all: process 0 sends 2 bytes to process 1, which expects 3", func() {
		onHost(t, h, shmLimit, func(g *shmGroup) {
			if g.Rank() == 0 {
				g.Alltoallv([]byte{1, 2, 3}, []int{1, 2}, make([]byte, 1), []int{1, 0})
			} else {
				g.Alltoallv([]byte{4}, []int{0, 1}, make([]byte, 4), []int{3, 1})
			}
		})
	})
}
