/* Reference for the gonox all-reduce benchmark: a plain loop of
 * MPI_Allreduce (sum, float32, separate send and receive buffers reused by
 * every call, as the binding's benchmark does) over one size.
 * Usage: allreduce MIB ITERS (defaults 64 and 20). Prints
 * "C MPI_Allreduce <MiB> MiB: <GB/s> GB/s (<ms> ms/call)", the bandwidth
 * being the bytes of the array over the time per call (the figure
 * BenchmarkAllreduce reports). One warm-up call precedes the timed loop.
 * Build: mpicc -O2 -o allreduce allreduce.c; run: mpirun -np 2 ./allreduce 4 200 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	int mib = argc > 1 ? atoi(argv[1]) : 64;
	int iters = argc > 2 ? atoi(argv[2]) : 20;
	if (mib <= 0 || iters <= 0) {
		if (rank == 0) fprintf(stderr, "usage: allreduce MIB ITERS\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	size_t n = (size_t)mib << 18; /* floats */
	float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++) x[i] = (float)(i % 7), y[i] = 1; /* touch every page */
	MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm-up */
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	for (int i = 0; i < iters; i++)
		MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	double t = (MPI_Wtime() - t0) / iters;
	if (rank == 0)
		printf("C MPI_Allreduce %d MiB: %.3f GB/s (%.3f ms/call)\n", mib, n * 4.0 / t / 1e9, t * 1e3);
	free(x);
	free(y);
	MPI_Finalize();
	return 0;
}
