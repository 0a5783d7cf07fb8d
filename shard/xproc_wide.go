package shard

import (
	"slices"

	"github.com/gonox/gonox/tensor"
)

// gatherSum is allreduceSum for float64 and int64 blocks: every process
// gathers every member's block (Group.Allgatherv of bytes; a transport
// has no float64 or int64 reduction) and sums them itself, in the
// group's rank order from zero, as the in-process psum does. So the sum
// is the same on every process, bit for bit the sum one process computes
// over the same devices, whatever the transport and however the devices
// are spread over the processes. It moves every block to every process
// (an all-gather, not a reduction's share): these dtypes are for
// checks and for integers, not for the bulk of a model's gradients.
func (x *crossGroup) gatherSum(x0 *tensor.Tensor) *tensor.Tensor {
	m, s := x.r.mesh, x.s
	n := x0.Bytes()
	counts := make([]int, len(x.procs))
	var send []byte
	for _, j := range x.members {
		p := slices.Index(x.procs, m.devices[j].proc)
		counts[p] += n
		if m.isLocal(j) {
			send = append(send, rawBytes(tensor.WithLocal(s.calls[j].x, nil))...)
		}
	}
	offs := make([]int, len(x.procs)) // where each process's blocks start in recv
	total := 0
	for p, c := range counts {
		offs[p] = total
		total += c
	}
	recv := make([]byte, total)
	x.g.Allgatherv(send, recv, counts)
	out := tensor.Zeros(x0.DType(), x0.Shape()...)
	for _, j := range x.members { // rank order
		p := slices.Index(x.procs, m.devices[j].proc)
		b := fromBytes(x0.DType(), recv[offs[p]:offs[p]+n], x0.Shape())
		offs[p] += n
		switch x0.DType() {
		case tensor.Float64:
			dst := out.RawFloat64()
			for i, v := range b.RawFloat64() {
				dst[i] += v
			}
		default:
			dst := out.RawInt64()
			for i, v := range b.RawInt64() {
				dst[i] += v
			}
		}
	}
	return out
}

// gatherExtreme is allreduceExtreme for float64 and int64 blocks: the
// processes' local extremes out are gathered (Group.Allgatherv) and each
// process takes their extreme in rank order.
func (x *crossGroup) gatherExtreme(out *tensor.Tensor, op ReduceOp) *tensor.Tensor {
	n := out.Bytes()
	counts := make([]int, len(x.procs))
	for i := range counts {
		counts[i] = n
	}
	recv := make([]byte, n*len(x.procs))
	x.g.Allgatherv(rawBytes(out), recv, counts)
	var res *tensor.Tensor
	for p := range x.procs {
		b := fromBytes(out.DType(), recv[p*n:(p+1)*n], out.Shape())
		switch {
		case res == nil:
			res = b
		case op == ReduceMax:
			res = tensor.Maximum(res, b)
		default:
			res = tensor.Minimum(res, b)
		}
	}
	return res
}
