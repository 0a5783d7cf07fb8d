package shard

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/gonox/gonox/tensor"
)

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

// DebugEnv is the environment variable that turns on cross-process checks
// (GONOX_DEBUG=1): a host tensor given to Put must be equal on every
// process of the target mesh, and the processes must issue the same
// collectives.
const DebugEnv = "GONOX_DEBUG"

// TimeoutEnv is the environment variable with the longest time a process
// waits in one cross-process exchange before it aborts the job (a Go
// duration such as "90s"; "0" waits forever). The default is 10 minutes.
const TimeoutEnv = "GONOX_TIMEOUT"

// dist is the multi-process part of the device pool (nil transport: one
// process). It is set once, by Install, before the pool exists.
var dist struct {
	t       Transport
	aux     Group // all processes, for AllGatherProcesses
	world   Group // the transport's World, for reshards between meshes
	rank    int
	debug   bool
	timeout time.Duration
}

// Install makes the device pool global over the processes of t: each
// process owns localDevices devices, and device IDs count processes first
// (process r owns IDs r·localDevices ... (r+1)·localDevices-1). It must be
// called by every process, with the same localDevices, before the device
// pool is first used (Devices, NewMesh); package shard/mpi's Init calls
// it. A transport of one process leaves the pool as it is.
//
// From then on the program is SPMD (as under jax.distributed):
//
//   - NewMesh, NewMeshOn and ParseMesh are collective over all processes
//     whenever the mesh has devices of more than one process: they set up
//     the mesh's communicators (every process creates such meshes in the
//     same order, including processes that own none of their devices).
//   - Map and propagated ops on a mesh that spans processes, and Gather of
//     an array on it that is not replicated, are collective over the
//     processes that own the mesh's devices.
//   - A mesh whose devices all live in one process (JAX: its arrays are
//     fully addressable there) is computed on by that process alone,
//     without talking to any other; Gather of its arrays is local.
//   - A process that owns no device of a mesh holds no blocks of its
//     arrays (Put gives it a tensor without local blocks) and cannot read
//     or compute on them: Map, propagated ops and Gather panic naming the
//     process. Reshard such an array onto a mesh with a device of this
//     process to read it there.
//   - Put or Reshard of a placed array is collective over the processes
//     owning devices of its source or target mesh whenever those are more
//     than one (on the target mesh's communicator if its processes are
//     all of them, else on the source mesh's, else on one of all the
//     processes of the job, which must then all call it).
//
// Each mesh has communicators of its own, so operations on different
// meshes (a teacher and a student, say) may run concurrently from
// different goroutines; the operations on one mesh form one stream, issued
// in the same order on every process. Reshards that fall back to the
// job-wide communicator must not run concurrently with each other.
func Install(t Transport, localDevices int) error {
	if localDevices <= 0 {
		return fmt.Errorf("shard.Install: %d local devices, want at least 1", localDevices)
	}
	installed := false
	pool.once.Do(func() {
		installed = true
		n := localDevices
		if t.Size() > 1 {
			dist.t = t
			dist.rank = t.Rank()
			n = localDevices * t.Size()
		}
		pool.devs = make([]*Device, n)
		for i := range pool.devs {
			pool.devs[i] = &Device{id: i, proc: i / localDevices}
			if dist.t == nil {
				pool.devs[i].proc = 0
			}
		}
	})
	if !installed {
		return fmt.Errorf("shard.Install: the device pool is already in use; install the transport first (call mpi.Init at the start of main)")
	}
	if dist.t != nil {
		all := make([]int, t.Size())
		for i := range all {
			all[i] = i
		}
		dist.aux = newGroup(all)
		dist.world = wrapGroup(t.World())
	}
	dist.debug = os.Getenv(DebugEnv) == "1"
	dist.timeout = 10 * time.Minute
	if s := os.Getenv(TimeoutEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return fmt.Errorf("shard.Install: %s=%q: want a duration such as 90s", TimeoutEnv, s)
		}
		dist.timeout = d
	}
	return nil
}

// Process returns the rank of the process that owns the device (0 in a
// one-process job).
func (d *Device) Process() int { return d.proc }

// IsLocal reports whether the device belongs to this process.
func (d *Device) IsLocal() bool { return dist.t == nil || d.proc == dist.rank }

// LocalDevices returns the devices of the pool that belong to this
// process.
func LocalDevices() []*Device {
	var out []*Device
	for _, d := range Devices() {
		if d.IsLocal() {
			out = append(out, d)
		}
	}
	return out
}

// ProcessIndex returns this process's rank in the job (0 with one
// process), as jax.process_index.
func ProcessIndex() int { return dist.rank }

// ProcessCount returns the number of processes in the job.
func ProcessCount() int {
	if dist.t == nil {
		return 1
	}
	return dist.t.Size()
}

// meshNet is what a mesh spanning processes needs: which of its devices
// are local, and one communicator per set of processes that some group of
// devices over some axes spans. It is nil for a mesh whose devices all
// live in this process's job of one process.
type meshNet struct {
	local  []bool // per mesh index
	nlocal int
	first  int              // first local mesh index, -1 if none
	spans  bool             // devices of more than one process
	procs  []int            // the processes owning its devices, ascending
	groups map[string]Group // by process set, for the collectives of Map
	// whole is a communicator of the mesh's own over procs (nil if this
	// process is not in procs or the mesh does not span processes), for
	// Gather and reshards: operations on different meshes use different
	// communicators, so two meshes may be driven from two goroutines.
	whole Group
	// put is another, for the GONOX_DEBUG check of Put, so a loader
	// putting batches on its goroutine does not cross Map or Gather.
	put Group

	mu        sync.Mutex
	partition map[uint64][][]int // groups over an axes mask, members ascending
}

// partitionOf returns the groups of devices over the axes in mask, each
// as its members in ascending mesh order, in order of their first member.
func (m *Mesh) partitionOf(mask uint64) [][]int {
	n := m.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.partition[mask]; ok {
		return p
	}
	if n.partition == nil {
		n.partition = map[uint64][][]int{}
	}
	seen := map[int]bool{}
	var out [][]int
	for i := range m.devices {
		key, members := m.groupOf(i, mask)
		if !seen[key] {
			seen[key] = true
			out = append(out, members)
		}
	}
	n.partition[mask] = out
	return out
}

// connect sets up the communicators of a new mesh (collectively) and
// returns it.
func (m *Mesh) connect() *Mesh {
	if dist.t == nil {
		return m
	}
	n := &meshNet{local: make([]bool, len(m.devices)), first: -1, groups: map[string]Group{}}
	for i, d := range m.devices {
		n.local[i] = d.IsLocal()
		if n.local[i] {
			n.nlocal++
			if n.first < 0 {
				n.first = i
			}
		}
		if d.proc != m.devices[0].proc {
			n.spans = true
		}
		if !slices.Contains(n.procs, d.proc) {
			n.procs = append(n.procs, d.proc)
		}
	}
	slices.Sort(n.procs)
	m.net = n
	if !n.spans {
		return m
	}
	n.whole = newGroup(n.procs)
	n.put = newGroup(n.procs)
	// Every subset of axes, every group of it: in the same order on every
	// process, so the collective NewGroup calls match.
	k := len(m.sizes)
	for mask := 1; mask < 1<<k; mask++ {
		for _, procs := range m.groupProcs(uint64(mask)) {
			key := procsKey(procs)
			if _, ok := n.groups[key]; ok || len(procs) < 2 {
				continue
			}
			n.groups[key] = newGroup(procs) // nil if this process is not in it
		}
	}
	return m
}

// groupProcs returns, for each group of devices over the axes in mask (in
// order of their first member), the sorted set of processes it spans.
func (m *Mesh) groupProcs(mask uint64) [][]int {
	var out [][]int
	for _, members := range m.partitionOf(mask) {
		out = append(out, m.procsOf(members))
	}
	return out
}

// groupOf returns the members (mesh indices, ascending) of the group over
// the axes in mask that contains device i, and its key (the first member).
func (m *Mesh) groupOf(i int, mask uint64) (int, []int) {
	c := m.Coords(i)
	var members []int
	for j := range m.devices {
		cj := m.Coords(j)
		same := true
		for a := range c {
			if mask&(1<<uint(a)) == 0 && c[a] != cj[a] {
				same = false
				break
			}
		}
		if same {
			members = append(members, j)
		}
	}
	return members[0], members
}

func (m *Mesh) procsOf(members []int) []int {
	var procs []int
	for _, j := range members {
		if p := m.devices[j].proc; !slices.Contains(procs, p) {
			procs = append(procs, p)
		}
	}
	slices.Sort(procs)
	return procs
}

func procsKey(procs []int) string {
	s := make([]string, len(procs))
	for i, p := range procs {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// isLocal reports whether device i of the mesh belongs to this process.
func (m *Mesh) isLocal(i int) bool { return m.net == nil || m.net.local[i] }

// spans reports whether the mesh has devices of more than one process.
func (m *Mesh) spans() bool { return m.net != nil && m.net.spans }

// firstLocal returns the first mesh index of this process (0 in one
// process), or -1.
func (m *Mesh) firstLocal() int {
	if m.net == nil {
		return 0
	}
	return m.net.first
}

// nlocal returns the number of the mesh's devices in this process.
func (m *Mesh) nlocal() int {
	if m.net == nil {
		return len(m.devices)
	}
	return m.net.nlocal
}

// ---- cross-process exchange inside a collective ----

// exchange runs the cross-process part of slot s, once every local device
// has arrived: for each group of devices that spans processes, a psum's
// local partial sums are all-reduced (the result is stored for the
// group), and for every other collective the blocks of the group's remote
// members are brought here, so the in-memory algorithms see every member
// (pmax and pmin are all-reduced like psum). Groups are visited in the
// same order on every process.
func (r *run) exchange(s *slot) (err error) {
	m := r.mesh
	var first *call
	for _, c := range s.calls {
		if c != nil {
			first = c
			break
		}
	}
	e := &devEnv{mesh: m, dev: m.firstLocal(), coords: m.Coords(m.firstLocal())}
	axesMask := e.maskOf("shard", first.axes)
	desc := fmt.Sprintf("collective #%d %s(%v %v over %s, %s)", s.k, first.kind, first.x.DType(), first.x.Shape(), strings.Join(first.axes, ","), first.extra)
	if first.kind == "ragged_all_to_all" {
		desc = fmt.Sprintf("collective #%d %s(%v over %s, %s)", s.k, first.kind, first.x.DType(), strings.Join(first.axes, ","), first.extra)
	}
	stop := watchdog(r.name + ": " + desc)
	defer stop()
	defer func() {
		if p := recover(); p != nil {
			err = &DeviceError{Device: m.devices[e.dev], Coords: e.coords, Op: r.name, Value: p}
		}
	}()
	for _, members := range m.partitionOf(axesMask) {
		key := members[0]
		procs := m.procsOf(members)
		if len(procs) < 2 || !slices.Contains(procs, dist.rank) {
			continue
		}
		g := m.net.groups[procsKey(procs)]
		if dist.debug {
			checkSame(g, procs, desc, fmt.Sprintf("%s: process %d and process %%d issued different collectives: %%s vs %%s", r.name, dist.rank))
		}
		// Members in the collective's rank order (listed axes, first major).
		ge := &devEnv{mesh: m, dev: key, coords: m.Coords(key)}
		members = ge.group("shard", first.axes).members
		switch first.kind {
		case "psum":
			r.exchangePsum(s, g, key, members)
		case "pmax", "pmin":
			r.exchangeExtreme(s, g, key, members, first.kind == "pmax")
		case "psum_scatter":
			switch {
			case r.exchangeScatter(s, g, key, members, procs):
			case first.x.DType() == tensor.Float32:
				// All-reduced whole, straight from and into the blocks'
				// storage (MPI_Allreduce), and each member takes its
				// part: twice the bytes of a reduce-scatter on the wire,
				// but none of exchangeParts' packing, unpacking and
				// fresh buffers, which cost more than the wire between
				// processes of one machine.
				r.exchangePsum(s, g, key, members)
			default:
				r.exchangeParts(s, g, ge, members, procs)
			}
		case "all_to_all", "ppermute":
			r.exchangeParts(s, g, ge, members, procs)
		case "all_gather":
			if !r.exchangeGather(s, g, key, members, procs) {
				r.exchangeBlocks(s, g, members, procs)
			}
		default:
			r.exchangeBlocks(s, g, members, procs)
		}
	}
	return nil
}

// watchdog aborts the job if the exchange described by what is not done
// within the timeout.
func watchdog(what string) func() {
	if dist.timeout <= 0 {
		return func() {}
	}
	t := time.AfterFunc(dist.timeout, func() {
		dist.t.Abort(fmt.Sprintf("gonox: process %d waited more than %v in %s; another process never issued it (see %s)", dist.rank, dist.timeout, what, TimeoutEnv))
	})
	return func() { t.Stop() }
}

// checkSame panics unless every process of g (the processes procs, or
// all if nil) passes the same string; format gets the other process's
// rank and both strings.
func checkSame(g Group, procs []int, s, format string) {
	all := allgatherBytes(g, []byte(s))
	for r, b := range all {
		if string(b) != s {
			p := r
			if procs != nil {
				p = procs[r]
			}
			panic(fmt.Sprintf(format, p, s, string(b)))
		}
	}
}

// allgatherBytes gathers a variable-length byte string from every rank.
func allgatherBytes(g Group, send []byte) [][]byte {
	n := g.Size()
	lens := make([]byte, 8*n)
	var mine [8]byte
	binary.LittleEndian.PutUint64(mine[:], uint64(len(send)))
	counts := make([]int, n)
	for i := range counts {
		counts[i] = 8
	}
	g.Allgatherv(mine[:], lens, counts)
	total := 0
	for i := range counts {
		counts[i] = int(binary.LittleEndian.Uint64(lens[8*i:]))
		total += counts[i]
	}
	recv := make([]byte, total)
	g.Allgatherv(send, recv, counts)
	out := make([][]byte, n)
	off := 0
	for i, c := range counts {
		out[i] = recv[off : off+c]
		off += c
	}
	return out
}

// exchangePsum all-reduces the sum of the group's local blocks and stores
// the result as the group's shared result.
func (r *run) exchangePsum(s *slot, g Group, key int, members []int) {
	m := r.mesh
	var local []*tensor.Tensor
	for _, j := range members {
		if m.isLocal(j) {
			local = append(local, s.calls[j].x)
		}
	}
	x0 := local[0]
	var out *tensor.Tensor
	// Float32 and int32 results are written whole, so they may reuse
	// donated storage (tensor.Empty); operands and results are borrowed,
	// not pinned, so both can be donated afterwards.
	switch x0.DType() {
	case tensor.Float32:
		out = tensor.Empty(x0.DType(), x0.Shape()...)
		send := x0.BorrowFloat32()
		if len(local) > 1 {
			ins := make([][]float32, len(local))
			for i, x := range local {
				ins[i] = x.BorrowFloat32()
			}
			sumFloat32(out.BorrowFloat32(), ins, 0, x0.Size())
			send = out.BorrowFloat32()
		}
		g.AllreduceFloat32(send, out.BorrowFloat32(), ReduceSum)
	case tensor.Int32:
		out = tensor.Empty(x0.DType(), x0.Shape()...)
		dst := out.BorrowInt32()
		copy(dst, x0.BorrowInt32())
		for _, x := range local[1:] {
			for i, v := range x.BorrowInt32() {
				dst[i] += v
			}
		}
		g.AllreduceInt32(dst, dst, ReduceSum)
	case tensor.BFloat16, tensor.Float16:
		out = tensor.Zeros(x0.DType(), x0.Shape()...)
		// Local blocks widened and summed in float32, all-reduced as
		// float32, rounded once (see half.go).
		ins := make([][]float32, len(local))
		for i, x := range local {
			ins[i] = make([]float32, x.Size())
			widenHalf(x.DType(), ins[i], x.RawUint16())
		}
		acc := make([]float32, x0.Size())
		sumFloat32(acc, ins, 0, x0.Size())
		g.AllreduceFloat32(acc, acc, ReduceSum)
		narrowHalf(x0.DType(), out.RawUint16(), acc)
	}
	storeRemote(s, key, out, true)
}

// exchangeGather all-gathers a float32 block per process straight into
// the shared result (MPI_Allgatherv from the block's storage into the
// result's), when that is a plain concatenation: each process has one
// member in the group, the members are ranked in process order, and the
// gathered dimension has no larger dimension before it. It reports
// whether it did; otherwise exchangeBlocks brings the blocks.
func (r *run) exchangeGather(s *slot, g Group, key int, members, procs []int) bool {
	c := r.soleFloat32Call(s, members, procs)
	if c == nil {
		return false
	}
	xs := c.x.Shape()
	if !c.p.tiled {
		xs = slices.Insert(xs, c.p.dim, 1)
	}
	for _, d := range xs[:c.p.dim] {
		if d != 1 {
			return false
		}
	}
	outShape := slices.Clone(xs)
	outShape[c.p.dim] *= len(members)
	out := tensor.Empty(tensor.Float32, outShape...) // every block is written
	counts := make([]int, len(procs))
	for i := range counts {
		counts[i] = c.x.Bytes()
	}
	g.Allgatherv(floatBytes(c.x.BorrowFloat32()), floatBytes(out.BorrowFloat32()), counts)
	storeRemote(s, key, out, true)
	return true
}

// soleFloat32Call returns this process's call in a collective over
// members when each process has one member, the members are ranked in
// process order (the group communicator's rank order) and the operand is
// float32; nil otherwise.
func (r *run) soleFloat32Call(s *slot, members, procs []int) *call {
	m := r.mesh
	if len(members) != len(procs) {
		return nil
	}
	for i, j := range members {
		if m.devices[j].proc != procs[i] {
			return nil
		}
	}
	var c *call
	for _, j := range members {
		if m.isLocal(j) {
			c = s.calls[j]
		}
	}
	if c == nil || c.p == nil || c.x.DType() != tensor.Float32 {
		return nil
	}
	return c
}

// storeRemote records out as the result the exchange brought for the
// group keyed key, with marker in slot.remote (true, or scattered{}).
func storeRemote(s *slot, key int, out *tensor.Tensor, marker any) {
	l := &lazyResult{t: out}
	l.once.Do(func() {})
	s.shared.Store(key, l)
	s.remote.Store(key, marker)
}

// scattered marks, in slot.remote, a psum_scatter that exchangeScatter
// reduce-scattered: the shared result under the key is this process's
// member's part itself.
type scattered struct{}

// exchangeScatter reduce-scatters a float32 block per process straight
// into this process's part (Group.ReduceScatterFloat32 from the block's
// storage into the part's: MPI_Reduce_scatter, or through shared memory),
// when the parts are contiguous: each process
// has one member in the group, the members are ranked in process order,
// and the scattered dimension has no larger dimension before it. Half the
// bytes of all-reducing the whole block. It reports whether it did.
//
// Between two processes, or through shared memory: a psum_scatter is bit
// for bit the part of the psum (TestPsumScatterIsPartOfPsum), and MPI sums
// in an order of its choosing, which for three or more processes may
// differ between MPI_Reduce_scatter and MPI_Allreduce (Open MPI's do under
// mpirun -np 4); the sum of two values is the same in either order, and a
// SharedMemoryGroup sums in rank order in both.
func (r *run) exchangeScatter(s *slot, g Group, key int, members, procs []int) bool {
	if len(procs) != 2 && !sumsInRankOrder(g) {
		return false
	}
	c := r.soleFloat32Call(s, members, procs)
	if c == nil {
		return false
	}
	xs := c.x.Shape()
	for _, d := range xs[:c.p.dim] {
		if d != 1 {
			return false
		}
	}
	part := slices.Clone(xs)
	part[c.p.dim] /= len(members)
	out := tensor.Empty(tensor.Float32, part...) // written whole
	g.ReduceScatterFloat32(c.x.BorrowFloat32(), out.BorrowFloat32(), ReduceSum)
	storeRemote(s, key, out, scattered{})
	return true
}

// floatBytes views float32 storage as bytes (borrowed: nothing is pinned).
func floatBytes(d []float32) []byte {
	if len(d) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 4*len(d))
}

// exchangeBlocks brings the blocks (and ragged sizes) of the group's
// remote members into s.calls.
func (r *run) exchangeBlocks(s *slot, g Group, members, procs []int) {
	m := r.mesh
	var local []int
	for _, j := range members {
		if m.isLocal(j) {
			local = append(local, j)
		}
	}
	c0 := s.calls[local[0]]
	ragged := c0.kind == "ragged_all_to_all"
	// Header per local member: its operand's leading dimension and, for a
	// ragged all-to-all, its offsets and sizes.
	var head []byte
	for _, j := range local {
		c := s.calls[j]
		head = binary.LittleEndian.AppendUint64(head, uint64(dimOr1(c.x)))
		if ragged {
			rc := c.data.(*raggedCall)
			for _, v := range [][]int{rc.io, rc.ss, rc.oo, rc.rs} {
				for _, x := range v {
					head = binary.LittleEndian.AppendUint64(head, uint64(int64(x)))
				}
			}
		}
	}
	heads := allgatherBytes(g, head)
	var body []byte
	for _, j := range local {
		body = append(body, rawBytes(s.calls[j].x)...)
	}
	bodies := allgatherBytes(g, body)
	// Walk the members of each process in order, reading their parts.
	tail := c0.x.Shape()
	rowBytes := c0.x.DType().Size()
	if len(tail) > 0 {
		tail = tail[1:]
	}
	for _, d := range tail {
		rowBytes *= d
	}
	for gi, p := range procs {
		if p == dist.rank {
			continue
		}
		h, b := heads[gi], bodies[gi]
		for _, j := range members {
			if m.devices[j].proc != p {
				continue
			}
			rows := int(binary.LittleEndian.Uint64(h))
			h = h[8:]
			shape := c0.x.Shape()
			if len(shape) > 0 {
				shape[0] = rows
			}
			n := rowBytes * rows
			x := fromBytes(c0.x.DType(), b[:n], shape)
			b = b[n:]
			c := &call{kind: c0.kind, axes: c0.axes, x: x, extra: c0.extra}
			if ragged {
				k := len(c0.data.(*raggedCall).io)
				vs := make([][]int, 4)
				for v := range vs {
					vs[v] = make([]int, k)
					for i := range vs[v] {
						vs[v][i] = int(int64(binary.LittleEndian.Uint64(h)))
						h = h[8:]
					}
				}
				c.data = &raggedCall{operand: x, io: vs[0], ss: vs[1], oo: vs[2], rs: vs[3]}
			}
			s.calls[j] = c
		}
	}
}

func dimOr1(x *tensor.Tensor) int {
	if x.Rank() == 0 {
		return 1
	}
	return x.Dim(0)
}

// rawBytes views a host tensor's data as bytes (read only).
func rawBytes(x *tensor.Tensor) []byte {
	if x.Size() == 0 {
		return nil
	}
	switch x.DType() {
	case tensor.Float32:
		d := x.RawFloat32()
		return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 4*len(d))
	case tensor.Int32:
		d := x.RawInt32()
		return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 4*len(d))
	case tensor.Bool:
		d := x.RawBool()
		return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), len(d))
	case tensor.BFloat16, tensor.Float16:
		d := x.RawUint16()
		return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 2*len(d))
	}
	panic(fmt.Sprintf("shard: cannot send %v between processes", x))
}

// fromBytes builds a host tensor of the given dtype and shape from bytes.
func fromBytes(dt tensor.DType, b []byte, shape []int) *tensor.Tensor {
	x := tensor.Zeros(dt, shape...)
	if len(b) > 0 {
		copy(rawBytes(x), b)
	}
	return x
}

// ---- cross-process placement ----

// ownerProcs returns the processes that own devices of m, ascending
// ([0] in a job of one process).
func (m *Mesh) ownerProcs() []int {
	if m.net == nil {
		return []int{0}
	}
	return m.net.procs
}

// needOwner panics unless this process owns a device of l's mesh: it
// cannot read the array's values (JAX: the array is not addressable here).
func needOwner(op string, l *layout, x *tensor.Tensor) {
	m := l.sharding.mesh
	if m.firstLocal() < 0 {
		panic(fmt.Sprintf("%s: %v lives on the devices of processes %v; process %d owns none of them and cannot read it (reshard it onto a mesh with a device of this process, or read it on an owner)", op, x, m.ownerProcs(), dist.rank))
	}
}

// crossProcess reports whether reading x's blocks on the host needs other
// processes: its mesh spans processes and the array is not replicated
// (Gather is then collective over the mesh's processes). A mesh whose
// devices all live in this process never needs another process, and a
// replicated array is whole on every owner.
func crossProcess(l *layout) bool {
	return l.sharding.mesh.spans() && !l.sharding.IsReplicated()
}

// gatherAll assembles a sharded tensor whose blocks live on several
// processes: every process of the mesh sends the distinct blocks it holds
// (in the order of the owners' mesh indices) and receives the rest, on
// the mesh's own communicator.
func gatherAll(l *layout, x *tensor.Tensor) *tensor.Tensor {
	stop := watchdog("shard.Gather of " + x.String())
	defer stop()
	m := l.sharding.mesh
	owners := l.uniqueBlocks() // first holder of each distinct block
	var send []byte
	for _, d := range owners {
		if m.isLocal(d) {
			send = append(send, rawBytes(l.blocks[d])...)
		}
	}
	got := allgatherBytes(m.net.whole, send) // by index in m.net.procs
	out := tensor.Zeros(x.DType(), l.geo.shape...)
	zero := make([]int, len(l.geo.shape))
	n := 1
	for _, v := range l.geo.block {
		n *= v
	}
	bb := n * x.DType().Size()
	for _, d := range owners {
		p := slices.Index(m.net.procs, m.devices[d].proc)
		b := fromBytes(x.DType(), got[p][:bb], l.geo.block)
		got[p] = got[p][bb:]
		off := l.offset(d)
		copyTensorRegion(out, zero, b, off, off, l.geo.block)
	}
	return out
}

// checkPutEqual panics (in debug mode) unless the host tensor x is the
// same on every process of mesh m (only they hold blocks of it; a mesh of
// one process is not checked). It uses a communicator of the mesh's own,
// so a loader putting batches on its goroutine does not cross Map or
// Gather; Puts onto one mesh from several goroutines at once must still
// come in the same order on every process.
func checkPutEqual(x *tensor.Tensor, m *Mesh) {
	if dist.t == nil || !dist.debug || !m.spans() || m.net.put == nil {
		return
	}
	h := fnv.New64a()
	h.Write([]byte(x.String()))
	h.Write(rawBytes(x))
	s := fmt.Sprintf("%x", h.Sum64())
	stop := watchdog("the GONOX_DEBUG check of shard.Put " + x.String())
	defer stop()
	checkSame(m.net.put, m.net.procs, s, "shard.Put: "+x.String()+": the host tensor differs between processes (this is process "+strconv.Itoa(dist.rank)+", process %d differs; hashes %s vs %s); every process of the mesh must Put the same value")
}

// firstLocalMember returns the first member of g in this process.
func firstLocalMember(m *Mesh, g group) int {
	for _, j := range g.members {
		if m.isLocal(j) {
			return j
		}
	}
	return -1
}

func (l *layout) meshOrNil() *Mesh {
	if l == nil {
		return nil
	}
	return l.sharding.mesh
}

// AllGatherProcesses gathers data from every process of the job, in rank
// order (with one process: just data). Every process must call it, in the
// same order; it uses a communicator of its own, so it may run on another
// goroutine than Map and Gather (package checkpoint commits saves with it,
// possibly in the background).
func AllGatherProcesses(data []byte) [][]byte {
	if dist.t == nil {
		return [][]byte{data}
	}
	stop := watchdog("shard.AllGatherProcesses")
	defer stop()
	return allgatherBytes(dist.aux, data)
}

// region is the part [lo, hi) along dim of a member's block that another
// member needs; whole means all of it, none nothing.
type region struct {
	dim, lo, hi int
	whole, none bool
}

// needs returns the part of sender member m's block x that member j reads
// in a reduce-scatter, an all-to-all or a ppermute over g.
func needs(c *call, g group, m, j int, x *tensor.Tensor) region {
	rank := func(dev int) int { return slices.Index(g.members, dev) }
	switch c.kind {
	case "psum_scatter", "all_to_all":
		d := c.p.dim
		size := x.Dim(d) / g.size
		return region{dim: d, lo: rank(j) * size, hi: (rank(j) + 1) * size}
	case "ppermute":
		from, to := g.meshRank[rank(m)], g.meshRank[rank(j)]
		for _, pr := range c.p.perm {
			if pr[0] == from && pr[1] == to {
				return region{whole: true}
			}
		}
		return region{none: true}
	}
	return region{whole: true}
}

func (rg region) bytes(x *tensor.Tensor) []byte {
	switch {
	case rg.none:
		return nil
	case rg.whole:
		return rawBytes(x)
	}
	return rawBytes(tensor.SliceAxis(tensor.WithLocal(x, nil), rg.dim, rg.lo, rg.hi))
}

func (rg region) size(x *tensor.Tensor) int {
	switch {
	case rg.none:
		return 0
	case rg.whole || x.Dim(rg.dim) == 0:
		return x.Bytes()
	}
	return x.Bytes() / x.Dim(rg.dim) * (rg.hi - rg.lo)
}

// exchangeParts brings, for a reduce-scatter, an all-to-all or a ppermute,
// only the parts of the remote members' blocks that this process's members
// read (MPI_Alltoallv): remote blocks are rebuilt full-size with zeros
// where nothing local reads them.
func (r *run) exchangeParts(s *slot, g Group, ge *devEnv, members, procs []int) {
	m := r.mesh
	gr := ge.group("shard", s.calls[r.first].axes)
	var c0 *call
	byProc := make([][]int, len(procs)) // members of each process, in rank order
	for _, j := range members {
		pi := slices.Index(procs, m.devices[j].proc)
		byProc[pi] = append(byProc[pi], j)
		if c0 == nil && m.isLocal(j) {
			c0 = s.calls[j]
		}
	}
	me := slices.Index(procs, dist.rank)
	x0 := c0.x
	sendCounts := make([]int, len(procs))
	recvCounts := make([]int, len(procs))
	var send []byte
	for q := range procs {
		for _, src := range byProc[me] {
			for _, dst := range byProc[q] {
				if q == me {
					continue
				}
				b := needs(c0, gr, src, dst, x0).bytes(s.calls[src].x)
				send = append(send, b...)
				sendCounts[q] += len(b)
			}
		}
		if q != me {
			for _, src := range byProc[q] {
				for _, dst := range byProc[me] {
					recvCounts[q] += needs(c0, gr, src, dst, x0).size(x0)
				}
			}
		}
	}
	total := 0
	for _, n := range recvCounts {
		total += n
	}
	recv := make([]byte, total)
	g.Alltoallv(send, sendCounts, recv, recvCounts)
	for q := range procs {
		if q == me {
			continue
		}
		for _, src := range byProc[q] {
			x := tensor.Zeros(x0.DType(), x0.Shape()...)
			for _, dst := range byProc[me] {
				rg := needs(c0, gr, src, dst, x0)
				n := rg.size(x0)
				part := recv[:n]
				recv = recv[n:]
				switch {
				case rg.none:
				case rg.whole:
					copy(rawBytes(x), part)
				default:
					shape := x0.Shape()
					shape[rg.dim] = rg.hi - rg.lo
					placeAt(x, fromBytes(x0.DType(), part, shape), rg.dim, rg.lo)
				}
			}
			s.calls[src] = &call{kind: c0.kind, axes: c0.axes, x: x, extra: c0.extra, p: c0.p}
		}
	}
}

// exchangeExtreme all-reduces (MPI_MAX or MPI_MIN) the elementwise extreme
// of the group's local blocks and stores it as the group's shared result.
func (r *run) exchangeExtreme(s *slot, g Group, key int, members []int, isMax bool) {
	m := r.mesh
	var out *tensor.Tensor
	for _, j := range members {
		if !m.isLocal(j) {
			continue
		}
		x := tensor.WithLocal(s.calls[j].x, nil)
		switch {
		case out == nil:
			out = tensor.Zeros(x.DType(), x.Shape()...)
			copy(rawBytes(out), rawBytes(x))
		case isMax:
			out = tensor.Maximum(out, x)
		default:
			out = tensor.Minimum(out, x)
		}
	}
	op := ReduceMin
	if isMax {
		op = ReduceMax
	}
	switch out.DType() {
	case tensor.Int32:
		g.AllreduceInt32(out.RawInt32(), out.RawInt32(), op)
	case tensor.BFloat16, tensor.Float16:
		// Widened exactly, reduced as float32; the extreme is one of the
		// values, so rounding back is exact.
		w := make([]float32, out.Size())
		widenHalf(out.DType(), w, out.RawUint16())
		g.AllreduceFloat32(w, w, op)
		narrowHalf(out.DType(), out.RawUint16(), w)
	default:
		g.AllreduceFloat32(out.RawFloat32(), out.RawFloat32(), op)
	}
	storeRemote(s, key, out, true)
}
