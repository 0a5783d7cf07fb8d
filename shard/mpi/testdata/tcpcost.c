/* What moving bytes between two processes costs in CPU: ITERS exchanges of
 * MIB MiB each way (MPI_Sendrecv between ranks 0 and 1), printing per
 * rank the wall time and the CPU time (user, system) per exchange and the
 * CPU seconds per GB moved (sent plus received).
 * Usage: tcpcost MIB ITERS. Build: mpicc -O2 -o tcpcost tcpcost.c */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static double secs(struct timeval t) { return t.tv_sec + t.tv_usec * 1e-6; }

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	int mib = argc > 1 ? atoi(argv[1]) : 4, iters = argc > 2 ? atoi(argv[2]) : 50;
	size_t n = (size_t)mib << 20;
	char *s = malloc(n), *r = malloc(n);
	for (size_t i = 0; i < n; i++) s[i] = (char)i, r[i] = 0;
	int peer = 1 - rank;
	MPI_Sendrecv(s, (int)n, MPI_BYTE, peer, 0, r, (int)n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	struct rusage a, b;
	MPI_Barrier(MPI_COMM_WORLD);
	getrusage(RUSAGE_SELF, &a);
	double t0 = MPI_Wtime();
	for (int i = 0; i < iters; i++)
		MPI_Sendrecv(s, (int)n, MPI_BYTE, peer, 0, r, (int)n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	double wall = (MPI_Wtime() - t0) / iters;
	getrusage(RUSAGE_SELF, &b);
	double us = (secs(b.ru_utime) - secs(a.ru_utime)) / iters, sy = (secs(b.ru_stime) - secs(a.ru_stime)) / iters;
	printf("rank %d: %d MiB each way: %.2f ms wall, %.2f ms user + %.2f ms sys CPU per exchange; %.2f CPU-s/GB moved; %.2f GB/s each way\n",
	       rank, mib, wall * 1e3, us * 1e3, sy * 1e3, (us + sy) / (2.0 * n / 1e9), n / wall / 1e9);
	MPI_Finalize();
	return 0;
}
