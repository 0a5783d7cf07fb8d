//go:build mpi

package mpi

/*
#cgo pkg-config: mpi
#include <mpi.h>
#include <time.h>
#include "wait.h"

static MPI_Datatype gonox_nb_type(int k) {
	switch (k) {
	case 0: return MPI_FLOAT;
	case 1: return MPI_INT;
	case 2: return MPI_BYTE;
	case 3: return MPI_DOUBLE;
	}
	return MPI_DATATYPE_NULL;
}
static MPI_Request gonox_request_null(void) { return MPI_REQUEST_NULL; }

// gonox_poll tests r every ns nanoseconds, sleeping in between, until it
// completes (*done set) or budget nanoseconds have passed: MPI_Wait
// without spinning, for a while.
static int gonox_poll(MPI_Request *r, long ns, long budget, int *done) {
	struct timespec ts = {ns / 1000000000L, ns % 1000000000L}, t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int rc = MPI_Test(r, done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS || *done) {
			return rc;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >= budget) {
			return MPI_SUCCESS;
		}
		nanosleep(&ts, NULL);
	}
}
*/
import "C"

import (
	"runtime"
	"sync"
	"time"

	"github.com/gonox/gonox/shard"
)

// Request is a non-blocking send or receive in flight (an MPI_Request),
// returned by Isend and Irecv. Complete it with Wait or Test; until then
// its buffer is MPI's: do not touch it. It is safe for concurrent use.
type Request struct {
	mu   sync.Mutex
	r    C.MPI_Request
	pin  runtime.Pinner // the buffer, which MPI holds past the call
	done bool
}

// Isend starts sending buf to rank dst with the given tag (MPI_Isend)
// and returns at once. Messages to the same rank with the same tag are
// received in the order they were sent.
func Isend[T elem](c *Comm, buf []T, dst, tag int) *Request {
	q := &Request{}
	p := ptr(buf)
	if p != nil {
		q.pin.Pin(p)
	}
	call(func() {
		check("Isend", C.MPI_Isend(p, C.int(len(buf)), C.gonox_nb_type(kindOf[T]()), C.int(dst), C.int(tag), c.c, &q.r))
	})
	return q
}

// Irecv starts receiving into buf from rank src with the given tag
// (MPI_Irecv) and returns at once.
func Irecv[T elem](c *Comm, buf []T, src, tag int) *Request {
	q := &Request{}
	p := ptr(buf)
	if p != nil {
		q.pin.Pin(p)
	}
	call(func() {
		check("Irecv", C.MPI_Irecv(p, C.int(len(buf)), C.gonox_nb_type(kindOf[T]()), C.int(src), C.int(tag), c.c, &q.r))
	})
	return q
}

// Test reports whether the transfer is done (MPI_Test), without blocking.
func (q *Request) Test() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done {
		return true
	}
	var flag C.int
	call(func() { check("Test", C.MPI_Test(&q.r, &flag, C.MPI_STATUS_IGNORE)) })
	if flag != 0 {
		q.finish()
	}
	return q.done
}

// Wait blocks until the transfer is done, as MPI_Wait, testing it and
// sleeping in between once a few microseconds have passed rather than
// spinning as Open MPI's MPI_Wait does (so a waiting process leaves its
// core to those that compute where processes share cores). Under
// MPI_THREAD_FUNNELED it polls with MPI_Test instead, so that the
// goroutine running every MPI call stays free for the others.
func (q *Request) Wait() {
	if state.funnel != nil {
		for d := time.Microsecond; !q.Test(); d = min(2*d, time.Millisecond) {
			time.Sleep(d)
		}
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done {
		return
	}
	check("Wait", C.gonox_complete(&q.r, C.long(state.spin)))
	q.finish()
}

// Poll tests the transfer every interval, sleeping in between (in C,
// off the Go scheduler; under MPI_THREAD_FUNNELED from Go), for at most
// budget, and reports whether it is done: MPI_Wait without spinning, for
// transfers that overlap computation on the same core. It implements
// shard.PollingRequest.
func (q *Request) Poll(every, budget time.Duration) bool {
	if state.funnel != nil {
		for t0 := time.Now(); !q.Test(); time.Sleep(every) {
			if time.Since(t0) >= budget {
				return false
			}
		}
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done {
		return true
	}
	var done C.int
	check("Test", C.gonox_poll(&q.r, C.long(every.Nanoseconds()), C.long(budget.Nanoseconds()), &done))
	if done != 0 {
		q.finish()
	}
	return q.done
}

func (q *Request) finish() {
	q.done = true
	q.r = C.gonox_request_null()
	q.pin.Unpin()
}

// Waitall completes every request (Wait on each).
func Waitall(reqs ...*Request) {
	for _, q := range reqs {
		q.Wait()
	}
}

// IsendBytes implements shard.AsyncGroup.
func (g group) IsendBytes(buf []byte, dst, tag int) shard.Request {
	return Isend(g.c, buf, dst, tag)
}

// IrecvBytes implements shard.AsyncGroup.
func (g group) IrecvBytes(buf []byte, src, tag int) shard.Request {
	return Irecv(g.c, buf, src, tag)
}
