//go:build mpi

package mpi_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/gonox/gonox/shard/mpi"
)

// TestMain runs the tests inside an MPI job when started by mpirun
// (go test -c -tags mpi ./shard/mpi; mpirun -np 2 ./mpi.test), with the 8
// devices of the guide's mesh split over the processes, and as a world of
// one process otherwise.
func TestMain(m *testing.M) {
	if n := worldSize(); n > 1 && os.Getenv("GONOX_DEVICES") == "" && 8%n == 0 {
		os.Setenv("GONOX_DEVICES", strconv.Itoa(8/n))
	}
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 2
	}
	os.Exit(code)
}

func worldSize() int {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"} {
		if n, err := strconv.Atoi(os.Getenv(v)); err == nil {
			return n
		}
	}
	return 1
}

// underLauncher reports whether mpirun (or srun) started this process,
// even as a job of one.
func underLauncher() bool {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"} {
		if _, ok := os.LookupEnv(v); ok {
			return true
		}
	}
	return false
}
