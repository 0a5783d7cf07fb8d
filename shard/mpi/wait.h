// Waiting for MPI requests without spinning, shared by the binding's
// cgo preambles.

#include <mpi.h>
#include <time.h>

// GONOX_NAP_NS: how long gonox_complete sleeps between tests once it has
// tested without sleeping for spin nanoseconds (the kernel's timer slack,
// 50 µs by default, adds to it).
#define GONOX_NAP_NS 20000L

// gonox_complete completes *r as MPI_Wait does, but sleeps between tests
// once spin nanoseconds have passed (GONOX_MPI_SPIN; 1 ms by default:
// on two idle simulated hosts the DP step waited as fast with it as
// without pause, and 100 µs made it 15 % slower): Open MPI's MPI_Wait
// polls its sockets and shared memory in a loop (with sched_yield at most), which takes a whole core for as
// long as the other processes take to arrive, from the processes
// computing on it where processes share cores (the simulated hosts of
// cluster.sh, an oversubscribed node).
static inline int gonox_complete(MPI_Request *r, long spin) {
	struct timespec t0, t, nap = {0, GONOX_NAP_NS};
	int done = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int rc = MPI_Test(r, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS || done) {
			return rc;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >= spin) {
			nanosleep(&nap, NULL);
		}
	}
}
