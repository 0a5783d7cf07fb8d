// Package testlong tells tests whether to run their exhaustive variants.
//
// `go test ./...` (the README's command) runs every test, each with a
// sweep sized to keep the whole suite under a minute on two cores. The
// exhaustive sweeps (dense bit-pattern sweeps of the vector kernels, every
// blocking corner of the gemm kernels, slow crash-recovery loops) run when
// the environment variable GONOX_TEST_LONG is set to 1, as .ci/run does:
//
//	GONOX_TEST_LONG=1 go test ./tensor/...
//
// An environment variable rather than a -long flag, so that it can be given
// to `go test ./...`: a flag would have to be defined by every test binary.
// The go command's test cache keys on it, so a cached short run is not
// reported for a long one.
package testlong

import (
	"os"
	"testing"
)

// Env is the environment variable that turns the exhaustive tests on.
const Env = "GONOX_TEST_LONG"

// Enabled reports whether exhaustive tests run: GONOX_TEST_LONG is set to
// something other than "" or "0", and the run is not -short.
func Enabled() bool {
	v := os.Getenv(Env)
	return v != "" && v != "0" && !testing.Short()
}

// Skip skips t unless exhaustive tests run, saying how to run it.
func Skip(t testing.TB) {
	t.Helper()
	if !Enabled() {
		t.Skip("exhaustive test: set " + Env + "=1 to run it")
	}
}
