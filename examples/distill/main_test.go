package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonox/gonox/examples/internal/clitest"
	"github.com/gonox/gonox/shard"
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

// Usage mistakes name the flag or variable, print nothing on stdout and
// exit with status 2.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{args: []string{"-steps", "-1"}, want: "-steps -1: want an integer from 0 to 1000000"},
		{args: []string{"-lr", "0"}, want: "-lr 0: want a finite number in (0, 10]"},
		{args: []string{"-lr", "-Inf"}, want: "-lr -Inf: want a finite number in (0, 10]"},
		{args: []string{"-lr", "Inf"}, want: "-lr +Inf: want a finite number in (0, 10]"},
		{args: []string{"-steps", "x"}, want: `invalid value "x" for flag -steps`},
		{args: []string{"more"}, want: `unexpected arguments ["more"]`},
		{env: "0", want: `GONOX_DEVICES="0": want a positive integer`},
		{env: "-1", want: `GONOX_DEVICES="-1": want a positive integer`},
		{env: "abc", want: `GONOX_DEVICES="abc": want a positive integer`},
		{env: "1", want: "GONOX_DEVICES=1: the teacher and the student need at least 2 devices"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(shard.DevicesEnv, tc.env)
			}
			var out, errOut bytes.Buffer
			assert.Equal(t, 2, mainExit(tc.args, &out, &errOut))
			assert.Contains(t, errOut.String(), tc.want)
			assert.Empty(t, out.String())
		})
	}
}

func TestMainRuns(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	require.Equal(t, 0, mainExit([]string{"-steps", "2"}, &out, io.Discard))
	assert.Equal(t, "Loss: 1.09\nLoss: 1.01\n", out.String())
}

func TestHelp(t *testing.T) { clitest.Help(t, mainExit) }
