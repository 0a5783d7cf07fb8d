package shard

// This file holds Put, Gather and Reshard across processes: reading an
// array whose blocks live on several processes, the GONOX_DEBUG check of
// Put, and the reshard that sends each process only what it lacks.

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/gonox/gonox/internal/box"
	"github.com/gonox/gonox/tensor"
)

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
	stop := watchdog("shard.Gather of "+x.String(), l.sharding.mesh.ownerProcs())
	defer stop()
	m := l.sharding.mesh
	agree(m.net.whole, m.net.procs, "shard.Gather", m.net.stream, m.net.stream.ops.Add(1),
		fmt.Sprintf("shard.Gather of %s (%s), spec %v", typeNotation(x.DType(), l.geo.shape), l.arrayName(), l.sharding.spec))
	owners := l.uniqueBlocks() // first holder of each distinct block
	var send []byte
	for _, d := range owners {
		if m.isLocal(d) {
			send = append(send, borrowBytes(l.blocks[d])...)
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
	h.Write(borrowBytes(x))
	s := fmt.Sprintf("%x", h.Sum64())
	stop := watchdog("the GONOX_DEBUG check of shard.Put "+x.String(), m.net.procs)
	defer stop()
	checkSame(m.net.put, m.net.procs, s, "shard.Put: "+x.String()+": the host tensor differs between processes (this is process "+strconv.Itoa(dist.rank)+", process %d differs; hashes %s vs %s); every process of the mesh must Put the same value")
}

func (l *layout) meshOrNil() *Mesh {
	if l == nil {
		return nil
	}
	return l.sharding.mesh
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
// tm, the processes it ranks (world ranks, ascending) and the stream that
// numbers its operations: the target mesh's own if it has every process
// involved, else the source mesh's if it has, else the communicator of
// all processes (every process must then take part, in the same order;
// documented under Install).
func reshardComm(sm, tm *Mesh) (Group, []int, *stream) {
	u := unionProcs(sm, tm)
	for _, m := range []*Mesh{tm, sm} {
		if m.spans() && slices.Equal(m.net.procs, u) {
			return m.net.whole, u, m.net.stream
		}
	}
	all := make([]int, dist.t.Size())
	for i := range all {
		all[i] = i
	}
	return dist.world, all, dist.worldStream
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
	comm, procs, st := reshardComm(src.sharding.mesh, s.mesh)
	return reshardOn(comm, procs, st, src, dt, s, charge)
}

// reshardOn is reshardAcross on the communicator comm of the processes
// procs, its operations numbered by st.
func reshardOn(comm Group, procs []int, st *stream, src *layout, dt tensor.DType, s Sharding, charge bool) []*tensor.Tensor {
	stop := watchdog(fmt.Sprintf("the reshard of %v[%v] from %v to %v", dt, src.geo.shape, src.sharding, s), unionProcs(src.sharding.mesh, s.mesh))
	defer stop()
	sm, tm := src.sharding.mesh, s.mesh
	geo := s.geometry("shard.Put", src.geo.shape)
	to := &layout{sharding: s, geo: geo}
	me := slices.Index(procs, dist.rank)
	if me < 0 {
		return make([]*tensor.Tensor, tm.Size()) // not involved
	}
	agree(comm, procs, "shard.Reshard", st, st.ops.Add(1),
		fmt.Sprintf("reshard of %s (%s) from spec %v on %s to spec %v on %s", typeNotation(dt, src.geo.shape), src.arrayName(), src.sharding.spec, sm.identity(), s.spec, tm.identity()))
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
	sends := make([][]part, nproc)
	sendBytes := 0
	for q := range nproc {
		if q != me {
			sends[q] = plan(me, q)
			for _, pt := range sends[q] {
				sendBytes += numelOf(pt.size) * dt.Size()
			}
		}
	}
	// Parts are cut from the source blocks straight into the send buffer
	// and written from the receive buffer straight into the target
	// blocks; both buffers come from the allocator cache and go back to
	// it, so that a run of reshards (FSDP's gathers of every weight, twice
	// a step) leaves no garbage the size of the model.
	es := dt.Size()
	sendT, send := scratch(sendBytes)
	defer tensor.Donate(sendT)
	send = send[:0]
	for q := range nproc {
		if q == me {
			continue
		}
		for _, pt := range sends[q] {
			b := blocks[pt.blk]
			blk := src.blocks[b.holders[me]]
			n := numelOf(pt.size) * es
			send = send[:len(send)+n]
			copyBytesRegion(send[len(send)-n:], pt.size, pt.lo, borrowBytes(blk), blk.Shape(), src.offset(b.dev), pt.lo, pt.size, es)
			sendCounts[q] += n
		}
		for _, pt := range plan(q, me) {
			recvCounts[q] += numelOf(pt.size) * dt.Size()
		}
	}
	total := 0
	for _, n := range recvCounts {
		total += n
	}
	recvT, recv := scratch(total)
	defer tensor.Donate(recvT)
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
			n := numelOf(pt.size) * es
			copyBytesRegion(borrowBytes(dst), dst.Shape(), off, recv[:n], pt.size, pt.lo, pt.lo, pt.size, es)
			recv = recv[n:]
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
						copy(borrowBytes(c), borrowBytes(b))
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
