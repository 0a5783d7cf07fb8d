package shard

import "time"

// SetAsyncProgress makes started collectives between processes be driven
// every d (0: only in Wait) until restore is called, for benchmarks that
// compare both within one run.
func SetAsyncProgress(d time.Duration) (restore func()) {
	old := progressInterval
	progressInterval = func() time.Duration { return d }
	return func() { progressInterval = old }
}

// GatheredInPlace returns the number of gathers of rows that found them in
// place (gatheredRows) since the process started.
func GatheredInPlace() int64 { return gatheredInPlace.Load() }

// CopyGathered makes every gather copy its rows, as before gatheredRows,
// and every shared product copy the device's rows out of the group's
// result (not viewRows), until restore is called.
func CopyGathered() (restore func()) {
	old, oldView := reuseGathered, viewRows
	reuseGathered, viewRows = false, false
	return func() { reuseGathered, viewRows = old, oldView }
}
