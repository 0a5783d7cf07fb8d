package shard

// This file holds the cross-process part of Map's collectives: once every
// local device has arrived in a collective, its descriptor's cross
// function (most are eachGroup of an exchange below) brings what the other
// processes' devices contribute.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/gonox/gonox/tensor"
)

// crossGroup is one group of devices of a collective in progress that
// spans this process and others, as a collective's cross-process exchange
// sees it (see collective.cross and eachGroup).
type crossGroup struct {
	r       *run
	s       *slot
	g       Group // the communicator of procs
	key     int   // the group's key, its first member in mesh order: where a shared result is stored
	members []int // mesh indices, in the collective's rank order (the listed axes, the first major)
	procs   []int // the processes the members live on, ascending
	gr      group // the group as its first member sees it (ranks, meshRank)
	c0      *call // a call of this process: the collective and its parameters
}

// eachGroup returns the cross function (see collective) that runs
// exchange for every group of devices of a slot that spans this process
// and others. The exchanges below are the usual ones: a sum or an extreme
// all-reduced (the group's shared result), or the remote members' blocks
// (or the parts of them the local members read) brought into the slot, so
// that the in-process exchange sees every member.
func eachGroup(exchange func(x *crossGroup)) func(r *run, s *slot) error {
	return func(r *run, s *slot) error { return r.eachGroup(s, exchange) }
}

// describe returns how the processes name the k-th collective c of a Map
// in their messages and compare it (see agree): its kind, dtype and shape
// in type notation (no shape if the collective's rows differ between
// devices), axes and params.
func (c *call) describe(k int) string {
	t := c.x.DType().Abbrev()
	if !c.coll.rowsDiffer {
		t = typeNotation(c.x.DType(), c.x.Shape())
	}
	if c.extra == "" {
		return fmt.Sprintf("collective #%d %s(%s over %s)", k, c.coll.kind, t, strings.Join(c.axes, ","))
	}
	return fmt.Sprintf("collective #%d %s(%s over %s, %s)", k, c.coll.kind, t, strings.Join(c.axes, ","), c.extra)
}

// eachGroup runs exchange for every group of devices of slot s that
// spans this process and others, in the same order on every process,
// under the watchdog, once the processes of the group are found to have
// issued the same collective (agree, once per set of processes). A panic
// becomes the run's error.
func (r *run) eachGroup(s *slot, exchange func(x *crossGroup)) (err error) {
	m := r.mesh
	var first *call
	for _, c := range s.calls {
		if c != nil {
			first = c
			break
		}
	}
	e := &devEnv{mesh: m, dev: m.firstLocal(), coords: m.Coords(m.firstLocal())}
	desc := first.describe(s.k)
	stop := watchdog(r.name+": "+desc, m.ownerProcs())
	defer stop()
	defer func() {
		if p := recover(); p != nil {
			err = &DeviceError{Device: m.devices[e.dev], Coords: e.coords, Op: r.name, Value: p}
		}
	}()
	var agreed []string // process sets
	for _, x := range r.crossGroups(s, first) {
		if k := procsKey(x.procs); !slices.Contains(agreed, k) {
			agree(x.g, x.procs, r.name, m.net.stream, m.net.groupOps[k].Add(1), desc)
			agreed = append(agreed, k)
		}
		exchange(x)
	}
	return nil
}

// crossGroups returns the groups of devices of slot s (whose call on
// this process is first) that span this process and others, in the same
// order on every process.
func (r *run) crossGroups(s *slot, first *call) []*crossGroup {
	m := r.mesh
	e := &devEnv{mesh: m, dev: m.firstLocal(), coords: m.Coords(m.firstLocal())}
	var out []*crossGroup
	for _, members := range m.partitionOf(e.maskOf("shard", first.axes)) {
		key := members[0]
		procs := m.procsOf(members)
		if len(procs) < 2 || !slices.Contains(procs, dist.rank) {
			continue
		}
		// Members in the collective's rank order (listed axes, first major).
		ge := &devEnv{mesh: m, dev: key, coords: m.Coords(key)}
		gr := ge.group("shard", first.axes)
		out = append(out, &crossGroup{r: r, s: s, g: m.net.groups[procsKey(procs)], key: key, members: gr.members, procs: procs, gr: gr, c0: first})
	}
	return out
}

// allreduceSum all-reduces the sum of the group's local blocks and stores
// the result as the group's shared result (psum; psum_scatter of float32
// blocks when reduceScatter cannot).
func (x *crossGroup) allreduceSum() {
	s, g := x.s, x.g
	var local []*tensor.Tensor
	for _, j := range x.members {
		if x.r.mesh.isLocal(j) {
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
	case tensor.Float64, tensor.Int64:
		out = x.gatherSum(x0)
	default:
		panic(fmt.Sprintf("shard: psum: cannot sum %v across processes (float32, float64, int32, int64, bfloat16 and float16 only)", x0))
	}
	storeRemote(s, x.key, out, true)
}

// soleFloat32Call returns this process's call in the group when each
// process has one member, the members are ranked in process order (the
// group communicator's rank order) and the operand is float32; nil
// otherwise.
func (x *crossGroup) soleFloat32Call() *call {
	return x.soleCall(func(dt tensor.DType) bool { return dt == tensor.Float32 })
}

// soleCall is soleFloat32Call for operands whose dtype ok accepts.
func (x *crossGroup) soleCall(ok func(tensor.DType) bool) *call {
	m, s, members, procs := x.r.mesh, x.s, x.members, x.procs
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
	if c == nil || c.p == nil || !ok(c.x.DType()) {
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

// floatBytes views float32 storage as bytes (borrowed: nothing is pinned).
func floatBytes(d []float32) []byte {
	if len(d) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 4*len(d))
}

// blocks brings the blocks of the group's remote members into the slot
// (all_gather when gatherFloat32 cannot, ragged_all_to_all), with the
// per-device data of the collective's calls (collective.wire).
func (x *crossGroup) blocks() {
	m, s := x.r.mesh, x.s
	var local []int
	for _, j := range x.members {
		if m.isLocal(j) {
			local = append(local, j)
		}
	}
	c0 := s.calls[local[0]]
	coll := c0.coll
	// Header per local member: its operand's leading dimension and, for a
	// collective whose calls carry data, that data's integers.
	var head []byte
	for _, j := range local {
		c := s.calls[j]
		head = binary.LittleEndian.AppendUint64(head, uint64(dimOr1(c.x)))
		if coll.wire != nil {
			v := coll.wire(c)
			head = binary.LittleEndian.AppendUint64(head, uint64(len(v)))
			for _, i := range v {
				head = binary.LittleEndian.AppendUint64(head, uint64(int64(i)))
			}
		}
	}
	heads := allgatherBytes(x.g, head)
	var body []byte
	for _, j := range local {
		body = append(body, rawBytes(s.calls[j].x)...)
	}
	bodies := allgatherBytes(x.g, body)
	// Walk the members of each process in order, reading their parts.
	tail := c0.x.Shape()
	rowBytes := c0.x.DType().Size()
	if len(tail) > 0 {
		tail = tail[1:]
	}
	for _, d := range tail {
		rowBytes *= d
	}
	next := func(h *[]byte) int {
		v := int(int64(binary.LittleEndian.Uint64(*h)))
		*h = (*h)[8:]
		return v
	}
	for gi, p := range x.procs {
		if p == dist.rank {
			continue
		}
		h, b := heads[gi], bodies[gi]
		for _, j := range x.members {
			if m.devices[j].proc != p {
				continue
			}
			rows := next(&h)
			shape := c0.x.Shape()
			if len(shape) > 0 {
				shape[0] = rows
			}
			n := rowBytes * rows
			xj := fromBytes(c0.x.DType(), b[:n], shape)
			b = b[n:]
			c := &call{coll: coll, axes: c0.axes, x: xj, extra: c0.extra, p: c0.p}
			if coll.wire != nil {
				v := make([]int, next(&h))
				for i := range v {
					v[i] = next(&h)
				}
				c.data = coll.unwire(xj, v)
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
	case tensor.Float64:
		d := x.RawFloat64()
		return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 8*len(d))
	case tensor.Int64:
		d := x.RawInt64()
		return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 8*len(d))
	case tensor.Uint8:
		return x.RawUint8()
	}
	panic(fmt.Sprintf("shard: cannot send %v between processes", x))
}

// fromBytes builds a host tensor of the given dtype and shape from bytes.
func fromBytes(dt tensor.DType, b []byte, shape []int) *tensor.Tensor {
	x := tensor.Zeros(dt, shape...)
	if len(b) > 0 {
		copy(borrowBytes(x), b)
	}
	return x
}

// scratch returns n bytes of storage from the allocator cache (a float32
// tensor's) for a synchronous exchange's send or receive buffer; donate
// the tensor once the exchange returned.
func scratch(n int) (*tensor.Tensor, []byte) {
	t := tensor.Empty(tensor.Float32, (n+3)/4)
	return t, borrowBytes(t)[:n:n]
}

// borrowBytes is rawBytes without pinning x's storage where the dtype
// allows (tensor.Tensor.BorrowFloat32): for a copy made during the call,
// so that x may still be donated and its storage recycled.
func borrowBytes(x *tensor.Tensor) []byte {
	if x.Size() == 0 {
		return nil
	}
	switch x.DType() {
	case tensor.Float32:
		d := x.BorrowFloat32()
		return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 4*len(d))
	case tensor.Int32:
		d := x.BorrowInt32()
		return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 4*len(d))
	case tensor.Float64:
		d := x.BorrowFloat64()
		return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 8*len(d))
	case tensor.Int64:
		d := x.BorrowInt64()
		return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 8*len(d))
	}
	return rawBytes(x)
}

// region is the part [lo, hi) along dim of a member's block that another
// member needs; whole means all of it, none nothing.
type region struct {
	dim, lo, hi int
	whole, none bool
}

// partAlong is the needs of a collective whose members read the part of
// every block along the params' dim that matches their rank (psum_scatter,
// all_to_all).
func partAlong(c *call, g group, _, dst int, x *tensor.Tensor) region {
	d := c.p.dim
	size := x.Dim(d) / g.size
	r := slices.Index(g.members, dst)
	return region{dim: d, lo: r * size, hi: (r + 1) * size}
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

// parts brings only the parts of the remote members' blocks that this
// process's members read, as the collective's needs says
// (MPI_Alltoallv): remote blocks are rebuilt full-size with zeros where
// nothing local reads them (psum_scatter of other than float32 blocks,
// all_to_all, ppermute).
func (x *crossGroup) parts() {
	m, s, g, gr, members, procs := x.r.mesh, x.s, x.g, x.gr, x.members, x.procs
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
	needs := c0.coll.needs
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
			xs := tensor.Zeros(x0.DType(), x0.Shape()...)
			for _, dst := range byProc[me] {
				rg := needs(c0, gr, src, dst, x0)
				n := rg.size(x0)
				part := recv[:n]
				recv = recv[n:]
				switch {
				case rg.none:
				case rg.whole:
					copy(rawBytes(xs), part)
				default:
					shape := x0.Shape()
					shape[rg.dim] = rg.hi - rg.lo
					placeAt(xs, fromBytes(x0.DType(), part, shape), rg.dim, rg.lo)
				}
			}
			s.calls[src] = &call{coll: c0.coll, axes: c0.axes, x: xs, extra: c0.extra, p: c0.p}
		}
	}
}

// allreduceExtreme all-reduces (MPI_MAX or MPI_MIN, as op says) the
// elementwise extreme of the group's local blocks and stores it as the
// group's shared result (pmax, pmin).
func (x *crossGroup) allreduceExtreme(op ReduceOp) {
	m, s, g := x.r.mesh, x.s, x.g
	var out *tensor.Tensor
	for _, j := range x.members {
		if !m.isLocal(j) {
			continue
		}
		b := tensor.WithLocal(s.calls[j].x, nil)
		switch {
		case out == nil:
			out = tensor.Zeros(b.DType(), b.Shape()...)
			copy(rawBytes(out), rawBytes(b))
		case op == ReduceMax:
			out = tensor.Maximum(out, b)
		default:
			out = tensor.Minimum(out, b)
		}
	}
	switch out.DType() {
	case tensor.Float64, tensor.Int64:
		out = x.gatherExtreme(out, op)
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
	storeRemote(s, x.key, out, true)
}
