package shard

import "time"

// This file holds what a transport implements (see "Adding a transport"
// in doc.go): Transport and Group, and the optional AsyncGroup (with its
// Request) and SharedMemoryGroup. Everything that uses them is in the
// xproc_*.go files.

// Transport connects the processes of a job whose meshes span processes
// (package shard/mpi provides one over MPI). Install makes it the
// process's; without one, every device lives in this process.
//
// Every method that communicates is collective: all processes of the
// group call it, in the same order.
type Transport interface {
	// Rank is this process's index in the job, Size the number of
	// processes.
	Rank() int
	Size() int
	// World returns a group of all processes, for Gather and the Put
	// check; NewGroup a group of the given processes (ascending ranks).
	// Every process calls NewGroup with the same arguments in the same
	// order, including processes outside procs (they get nil).
	World() Group
	NewGroup(procs []int) Group
	// Abort ends every process of the job after printing msg on this
	// one's standard error. It does not return.
	Abort(msg string)
}

// HostTransport is implemented by a Transport that knows which of its
// processes share a host (package shard/mpi's, from
// MPI_Comm_split_type). shard then makes the float32 sums of a group
// spanning several hosts hierarchical (see hierGroup in xproc_hier.go):
// through shared memory within each host, between hosts by one process
// per host.
type HostTransport interface {
	Transport
	// Hosts returns, for every process, the lowest rank of a process on
	// the same host.
	Hosts() []int
}

// ReduceOp is the reduction of Group.Allreduce.
type ReduceOp int

// Reductions.
const (
	ReduceSum ReduceOp = iota
	ReduceMax
	ReduceMin
)

// Group is a communicator among some processes, ranked in the order of
// the process ranks it was made from. A Group may also implement
// AsyncGroup (non-blocking sends, for RingShiftStart and PpermuteStart)
// and SharedMemoryGroup (its processes share a host: shard then moves its
// collectives through shared memory and uses the methods below only if
// that memory cannot be had).
type Group interface {
	// Rank is this process's index in the group, Size the number of
	// processes in it.
	Rank() int
	Size() int
	// AllreduceFloat32 and AllreduceInt32 combine send over the group
	// into recv (send and recv may be the same slice).
	AllreduceFloat32(send, recv []float32, op ReduceOp)
	AllreduceInt32(send, recv []int32, op ReduceOp)
	// ReduceScatterFloat32 combines send over the group and leaves
	// block r of the result (len(recv) elements) in rank r's recv:
	// len(send) = Size()·len(recv).
	ReduceScatterFloat32(send, recv []float32, op ReduceOp)
	// Allgatherv concatenates every rank's send into recv in rank
	// order; counts[r] is the length of rank r's send.
	Allgatherv(send, recv []byte, counts []int)
	// Alltoallv sends sendCounts[r] bytes of send (in rank order) to
	// rank r and receives recvCounts[r] bytes from rank r into recv.
	Alltoallv(send []byte, sendCounts []int, recv []byte, recvCounts []int)
}

// AsyncGroup is implemented by a Group that can move bytes between two of
// its processes without blocking (package shard/mpi: MPI_Isend and
// MPI_Irecv). Without it, an asynchronous collective between processes
// exchanges synchronously when it starts (correct, but nothing overlaps).
type AsyncGroup interface {
	// IsendBytes starts sending buf to rank dst of the group with the
	// given tag; IrecvBytes starts receiving into buf from rank src.
	// Messages between the same two ranks with the same tag are matched
	// in the order they are posted. buf must not be touched until the
	// request completes.
	IsendBytes(buf []byte, dst, tag int) Request
	IrecvBytes(buf []byte, src, tag int) Request
}

// Request is a transfer in flight (an MPI_Request).
type Request interface {
	// Wait blocks until the transfer is done (MPI_Wait).
	Wait()
	// Test reports whether it is done, without blocking (MPI_Test).
	Test() bool
}

// PollingRequest is implemented by a Request that can wait by testing
// the transfer every interval and sleeping in between, off the Go
// scheduler (package shard/mpi: MPI_Test and nanosleep in C), rather
// than spinning in MPI_Wait: a started collective's exchange waits so
// while the device computes on the same core.
type PollingRequest interface {
	Request
	// Poll tests the transfer every interval for at most budget and
	// reports whether it is done.
	Poll(every, budget time.Duration) bool
}

// SharedMemoryGroup is implemented by a Group whose processes can all map
// one region of memory: processes of one host. Package shard/mpi provides
// it with an MPI-3 shared-memory window (MPI_Win_allocate_shared) when
// MPI_Comm_split_type puts every process of the group on one node. shard
// then moves that group's collectives (AllreduceFloat32, AllreduceInt32,
// ReduceScatterFloat32, Allgatherv, Alltoallv) through the region itself:
// each process stores what the others need into its own segment and, past
// a fence, loads what it needs from theirs, one copy in and one out at
// memory speed. Reductions are summed by shard's own kernels in rank
// order, so a psum_scatter is bit for bit the part of the psum for any
// number of processes, and a psum over one device per process equals the
// one-process psum over the same devices bit for bit.
//
// Why: Open MPI 4.1's collectives between the processes of one host move
// large blocks at a fraction of memory speed. On a 2-core Zen 3 VM a Psum
// of 64 MiB over 2 processes ran at 2.2 GB/s this way against 0.77 GB/s
// through MPI_Allreduce (0.80 GB/s for a plain C MPI_Allreduce loop), and
// the DP training step of the README's MLP took 28.6 ms against 33.7 ms
// (shard/mpi/bench.sh; the README's "Multi-process figures").
//
// Every method is collective over the group, called in the same order by
// all its processes. shard keeps one region per Group it got from the
// Transport: a Group's Share must not be called by anything else.
type SharedMemoryGroup interface {
	Group
	// Share replaces the group's shared region (the previous one must
	// no longer be used) with one of n bytes per process, and returns
	// every process's segment in group rank order, mapped into this
	// process, each starting 64-byte aligned. Every process calls it
	// with the same n. It returns nil on every process if the memory
	// cannot be had; the group's own collectives are used from then on.
	Share(n int) [][]byte
	// Fence returns once every process of the group has called it;
	// whatever any process stored into a segment before its call is
	// seen by every process's loads after its own call.
	Fence()
}
