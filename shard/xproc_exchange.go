package shard

// This file holds the cross-process part of Map's collectives: once every
// local device has arrived in a collective, the exchange brings what the
// other processes' devices contribute.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/gonox/gonox/tensor"
)

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
