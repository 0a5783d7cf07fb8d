package workers

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Hostile uses of Go and Later: a nil function panics at the call naming
// the op, a second wait panics naming it (it used to close the region
// twice and hang, or run f twice at GOMAXPROCS 1), and a wait never called
// leaves the pool working.
func TestHostileGo(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		for _, c := range []struct {
			name string
			call func(op string, f func()) func()
		}{{"Go", Go}, {"Later", Later}} {
			require.PanicsWithValue(t, "op: nil host function", func() { c.call("op", nil) }, "%s at GOMAXPROCS %d", c.name, procs)

			var calls atomic.Int32
			wait := c.call("op", func() { calls.Add(1) })
			wait()
			done := make(chan any, 1)
			go func() {
				defer func() { done <- recover() }()
				wait()
			}()
			select {
			case r := <-done:
				require.Equal(t, "op: wait called a second time (each call must be followed by exactly one wait)", r,
					"%s at GOMAXPROCS %d", c.name, procs)
			case <-time.After(10 * time.Second):
				require.FailNow(t, "a second wait hangs", "%s at GOMAXPROCS %d", c.name, procs)
			}
			require.Equal(t, int32(1), calls.Load(), "%s at GOMAXPROCS %d: f runs once", c.name, procs)

			// A panicking f: its wait raises it, and a second wait still
			// panics as a second wait.
			wait = c.call("op", func() { panic("boom") })
			require.PanicsWithValue(t, "boom", wait)
			require.Panics(t, wait)
		}

		// Waits never called: f runs at most once each, and later
		// calls still run theirs.
		var abandoned atomic.Int32
		for range 50 {
			Go("op", func() { abandoned.Add(1) })
		}
		for range 50 {
			calls := 0
			Go("op", func() { calls++ })()
			require.Equal(t, 1, calls)
		}
		require.LessOrEqual(t, abandoned.Load(), int32(50))
	}
}
