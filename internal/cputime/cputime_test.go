//go:build unix

package cputime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/internal/cputime"
)

// Spinning for a while of wall time uses about as much CPU time; sleeping
// uses almost none.
func TestUsed(t *testing.T) {
	start := cputime.Used()
	wall := time.Now()
	x := 0
	for time.Since(wall) < 50*time.Millisecond {
		x++
	}
	spun := cputime.Used() - start
	assert.Positive(t, x)
	// The machine may be shared: ask for a tenth of the spin only.
	assert.Greater(t, spun, 5*time.Millisecond)
	before := cputime.Used()
	time.Sleep(50 * time.Millisecond)
	assert.Less(t, cputime.Used()-before, 25*time.Millisecond)
}
