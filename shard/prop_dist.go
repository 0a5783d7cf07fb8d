package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/internal/box"
	"github.com/gonox/gonox/tensor"
)

// Propagation on a mesh that spans processes (see Install): every process
// computes the blocks of its own devices only, and the reductions a rule
// leaves (pending sums, pmax and pmin) meet across processes through the
// communicator of each group of devices, as the collectives of Map do.
// Reshards that need blocks of other processes go through makeBlocks,
// which assembles the array with every process; host reads (Gather, Item)
// and the gather fallback are therefore collective: every process runs
// the same propagated program, in the same order.

// firstBlock returns the first block this process holds, or nil.
func firstBlock(blocks []*tensor.Tensor) *tensor.Tensor {
	for _, b := range blocks {
		if b != nil {
			return b
		}
	}
	return nil
}

// blockDType returns the dtype of l's blocks (Float32 if this process
// holds none; it only sizes the charges then).
func (l *layout) blockDType() tensor.DType {
	if b := firstBlock(l.blocks); b != nil {
		return b.DType()
	}
	return tensor.Float32
}

// localOf returns the devices of devs that belong to this process.
func localOf(m *Mesh, devs []int) []int {
	if m.net == nil {
		return devs
	}
	var out []int
	for _, d := range devs {
		if m.net.local[d] {
			out = append(out, d)
		}
	}
	return out
}

// needLocalDevice panics unless this process has a device of m: the
// shapes and dtypes of a propagated result come from the blocks a process
// computes.
func needLocalDevice(op string, m *Mesh) {
	if m.firstLocal() < 0 {
		panic(fmt.Sprintf("shard: op %q on %v: process %d has no device of this mesh; under mpirun every process computing on a mesh must own some of its devices", op, m, dist.rank))
	}
}

// allreduceAcross combines, for every group of devices (groups as
// groupsAlong returns them) that spans processes including this one, this
// process's partial result res[i] (over its local members) with those of
// the other processes, replacing res[i] by a new tensor. Groups are
// visited in the same order on every process.
func allreduceAcross(what string, m *Mesh, groups [][]int, res []*tensor.Tensor, op ReduceOp) {
	if !m.spans() {
		return
	}
	var stop func()
	for i, g := range groups {
		procs := m.procsOf(g)
		if len(procs) < 2 || res[i] == nil {
			continue
		}
		if stop == nil {
			stop = watchdog(what)
			defer stop()
		}
		comm := m.net.groups[procsKey(procs)]
		x := res[i]
		var out *tensor.Tensor
		switch x.DType() {
		case tensor.Float32:
			out = tensor.Empty(x.DType(), x.Shape()...) // written whole
			comm.AllreduceFloat32(x.BorrowFloat32(), out.BorrowFloat32(), op)
		case tensor.Int32:
			out = tensor.Empty(x.DType(), x.Shape()...)
			comm.AllreduceInt32(x.BorrowInt32(), out.BorrowInt32(), op)
		case tensor.BFloat16, tensor.Float16:
			// Reduced in float32, rounded once.
			x32 := tensor.AsType(x, tensor.Float32)
			o32 := tensor.Zeros(tensor.Float32, x.Shape()...)
			comm.AllreduceFloat32(x32.RawFloat32(), o32.RawFloat32(), op)
			out = tensor.AsType(o32, x.DType())
		default:
			panic(fmt.Sprintf("shard: %s: cannot reduce %v across processes", what, x))
		}
		res[i] = out
	}
}

// unionProcs returns the processes owning a device of a or b, ascending.
func unionProcs(a, b *Mesh) []int {
	out := slices.Clone(a.ownerProcs())
	for _, p := range b.ownerProcs() {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// reshardComm returns the communicator of a reshard from mesh sm to mesh
// tm and the processes it ranks (world ranks, ascending): the target
// mesh's own if it has every process involved, else the source mesh's if
// it has, else the communicator of all processes (every process must then
// take part, in the same order; documented under Install).
func reshardComm(sm, tm *Mesh) (Group, []int) {
	u := unionProcs(sm, tm)
	for _, m := range []*Mesh{tm, sm} {
		if m.spans() && slices.Equal(m.net.procs, u) {
			return m.net.whole, u
		}
	}
	all := make([]int, dist.t.Size())
	for i := range all {
		all[i] = i
	}
	return dist.world, all
}

// reshardAcross returns this process's blocks (nil for other processes'
// devices) of the array laid out by src, re-laid out by s, when the source
// or target blocks live on several processes: every process sends each
// other process exactly the parts of the distinct source blocks it owns
// that the other's target blocks need and that it holds no replica of
// (one MPI_Alltoallv on the communicator reshardComm picks, whose
// processes must all call it, in the same order). It replaces assembling
// the whole array on every process. Devices of this process that need the
// same block share one copy unless charge is set (each device then owns
// and is charged its copy).
func reshardAcross(src *layout, dt tensor.DType, s Sharding, charge bool) []*tensor.Tensor {
	stop := watchdog(fmt.Sprintf("the reshard of %v[%v] from %v to %v", dt, src.geo.shape, src.sharding, s))
	defer stop()
	sm, tm := src.sharding.mesh, s.mesh
	geo := s.geometry("shard.Put", src.geo.shape)
	to := &layout{sharding: s, geo: geo}
	comm, procs := reshardComm(sm, tm)
	me := slices.Index(procs, dist.rank)
	if me < 0 {
		return make([]*tensor.Tensor, tm.Size()) // not involved
	}
	nproc := len(procs)
	rankOf := func(d *Device) int { return slices.Index(procs, d.proc) }
	// Distinct source blocks: the processes holding a replica, and the
	// one that sends it (the process of its first holder).
	type srcBlock struct {
		dev     int         // first holder
		holders map[int]int // process (index in procs) -> a device of it holding the block
	}
	var blocks []srcBlock
	index := map[string]int{}
	for d := range sm.Size() {
		k := fmt.Sprint(src.sharding.blockIndex(d, len(src.geo.shape)))
		i, ok := index[k]
		if !ok {
			i = len(blocks)
			index[k] = i
			blocks = append(blocks, srcBlock{dev: d, holders: map[int]int{}})
		}
		if _, ok := blocks[i].holders[rankOf(sm.devices[d])]; !ok {
			blocks[i].holders[rankOf(sm.devices[d])] = d
		}
	}
	// Distinct target blocks of each process, in mesh order.
	targets := make([][]int, nproc)
	seen := make([]map[int]bool, nproc)
	for d := range tm.Size() {
		p := rankOf(tm.devices[d])
		if seen[p] == nil {
			seen[p] = map[int]bool{}
		}
		k := tm.Index(to.canonical(d))
		if !seen[p][k] {
			seen[p][k] = true
			targets[p] = append(targets[p], d)
		}
	}
	// parts lists, for receiver q, every (source block, target device,
	// box) that crosses from sender p (or is copied locally when p == q).
	type part struct {
		blk, dev  int
		lo, size  []int
		fromLocal int // device of q holding the block, -1 if received
	}
	plan := func(p, q int) []part {
		var out []part
		for _, dev := range targets[q] {
			off := to.offset(dev)
			for bi, b := range blocks {
				sender := rankOf(sm.devices[b.dev])
				local, held := b.holders[q]
				if !held && sender != p || held && p != q {
					continue
				}
				soff := src.offset(b.dev)
				lo, size, ok := box.Intersect(off, geo.block, soff, src.geo.block)
				if !ok {
					continue
				}
				pt := part{blk: bi, dev: dev, lo: lo, size: size, fromLocal: -1}
				if held {
					pt.fromLocal = local
				}
				out = append(out, pt)
			}
		}
		return out
	}
	sendCounts := make([]int, nproc)
	recvCounts := make([]int, nproc)
	var send []byte
	for q := range nproc {
		if q == me {
			continue
		}
		for _, pt := range plan(me, q) {
			b := blocks[pt.blk]
			tmp := tensor.Zeros(dt, pt.size...)
			copyTensorRegion(tmp, pt.lo, src.blocks[b.holders[me]], src.offset(b.dev), pt.lo, pt.size)
			raw := rawBytes(tmp)
			send = append(send, raw...)
			sendCounts[q] += len(raw)
		}
		for _, pt := range plan(q, me) {
			recvCounts[q] += numelOf(pt.size) * dt.Size()
		}
	}
	total := 0
	for _, n := range recvCounts {
		total += n
	}
	recv := make([]byte, total)
	if !everyProcessHolds(src, targets, procs) {
		comm.Alltoallv(send, sendCounts, recv, recvCounts)
	}
	out := make([]*tensor.Tensor, tm.Size())
	mine := map[int]*tensor.Tensor{} // by target device
	for _, dev := range targets[me] {
		mine[dev] = tensor.Zeros(dt, geo.block...)
	}
	for q := range nproc {
		for _, pt := range plan(q, me) {
			dst := mine[pt.dev]
			off := to.offset(pt.dev)
			if pt.fromLocal >= 0 {
				copyTensorRegion(dst, off, src.blocks[pt.fromLocal], src.offset(blocks[pt.blk].dev), pt.lo, pt.size)
				continue
			}
			n := numelOf(pt.size) * dt.Size()
			tmp := fromBytes(dt, recv[:n], pt.size)
			recv = recv[n:]
			copyTensorRegion(dst, off, tmp, pt.lo, pt.lo, pt.size)
		}
	}
	for d := range tm.Size() {
		if !tm.isLocal(d) {
			continue
		}
		b := mine[d]
		if b == nil {
			// A replica of a block computed for another local device.
			for _, first := range targets[me] {
				if tm.Index(to.canonical(first)) == tm.Index(to.canonical(d)) {
					b = mine[first]
					if charge {
						c := tensor.Zeros(dt, geo.block...)
						copy(rawBytes(c), rawBytes(b))
						b = c
					}
					break
				}
			}
		}
		out[d] = b
		if charge {
			chargeBlock(tm.devices[d], b)
		}
	}
	return out
}

// everyProcessHolds reports whether src is replicated and every process
// with target blocks holds a replica: the reshard then moves nothing
// between processes (every process finds the same answer).
func everyProcessHolds(src *layout, targets [][]int, procs []int) bool {
	if !src.sharding.IsReplicated() {
		return false
	}
	sm := src.sharding.mesh
	for q, ts := range targets {
		if len(ts) == 0 {
			continue
		}
		held := false
		for _, d := range sm.devices {
			if d.proc == procs[q] {
				held = true
				break
			}
		}
		if !held {
			return false
		}
	}
	return true
}

// reduceScatterAcross resolves the pending sums of src straight into the
// blocks of dst (which shards over every partial axis) on a mesh that
// spans processes: within each group of devices along the partial axes,
// every process sends each other process only the parts of its local
// partial sum that the other's devices keep, and adds up what it
// receives (MPI_Alltoallv on the group's communicator): a reduce-scatter,
// half the traffic of all-reducing the whole sum. It returns this
// process's blocks (nil for other processes' devices), or nil when some
// device's new block is not inside its old one (the caller then
// all-reduces and reshards).
func reduceScatterAcross(src *layout, dst Sharding) []*tensor.Tensor {
	m := src.sharding.mesh
	geo := dst.geometry("shard", src.geo.shape)
	to := &layout{sharding: dst, geo: geo}
	for d := range m.Size() {
		lo, size, ok := box.Intersect(to.offset(d), geo.block, src.offset(d), src.geo.block)
		if !ok || !slices.Equal(lo, to.offset(d)) || !slices.Equal(size, geo.block) {
			return nil
		}
	}
	dt := src.blockDType()
	if dt != tensor.Float32 && dt != tensor.Int32 {
		return nil // all-reduced whole (in float32 for half precision)
	}
	groups := groupsAlong(m, src.partial)
	stop := watchdog(fmt.Sprintf("the psum_scatter of the pending sums of %s", src.origin))
	defer stop()
	out := make([]*tensor.Tensor, m.Size())
	for _, g := range groups {
		local := localOf(m, g)
		procs := m.procsOf(g)
		if len(local) == 0 {
			continue
		}
		// This process's partial sum (its members' summands added), in the
		// old block's coordinates.
		sum := sumBlocks(src.blocks, local)
		soff := src.offset(local[0])
		// The distinct new blocks each process of the group keeps.
		boxes := make([][]int, len(procs)) // per process: devices, one per distinct block
		for pi, p := range procs {
			seen := map[string]bool{}
			for _, d := range g {
				if m.devices[d].proc != p {
					continue
				}
				k := fmt.Sprint(to.offset(d))
				if !seen[k] {
					seen[k] = true
					boxes[pi] = append(boxes[pi], d)
				}
			}
		}
		slice := func(d int) *tensor.Tensor {
			b := tensor.Zeros(dt, geo.block...)
			off := to.offset(d)
			copyTensorRegion(b, off, sum, soff, off, geo.block)
			return b
		}
		me := -1
		for pi, p := range procs {
			if p == dist.rank {
				me = pi
			}
		}
		mine := make([]*tensor.Tensor, len(boxes[me]))
		for i, d := range boxes[me] {
			mine[i] = slice(d)
		}
		if len(procs) > 1 {
			blockBytes := numelOf(geo.block) * dt.Size()
			sendCounts := make([]int, len(procs))
			recvCounts := make([]int, len(procs))
			var send []byte
			for pi := range procs {
				if pi == me {
					continue
				}
				for _, d := range boxes[pi] {
					send = append(send, rawBytes(slice(d))...)
				}
				sendCounts[pi] = len(boxes[pi]) * blockBytes
				recvCounts[pi] = len(boxes[me]) * blockBytes
			}
			recv := make([]byte, len(boxes[me])*blockBytes*(len(procs)-1))
			m.net.groups[procsKey(procs)].Alltoallv(send, sendCounts, recv, recvCounts)
			for pi := range procs {
				if pi == me {
					continue
				}
				for i := range boxes[me] {
					part := fromBytes(dt, recv[:blockBytes], geo.block)
					recv = recv[blockBytes:]
					mine[i] = addInto(mine[i], part)
				}
			}
		}
		for _, d := range local {
			for i, b := range boxes[me] {
				if slices.Equal(to.offset(b), to.offset(d)) {
					out[d] = mine[i]
					chargeBlock(m.devices[d], mine[i])
				}
			}
		}
	}
	return out
}

// addInto returns a + b for fresh float32 or int32 blocks (a is updated
// in place; reduceScatterAcross sends no other dtype).
func addInto(a, b *tensor.Tensor) *tensor.Tensor {
	switch a.DType() {
	case tensor.Float32:
		x, y := a.RawFloat32(), b.RawFloat32()
		for i := range x {
			x[i] += y[i]
		}
	case tensor.Int32:
		x, y := a.RawInt32(), b.RawInt32()
		for i := range x {
			x[i] += y[i]
		}
	}
	return a
}
