package shard

import (
	"fmt"

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
		out := tensor.Zeros(x.DType(), x.Shape()...)
		switch x.DType() {
		case tensor.Float32:
			comm.AllreduceFloat32(x.RawFloat32(), out.RawFloat32(), op)
		case tensor.Int32:
			comm.AllreduceInt32(x.RawInt32(), out.RawInt32(), op)
		default:
			panic(fmt.Sprintf("shard: %s: cannot reduce %v across processes (float32 and int32 only)", what, x))
		}
		res[i] = out
	}
}
