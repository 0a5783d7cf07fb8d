/* The MPI calls a DP step of the MLP 784-1024-1024-10 makes between
 * processes, on its 1,863,690 float32 parameters (7.45 MB), timed alone:
 * MPI_Allreduce (the plain update's all-reduce), MPI_Reduce_scatter and
 * MPI_Reduce_scatter_block (the sharded update's reduce-scatter, as
 * shard/mpi's ReduceScatter calls it and as it did before), and
 * MPI_Allgather and MPI_Allgatherv (its all-gather of the parameters).
 * Each is called 20 times in a row after one warm-up call, for ROUNDS
 * rounds (default 6); rank 0 prints one line per round with the mean time
 * per call of each, in ms. The README's multi-process section cites it.
 * Build: mpicc -O2 -o dpcollectives dpcollectives.c;
 * run: mpirun -np 2 --bind-to core ./dpcollectives 6 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define CALLS 20

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int rounds = argc > 1 ? atoi(argv[1]) : 6;
	if (rounds <= 0 || size > 64) {
		if (rank == 0) fprintf(stderr, "usage: dpcollectives ROUNDS (at most 64 processes)\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int n = 1863690;
	n -= n % size; /* equal parts */
	int part = n / size;
	float *send = malloc((size_t)n * sizeof(float)), *recv = malloc((size_t)n * sizeof(float));
	int counts[64], displs[64];
	for (int i = 0; i < size; i++) {
		counts[i] = part;
		displs[i] = i * part;
	}
	for (int i = 0; i < n; i++) { /* touch every page */
		send[i] = (float)(i % 7);
		recv[i] = 0;
	}
	const char *names[] = {"allreduce", "reduce_scatter", "reduce_scatter_block", "allgather", "allgatherv"};
	for (int r = 0; r < rounds; r++) {
		double ms[5];
		for (int c = 0; c < 5; c++) {
			double t0 = 0;
			for (int i = 0; i <= CALLS; i++) {
				if (i == 1) t0 = MPI_Wtime(); /* after the warm-up call */
				switch (c) {
				case 0: MPI_Allreduce(send, recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
				case 1: MPI_Reduce_scatter(send, recv, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
				case 2: MPI_Reduce_scatter_block(send, recv, part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
				case 3: MPI_Allgather(send, part, MPI_FLOAT, recv, part, MPI_FLOAT, MPI_COMM_WORLD); break;
				case 4: MPI_Allgatherv(send, part, MPI_FLOAT, recv, counts, displs, MPI_FLOAT, MPI_COMM_WORLD); break;
				}
			}
			ms[c] = (MPI_Wtime() - t0) / CALLS * 1e3;
		}
		if (rank == 0) {
			printf("round %d:", r + 1);
			for (int c = 0; c < 5; c++) printf(" %s %.2f ms", names[c], ms[c]);
			printf("\n");
		}
	}
	free(send);
	free(recv);
	MPI_Finalize();
	return 0;
}
