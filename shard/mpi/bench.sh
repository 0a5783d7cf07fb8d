#!/usr/bin/env bash
# Benchmarks of multi-process meshes, side by side in one run:
#  1. all-reduce of 4 MiB and 64 MiB float32 over 2 processes: gonox
#     (shard.Map + Psum, and the binding alone) vs a plain C MPI_Allreduce
#     loop (testdata/allreduce.c, built here with mpicc), with
#     MPI_THREAD_MULTIPLE and with every MPI call funnelled through one
#     goroutine;
#  2. a DP training step of the MLP 784-1024-1024-10, global batch 256:
#     1 process x 1 core vs 2 processes x 1 core (GOMAXPROCS=1, one device
#     per process).
# Run from anywhere: shard/mpi/bench.sh. The machine should be otherwise
# idle: with 2 processes on 2 cores, any other load shows in every figure.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_btl=self,vader,tcp
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
grep -m1 'model name' /proc/cpuinfo
mpirun --version | head -1
mpicc -O2 -o "$out/allreduce" shard/mpi/testdata/allreduce.c
go test -tags mpi -c -o "$out/mpi.test" ./shard/mpi
bench() { "$@" -test.run '^$' -test.benchtime "${N:-20}x" 2>&1 | grep -E '^(Benchmark|C MPI)' || true; }

echo "--- all-reduce, 2 processes (rounds interleave C and gonox: compare within a round)"
for i in 1 2 3; do
  echo "round $i"
  mpirun -np 2 "$out/allreduce"
  GONOX_DEVICES=1 bench mpirun -np 2 "$out/mpi.test" -test.bench 'Allreduce'
  GONOX_DEVICES=1 GONOX_MPI_THREAD=funneled bench mpirun -np 2 -x GONOX_MPI_THREAD "$out/mpi.test" -test.bench 'Allreduce' | sed 's/^/funneled: /'
done

echo "--- DP step, MLP 784-1024-1024-10, batch 256"
for i in 1 2 3; do
  echo "round $i"
  GONOX_DEVICES=1 GOMAXPROCS=1 N=10 bench "$out/mpi.test" -test.bench 'DPStep'
  GONOX_DEVICES=1 GOMAXPROCS=1 N=10 bench mpirun -np 2 -x GOMAXPROCS -x GONOX_DEVICES "$out/mpi.test" -test.bench 'DPStep'
done
