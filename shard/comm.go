package shard

// This file holds Comm, the communication counter of Map (WithComm) and
// of propagation (Record).

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Comm accumulates the bytes each device sends, per collective kind, over
// the Map calls (and their backward passes) it is given to with WithComm.
// The byte counts follow the textbook algorithms on a ring: an all-reduce
// over n devices sends 2(n-1)/n of the data per device, an all-gather or a
// reduce-scatter (n-1)/n of the full result, a ppermute its block to one
// peer, an all-to-all (n-1)/n of its input. It is safe for concurrent use.
type Comm struct {
	mu    sync.Mutex
	bytes map[int]map[string]int64 // device id -> kind -> bytes
	calls map[string]int
	byOp  map[int]map[string]int64 // device id -> tensor op -> bytes (propagation)
	wait  map[int]time.Duration    // device id -> time waited for collectives
}

// addWait adds d to the time device dev waited for collectives.
func (c *Comm) addWait(dev *Device, d time.Duration) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wait == nil {
		c.wait = map[int]time.Duration{}
	}
	c.wait[dev.ID()] += d
}

// Waited returns the time device dev spent waiting for collectives: from
// issuing a collective until its result was there, and in Handle.Wait
// until a started one's was. It is the communication the device's
// computation did not hide (and, in one process, the time it waited for
// slower devices), the exposed communication of a training step.
func (c *Comm) Waited(dev *Device) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wait[dev.ID()]
}

func (c *Comm) add(dev *Device, kind string, bytes int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes == nil {
		c.bytes = map[int]map[string]int64{}
		c.calls = map[string]int{}
	}
	m := c.bytes[dev.ID()]
	if m == nil {
		m = map[string]int64{}
		c.bytes[dev.ID()] = m
	}
	m[kind] += bytes
}

func (c *Comm) count(kind string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.bytes = map[int]map[string]int64{}
		c.calls = map[string]int{}
	}
	c.calls[kind]++
}

// Bytes returns the bytes device dev sent in collectives of the given kind
// ("psum", "all_gather", ...); an empty kind sums all kinds.
func (c *Comm) Bytes(dev *Device, kind string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for k, b := range c.bytes[dev.ID()] {
		if kind == "" || k == kind {
			n += b
		}
	}
	return n
}

// Calls returns how many collectives of the given kind were issued (each
// counted once, not once per device).
func (c *Comm) Calls(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[kind]
}

// Kinds returns the collective kinds seen, sorted.
func (c *Comm) Kinds() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k := range c.calls {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Reset forgets everything counted so far.
func (c *Comm) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes, c.calls, c.byOp, c.wait = nil, nil, nil, nil
}

// String prints bytes per device and kind as a table.
func (c *Comm) String() string {
	c.mu.Lock()
	devs := make([]int, 0, len(c.bytes))
	for d := range c.bytes {
		devs = append(devs, d)
	}
	c.mu.Unlock()
	sort.Ints(devs)
	kinds := c.Kinds()
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s", "device")
	for _, k := range kinds {
		fmt.Fprintf(&b, " %18s", k)
	}
	b.WriteByte('\n')
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range devs {
		fmt.Fprintf(&b, "%-8d", d)
		for _, k := range kinds {
			fmt.Fprintf(&b, " %18d", c.bytes[d][k])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (c *Comm) addOp(dev *Device, op string, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byOp == nil {
		c.byOp = map[int]map[string]int64{}
	}
	m := c.byOp[dev.ID()]
	if m == nil {
		m = map[string]int64{}
		c.byOp[dev.ID()] = m
	}
	m[op] += bytes
}

// OpBytes returns the bytes device dev sent in the collectives that
// sharding propagation inserted for the tensor op named op ("matmul",
// "reduce_sum", ...; see Record); an empty op sums all ops.
func (c *Comm) OpBytes(dev *Device, op string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for k, b := range c.byOp[dev.ID()] {
		if op == "" || k == op {
			n += b
		}
	}
	return n
}

// Ops returns the names of the ops that propagation charged communication
// to, sorted.
func (c *Comm) Ops() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for _, m := range c.byOp {
		for k := range m {
			seen[k] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
