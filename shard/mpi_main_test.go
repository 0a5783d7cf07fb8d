//go:build mpi

package shard_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/gonox/gonox/shard/mpi"
)

// TestMain runs the tests of package shard inside an MPI job when started
// by mpirun (go test -c -tags mpi, then mpirun -np 2 shard.test -test.run
// Guide): the 8 devices of the guide's mesh are split over the processes.
// Alone, the binary is one process with the usual 8 devices.
func TestMain(m *testing.M) {
	if n := mpiWorldSize(); n > 1 && os.Getenv("GONOX_DEVICES") == "" {
		os.Setenv("GONOX_DEVICES", strconv.Itoa(8/n))
	}
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	mpi.Finalize()
	os.Exit(code)
}

// mpiWorldSize reads the job size that mpirun (Open MPI, MPICH or Slurm)
// puts in the environment, before MPI is initialised.
func mpiWorldSize() int {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"} {
		if n, err := strconv.Atoi(os.Getenv(v)); err == nil {
			return n
		}
	}
	return 1
}
