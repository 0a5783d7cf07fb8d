//go:build !race

package tensor

import "sync/atomic"

// statCounter counts events for a statistic (the allocator cache's hits)
// on paths that run once per allocation. Without the race detector add is
// a plain increment: an atomic read-modify-write (LOCK XADD) waits until
// every earlier store has left the store buffer, and on the allocation
// after a product's output stores that wait was most of the lookup's
// time (docs/performance.md, "Batch 16, fifth pass"). Adds from goroutines
// running at the same moment may then lose a count, which a statistic
// tolerates; under -race (stat_race.go) the counter is atomic, so the
// detector sees no race.
type statCounter struct{ n int64 }

// add adds d to the count.
func (c *statCounter) add(d int64) { c.n += d }

// load returns the count.
func (c *statCounter) load() int64 { return atomic.LoadInt64(&c.n) }
