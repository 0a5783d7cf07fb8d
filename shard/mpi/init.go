//go:build mpi

package mpi

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/gonox/gonox/shard"
)

// Init initialises MPI and, in a job of several processes, installs them
// into package shard: every process owns $GONOX_DEVICES devices (default
// 1) of a global, process-major device pool. Started without mpirun (a
// world of one process), the pool is left as it would be without MPI. Call
// Init at the start of main, before anything uses the device pool, and
// Finalize before main returns. A second call does nothing.
func Init() error {
	if _, set := os.LookupEnv("OMPI_MCA_opal_signal"); !set {
		// Open MPI's handlers for SIGSEGV and friends would take over Go's,
		// which turn nil dereferences into panics.
		os.Setenv("OMPI_MCA_opal_signal", "")
	}
	want := ThreadMultiple
	switch s := os.Getenv(ThreadEnv); s {
	case "", "multiple":
	case "funneled":
		want = ThreadFunneled
	default:
		return fmt.Errorf("mpi.Init: %s=%q: want multiple or funneled", ThreadEnv, s)
	}
	if _, err := sharedMemoryOn(); err != nil {
		return err
	}
	if state.inited {
		return nil
	}
	if _, err := initThread(want); err != nil {
		return err
	}
	w := World()
	if w.Size() == 1 {
		return nil
	}
	n := 1
	if s := os.Getenv(shard.DevicesEnv); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			return fmt.Errorf("mpi.Init: process %d: %s=%q: want a positive integer", w.Rank(), shard.DevicesEnv, s)
		}
		n = v
	}
	all := make([]int32, w.Size())
	Allgather(w, []int32{int32(n)}, all)
	for r, v := range all {
		if int(v) != n {
			return fmt.Errorf("mpi.Init: process %d has %s=%d but process %d has %d; every process must own as many devices", w.Rank(), shard.DevicesEnv, n, r, v)
		}
	}
	t := &transport{world: w}
	t.gathers = t.group(w.Dup())
	return shard.Install(t, n)
}

// Finalize shuts MPI down (MPI_Finalize); call it before main returns, or
// mpirun reports the process as failed. It does nothing if Init was not
// called.
func Finalize() error { return finalize() }

// Rank returns this process's rank in the job (0 before Init).
func Rank() int {
	if w := World(); w != nil {
		return w.Rank()
	}
	return 0
}

// Size returns the number of processes in the job (1 before Init).
func Size() int {
	if w := World(); w != nil {
		return w.Size()
	}
	return 1
}

// transport implements shard.Transport over MPI.
type transport struct {
	world   *Comm
	gathers shard.Group // on a duplicate of the world, for shard's own calls
}

func (t *transport) Rank() int          { return t.world.Rank() }
func (t *transport) Size() int          { return t.world.Size() }
func (t *transport) World() shard.Group { return t.gathers }

func (t *transport) NewGroup(procs []int) shard.Group {
	color := -1
	for _, p := range procs {
		if p == t.world.Rank() {
			color = 0
		}
	}
	c := t.world.Split(color, t.world.Rank())
	if c == nil {
		return nil
	}
	return t.group(c)
}

// group returns the shard.Group on c: a shard.SharedMemoryGroup when its
// processes share a node (see SharedMemoryEnv). Collective over c.
func (t *transport) group(c *Comm) shard.Group {
	if g := sharedOf(c); g != nil {
		return g
	}
	return group{c}
}

func (t *transport) Abort(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	t.world.Abort(1)
}

// group implements shard.Group over a communicator.
type group struct{ c *Comm }

func (g group) Rank() int { return g.c.Rank() }
func (g group) Size() int { return g.c.Size() }

func (g group) AllreduceFloat32(send, recv []float32, op shard.ReduceOp) {
	Allreduce(g.c, send, recv, Op(op))
}

func (g group) AllreduceInt32(send, recv []int32, op shard.ReduceOp) {
	Allreduce(g.c, send, recv, Op(op))
}

func (g group) ReduceScatterFloat32(send, recv []float32, op shard.ReduceOp) {
	ReduceScatter(g.c, send, recv, Op(op))
}

func (g group) Allgatherv(send, recv []byte, counts []int) {
	Allgatherv(g.c, send, recv, counts)
}

// Output returns w on process 0 and io.Discard on the others, so that
// only one process of a job prints:
//
//	out := mpi.Output(os.Stdout)
//	fmt.Fprintf(out, "epoch %d loss %.4f\n", epoch, loss)
func Output(w io.Writer) io.Writer {
	if Rank() != 0 {
		return io.Discard
	}
	return w
}

func (g group) Alltoallv(send []byte, sendCounts []int, recv []byte, recvCounts []int) {
	Alltoallv(g.c, send, sendCounts, recv, recvCounts)
}
