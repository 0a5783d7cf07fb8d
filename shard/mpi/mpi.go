//go:build mpi

package mpi

/*
#cgo pkg-config: mpi
#include <mpi.h>
#include <stdlib.h>
#include "wait.h"

static MPI_Comm gonox_world(void) { return MPI_COMM_WORLD; }
static MPI_Comm gonox_comm_null(void) { return MPI_COMM_NULL; }
static int gonox_undefined(void) { return MPI_UNDEFINED; }
static MPI_Datatype gonox_type(int k) {
	switch (k) {
	case 0: return MPI_FLOAT;
	case 1: return MPI_INT;
	case 2: return MPI_BYTE;
	case 3: return MPI_DOUBLE;
	}
	return MPI_DATATYPE_NULL;
}
static MPI_Op gonox_op(int k) {
	switch (k) {
	case 0: return MPI_SUM;
	case 1: return MPI_MAX;
	case 2: return MPI_MIN;
	}
	return MPI_OP_NULL;
}
// MPI_IN_PLACE is not a valid Go pointer (Open MPI's is (void *)1): it
// never passes through a Go variable, which the collector would check.
// With quiet set (small arrays over two processes, see Allreduce) it
// completes MPI_Iallreduce with gonox_complete (wait.h) instead of
// spinning in MPI_Allreduce.
static int gonox_allreduce(void *send, void *recv, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, int in_place, int quiet, long spin) {
	void *s = in_place ? MPI_IN_PLACE : send;
	if (!quiet) return MPI_Allreduce(s, recv, n, t, op, c);
	MPI_Request r;
	int rc = MPI_Iallreduce(s, recv, n, t, op, c, &r);
	return rc != MPI_SUCCESS ? rc : gonox_complete(&r, spin);
}
// The collectives below start MPI's non-blocking collective and complete
// it with gonox_complete (wait.h), which sleeps where MPI_Wait, and the
// blocking collectives, would spin. Every process of a communicator calls
// the same one (blocking and non-blocking collectives do not match each
// other). Sums and extremes keep MPI_Allreduce and MPI_Reduce_scatter
// but for small arrays over two processes (gonox_allreduce): the
// non-blocking forms may combine the processes' values in another order
// (not so on two: a+b is b+a), and Open MPI's (libnbc) all-reduced 4 MiB
// between two processes of one host at about half the speed.
static int gonox_allgather(void *send, int n, void *recv, MPI_Datatype t, MPI_Comm c, long spin) {
	MPI_Request r;
	int rc = MPI_Iallgather(send, n, t, recv, n, t, c, &r);
	return rc != MPI_SUCCESS ? rc : gonox_complete(&r, spin);
}
static int gonox_allgatherv(void *send, int n, void *recv, const int *counts, const int *displs, MPI_Datatype t, MPI_Comm c, long spin) {
	MPI_Request r;
	int rc = MPI_Iallgatherv(send, n, t, recv, counts, displs, t, c, &r);
	return rc != MPI_SUCCESS ? rc : gonox_complete(&r, spin);
}
static int gonox_alltoall(void *send, int n, void *recv, MPI_Datatype t, MPI_Comm c, long spin) {
	MPI_Request r;
	int rc = MPI_Ialltoall(send, n, t, recv, n, t, c, &r);
	return rc != MPI_SUCCESS ? rc : gonox_complete(&r, spin);
}
static int gonox_alltoallv(void *send, const int *sc, const int *sd, void *recv, const int *rc_, const int *rd, MPI_Datatype t, MPI_Comm c, long spin) {
	MPI_Request r;
	int rc = MPI_Ialltoallv(send, sc, sd, t, recv, rc_, rd, t, c, &r);
	return rc != MPI_SUCCESS ? rc : gonox_complete(&r, spin);
}
static int gonox_sendrecv(void *send, int ns, int dst, void *recv, int nr, int src, int tag, MPI_Datatype t, MPI_Comm c, long spin) {
	MPI_Request r[2];
	int rc = MPI_Irecv(recv, nr, t, src, tag, c, &r[0]);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Isend(send, ns, t, dst, tag, c, &r[1]);
	if (rc != MPI_SUCCESS) return rc;
	rc = gonox_complete(&r[0], spin);
	if (rc != MPI_SUCCESS) return rc;
	return gonox_complete(&r[1], spin);
}
static int gonox_bcast(void *buf, int n, MPI_Datatype t, int root, MPI_Comm c, long spin) {
	MPI_Request r;
	int rc = MPI_Ibcast(buf, n, t, root, c, &r);
	return rc != MPI_SUCCESS ? rc : gonox_complete(&r, spin);
}
static int gonox_thread_level(int k) {
	switch (k) {
	case 0: return MPI_THREAD_SINGLE;
	case 1: return MPI_THREAD_FUNNELED;
	case 2: return MPI_THREAD_SERIALIZED;
	}
	return MPI_THREAD_MULTIPLE;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Available reports whether this binary was built with the mpi tag (and so
// links an MPI library).
const Available = true

// ThreadLevel is the MPI thread support level gonox asks for.
type ThreadLevel int

const (
	// ThreadSingle: one thread only (MPI_THREAD_SINGLE).
	ThreadSingle ThreadLevel = iota
	// ThreadFunneled: only the thread that called Init makes MPI calls
	// (MPI_THREAD_FUNNELED). gonox then runs every MPI call on one
	// goroutine locked to that thread.
	ThreadFunneled
	// ThreadSerialized: any thread, one at a time (MPI_THREAD_SERIALIZED).
	ThreadSerialized
	// ThreadMultiple: any thread, concurrently (MPI_THREAD_MULTIPLE).
	ThreadMultiple
)

// String returns the MPI name of the level, such as MPI_THREAD_MULTIPLE.
func (l ThreadLevel) String() string {
	return [...]string{"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"}[l]
}

// Op is a reduction operation.
type Op int

// Reductions.
const (
	Sum Op = iota
	Max
	Min
)

// Datatypes of the element kinds the binding moves.
const (
	tFloat32 = 0
	tInt32   = 1
	tByte    = 2
	tFloat64 = 3
)

// Comm is an MPI communicator. Its methods are the few MPI calls gonox
// needs, on Go slices; each blocks until the call completes locally, as
// the MPI call does. Collective calls must be made by every process of the
// communicator in the same order.
type Comm struct {
	c    C.MPI_Comm
	rank int
	size int
}

// state is the process's MPI state: set once by initThread.
var state struct {
	mu       sync.Mutex
	inited   bool
	final    bool
	level    ThreadLevel
	world    *Comm
	funnel   chan func()
	funnelOK chan struct{}
	spin     int64 // GONOX_MPI_SPIN in nanoseconds: see gonox_complete
	hosts    []int // per process, the lowest rank on its node (set by Init)
}

// call runs f where MPI calls may be made: directly under
// MPI_THREAD_MULTIPLE, else on the funnel goroutine (which holds the thread
// that initialised MPI), one call at a time.
func call(f func()) {
	if state.funnel == nil {
		f()
		return
	}
	done := make(chan struct{})
	var p any
	state.funnel <- func() {
		defer close(done)
		defer func() { p = recover() }()
		f()
	}
	<-done
	if p != nil {
		panic(p)
	}
}

func check(op string, rc C.int) {
	if rc != C.MPI_SUCCESS {
		var buf [C.MPI_MAX_ERROR_STRING]C.char
		var n C.int
		C.MPI_Error_string(rc, &buf[0], &n)
		panic(fmt.Sprintf("mpi.%s: %s", op, C.GoStringN(&buf[0], n)))
	}
}

// initThread initialises MPI asking for the given thread level. With
// ThreadFunneled, a goroutine locked to its OS thread initialises MPI and
// from then on runs every MPI call of the process.
func initThread(want ThreadLevel) (ThreadLevel, error) {
	state.mu.Lock()
	defer state.mu.Unlock()
	if state.inited {
		return state.level, nil
	}
	var got C.int
	var rc C.int
	if want == ThreadFunneled {
		state.funnel = make(chan func())
		ready := make(chan struct{})
		go func() {
			runtime.LockOSThread() // never unlocked: this thread is MPI's
			rc = C.MPI_Init_thread(nil, nil, C.gonox_thread_level(C.int(want)), &got)
			close(ready)
			for f := range state.funnel {
				f()
			}
		}()
		<-ready
	} else {
		rc = C.MPI_Init_thread(nil, nil, C.gonox_thread_level(C.int(want)), &got)
	}
	if rc != C.MPI_SUCCESS {
		return 0, fmt.Errorf("mpi.Init: MPI_Init_thread failed with code %d", int(rc))
	}
	level := ThreadSingle
	for l := ThreadSingle; l <= ThreadMultiple; l++ {
		if C.gonox_thread_level(C.int(l)) == got {
			level = l
		}
	}
	if level < want {
		return level, fmt.Errorf("mpi.Init: asked for %v, the MPI library provides %v", want, level)
	}
	state.inited = true
	state.level = want
	w := &Comm{c: C.gonox_world()}
	call(func() { w.fill() })
	state.world = w
	return want, nil
}

func (c *Comm) fill() {
	var r, s C.int
	check("Comm_rank", C.MPI_Comm_rank(c.c, &r))
	check("Comm_size", C.MPI_Comm_size(c.c, &s))
	c.rank, c.size = int(r), int(s)
}

// World returns MPI_COMM_WORLD, or nil before Init.
func World() *Comm { return state.world }

// Rank returns this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of processes in the communicator.
func (c *Comm) Size() int { return c.size }

// Dup returns a new communicator with the same processes (MPI_Comm_dup),
// whose collectives never match those of c.
func (c *Comm) Dup() *Comm {
	d := &Comm{}
	call(func() {
		check("Comm_dup", C.MPI_Comm_dup(c.c, &d.c))
		d.fill()
	})
	return d
}

// Split partitions the communicator by color (MPI_Comm_split): processes
// with the same color form one new communicator, ranked by key. A negative
// color leaves this process out, and Split returns nil.
func (c *Comm) Split(color, key int) *Comm {
	col := C.int(color)
	if color < 0 {
		col = C.gonox_undefined()
	}
	d := &Comm{}
	call(func() {
		check("Comm_split", C.MPI_Comm_split(c.c, col, C.int(key), &d.c))
		if d.c != C.gonox_comm_null() {
			d.fill()
		}
	})
	if d.c == C.gonox_comm_null() {
		return nil
	}
	return d
}

// Free releases the communicator (MPI_Comm_free).
func (c *Comm) Free() {
	call(func() { check("Comm_free", C.MPI_Comm_free(&c.c)) })
}

// Barrier blocks until every process of the communicator has called it.
func (c *Comm) Barrier() {
	call(func() { check("Barrier", C.MPI_Barrier(c.c)) })
}

// Abort ends every process of the job with the given exit code
// (MPI_Abort). It does not return.
func (c *Comm) Abort(code int) {
	C.MPI_Abort(c.c, C.int(code)) // from any thread: the process is going away
	panic("mpi.Abort returned")
}

// elem describes a slice's element type for MPI.
type elem interface {
	~float32 | ~int32 | ~byte | ~float64
}

func kindOf[T elem]() C.int {
	var z T
	switch any(z).(type) {
	case float32:
		return tFloat32
	case int32:
		return tInt32
	case byte:
		return tByte
	case float64:
		return tFloat64
	}
	panic("mpi: unsupported element type")
}

func ptr[T elem](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

func cints(v []int) []C.int {
	out := make([]C.int, len(v))
	for i, x := range v {
		out[i] = C.int(x)
	}
	return out
}

func displs(counts []int) []int {
	d := make([]int, len(counts))
	for i := 1; i < len(counts); i++ {
		d[i] = d[i-1] + counts[i-1]
	}
	return d
}

func (c *Comm) needLen(op string, n, want int) {
	if n != want {
		panic(fmt.Sprintf("mpi.%s: buffer of %d elements, want %d (communicator of %d processes)", op, n, want, c.size))
	}
}

// quietAllreduceBytes is the largest array Allreduce sums over two
// processes with MPI_Iallreduce and a wait that sleeps (gonox_complete)
// rather than MPI_Allreduce.
const quietAllreduceBytes = 64 << 10

// Allreduce combines send over all processes with op into recv
// (MPI_Allreduce). recv may be send itself (then MPI_IN_PLACE is used).
func Allreduce[T elem](c *Comm, send, recv []T, op Op) {
	c.needLen("Allreduce", len(recv), len(send))
	inPlace := C.int(0)
	if len(send) > 0 && &send[0] == &recv[0] {
		inPlace = 1
	}
	// A small sum over two processes (a loss, a norm, a fingerprint of
	// settings) waits without spinning; its order cannot differ.
	quiet := C.int(0)
	if c.size == 2 && len(send)*int(unsafe.Sizeof(send[0])) <= quietAllreduceBytes {
		quiet = 1
	}
	call(func() {
		check("Allreduce", C.gonox_allreduce(ptr(send), ptr(recv), C.int(len(recv)), C.gonox_type(kindOf[T]()), C.gonox_op(C.int(op)), c.c, inPlace, quiet, C.long(state.spin)))
	})
}

// Allgather concatenates every process's send, in rank order, into recv
// (MPI_Allgather): len(recv) = size·len(send).
func Allgather[T elem](c *Comm, send, recv []T) {
	c.needLen("Allgather", len(recv), c.size*len(send))
	t := C.gonox_type(kindOf[T]())
	call(func() {
		check("Allgather", C.gonox_allgather(ptr(send), C.int(len(send)), ptr(recv), t, c.c, C.long(state.spin)))
	})
}

// Allgatherv concatenates every process's send, in rank order, into recv
// (MPI_Allgatherv); counts[r] is the length of rank r's send.
func Allgatherv[T elem](c *Comm, send, recv []T, counts []int) {
	c.needLen("Allgatherv", len(counts), c.size)
	c.needLen("Allgatherv (send)", len(send), counts[c.rank])
	total := 0
	for _, n := range counts {
		total += n
	}
	c.needLen("Allgatherv (recv)", len(recv), total)
	t := C.gonox_type(kindOf[T]())
	cn, dp := cints(counts), cints(displs(counts))
	call(func() {
		check("Allgatherv", C.gonox_allgatherv(ptr(send), C.int(len(send)), ptr(recv), &cn[0], &dp[0], t, c.c, C.long(state.spin)))
	})
}

// ReduceScatter combines send over all processes with op and leaves block
// r of the result in rank r's recv: len(send) = size·len(recv). It calls
// MPI_Reduce_scatter with equal counts rather than
// MPI_Reduce_scatter_block: with Open MPI 4.1's default algorithms on one
// 2-core host, 7.45 MB took 4.1–5.2 ms through the first and 5.3–7.0 ms
// through the second (testdata/dpcollectives.c, 6 rounds of 20 calls; an
// MPI_Allreduce of the same array 5.0–5.5 ms).
func ReduceScatter[T elem](c *Comm, send, recv []T, op Op) {
	c.needLen("ReduceScatter", len(send), c.size*len(recv))
	counts := make([]int, c.size)
	for i := range counts {
		counts[i] = len(recv)
	}
	cn := cints(counts)
	call(func() {
		check("Reduce_scatter", C.MPI_Reduce_scatter(ptr(send), ptr(recv), &cn[0], C.gonox_type(kindOf[T]()), C.gonox_op(C.int(op)), c.c))
	})
}

// Alltoall sends block j of send to rank j and places the block received
// from rank j at block j of recv (MPI_Alltoall).
func Alltoall[T elem](c *Comm, send, recv []T) {
	c.needLen("Alltoall", len(recv), len(send))
	if len(send)%c.size != 0 {
		panic(fmt.Sprintf("mpi.Alltoall: %d elements do not split into %d blocks", len(send), c.size))
	}
	n := C.int(len(send) / c.size)
	t := C.gonox_type(kindOf[T]())
	call(func() {
		check("Alltoall", C.gonox_alltoall(ptr(send), n, ptr(recv), t, c.c, C.long(state.spin)))
	})
}

// Alltoallv sends sendCounts[j] elements of send (in rank order) to rank j
// and receives recvCounts[j] elements from rank j, in rank order, into
// recv (MPI_Alltoallv).
func Alltoallv[T elem](c *Comm, send []T, sendCounts []int, recv []T, recvCounts []int) {
	c.needLen("Alltoallv", len(sendCounts), c.size)
	c.needLen("Alltoallv", len(recvCounts), c.size)
	t := C.gonox_type(kindOf[T]())
	sc, sd := cints(sendCounts), cints(displs(sendCounts))
	rc, rd := cints(recvCounts), cints(displs(recvCounts))
	call(func() {
		check("Alltoallv", C.gonox_alltoallv(ptr(send), &sc[0], &sd[0], ptr(recv), &rc[0], &rd[0], t, c.c, C.long(state.spin)))
	})
}

// Sendrecv sends send to rank dst and receives recv from rank src
// (MPI_Sendrecv) with the given tag.
func Sendrecv[T elem](c *Comm, send []T, dst int, recv []T, src, tag int) {
	t := C.gonox_type(kindOf[T]())
	call(func() {
		check("Sendrecv", C.gonox_sendrecv(ptr(send), C.int(len(send)), C.int(dst), ptr(recv), C.int(len(recv)), C.int(src), C.int(tag), t, c.c, C.long(state.spin)))
	})
}

// Bcast copies root's buf into every other process's buf (MPI_Bcast).
func Bcast[T elem](c *Comm, buf []T, root int) {
	call(func() {
		check("Bcast", C.gonox_bcast(ptr(buf), C.int(len(buf)), C.gonox_type(kindOf[T]()), C.int(root), c.c, C.long(state.spin)))
	})
}

// finalize shuts MPI down (MPI_Finalize).
func finalize() error {
	state.mu.Lock()
	defer state.mu.Unlock()
	if !state.inited || state.final {
		return nil
	}
	state.final = true
	freeWindows()
	var rc C.int
	call(func() { rc = C.MPI_Finalize() })
	if state.funnel != nil {
		close(state.funnel)
		state.funnel = nil
	}
	if rc != C.MPI_SUCCESS {
		return fmt.Errorf("mpi.Finalize: MPI_Finalize failed with code %d", int(rc))
	}
	return nil
}
