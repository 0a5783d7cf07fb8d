/* Reference for the gonox all-reduce benchmark: a plain loop of
 * MPI_Allreduce (sum, float32, separate send and receive buffers reused by
 * every call, as the binding's benchmark does) over one size.
 * Usage: allreduce MIB ITERS (defaults 64 and 20). Prints
 * "C MPI_Allreduce <MiB> MiB: <a> GB/s <b> GB/s-median <c> GB/s-best
 * (<ms> ms/call)", the bandwidth being the bytes of the array over the
 * mean, the median and the shortest time per call (the figures
 * BenchmarkAllreduce reports). One warm-up call precedes the timed loop.
 * Build: mpicc -O2 -o allreduce allreduce.c; run: mpirun -np 2 ./allreduce 4 200 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

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
	double *ts = malloc(iters * sizeof(double));
	double t0 = MPI_Wtime();
	for (int i = 0; i < iters; i++) {
		double t1 = MPI_Wtime();
		MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		ts[i] = MPI_Wtime() - t1;
	}
	double t = (MPI_Wtime() - t0) / iters;
	qsort(ts, iters, sizeof(double), cmp);
	double med = iters % 2 ? ts[iters / 2] : (ts[iters / 2 - 1] + ts[iters / 2]) / 2;
	if (rank == 0)
		printf("C MPI_Allreduce %d MiB: %.4f GB/s %.4f GB/s-median %.4f GB/s-best (%.3f ms/call)\n", mib,
		       n * 4.0 / t / 1e9, n * 4.0 / med / 1e9, n * 4.0 / ts[0] / 1e9, t * 1e3);
	free(ts);
	free(x);
	free(y);
	MPI_Finalize();
	return 0;
}
