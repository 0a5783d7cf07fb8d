// Package workers runs the parallel regions of gonox's kernels (tensor's
// elementwise, row and reduction kernels, gemm, the convolutions) on a
// small pool of goroutines that stay awake for a moment after a region.
//
// A region is a function that takes chunks of work from a shared counter
// until none is left, so it gives the same result whatever number of
// goroutines run it. Run calls it on the calling goroutine and on up to
// the requested number of pooled workers, and returns when every call has
// returned.
//
// Why a pool: kernels split work as small as a few hundred microseconds,
// and a step of a model runs dozens of such regions. A goroutine started
// per region ran 30-150 µs late on a 2-core VM whose idle vCPU halts (the
// host's wake-up of the parked core, no guest halt polling), most of the
// region. A worker that has just finished a chunk instead spins for
// SpinWindow, watching the queue and yielding the processor
// (runtime.Gosched) every 20 µs, and takes the next region at once if one
// comes; only then does it park, as
// OpenMP's OMP_WAIT_POLICY=active with a bounded spin (GOMP_SPINCOUNT)
// does. A region that wakes a parked worker hands it the caller's
// processor (see Run) rather than wait for the runtime to steal it.
//
// Lifetime (the documented exception to "no goroutine outlives the call
// that started it"): workers are started on first use, at most
// runtime.GOMAXPROCS(0)-1 of them, and each exits after IdleExit without a
// region, so a program that stops computing has none left shortly after
// (leak checkers such as goleak, which retry for about half a second, see
// none). Correctness never depends on a worker: a region nobody joins is
// run by its caller alone.
package workers

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// SpinWindow is how long a worker watches for the next region after
// finishing one before it parks, and how long Run's caller waits awake
// for the last worker. A training step's serial stretches between
// regions are mostly shorter (see docs/performance.md, "A pool of
// workers" and "Two cores on the MoE step"). It was 200 µs: on the 2-core
// VM the MoE step's ~7 stretches a step of 200 µs to 1 ms parked the
// worker, and a parked worker then joined the next region 0.25-2 ms late
// (~1 ms of a core a step); the longer spin costs only the idle core's
// time, and a goroutine waiting for that core still runs within
// yieldEvery (docs/performance.md, "The MoE step's idle core").
const SpinWindow = time.Millisecond

// IdleExit is how long a parked worker waits for a region before it
// exits.
const IdleExit = 100 * time.Millisecond

// closed marks a region whose caller has finished its own share: no
// worker joins it any more.
const closed = 1 << 62

// region is one call of Run. Regions are pooled; a stale queue entry for
// a region already finished either finds it closed or joins the region
// reusing it, which is as good (its work is current once state reopens).
type region struct {
	work  func()
	state atomic.Int64  // workers running work, plus closed
	done  chan struct{} // the last worker out of a closed region signals
	mu    sync.Mutex
	fault any     // the first panic of a worker
	stat  statRun // timings (build tag workerstats)
}

var (
	queue   = make(chan *region, 64)
	running atomic.Int64 // workers alive
	parked  atomic.Int64 // workers blocked on the queue
	startMu sync.Mutex
	regions = sync.Pool{New: func() any { return &region{done: make(chan struct{}, 1)} }}
	asked   atomic.Int64 // regions that asked for helpers (tests)
)

// Asked returns how many calls of Run have asked for helpers since the
// program started (tests use it to see whether a kernel split).
func Asked() int64 { return asked.Load() }

// Run calls work on the calling goroutine and on up to helpers pooled
// workers at once (fewer if they are busy, at most GOMAXPROCS-1), and
// returns when every call has returned. work must be safe to call from
// several goroutines at once and must do all the region's work even when
// called only once; a call that panics must leave the work it did not do
// to the next call. A panic in any call is raised again on the caller
// after every call has returned.
func Run(helpers int, work func()) {
	helpers = min(helpers, runtime.GOMAXPROCS(0)-1)
	if helpers < 1 {
		work()
		return
	}
	r := start(helpers, work)
	// A call that panics leaves the chunks after its own to the others,
	// which may be none: the caller calls work again until one returns.
	var fault any
	for {
		f := call(work)
		if f == nil {
			break
		}
		if fault == nil {
			fault = f
		}
	}
	finish(r, fault)
}

// Go calls f once, on a pooled worker if one takes it before the caller
// calls the returned wait, else on the caller inside wait, and wait
// returns once f has returned (raising again on the caller a panic of f).
// The caller goes on with other work meanwhile: f must not touch what
// that work touches. Go asks for no worker when GOMAXPROCS is 1: f then
// runs inside wait (as Later).
//
// Every Go must be followed by exactly one call of its wait. A wait never
// called blocks nobody (no worker waits for it), but f may never run, and
// a panic of f that a worker caught is lost. op names the caller in the
// panics: Go panics if f is nil, and wait if it is called a second time.
func Go(op string, f func()) (wait func()) {
	if f == nil {
		panic(op + ": nil host function")
	}
	g := &goCall{op: op, f: f}
	if runtime.GOMAXPROCS(0) >= 2 {
		g.r = start(1, g.work)
	}
	return g.wait
}

// Later returns a wait that calls f on the calling goroutine: Go without
// a worker, for callers that must not ask the pool (a device's goroutine
// inside shard.Map). It panics as Go does.
func Later(op string, f func()) (wait func()) {
	if f == nil {
		panic(op + ": nil host function")
	}
	return (&goCall{op: op, f: f}).wait
}

// goCall is one call of Go or Later: f, run once by whoever takes it
// first (taken), and the region offering it to the workers (nil: none).
type goCall struct {
	op     string
	f      func()
	r      *region
	taken  atomic.Bool
	waited atomic.Bool
}

func (g *goCall) work() {
	if g.taken.CompareAndSwap(false, true) {
		g.f()
	}
}

func (g *goCall) wait() {
	if g.waited.Swap(true) {
		panic(g.op + ": wait called a second time (each call must be followed by exactly one wait)")
	}
	if g.r == nil {
		g.work()
		return
	}
	finish(g.r, call(g.work))
}

// start opens a region of work for up to helpers (≥ 1) pooled workers.
func start(helpers int, work func()) *region {
	asked.Add(1)
	sr := statEnter()
	ensure(helpers)
	r := regions.Get().(*region)
	r.stat = sr
	r.work = work
	r.state.Store(0) // open: workers may join from here on
	woke := parked.Load() > 0
	for range helpers {
		select {
		case queue <- r:
		default: // the queue is full of entries not taken yet: enough
		}
	}
	if woke {
		// A parked worker woken by the send waits in this processor's
		// next-to-run slot, which another processor steals only after a
		// usleep(3) that Linux's 50 µs timer slack stretches to ~55 µs:
		// most of a region. Yielding runs it here at once; the caller
		// moves to the global queue, where the processor the runtime
		// woke for it finds it without that sleep.
		runtime.Gosched()
	}
	return r
}

// finish closes region r once its caller has done its share of the work
// (the first panic of the caller's calls in fault), waits for the workers
// in it, and raises the first panic again.
func finish(r *region, fault any) {
	r.stat.callerDone()
	if r.state.Add(closed) != closed {
		// Workers are still in work: wait, briefly awake, for the last.
		wait(r.done)
	}
	if fault == nil {
		fault = r.fault
	}
	statExit(r.stat)
	r.work, r.fault = nil, nil
	regions.Put(r)
	if fault != nil {
		panic(fault)
	}
}

// call calls work and returns what it panicked with.
func call(work func()) (fault any) {
	defer func() { fault = recover() }()
	work()
	return nil
}

// wait receives from done, watching it for SpinWindow before it parks.
func wait(done chan struct{}) {
	poll(func() bool { return len(done) > 0 })
	<-done
}

// yieldEvery is how often a goroutine watching for work (poll) lets the
// runtime run another goroutine waiting for its processor.
const yieldEvery = 20 * time.Microsecond

// poll calls ready until it returns true or SpinWindow has passed, and
// returns its last answer. It yields the processor (runtime.Gosched) only
// every yieldEvery: a Gosched at every turn took the scheduler's lock
// three times (the global run queue in and out, and waking an idle
// processor for it), and runtime.gosched_m was ~6% of the samples of a
// training step at two threads, most of it in the spinning workers,
// where it delayed their joining the next region; a goroutine waiting for
// the processor still runs within yieldEvery. The first yield comes after
// the first few polls: a worker that woke from parking on the caller's
// processor (see Run) and then computed the whole region must let the
// caller, waiting in the run queue, back at once.
func poll(ready func() bool) bool {
	start := time.Now()
	yielded := start.Add(-yieldEvery) // the first check yields
	for i := 1; ; i++ {
		if ready() {
			return true
		}
		if i%64 != 0 {
			continue
		}
		now := time.Now()
		if now.Sub(start) >= SpinWindow {
			return false
		}
		if now.Sub(yielded) >= yieldEvery {
			runtime.Gosched()
			yielded = now
		}
	}
}

// ensure starts workers until n are alive.
func ensure(n int) {
	if running.Load() >= int64(n) {
		return
	}
	startMu.Lock()
	for running.Load() < int64(n) {
		running.Add(1)
		go worker()
	}
	startMu.Unlock()
}

// worker runs regions from the queue: after each it spins for the next,
// then parks, and exits after IdleExit without one.
func worker() {
	idle := time.NewTimer(IdleExit)
	defer idle.Stop()
	for {
		var r *region
		select {
		case r = <-queue:
		default:
			idle.Reset(IdleExit)
			parked.Add(1)
			select {
			case r = <-queue:
				parked.Add(-1)
			case <-idle.C:
				parked.Add(-1)
				running.Add(-1)
				return
			}
		}
		for r != nil {
			r.join()
			r = spin()
		}
	}
}

// spin watches the queue for SpinWindow (poll) and returns the region it
// takes, or nil.
func spin() *region {
	var r *region
	poll(func() bool {
		if len(queue) == 0 {
			return false
		}
		select {
		case r = <-queue:
			return true
		default: // another worker took it
			return false
		}
	})
	return r
}

// join runs the region's work if it is still open.
func (r *region) join() {
	for {
		s := r.state.Load()
		if s&closed != 0 {
			return
		}
		if r.state.CompareAndSwap(s, s+1) {
			break
		}
	}
	m := statJoinStart()
	fault := call(r.work)
	statJoinEnd(m, &r.stat)
	if fault != nil {
		r.mu.Lock()
		if r.fault == nil {
			r.fault = fault
		}
		r.mu.Unlock()
	}
	if r.state.Add(-1) == closed {
		r.done <- struct{}{}
	}
}
