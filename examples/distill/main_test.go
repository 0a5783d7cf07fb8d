package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The JAX sharding guide prints these losses for its distillation example.
func TestReproducesTheGuide(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	require.NoError(t, run(5, 0.01, &out))
	assert.Equal(t, "Loss: 1.09\nLoss: 1.01\nLoss: 0.94\nLoss: 0.88\nLoss: 0.83\n", out.String())
}

// Stopping early (fewer steps than the teacher could run) leaves no
// goroutine behind.
func TestEarlyStop(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	require.NoError(t, run(1, 0.01, &out))
	assert.Equal(t, "Loss: 1.09\n", out.String())
}
