package workers

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// chunks runs fn on n chunks through Run with the given helpers and
// returns how many calls of the region's work there were.
func chunks(helpers, n int, fn func(c int)) (calls int64) {
	var next, nc atomic.Int64
	Run(helpers, func() {
		nc.Add(1)
		for {
			c := int(next.Add(1)) - 1
			if c >= n {
				return
			}
			fn(c)
		}
	})
	return nc.Load()
}

// Every chunk runs exactly once whatever the helpers and GOMAXPROCS,
// including when regions run from several goroutines at once and nest.
func TestRunCoversEveryChunk(t *testing.T) {
	old := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(old)
	for _, helpers := range []int{0, 1, 3, 8} {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					n := 1 + g*7
					seen := make([]atomic.Int32, n)
					chunks(helpers, n, func(c int) {
						// A nested region: runs whether or not workers are free.
						var sum atomic.Int64
						chunks(1, 3, func(i int) { sum.Add(int64(i)) })
						require.EqualValues(t, 3, sum.Load())
						seen[c].Add(1)
					})
					for c := range seen {
						require.EqualValues(t, 1, seen[c].Load(), "helpers=%d chunk %d", helpers, c)
					}
				}
			}()
		}
		wg.Wait()
	}
}

// With one processor, or no helper asked for, work runs once, on the caller.
func TestRunSerial(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	a := Asked()
	require.EqualValues(t, 1, chunks(3, 10, func(int) {}))
	require.Equal(t, a, Asked())
	runtime.GOMAXPROCS(4)
	require.EqualValues(t, 1, chunks(0, 10, func(int) {}))
	require.Equal(t, a, Asked())
}

// A worker that is spinning joins the next region: with chunks that take
// long enough, a helper computes some of them.
func TestWorkerJoins(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	old := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(old)
	joined := 0
	for range 50 {
		if chunks(1, 4, func(int) { time.Sleep(time.Millisecond) }) > 1 {
			joined++
		}
	}
	require.Greater(t, joined, 0, "no worker ever joined a region")
}

// A panic on the caller or on a worker reaches the caller after every
// chunk has finished.
func TestRunPanics(t *testing.T) {
	old := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(old)
	for _, bad := range []int{0, 5, 11} {
		var done atomic.Int64
		require.PanicsWithValue(t, "chunk failed", func() {
			chunks(3, 12, func(c int) {
				time.Sleep(100 * time.Microsecond)
				if c == bad {
					panic("chunk failed")
				}
				done.Add(1)
			})
		})
		require.EqualValues(t, 11, done.Load(), "bad chunk %d", bad)
	}
}

// Workers exit after IdleExit without work: none is left shortly after
// the last region.
func TestWorkersExitWhenIdle(t *testing.T) {
	old := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(old)
	// Wait for workers of earlier tests to exit, so the ones this test
	// uses are new and not in the snapshot goleak ignores.
	require.Eventually(t, func() bool { return running.Load() == 0 }, 2*time.Second, time.Millisecond)
	before := goleak.IgnoreCurrent()
	chunks(3, 8, func(int) { time.Sleep(100 * time.Microsecond) })
	require.Positive(t, running.Load())
	goleak.VerifyNone(t, before)
	require.Eventually(t, func() bool { return running.Load() == 0 }, 2*time.Second, time.Millisecond)
}

// BenchmarkRegion times a region after a serial gap (µs/region):
//
//   - pool and spawn: two chunks of about 5 µs each, the pattern of a
//     training step's small parallel ops, on the pooled workers and on a
//     goroutine started for each region (the mechanism before the pool).
//     At -cpu 2, near 5 means the second chunk ran on the other core at
//     once; near 10 or above, it waited.
//   - long: eight chunks of 25 µs (100 µs on two cores), the pattern of
//     a step's larger regions: after a gap longer than SpinWindow the
//     worker has parked, and it must still start at once although the
//     caller keeps computing (near 100; 130 or more when the woken worker
//     waits for the runtime to steal it from the caller's processor).
func BenchmarkRegion(b *testing.B) {
	run := func(b *testing.B, gap time.Duration, region func()) {
		var in time.Duration
		for b.Loop() {
			busy(gap)
			s := time.Now()
			region()
			in += time.Since(s)
		}
		b.ReportMetric(float64(in.Microseconds())/float64(b.N), "µs/region")
	}
	short := func(int) { busy(5 * time.Microsecond) }
	long := func(int) { busy(25 * time.Microsecond) }
	for _, gap := range []time.Duration{0, 20 * time.Microsecond, 2 * SpinWindow} {
		b.Run("pool/gap="+gap.String(), func(b *testing.B) {
			run(b, gap, func() { chunks(runtime.GOMAXPROCS(0)-1, 2, short) })
		})
		b.Run("spawn/gap="+gap.String(), func(b *testing.B) {
			run(b, gap, func() { spawnRegion(runtime.GOMAXPROCS(0), 2, short) })
		})
		b.Run("long/gap="+gap.String(), func(b *testing.B) {
			run(b, gap, func() { chunks(runtime.GOMAXPROCS(0)-1, 8, long) })
		})
	}
}

// busy computes for d.
func busy(d time.Duration) {
	for s := time.Now(); time.Since(s) < d; {
	}
}

// spawnRegion is the region as it ran before the pool: p new goroutines
// (one spare) and the caller take chunks.
func spawnRegion(p, n int, fn func(int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	work := func() {
		for {
			c := int(next.Add(1)) - 1
			if c >= n {
				return
			}
			fn(c)
		}
	}
	if p < 2 {
		work()
		return
	}
	wg.Add(p)
	for range p {
		go func() { defer wg.Done(); work() }()
	}
	work()
	wg.Wait()
}
