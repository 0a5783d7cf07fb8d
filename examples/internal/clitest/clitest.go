// Package clitest holds the check the examples' tests make of a command
// that fails: run as main runs it (each example's mainExit), it exits with
// the status of its kind of failure (2 for a usage mistake, 1 for the
// outside world), prints nothing on standard output, and one line on
// standard error saying what is wrong.
package clitest

import (
	"bytes"
	"io"
	"strings"

	"github.com/stretchr/testify/assert"
)

// Main is a command run as main runs it, returning its exit status
// instead of ending the process (an example's mainExit).
type Main func(args []string, out, errOut io.Writer) int

// T is the part of a *testing.T that Fails reports to.
type T interface {
	Helper()
	Errorf(format string, args ...any)
}

// Fails runs main with args and checks that it exits with status, prints
// nothing on standard output, and prints on standard error one line that
// contains every string of want. Failures name args.
func Fails(t T, main Main, status int, args []string, want ...string) {
	t.Helper()
	var out, errOut bytes.Buffer
	got := main(args, &out, &errOut)
	msg := errOut.String()
	assert.Equal(t, status, got, "%q: exit status; standard error: %s", args, msg)
	for _, w := range want {
		assert.Contains(t, msg, w, "%q", args)
	}
	assert.Equal(t, 1, strings.Count(msg, "\n"), "%q: one line on standard error: %q", args, msg)
	assert.True(t, msg == "" || strings.HasSuffix(msg, "\n"), "%q: the line ends", args)
	assert.Empty(t, out.String(), "%q: nothing on standard output", args)
}

// Help runs main with -h and checks that it exits with status 0 and that
// no flag's usage states a default twice (the flag package appends
// `(default "x")` to a usage that already says "(default y)").
func Help(t T, main Main) {
	t.Helper()
	var out, errOut bytes.Buffer
	assert.Equal(t, 0, main([]string{"-h"}, &out, &errOut), "-h: exit status")
	usage := out.String() + errOut.String()
	assert.Contains(t, usage, "Usage of ")
	for _, line := range strings.Split(usage, "\n") {
		assert.LessOrEqual(t, strings.Count(line, "(default"), 1, "-h: two defaults in %q", strings.TrimSpace(line))
	}
}
