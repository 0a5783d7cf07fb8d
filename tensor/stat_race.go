//go:build race

package tensor

import "sync/atomic"

// statCounter counts events for a statistic; under the race detector it
// is atomic (see stat_norace.go).
type statCounter struct{ n atomic.Int64 }

// add adds d to the count.
func (c *statCounter) add(d int64) { c.n.Add(d) }

// load returns the count.
func (c *statCounter) load() int64 { return c.n.Load() }
