package gemm

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gonox/gonox/tensor/internal/workers"
)

// elem is the element type of a product: the driver is written once, for
// both precisions; only the micro-kernels and packers differ.
type elem interface{ float32 | float64 }

// active and active64 are the kernel sets Sgemm and Dgemm use: the best
// this machine runs, as package kernels allows ($GONOX_KERNELS), chosen at
// start-up. Tests switch them with useKernels.
var (
	active   = bestSet(archSets(), goSet)
	active64 = bestSet(archSets64(), goSet64)
)

func bestSet[T elem](arch []*kernelSet[T], fallback *kernelSet[T]) *kernelSet[T] {
	if len(arch) > 0 {
		return arch[0]
	}
	return fallback
}

// kernelSets and kernelSets64 list every float32 and float64 kernel set
// this machine can run, best first; the portable Go set is always last.
func kernelSets() []*kernelSet[float32]   { return append(archSets(), goSet) }
func kernelSets64() []*kernelSet[float64] { return append(archSets64(), goSet64) }

// useKernels makes Sgemm and Dgemm use the named kernel sets ("avx512",
// "avx2" or "go") and returns a function restoring the previous ones. It
// reports false if this machine cannot run that set. Not safe to call
// concurrently with Sgemm or Dgemm; it exists for tests and benchmarks.
func useKernels(name string) (restore func(), ok bool) {
	var s32 *kernelSet[float32]
	var s64 *kernelSet[float64]
	for _, s := range kernelSets() {
		if s.name == name {
			s32 = s
		}
	}
	for _, s := range kernelSets64() {
		if s.name == name {
			s64 = s
		}
	}
	if s32 == nil || s64 == nil {
		return func() {}, false
	}
	prev, prev64 := active, active64
	active, active64 = s32, s64
	return func() { active, active64 = prev, prev64 }, true
}

// parMinFlops is the smallest problem (2·m·n·k) split across goroutines.
// Starting a goroutine on an idle core costs tens of microseconds on the
// machines we measured (mostly the OS waking the idle CPU), so smaller
// problems run on the calling goroutine.
const parMinFlops = 16 << 20

// parMinFlopsNarrow is parMinFlops for products with a side (m, n or k)
// narrower than narrowSide: their kernel calls compute mostly edges (or,
// for a short k, mostly load and store C), at a fraction of the wide
// kernels' rate, so 4 MFLOP of them take about as long as 16 MFLOP of a
// square product. The MoE router's [2048,128]@[128,8] and its two
// gradients are 4 MFLOP each, ~0.1 ms on one Zen 5 core; split by rows
// over two cores they no longer hold the second core idle.
const (
	parMinFlopsNarrow = 4 << 20
	narrowSide        = 32
)

// worthSplitting reports whether an m×n×k product is big enough to split
// across goroutines. The answer depends on the shape only, and a split
// never changes a result's bits.
func worthSplitting(m, n, k int) bool {
	flops := 2 * int64(m) * int64(n) * int64(k)
	if min(m, n, k) < narrowSide {
		return flops >= parMinFlopsNarrow
	}
	return flops >= parMinFlops
}

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
	gemm(active, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads)
}

// Dgemm is Sgemm in double precision: C = alpha*op(A)*op(B) + beta*C for
// row-major float64 matrices, with the same arguments, the same handling of
// beta == 0, alpha == 0 and k == 0, and the same thread budget. It has its
// own micro-kernels (8 doubles per AVX-512 vector, 4 per AVX2 vector) and
// blocking; products are accumulated in float64 with FMAs on the assembly
// sets, in the same order for every thread budget.
func Dgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int, threads int) {
	gemm(active64, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads)
}

// gemm is Sgemm and Dgemm on the kernel set ks.
func gemm[T elem](ks *kernelSet[T], transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, threads int) {
	checkArgs(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	if threads != 1 && worthSplitting(m, n, k) {
		// (runtime.GOMAXPROCS takes a global lock: not for small calls.)
		t := threads
		if procs := runtime.GOMAXPROCS(0); t <= 0 || t > procs {
			t = procs
		}
		if t > 1 {
			gemmParallel(ks, problem[T]{transA, transB, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc, nil, nil}, t)
			return
		}
	}
	p := problem[T]{transA, transB, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc, nil, nil}
	ws := ks.pools.getWorkspace()
	ks.run(&p, 0, m, 0, n, ws)
	ks.pools.putWorkspace(ws)
}

// checkArgs panics if the dimensions, strides or slice lengths are
// inconsistent.
func checkArgs[T elem](transA, transB bool, m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	check := func(name string, rows, cols int, x []T, ld int) {
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
func scaleC[T elem](m, n int, beta T, c []T, ldc int) {
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

// pools recycle the per-call state of one element type: workspaces,
// parallel jobs and shared A panels. Every kernel set of that type points
// at the same pools, so steady-state calls do not allocate.
type pools[T elem] struct {
	ws      sync.Pool // *workspace[T]
	job     sync.Pool // *parJob[T]
	shared  sync.Pool // *sharedPanels[T]
	sharedB sync.Pool // *sharedB[T]
}

var (
	pools32 = newPools[float32]()
	pools64 = newPools[float64]()
)

func newPools[T elem]() *pools[T] {
	ps := new(pools[T])
	ps.ws.New = func() any { return new(workspace[T]) }
	// Each job holds its work method value, made once, so that a
	// parallel call does not allocate a closure.
	ps.job.New = func() any {
		j := new(parJob[T])
		j.helper = j.work
		return j
	}
	ps.shared.New = func() any { return new(sharedPanels[T]) }
	ps.sharedB.New = func() any { return new(sharedB[T]) }
	return ps
}

// poolsOf returns the pools of element type T.
func poolsOf[T elem]() *pools[T] {
	if ps, ok := any(pools32).(*pools[T]); ok {
		return ps
	}
	return any(pools64).(*pools[T])
}

func (ps *pools[T]) getWorkspace() *workspace[T]  { return ps.ws.Get().(*workspace[T]) }
func (ps *pools[T]) putWorkspace(w *workspace[T]) { ps.ws.Put(w) }

// parJob is one parallel Sgemm or Dgemm: C is cut into ntask blocks of
// whole rows (or whole columns), handed out through blocks. Jobs are pooled
// so a call does not allocate.
type parJob[T elem] struct {
	p      problem[T]
	ks     *kernelSet[T]
	splitN bool // blocks are column ranges of C; otherwise row ranges
	chunk  int  // rows or columns per block
	ntask  int
	blocks workers.Chunks // the blocks not yet computed
	slots  atomic.Int64   // goroutines still allowed to compute
	helper func()         // j.work, bound once
}

// work computes blocks until none is left, if a compute slot is free.
func (j *parJob[T]) work() {
	if j.slots.Add(-1) < 0 {
		return
	}
	ws := j.ks.pools.getWorkspace()
	dim := j.p.m
	if j.splitN {
		dim = j.p.n
	}
	front := j.blocks.Front()
	for {
		t, ok := j.blocks.Next(front)
		if !ok {
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
	j.ks.pools.putWorkspace(ws)
}

// columnBlockStrips is the width, in strips, of the column blocks of a
// parallel call over t goroutines that splits units strips of C by
// columns: tasksPerThread blocks a goroutine, but none narrower than
// minTaskStrips strips (it would reuse each strip of A, read in place,
// over too few kernel calls), and whole rounds of t blocks when there are
// more than t. With 12 strips (n = 384, the MoE example's fused QKV
// projection 2048×128×384 and its weight gradient) on two goroutines, 3
// blocks of 4 strips left one goroutine computing two while the other
// waited (spinning) a third of the call; 2 blocks of 6 took the products
// from 193 to 245-254 GFLOP per CPU-second (forward) and from 179-184 to
// 222-224 (weight gradient), 381-387 → 450-505 and 351-367 → 433-448
// GFLOP/s (BenchmarkSgemm/mlp_m2048_k128_n384/{fwd_NN,dW_TN}/threads=2,
// AMD EPYC Zen 5, 3 alternated rounds, load ~2).
func columnBlockStrips(units, t int) int {
	ntask := min(units, tasksPerThread*t)
	per := max((units+ntask-1)/ntask, minTaskStrips)
	if nt := (units + per - 1) / per; nt > t && nt%t != 0 {
		nt = nt / t * t
		per = (units + nt - 1) / nt
	}
	return per
}

// parSplits counts the calls gemmParallel split into blocks (tests).
var parSplits atomic.Int64

// gemmParallel computes p on at most t goroutines at a time: the calling
// one and up to t-1 pooled workers (package workers; a slot counter lets
// at most t compute).
// Blocks are column ranges of C when n is wide enough (each goroutine then
// packs only its own columns of B and reads A in place, so nothing is done
// twice), row ranges otherwise. There are a few blocks per goroutine, handed
// out dynamically, so a goroutine that starts late does less: the first
// from the front, the others from the back (workers.Chunks), so that each
// core computes about the same rows call after call.
func gemmParallel[T elem](ks *kernelSet[T], p problem[T], t int) {
	ps := ks.pools
	j := ps.job.Get().(*parJob[T])
	j.p, j.ks = p, ks
	// Columns only when they make two blocks of minTaskStrips strips at
	// least (below, the rounding up leaves one block: n = 128 computed
	// on one goroutine); rows otherwise.
	j.splitN = p.n >= 2*t*ks.nr && p.n >= 2*minTaskStrips*ks.nr
	dim, unit := p.m, ks.mr
	if j.splitN {
		dim, unit = p.n, ks.nr
	} else if ks.useTransposed(&p) {
		unit = ks.nr // rows of C are the kernel's columns
	} else if p.transA {
		// Rows of C are columns of A as stored: blocks of whole cache
		// lines of A, so that no line is loaded by both cores, and of
		// even size. In MR units the last block came short (128 rows as
		// 36, 36, 36, 20 for MR = 12): the MoE example's 128×128 weight
		// gradients from k = 2048 (BenchmarkSgemm/mlp_m2048_k128_n128/
		// dW_TN) ran at 212 GFLOP/cpu-s on two cores, 230 in 32-row
		// blocks, 245 on one (Zen 5, near idle). Only the row tiles
		// change, not any element's sum.
		unit = 64 / int(unsafe.Sizeof(T(0)))
	}
	units := (dim + unit - 1) / unit
	ntask := min(units, tasksPerThread*t)
	per := (units + ntask - 1) / ntask
	if j.splitN {
		per = columnBlockStrips(units, t)
	}
	j.chunk = per * unit
	j.ntask = (dim + j.chunk - 1) / j.chunk
	if j.splitN && j.ntask > 1 && ks.sharesA(&p) {
		// Every block of columns reads all of A: pack it once, shared.
		j.p.sharedA = newSharedPanels(ks, &p)
	}
	if !j.splitN && j.ntask > 1 && ks.sharesB(&p) {
		// Every block of rows reads all of op(B): pack it once, shared.
		j.p.sharedB = newSharedB(ks, &p)
	}
	if j.ntask < 2 {
		ws := ps.getWorkspace()
		ks.run(&j.p, 0, p.m, 0, p.n, ws)
		ps.putWorkspace(ws)
	} else {
		t = min(t, j.ntask)
		j.blocks.Reset(j.ntask)
		j.slots.Store(int64(t))
		parSplits.Add(1)
		workers.Run(t-1, j.helper)
	}
	putSharedPanels(ks, j.p.sharedA)
	putSharedB(ks, j.p.sharedB)
	j.p = problem[T]{}
	j.ks = nil
	ps.job.Put(j)
}
