//go:build mpi

package mpi

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Init initialises MPI and, in a job of several processes, installs them
// into package shard: every process owns $GONOX_DEVICES devices (default
// 1) of a global, process-major device pool. Started without mpirun (a
// world of one process), the pool is left as it would be without MPI. Call
// Init at the start of main, before anything uses the device pool, and
// Finalize before main returns. A second call does nothing.
//
// Unless they are set, Init sets two of Open MPI's variables for MPI_Init:
// OMPI_MCA_opal_signal empty (Go keeps its own signal handlers) and
// OMPI_MCA_mpi_preconnect_mpi=1 (every process connects to every other
// during MPI_Init, since lazy connections race when several devices send
// a first message at once).
//
// Init parses the environment (EnvSettings) and, under mpirun, makes the
// processes agree on it: a value refused on any process, or a setting
// that differs between processes (GONOX_DEBUG given to some with a
// forgotten -x, say), is an error returned by every process alike, naming
// the variable and the processes:
//
//	mpi.Init: GONOX_DEBUG differs between processes: "1" on process 1, unset on process 0; give every process the same (mpirun -x GONOX_DEBUG)
func Init() error {
	if _, set := os.LookupEnv("OMPI_MCA_opal_signal"); !set {
		// Open MPI's handlers for SIGSEGV and friends would take over Go's,
		// which turn nil dereferences into panics.
		os.Setenv("OMPI_MCA_opal_signal", "")
	}
	if _, set := os.LookupEnv("OMPI_MCA_mpi_preconnect_mpi"); !set {
		// Open MPI's TCP connections made in MPI_Init, not at the first
		// message to each peer: the devices of a process send from
		// several threads at once, and two first messages to one peer
		// race in the TCP BTL's connection set-up ("connect() ...
		// failed: Operation now in progress", then a hang; Open MPI's
		// issues 3035 and 10734). Set the variable to 0 to connect lazily.
		os.Setenv("OMPI_MCA_mpi_preconnect_mpi", "1")
	}
	settings, bad := EnvSettings()
	if state.inited {
		return bad
	}
	state.spin = DefaultSpin.Nanoseconds()
	if d, err := time.ParseDuration(setting(settings, SpinEnv)); bad == nil && err == nil {
		state.spin = d.Nanoseconds()
	}
	want := ThreadMultiple
	if bad == nil && setting(settings, ThreadEnv) == "funneled" {
		want = ThreadFunneled
	}
	if _, err := initThread(want); err != nil {
		return err
	}
	w := World()
	if w.Size() == 1 {
		return bad
	}
	// Every process initialises MPI, even one whose environment is
	// wrong, so that all of them learn of it and none waits for it.
	n := 1
	if bad == nil {
		if v := os.Getenv(shard.DevicesEnv); v != "" {
			n, _ = shard.DevicesFromEnv()
		}
		for i := range settings {
			if settings[i].Name == shard.DevicesEnv {
				settings[i].Canon = strconv.Itoa(n)
			}
		}
	}
	if err := agree(w, settings, bad); err != nil {
		return err
	}
	state.hosts = hostsOf(w)
	t := &transport{world: w, hosts: state.hosts}
	t.gathers = t.group(w.Dup())
	return shard.Install(t, n)
}

// agree gathers every process's settings (or its error) and returns, on
// every process alike, the first process's error, or an error naming the
// first setting that differs between processes. Collective over w.
func agree(w *Comm, settings []shard.Setting, bad error) error {
	var rec []byte
	if bad != nil {
		rec = append([]byte{1}, bad.Error()...)
	} else {
		rec = []byte{0}
		for _, s := range settings {
			rec = append(rec, s.Name+"\x00"+s.Value+"\x00"+s.Canon+"\x00"...)
		}
	}
	lens := make([]int32, w.Size())
	Allgather(w, []int32{int32(len(rec))}, lens)
	counts := make([]int, len(lens))
	total := 0
	for i, v := range lens {
		counts[i] = int(v)
		total += int(v)
	}
	all := make([]byte, total)
	Allgatherv(w, rec, all, counts)
	recs := make([][]byte, len(counts))
	for i, c := range counts {
		recs[i], all = all[:c], all[c:]
	}
	var errs []int
	for r, b := range recs {
		if b[0] == 1 {
			errs = append(errs, r)
		}
	}
	if len(errs) > 0 {
		msg := fmt.Sprintf("mpi.Init: process %d: %s", errs[0], recs[errs[0]][1:])
		if len(errs) > 1 {
			msg += fmt.Sprintf(" (and processes %v have refused settings too)", errs[1:])
		}
		return errors.New(msg)
	}
	parsed := make([][]string, len(recs))
	for r, b := range recs {
		parsed[r] = strings.Split(string(b[1:]), "\x00")
	}
	for i := 0; i+2 < len(parsed[0]); i += 3 {
		name := parsed[0][i]
		groups := map[string][]int{} // canon -> processes
		var order []string
		for r, p := range parsed {
			c := p[i+2]
			if _, ok := groups[c]; !ok {
				order = append(order, c)
			}
			groups[c] = append(groups[c], r)
		}
		if len(order) == 1 {
			continue
		}
		var parts []string
		for _, c := range order {
			v := parsed[groups[c][0]][i+1]
			what := fmt.Sprintf("%q", v)
			if v == "" {
				what = "unset"
			}
			if name == tensor.KernelsEnv {
				what = fmt.Sprintf("%s (%s)", what, c)
			}
			parts = append(parts, fmt.Sprintf("%s on %s", what, procList(groups[c])))
		}
		return fmt.Errorf("mpi.Init: %s differs between processes: %s; give every process the same (mpirun -x %s)", name, strings.Join(parts, ", "), name)
	}
	return nil
}

// procList names processes: "process 1", "processes 0, 2".
func procList(ps []int) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	if len(ps) == 1 {
		return "process " + s[0]
	}
	return "processes " + strings.Join(s, ", ")
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

// Hosts returns, for every process of the job, the lowest rank of a
// process on the same node (host): processes with the same number share
// memory. It is []int{0} in a job of one process.
func Hosts() []int {
	if state.hosts == nil {
		return []int{0}
	}
	return slices.Clone(state.hosts)
}

// transport implements shard.Transport over MPI.
type transport struct {
	world   *Comm
	gathers shard.Group // on a duplicate of the world, for shard's own calls
	hosts   []int       // per process, the lowest rank on its node
}

// Hosts implements shard.HostTransport: per process, the lowest rank of
// a process on the same node.
func (t *transport) Hosts() []int { return t.hosts }

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
	// MPI_Abort asks mpirun to end every process; if mpirun cannot be
	// reached (this host's link is down), the process ends itself.
	time.AfterFunc(abortGrace, func() { os.Exit(1) })
	t.world.Abort(1)
}

// abortGrace is how long Abort waits for MPI_Abort to end the process.
const abortGrace = 3 * time.Second

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

// setting returns the Canon of the named setting.
func setting(all []shard.Setting, name string) string {
	for _, s := range all {
		if s.Name == name {
			return s.Canon
		}
	}
	return ""
}
