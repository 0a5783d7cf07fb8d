package mpi

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
)
