package cli

import "github.com/gonox/gonox/shard/mpi"

// CheckEnv checks the environment variables gonox reads, with the parsers
// of the packages that read them (mpi.EnvSettings, which covers package
// shard's and tensor's too), so that a wrong value is a usage error naming
// the variable before any work — where the library would fail at the
// first op (GONOX_KERNELS), at the first use of the device pool
// (GONOX_DEVICES, GONOX_DEBUG, ...) or in mpi.Init. Unset and empty
// variables take their defaults.
func CheckEnv() error {
	if _, err := mpi.EnvSettings(); err != nil {
		return Usage(err)
	}
	return nil
}
