package shard

import (
	"fmt"
	"slices"
	"unsafe"

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
	var agreed []string // process sets
	for i, g := range groups {
		procs := m.procsOf(g)
		if len(procs) < 2 || res[i] == nil {
			continue
		}
		if stop == nil {
			stop = watchdog(what, m.ownerProcs())
			defer stop()
		}
		comm := m.net.groups[procsKey(procs)]
		x := res[i]
		if k := procsKey(procs); !slices.Contains(agreed, k) {
			agree(comm, procs, "shard: "+what, m.net.stream, m.net.groupOps[k].Add(1), fmt.Sprintf("%s (%s of %s)", what, reduceName(op), typeNotation(x.DType(), x.Shape())))
			agreed = append(agreed, k)
		}
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
	stop := watchdog(fmt.Sprintf("the psum_scatter of the pending sums of %s", src.origin), m.ownerProcs())
	defer stop()
	desc := fmt.Sprintf("psum_scatter of the pending sums of %s (%s, spec %v over %v to spec %v)", src.origin, typeNotation(dt, src.geo.shape), src.sharding.spec, src.partial, dst.spec)
	var agreed []string // process sets
	out := make([]*tensor.Tensor, m.Size())
	for _, g := range groups {
		local := localOf(m, g)
		procs := m.procsOf(g)
		if len(local) == 0 {
			continue
		}
		// This process's partial sum (its members' summands added), in the
		// old block's coordinates: a sum made here is dropped once sliced
		// (FSDP sums a weight's whole gradient a layer), one device's
		// summand is read as it is.
		sum := src.blocks[local[0]]
		if len(local) > 1 {
			sum = sumBlocks(src.blocks, local)
			if dt == tensor.Float32 {
				defer tensor.Donate(sum)
			}
		}
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
			if k := procsKey(procs); !slices.Contains(agreed, k) {
				agree(m.net.groups[k], procs, "shard", m.net.stream, m.net.groupOps[k].Add(1), desc)
				agreed = append(agreed, k)
			}
			blockBytes := numelOf(geo.block) * dt.Size()
			sendCounts := make([]int, len(procs))
			recvCounts := make([]int, len(procs))
			n := 0
			for pi := range procs {
				if pi != me {
					n += len(boxes[pi]) * blockBytes
				}
			}
			sendT, send := scratch(n)
			send = send[:0]
			for pi := range procs {
				if pi == me {
					continue
				}
				for _, d := range boxes[pi] {
					// Float32 blocks (FSDP reduce-scatters every weight's
					// gradient a step) are cut from sum straight into the
					// send buffer: a staging tensor per block, donated
					// once copied, was taken by the activations of the
					// backward pass running meanwhile, and a fresh one
					// drawn for the next.
					send = send[:len(send)+blockBytes]
					off := to.offset(d)
					copyBytesRegion(send[len(send)-blockBytes:], geo.block, off, borrowBytes(sum), sum.Shape(), soff, off, geo.block, dt.Size())
				}
				sendCounts[pi] = len(boxes[pi]) * blockBytes
				recvCounts[pi] = len(boxes[me]) * blockBytes
			}
			recvT, recv := scratch(len(boxes[me]) * blockBytes * (len(procs) - 1))
			m.net.groups[procsKey(procs)].Alltoallv(send, sendCounts, recv, recvCounts)
			tensor.Donate(sendT)
			for pi := range procs {
				if pi == me {
					continue
				}
				for i := range boxes[me] {
					// Added straight from the receive buffer: a tensor
					// per part missed the allocator cache as the staging
					// copies above did.
					addInto(mine[i], recv[:blockBytes])
					recv = recv[blockBytes:]
				}
			}
			tensor.Donate(recvT)
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
	// The partial sums FSDP drops here each layer are large garbage: the
	// collector is paced mid-step, not only at the end of Backward.
	tensor.PaceCollector()
	return out
}

// addInto adds to a fresh float32 or int32 block a the block of the same
// dtype and shape that the bytes b hold (reduceScatterAcross's receive
// buffer; it sends no other dtype).
func addInto(a *tensor.Tensor, b []byte) {
	switch a.DType() {
	case tensor.Float32:
		x := a.BorrowFloat32()
		y := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(x))
		for i := range x {
			x[i] += y[i]
		}
	case tensor.Int32:
		x := a.BorrowInt32()
		y := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(b))), len(x))
		for i := range x {
			x[i] += y[i]
		}
	}
}

// reduceName names a reduction in the messages of agree.
func reduceName(op ReduceOp) string {
	switch op {
	case ReduceSum:
		return "sum"
	case ReduceMax:
		return "max"
	case ReduceMin:
		return "min"
	}
	return fmt.Sprintf("ReduceOp(%d)", int(op))
}
