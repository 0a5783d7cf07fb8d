package workers

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Go calls f exactly once, and its wait returns only after f has
// returned, wherever f ran; at GOMAXPROCS 1 f runs inside wait.
func TestGoRunsOnceBeforeWaitReturns(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		for range 200 {
			calls := 0
			wait := Go("test", func() {
				time.Sleep(time.Microsecond)
				calls++
			})
			if procs == 1 {
				require.Zero(t, calls, "f ran before wait at GOMAXPROCS 1")
			}
			wait()
			require.Equal(t, 1, calls, "GOMAXPROCS %d", procs)
		}
	}
}

// At two threads a worker takes f while the caller goes on: f completes
// with the caller still before its wait.
func TestGoOverlapsTheCaller(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	done := make(chan struct{})
	wait := Go("test", func() { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("no worker took f in 5 s while its caller waited before wait")
	}
	wait()
}

// A panic in f is raised again by wait, on the worker's side or the
// caller's.
func TestGoPanicReachesWait(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		wait := Go("test", func() { panic("boom") })
		require.PanicsWithValue(t, "boom", wait, "GOMAXPROCS %d", procs)
	}
}
