//go:build unix

package cputime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/internal/cputime"
)

// Spinning uses CPU time, which Used sees advance (on a shared machine
// slowly: the spin may wait for a core, so it runs until 20 ms of CPU
// time have passed, or fails after 10 s of wall time); sleeping uses
// almost none.
func TestUsed(t *testing.T) {
	start := cputime.Used()
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for cputime.Used()-start < 20*time.Millisecond && time.Now().Before(deadline) {
		for range 10000 {
			x++
		}
	}
	assert.Positive(t, x)
	assert.GreaterOrEqual(t, cputime.Used()-start, 20*time.Millisecond, "10 s of spinning and Used did not advance by 20 ms")
	before := cputime.Used()
	time.Sleep(50 * time.Millisecond)
	assert.Less(t, cputime.Used()-before, 25*time.Millisecond)
}
