// Package mpi runs gonox meshes across processes and hosts over MPI, in the
// manner of jax.distributed.initialize.
//
// Build with the mpi tag (the default build stays pure Go and has no MPI):
//
//	go build -tags mpi ./examples/mlp
//	mpirun -np 2 ./mlp -strategy dp -mesh dp=2
//
// A program calls Init first and Finalize last:
//
//	func main() {
//		if err := mpi.Init(); err != nil {
//			log.Fatal(err)
//		}
//		defer mpi.Finalize()
//		mesh := shard.NewMesh([]int{2}, []string{"dp"}) // spans 2 processes
//		...
//	}
//
// Init connects the processes of the job and installs them into package
// shard (shard.Install): each process owns $GONOX_DEVICES devices (default
// 1 under mpirun, 8 when the program runs alone) and the device pool is
// global, process-major, so process r owns devices r·n ... (r+1)·n-1. The
// program is SPMD: every process runs the same code, creates the same
// meshes in the same order and calls the same cross-process operations
// (shard.Map on a mesh of several processes, shard.Gather, shard.Put from
// another process's blocks, checkpoints) in the same order. A host tensor
// given to shard.Put must be equal on every process of the target mesh
// (GONOX_DEBUG=1 checks it with a hash).
//
// Which processes take part follows from the mesh (shard.Install lists
// the rules): an operation on a mesh that spans processes involves the
// processes owning its devices; a mesh whose devices all live in one
// process (its arrays are fully addressable there, in JAX's words) is
// computed on by that process alone, with no MPI call; a process owning
// no device of a mesh holds no blocks of its arrays and cannot compute on
// them or read them (shard.Map, propagated ops and shard.Gather panic
// naming the process) until they are resharded onto a mesh with one of
// its devices. Every mesh has MPI communicators of its own (made when the
// mesh is created), so operations on two meshes, such as a teacher's and
// a student's, may run concurrently on two goroutines.
//
// Each process materialises only its own devices' blocks. Collectives in
// shard.Map among devices of one process stay in memory; between
// processes they go through MPI communicators, one per set of processes
// that a group of devices over some mesh axes spans, created when the
// mesh is made and kept for its lifetime. A psum all-reduces each
// process's partial sum (MPI_Allreduce), pmax and pmin likewise with
// MPI_MAX and MPI_MIN; a reduce-scatter, an all-to-all and a ppermute send
// each process only the parts of other processes' blocks its devices read
// (MPI_Alltoallv); an all-gather and a ragged all-to-all bring the whole
// blocks of the other processes' group members (MPI_Allgatherv). The
// in-memory algorithm then runs as in one process, so results (and their
// VJPs) are those of one process.
//
// # One host
//
// When every process of a communicator runs on one node
// (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED), its group is a
// shard.SharedMemoryGroup: package shard moves that group's all-reduce,
// reduce-scatter, all-gather and all-to-all through an MPI-3
// shared-memory window (MPI_Win_allocate_shared; MPI_Win_sync and
// MPI_Barrier order the stores and loads), at memory speed and summing in
// rank order, instead of through MPI's collectives, which on one 2-core
// host moved large blocks at a third to a half of that speed (the
// README's "Multi-process figures"). A window is made on a group's first
// collective, grows with the largest one up to 16 MiB per process (larger
// ones go through it in rounds), and is freed by Finalize. Open MPI backs
// a window with a file in /dev/shm (its MCA parameter
// osc_sm_backing_directory): where that has too little room, as a
// container's 64 MB default may, process 0 warns once and the group uses
// MPI's collectives. Groups that span hosts use MPI's collectives.
// GONOX_MPI_SHM=0 (SharedMemoryEnv) turns shared memory off.
//
// A program built with the mpi tag and started without mpirun is a world
// of one process and behaves exactly as without the tag. Without the tag,
// Init only checks the environment and Finalize does nothing, so programs
// call them unconditionally.
//
// # Settings
//
// Init parses every environment variable gonox reads (EnvSettings:
// GONOX_DEVICES, GONOX_DEBUG, GONOX_TIMEOUT, GONOX_ASYNC_PROGRESS, the
// kernel set GONOX_KERNELS chooses, GONOX_MPI_THREAD, GONOX_MPI_SHM,
// GONOX_MPI_SPIN),
// strictly and with bounds, and under mpirun gathers every process's
// settings: a value refused on one process, or a setting that differs
// between processes (a variable given to some processes only, a forgotten
// mpirun -x), is one error that Init returns on every process, naming the
// variable and the processes, before any device exists:
//
//	mpi.Init: GONOX_DEBUG differs between processes: unset on process 0, "1" on process 1; give every process the same (mpirun -x GONOX_DEBUG)
//	mpi.Init: process 0: shard: GONOX_DEVICES="99999999999": at most 4096 simulated devices
//
// Two machines whose default kernel sets differ (one with AVX-512, one
// without) disagree on GONOX_KERNELS: their sums would differ in the last
// bits, so set it to a set both run. Programs call EnvSettings first to
// report a mistake as a usage error (the examples do).
//
// # Failures
//
// A panic on a device in a Map over several processes aborts the job
// (MPI_Abort) with a message naming the process and device; a process that
// exits or is killed makes mpirun end the others. A process that waits
// more than $GONOX_TIMEOUT (default 10m) in one cross-process exchange
// aborts the job, naming the collective and the processes it waits for
// (one never issued it, failed, or cannot be reached: a link down); if
// MPI_Abort cannot reach mpirun, the process ends itself. Before every
// exchange the processes compare a fingerprint of what each is about to do
// (the mesh's devices and axes, the operation's kind, dtype, shape, axes
// and parameters, its sequence number on its communicator, and for Gather
// and reshards which array), always: processes that issued different
// collectives end the job at once with a message naming each process's
// operation, instead of exchanging wrong data or hanging. GONOX_DEBUG=1
// adds the check that the host tensors given to shard.Put are equal.
//
// # Threads
//
// gonox asks for MPI_THREAD_MULTIPLE: device goroutines of different
// meshes may be in MPI at the same time. GONOX_MPI_THREAD=funneled instead
// runs every MPI call on one goroutine locked to the thread that
// initialised MPI (for MPI libraries without thread support).
//
// # Waiting
//
// A process waiting for other processes (a collective that moves data, a
// small sum over two processes, Request.Wait) tests the transfer without
// pause for GONOX_MPI_SPIN (1ms by default), then sleeps 20 µs between
// tests: MPI's own waits test without pause until done, which takes a
// core from the processes computing on it where processes share cores
// (simulated hosts, an oversubscribed node). The collectives start MPI's
// non-blocking forms for this; sums over more than two processes and
// large ones keep MPI_Allreduce and MPI_Reduce_scatter, whose order of
// additions the non-blocking forms need not keep. A long GONOX_MPI_SPIN
// (10s at most) waits as MPI does.
package mpi
