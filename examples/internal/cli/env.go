package cli

import (
	"os"
	"time"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

// CheckEnv checks the environment variables gonox reads, as the packages
// that read them would, so that a wrong value is a usage error naming the
// variable before any work — where the library would panic at the first
// op (GONOX_KERNELS), at the first use of the device pool
// (GONOX_DEVICES), in the middle of a run (GONOX_ASYNC_PROGRESS) or ignore
// it (GONOX_DEBUG=true):
//
//	GONOX_KERNELS         avx512, avx2 or go, and one this machine runs
//	GONOX_DEVICES         an integer from 1 to MaxDevices
//	GONOX_DEBUG           0 or 1
//	GONOX_TIMEOUT         a duration of 0 or more (mpirun only)
//	GONOX_ASYNC_PROGRESS  a duration of 0 or more (mpirun only)
//	GONOX_MPI_THREAD      multiple or funneled (mpi build tag)
//	GONOX_MPI_SHM         0 or 1 (mpi build tag)
//
// Unset and empty variables take their defaults.
func CheckEnv() error {
	if _, _, err := tensor.Kernels(); err != nil {
		return Usage(err)
	}
	if n, err := shard.DevicesFromEnv(); err != nil {
		return Usage(err)
	} else if n > MaxDevices {
		return Usagef("%s=%d: at most %d simulated devices", shard.DevicesEnv, n, MaxDevices)
	}
	for _, c := range []struct {
		name string
		ok   func(string) bool
		want string
	}{
		{shard.DebugEnv, oneOf("0", "1"), "0 or 1"},
		{shard.TimeoutEnv, duration, "a duration such as 90s or 10m"},
		{shard.ProgressEnv, duration, "a duration such as 100us, or 0"},
		{mpi.ThreadEnv, oneOf("multiple", "funneled"), "multiple or funneled"},
		{mpi.SharedMemoryEnv, oneOf("0", "1"), "0 or 1"},
	} {
		if v := os.Getenv(c.name); v != "" && !c.ok(v) {
			return Usagef("%s=%q: want %s", c.name, v, c.want)
		}
	}
	return nil
}

// MaxDevices bounds GONOX_DEVICES: each simulated device has a goroutine
// and its own blocks, and a pool beyond this is a typing mistake rather
// than a mesh.
const MaxDevices = 4096

func oneOf(values ...string) func(string) bool {
	return func(v string) bool {
		for _, w := range values {
			if v == w {
				return true
			}
		}
		return false
	}
}

func duration(v string) bool {
	d, err := time.ParseDuration(v)
	return err == nil && d >= 0
}
