/* Reference for the gonox all-reduce benchmark: a plain loop of
 * MPI_Allreduce (sum, float32, separate send and receive buffers, as
 * gonox's Psum with one device per process) over the same sizes.
 * Prints one line per size: "C MPI_Allreduce <MiB> MiB: <GB/s> GB/s",
 * the bandwidth being the bytes of the array over the time per call.
 * Build: mpicc -O2 -o allreduce allreduce.c; run: mpirun -np 2 ./allreduce */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	int mibs[] = {4, 64};
	int iters[] = {200, 20};
	for (int k = 0; k < 2; k++) {
		size_t n = (size_t)mibs[k] << 18; /* floats */
		float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
		for (size_t i = 0; i < n; i++) x[i] = (float)(i % 7);
		MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm-up */
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < iters[k]; i++)
			MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double t = (MPI_Wtime() - t0) / iters[k];
		if (rank == 0)
			printf("C MPI_Allreduce %d MiB: %.2f GB/s (%.3f ms/call)\n", mibs[k], n * 4.0 / t / 1e9, t * 1e3);
		free(x);
		free(y);
	}
	MPI_Finalize();
	return 0;
}
