package shard

import (
	"slices"
	"strconv"

	"github.com/gonox/gonox/tensor"
)

// hierGroup is a Group whose processes live on several hosts, some host
// holding two or more of them, each host's processes consecutive ranks
// (mpirun's default placement, --map-by slot). Its float32 sums are
// hierarchical:
//
//   - each host's processes all-reduce through their shared memory, so
//     that the host's first process, its leader, holds the host's sum;
//   - the leaders reduce-scatter and all-gather the hosts' sums between
//     them with non-blocking sends (each sums its part of the hosts' sums,
//     in host order, as sumFloat32 sums blocks);
//   - each leader broadcasts the total through its host's shared memory.
//
// Between hosts each leader sends and receives 2·(h−1)/h of the array for
// h hosts, once per host rather than once per process. It is used only
// where the order of the additions this makes is the order of sumFloat32
// over every process in rank order (sameSum): the order of the
// shared-memory collectives on one host, and of the one-process psum over
// one device per process. So a psum over 2 hosts of 2 or 4 processes, or
// 3 hosts of 2, equals the one-process psum bit for bit, where MPI's own
// all-reduce sums in an order of its choosing. The other collectives, and
// sums of integers (exact in any order) or extremes, go through the
// group spanning every process (Group).
type hierGroup struct {
	Group         // every process of the group
	local   Group // this host's processes of the group (shared memory)
	leaders Group // the first process of each host; nil if this process is not one
	run     int   // this host's index among the group's hosts
	nruns   int   // the group's hosts
	starts  []int // the group rank of each host's first process, then the group's size
}

// hierAsyncGroup is a hierGroup whose group also sends without blocking.
type hierAsyncGroup struct {
	*hierGroup
	AsyncGroup
}

// newHierGroup returns the hierarchical group over g (the group of procs
// this process got, nil if it is not among them), or nil if procs do not
// call for one: the transport does not know the hosts, the processes are
// on one host or one per host, a host's processes are not consecutive,
// the hierarchical sum would add in another order than sumFloat32, or
// shared memory is off.
// Every process of the job calls it with the same procs in the same order
// (it makes groups: collective over the job).
func newHierGroup(g Group, procs []int) Group {
	ht, ok := dist.t.(HostTransport)
	if !ok || len(procs) < 3 {
		return nil
	}
	runs := hostRuns(ht.Hosts(), procs)
	if runs == nil {
		return nil
	}
	// The order of the hierarchical sum: each host's sum, then the sum of
	// those, against sumFloat32's over every process.
	parts := make([]*sumTree, len(runs))
	for i, r := range runs {
		parts[i] = sumOrder(leaves(len(r)))
	}
	if !sameSum(sumOrder(parts), sumOrder(leaves(len(procs)))) {
		return nil
	}
	h := &hierGroup{Group: g, nruns: len(runs), run: -1, starts: []int{0}}
	lead := make([]int, len(runs))
	for i, r := range runs {
		lead[i] = r[0]
		h.starts = append(h.starts, h.starts[i]+len(r))
		l := wrapGroup(dist.t.NewGroup(r))
		if slices.Contains(r, dist.rank) {
			h.local, h.run = l, i
		}
	}
	h.leaders = dist.t.NewGroup(lead)
	switch h.local.(type) {
	case *shmGroup, shmAsyncGroup:
	default:
		// Shared memory is off (GONOX_MPI_SHM=0, the same on every
		// process): MPI's own collectives throughout.
		return nil
	}
	if g == nil {
		return nil
	}
	if _, ok := h.leaders.(AsyncGroup); h.leaders != nil && !ok {
		return nil // every process decides alike: shard/mpi's groups send without blocking
	}
	if ag, ok := g.(AsyncGroup); ok {
		return hierAsyncGroup{h, ag}
	}
	return h
}

// hostRuns splits procs into runs of consecutive processes on one host
// (hosts[p] is process p's host), or returns nil if they are on one host,
// one per host, or a host's processes are not consecutive.
func hostRuns(hosts, procs []int) [][]int {
	var runs [][]int
	for i, p := range procs {
		if i == 0 || hosts[p] != hosts[procs[i-1]] {
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], p)
	}
	seen := map[int]bool{}
	wide := false
	for _, r := range runs {
		if seen[hosts[r[0]]] {
			return nil
		}
		seen[hosts[r[0]]] = true
		wide = wide || len(r) > 1
	}
	if len(runs) < 2 || !wide {
		return nil
	}
	return runs
}

// sumTree is the order of a float32 sum: an operand (l and r nil) or the
// sum of two sums.
type sumTree struct{ l, r *sumTree }

// leaves returns n operands.
func leaves(n int) []*sumTree {
	out := make([]*sumTree, n)
	for i := range out {
		out[i] = &sumTree{}
	}
	return out
}

// sumOrder returns the order in which sumFloat32 adds the operands xs:
// groups of eight, four, two or one, each summed as a balanced tree,
// the groups added one after another.
func sumOrder(xs []*sumTree) *sumTree {
	var acc *sumTree
	for len(xs) > 0 {
		k := sumGroup(len(xs))
		g := slices.Clone(xs[:k])
		for len(g) > 1 {
			for i := range len(g) / 2 {
				g[i] = &sumTree{g[2*i], g[2*i+1]}
			}
			g = g[:len(g)/2]
		}
		if acc == nil {
			acc = g[0]
		} else {
			acc = &sumTree{acc, g[0]}
		}
		xs = xs[k:]
	}
	return acc
}

// sameSum reports whether two sums of the same operands, numbered by
// their order as leaves, add alike (a+b is b+a bit for bit).
func sameSum(a, b *sumTree) bool {
	var sig func(t *sumTree, next *int) string
	sig = func(t *sumTree, next *int) string {
		if t.l == nil {
			*next++
			return "x" + strconv.Itoa(*next)
		}
		x, y := sig(t.l, next), sig(t.r, next)
		if y < x {
			x, y = y, x
		}
		return "(" + x + "+" + y + ")"
	}
	var i, j int
	return sig(a, &i) == sig(b, &j)
}

// AllreduceFloat32 sums hierarchically (see hierGroup); other reductions
// go through the group of every process.
func (h *hierGroup) AllreduceFloat32(send, recv []float32, op ReduceOp) {
	if op != ReduceSum {
		h.Group.AllreduceFloat32(send, recv, op)
		return
	}
	lead := h.local.Rank() == 0
	// This host's sum, in every process of the host (the leader needs
	// it; the others' is overwritten by the broadcast).
	h.local.AllreduceFloat32(send, recv, ReduceSum)
	if lead {
		h.leadersSum(recv, func(j int) (int, int) { return partOf(len(recv), h.nruns, j) }, true)
	}
	counts := make([]int, h.local.Size())
	counts[0] = 4 * len(recv)
	var own []byte
	if lead {
		own = slices.Clone(floatBytes(recv)) // an all-gather's operand may not be its result
	}
	h.local.Allgatherv(own, floatBytes(recv), counts)
}

// leadersSum sums x, this host's sum, with every other host's, in host
// order: the leaders reduce-scatter the hosts' sums, host j's leader
// summing x[part(j)], and with gather all-gather the parts, replacing x
// with the sum of every host's; without, only x[part(this host)] is
// replaced. Non-blocking sends throughout.
func (h *hierGroup) leadersSum(x []float32, part func(j int) (int, int), gather bool) {
	ag := h.leaders.(AsyncGroup)
	k, me := h.nruns, h.run
	lo, hi := part(me)
	bufs := make([]*tensor.Tensor, k)
	ins := make([][]float32, k)
	var reqs []Request
	for j := range k {
		if j == me {
			ins[j] = x[lo:hi]
			continue
		}
		bufs[j] = tensor.Empty(tensor.Float32, hi-lo)
		ins[j] = bufs[j].BorrowFloat32()
		reqs = append(reqs, ag.IrecvBytes(floatBytes(ins[j]), j, 0))
		jl, jh := part(j)
		reqs = append(reqs, ag.IsendBytes(floatBytes(x[jl:jh]), j, 0))
	}
	waitAll(reqs, nil)
	mine := tensor.Empty(tensor.Float32, hi-lo)
	defer tensor.Donate(mine)
	sumFloat32(mine.BorrowFloat32(), ins, 0, hi-lo)
	for _, b := range bufs {
		if b != nil {
			tensor.Donate(b)
		}
	}
	if gather {
		reqs = reqs[:0]
		for j := range k {
			if j == me {
				continue
			}
			jl, jh := part(j)
			reqs = append(reqs, ag.IrecvBytes(floatBytes(x[jl:jh]), j, 1), ag.IsendBytes(floatBytes(mine.BorrowFloat32()), j, 1))
		}
		waitAll(reqs, nil)
	}
	copy(x[lo:hi], mine.BorrowFloat32())
}

// ReduceScatterFloat32 sums hierarchically as AllreduceFloat32 does, in
// the same order, so that this process's block is the part of the
// all-reduce bit for bit, but between hosts the leaders only
// reduce-scatter: host j's leader sums the blocks of host j's processes
// (the group's ranks are in host order), half the bytes between hosts of
// the all-reduce, and shares them with its host through shared memory.
func (h *hierGroup) ReduceScatterFloat32(send, recv []float32, op ReduceOp) {
	if op != ReduceSum {
		h.Group.ReduceScatterFloat32(send, recv, op)
		return
	}
	full := tensor.Empty(tensor.Float32, len(send))
	defer tensor.Donate(full)
	f := full.BorrowFloat32()
	// This host's sum, in every process of the host (the leader needs it).
	h.local.AllreduceFloat32(send, f, ReduceSum)
	n := len(recv)
	hostPart := func(j int) (int, int) { return h.starts[j] * n, h.starts[j+1] * n }
	lo, hi := hostPart(h.run)
	counts := make([]int, h.local.Size())
	counts[0] = 4 * (hi - lo)
	var own []byte
	if h.local.Rank() == 0 {
		h.leadersSum(f, hostPart, false)
		own = slices.Clone(floatBytes(f[lo:hi])) // an all-gather's operand may not be its result
	}
	h.local.Allgatherv(own, floatBytes(f[lo:hi]), counts)
	r := h.local.Rank()
	copy(recv, f[lo+r*n:lo+(r+1)*n])
}
