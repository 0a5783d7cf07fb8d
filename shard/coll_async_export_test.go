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
