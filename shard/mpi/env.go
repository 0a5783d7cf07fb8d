package mpi

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// The environment variables of package mpi, defined in every build so that
// programs naming them compile with and without the mpi tag (without it
// they are not read).
const (
	// ThreadEnv is the environment variable that chooses the MPI thread
	// level: "multiple" (the default, MPI_THREAD_MULTIPLE) or "funneled"
	// (every MPI call on one goroutine locked to the thread that
	// initialised MPI).
	ThreadEnv = "GONOX_MPI_THREAD"

	// SharedMemoryEnv is the environment variable that turns off the
	// collectives through shared memory between processes of one host
	// (GONOX_MPI_SHM=0; 1 or unset is on, anything else makes Init
	// fail): every collective then goes through MPI's own. By default a
	// group whose processes all share one node (MPI_Comm_split_type with
	// MPI_COMM_TYPE_SHARED) is a shard.SharedMemoryGroup over an MPI-3
	// shared-memory window.
	SharedMemoryEnv = "GONOX_MPI_SHM"

	// SpinEnv is the environment variable with how long a process waiting
	// for MPI (a collective, Request.Wait) tests the transfer without
	// pause before it sleeps 20 µs between tests: a Go duration from 0 to
	// MaxSpin, 1ms by default. Open MPI's own waits test without pause
	// until done, which takes a core from the processes computing on it
	// where processes share cores; MaxSpin does much the same.
	SpinEnv = "GONOX_MPI_SPIN"
)

// MaxSpin is the longest GONOX_MPI_SPIN, and DefaultSpin its default.
const (
	MaxSpin     = 10 * time.Second
	DefaultSpin = time.Millisecond
)

// spinFromEnv parses GONOX_MPI_SPIN.
func spinFromEnv() (time.Duration, error) {
	s := os.Getenv(SpinEnv)
	if s == "" {
		return DefaultSpin, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > MaxSpin {
		return 0, fmt.Errorf("mpi: %s=%q: want a duration from 0 to %v (default %v)", SpinEnv, s, MaxSpin, DefaultSpin)
	}
	return d, nil
}

// EnvSettings parses every environment variable whose value the processes
// of a job must agree on, strictly, in this order: package shard's
// (shard.EnvSettings: GONOX_DEVICES, GONOX_DEBUG, GONOX_TIMEOUT,
// GONOX_ASYNC_PROGRESS), the kernel set in use (GONOX_KERNELS, see
// tensor.Kernels: its Canon is the set chosen, so two machines whose
// default sets differ disagree), GONOX_MPI_THREAD (multiple or funneled),
// GONOX_MPI_SHM (0 or 1) and GONOX_MPI_SPIN (a duration). It returns an error naming the first
// variable whose value is refused and what it wants. It is defined in
// every build, so that programs check their environment the same way with
// and without the mpi tag; Init calls it, and under mpirun compares the
// Canons of every process, naming the variable and the processes that
// differ.
func EnvSettings() ([]shard.Setting, error) {
	out, err := shard.EnvSettings()
	if err != nil {
		return nil, err
	}
	active, _, err := tensor.Kernels()
	if err != nil {
		return nil, err
	}
	out = append(out, shard.Setting{Name: tensor.KernelsEnv, Value: os.Getenv(tensor.KernelsEnv), Canon: active})
	for _, v := range []struct {
		name string
		ok   []string
		want string
	}{
		{ThreadEnv, []string{"multiple", "funneled"}, "multiple (the default) or funneled"},
		{SharedMemoryEnv, []string{"1", "0"}, "0 (off) or 1 (on, the default)"},
	} {
		s := os.Getenv(v.name)
		canon := v.ok[0]
		if s != "" {
			if !slices.Contains(v.ok, s) {
				return nil, fmt.Errorf("mpi: %s=%q: want %s", v.name, s, v.want)
			}
			canon = s
		}
		out = append(out, shard.Setting{Name: v.name, Value: s, Canon: canon})
	}
	spin, err := spinFromEnv()
	if err != nil {
		return nil, err
	}
	out = append(out, shard.Setting{Name: SpinEnv, Value: os.Getenv(SpinEnv), Canon: spin.String()})
	return out, nil
}
