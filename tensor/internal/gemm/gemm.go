package gemm

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// active is the kernel set Sgemm uses: the best this machine runs, as
// package kernels allows ($GONOX_KERNELS), chosen at start-up. Tests switch
// it with useKernels.
var active = bestSet()

func bestSet() *kernelSet {
	if s := archSets(); len(s) > 0 {
		return s[0]
	}
	return goSet
}

// kernelSets lists every kernel set this machine can run, best first; the
// portable Go set is always last.
func kernelSets() []*kernelSet { return append(archSets(), goSet) }

// useKernels makes Sgemm use the named kernel set ("avx512", "avx2" or
// "go") and returns a function restoring the previous one. It reports false
// if this machine cannot run that set. Not safe to call concurrently with
// Sgemm; it exists for tests and benchmarks.
func useKernels(name string) (restore func(), ok bool) {
	prev := active
	for _, s := range kernelSets() {
		if s.name == name {
			active = s
			return func() { active = prev }, true
		}
	}
	return func() {}, false
}

// parMinFlops is the smallest problem (2·m·n·k) split across goroutines.
// Starting a goroutine on an idle core costs tens of microseconds on the
// machines we measured (mostly the OS waking the idle CPU), so smaller
// problems run on the calling goroutine.
const parMinFlops = 16 << 20

// tasksPerThread is how many blocks of C a parallel Sgemm makes per
// goroutine, and minTaskStrips the fewest NR-wide strips in a block of
// columns. More blocks balance the load when a goroutine starts late;
// fewer, wider blocks reuse each strip of A over more columns of B. On
// Sapphire Rapids (AVX-512), in GFLOP per CPU-second of a 2-goroutine call
// against a 1-goroutine one (medians of 5-6 runs), 4 blocks per goroutine
// lost 7% of the work per core at 1024³ and 18% at (1024×4096)@(4096×256),
// 2 blocks lost 3% and 10%, 1 block (no balancing) 0.5% and 5%.
var (
	tasksPerThread = 2
	minTaskStrips  = 4
)

// Sgemm computes C = alpha*op(A)*op(B) + beta*C for row-major matrices,
// where op(X) is X or its transpose. op(A) is m×k, op(B) is k×n and C is
// m×n; lda, ldb and ldc are the row strides of A, B and C as stored.
// When beta == 0, C is overwritten without being read (NaNs in C do not
// propagate); when alpha == 0 or k == 0, A and B are not read.
//
// threads bounds the number of goroutines the kernel may compute on: 1
// computes on the calling goroutine, 0 or less means runtime.GOMAXPROCS, and
// n > 1 at most n (and at most GOMAXPROCS). Small problems always run on the
// calling goroutine. Every goroutine Sgemm starts has finished when it
// returns.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, threads int) {
	checkArgs(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	ks := active
	if threads != 1 && 2*int64(m)*int64(n)*int64(k) >= parMinFlops {
		// (runtime.GOMAXPROCS takes a global lock: not for small calls.)
		t := threads
		if procs := runtime.GOMAXPROCS(0); t <= 0 || t > procs {
			t = procs
		}
		if t > 1 {
			sgemmParallel(ks, problem{transA, transB, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc, nil}, t)
			return
		}
	}
	p := problem{transA, transB, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc, nil}
	ws := getWorkspace()
	ks.run(&p, 0, m, 0, n, ws)
	putWorkspace(ws)
}

// checkArgs panics if the dimensions, strides or slice lengths are
// inconsistent.
func checkArgs(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	check := func(name string, rows, cols int, x []float32, ld int) {
		if ld < max(1, cols) {
			panic(fmt.Sprintf("gemm: ld%s=%d < %d columns of %s", name, ld, cols, name))
		}
		if rows > 0 && cols > 0 && len(x) < (rows-1)*ld+cols {
			panic(fmt.Sprintf("gemm: len(%s)=%d < %d for %d×%d with stride %d", name, len(x), (rows-1)*ld+cols, rows, cols, ld))
		}
	}
	if m == 0 || n == 0 {
		return
	}
	if k > 0 {
		if transA {
			check("a", k, m, a, lda)
		} else {
			check("a", m, k, a, lda)
		}
		if transB {
			check("b", n, k, b, ldb)
		} else {
			check("b", k, n, b, ldb)
		}
	}
	check("c", m, n, c, ldc)
}

// scaleC sets C = beta*C, writing zeros when beta == 0.
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
		} else if beta != 1 {
			for j := range row {
				row[j] *= beta
			}
		}
	}
}

// parJob is one parallel Sgemm: C is cut into ntask blocks of whole rows
// (or whole columns), handed out through next. Jobs are pooled so a call
// does not allocate.
type parJob struct {
	p      problem
	ks     *kernelSet
	splitN bool // blocks are column ranges of C; otherwise row ranges
	chunk  int  // rows or columns per block
	ntask  int
	next   atomic.Int64 // next block to compute
	slots  atomic.Int64 // goroutines still allowed to compute
	wg     sync.WaitGroup
	helper func() // j.helperMain, bound once
}

// jobPool recycles parJobs. Each holds its helper method value, made once,
// so that "go helper()" starts a goroutine without allocating a closure.
var jobPool = sync.Pool{New: func() any {
	j := new(parJob)
	j.helper = j.helperMain
	return j
}}

// helperMain is the body of a goroutine started by sgemmParallel.
func (j *parJob) helperMain() {
	j.work()
	j.wg.Done()
}

// work computes blocks until none is left, if a compute slot is free.
func (j *parJob) work() {
	if j.slots.Add(-1) < 0 {
		return
	}
	ws := getWorkspace()
	dim := j.p.m
	if j.splitN {
		dim = j.p.n
	}
	for {
		t := int(j.next.Add(1)) - 1
		if t >= j.ntask {
			break
		}
		lo := t * j.chunk
		hi := min(lo+j.chunk, dim)
		if j.splitN {
			j.ks.run(&j.p, 0, j.p.m, lo, hi, ws)
		} else {
			j.ks.run(&j.p, lo, hi, 0, j.p.n, ws)
		}
	}
	putWorkspace(ws)
}

// sgemmParallel computes p on at most t goroutines at a time: the calling
// one and helpers (it starts t, one spare; a slot counter lets at most t
// compute).
// Blocks are column ranges of C when n is wide enough (each goroutine then
// packs only its own columns of B and reads A in place, so nothing is done
// twice), row ranges otherwise. There are a few blocks per goroutine, handed
// out dynamically, so a goroutine that starts late does less.
func sgemmParallel(ks *kernelSet, p problem, t int) {
	j := jobPool.Get().(*parJob)
	j.p, j.ks = p, ks
	j.splitN = p.n >= 2*t*ks.nr
	dim, unit := p.m, ks.mr
	if j.splitN {
		dim, unit = p.n, ks.nr
	} else if ks.useTransposed(&p) {
		unit = ks.nr // rows of C are the kernel's columns
	}
	units := (dim + unit - 1) / unit
	ntask := min(units, tasksPerThread*t)
	per := (units + ntask - 1) / ntask
	if j.splitN {
		// A column block narrower than minTaskStrips strips reuses each
		// strip of A (read in place) over too few kernel calls.
		per = max(per, minTaskStrips)
	}
	j.chunk = per * unit
	j.ntask = (dim + j.chunk - 1) / j.chunk
	if j.splitN && j.ntask > 1 && ks.sharesA(&p) {
		// Every block of columns reads all of A: pack it once, shared.
		j.p.sharedA = newSharedPanels(ks, &p)
	}
	if j.ntask < 2 {
		ws := getWorkspace()
		ks.run(&j.p, 0, p.m, 0, p.n, ws)
		putWorkspace(ws)
	} else {
		t = min(t, j.ntask)
		j.next.Store(0)
		j.slots.Store(int64(t))
		// t-1 helpers, plus one that only matters if another is late: the
		// runtime keeps the newest goroutine in this P's run-next slot,
		// which idle Ps do not steal from for a long while; starting one
		// more moves the real helpers to the stealable run queue.
		helpers := t
		j.wg.Add(helpers)
		for i := 0; i < helpers; i++ {
			helper := j.helper
			go helper()
		}
		j.work()
		j.wg.Wait()
	}
	putSharedPanels(j.p.sharedA)
	j.p = problem{}
	j.ks = nil
	jobPool.Put(j)
}
