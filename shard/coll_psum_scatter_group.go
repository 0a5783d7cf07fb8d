package shard

import (
	"fmt"
	"strconv"

	"github.com/gonox/gonox/tensor"
)

// psumScatterGroupColl is the slot of PsumScatterGroupStart: the
// reduce-scatters of several float32 blocks at one meeting of the
// devices. It only meets in one process (PsumScatterGroupStart starts the
// reduce-scatters one by one on a mesh spanning processes), so it has no
// cross-process exchange, and it is not registered: Comm counts its
// reduce-scatters as psum_scatter calls, one a block.
var psumScatterGroupColl = &collective{kind: "psum_scatter group"}

// PsumScatterGroupStart starts the reduce-scatters PsumScatterStart(xs[i],
// axes, dims[i], true) of float32 blocks as one collective and returns
// at once. h.Wait() returns the device's parts laid end to end in one
// float32 vector: part i, of xs[i].Size()/n elements (n the number of
// devices over axes) in the row-major order of PsumScatter's result, at
// the offset of the parts before it. Each part is bit for bit that of
// its own reduce-scatter (the same sums, in the same order of devices).
//
// In one process the devices meet once for all the blocks, and each sums
// its part of every block straight into the vector: one rendezvous and
// one result instead of one of each a block, as the flat buckets of
// PyTorch's DDP and ZeRO (a data-parallel step's gradients). On a mesh
// spanning processes, or over one device, the blocks are reduce-scattered
// one by one (PsumScatterStart) and their parts copied into the vector.
// Comm counts a psum_scatter call and its bytes for every block either
// way. As PsumScatterStart it is not differentiable, and Wait must be
// called once, inside fn, on the device that started it.
//
// dims[i] is block i's scattered dimension, counted from the end if
// negative. It panics (failing the Map call, with every device released)
// if xs is empty or dims is not as long, if a block is nil, donated, not
// float32, of rank 0, or a global sharded tensor, if a dimension is out of
// range or its size not divisible by the number of devices over axes, if
// axes is empty or names an axis the mesh lacks, and if the devices bring
// different counts, sizes or dimensions of blocks.
func (c *Ctx) PsumScatterGroupStart(xs []*tensor.Tensor, axes Axes, dims []int) *Handle {
	const op = "shard.Ctx.PsumScatterGroupStart"
	checkCtx(op, c)
	if len(xs) == 0 || len(dims) != len(xs) {
		panic(fmt.Sprintf("%s: %d blocks and %d dimensions: want one dimension a block, at least one block", op, len(xs), len(dims)))
	}
	e := c.env
	vs := make([]*tensor.Tensor, len(xs)) // the blocks, marked varying over axes
	ps := make([]*collParams, len(xs))
	total := 0
	for i, x := range xs {
		if x == nil {
			panic(fmt.Sprintf("%s: block %d is nil", op, i))
		}
		checkLocal(op, c, x)
		if x.DType() != tensor.Float32 {
			panic(fmt.Sprintf("%s: block %d %v: want float32 blocks", op, i, x))
		}
		vs[i], ps[i] = psumScatterArgs(op, e, x, axes, dims[i], true)
		total += x.Size()
	}
	g := e.group(op, axes)
	if g.size == 1 || e.mesh.spans() {
		return c.psumScatterEach(vs, ps, total/g.size)
	}
	var mask uint64
	own := make([]*tensor.Tensor, len(xs)) // the snapshots the other devices read
	for i, x := range vs {
		mask |= maskOf(x) | ps[i].mask
		own[i] = snapshotOf(x)
	}
	// The devices must bring the same blocks: the count, the size and
	// the dimensions (counted from 0: -1 on one device and 1 on another
	// are the same dimension of a matrix) are checked at the meeting
	// (call.extra), the first block's shape with it.
	key := groupKey(len(xs), total, func(i int) int { return ps[i].dim })
	cl := &call{coll: psumScatterGroupColl, axes: ps[0].axes, x: own[0], extra: key, data: own, members: g.members}
	return e.startReduction(c, cl, func(s *slot) *tensor.Tensor {
		out := tensor.Empty(tensor.Float32, total/g.size) // every part is written
		dst := out.BorrowFloat32()
		at := 0
		for i, x := range own {
			shape := x.BorrowShape() // read only
			d := ps[i].dim
			outer, inner := 1, 1
			for _, n := range shape[:d] {
				outer *= n
			}
			for _, n := range shape[d+1:] {
				inner *= n
			}
			run := shape[d] / g.size * inner
			scatterSumFloat32(dst[at:at+outer*run], outer, run, shape[d]*inner, g.rank, func(r int) *tensor.Tensor {
				return s.calls[g.members[r]].data.([]*tensor.Tensor)[i]
			}, g.size)
			at += outer * run
		}
		e.run.barrier(e, s) // the blocks are read until every member is done
		for i, x := range own {
			e.account(psumScatterColl, int64(g.size-1)*int64(x.Bytes())/int64(g.size))
			dropSnapshot(vs[i], x)
		}
		return e.markedFresh(out, mask)
	})
}

// groupKey is the call.extra of a grouped collective of n blocks of total
// elements along dimensions dim(0), ..., dim(n-1): what the devices must
// agree on.
func groupKey(n, total int, dim func(i int) int) string {
	b := make([]byte, 0, 32+4*n)
	b = append(b, "blocks "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, " of "...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, " dims ["...)
	for i := range n {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(dim(i)), 10)
	}
	return string(append(b, ']'))
}

// psumScatterEach is PsumScatterGroupStart block by block: each block's
// reduce-scatter started (PsumScatterStart), their parts copied into one
// vector of size elements at Wait.
func (c *Ctx) psumScatterEach(xs []*tensor.Tensor, ps []*collParams, size int) *Handle {
	hs := make([]*Handle, len(xs))
	for i, x := range xs {
		hs[i] = c.PsumScatterStart(x, ps[i].axes, ps[i].dim, true)
	}
	return &Handle{c: c, kind: "psum_scatter", fin: func() *tensor.Tensor {
		out := tensor.Empty(tensor.Float32, size)
		dst := out.BorrowFloat32()
		var mask uint64
		at := 0
		for _, h := range hs {
			part := h.Wait()
			mask |= maskOf(part)
			at += copy(dst[at:], part.BorrowFloat32())
			tensor.Donate(part)
		}
		return c.env.markedFresh(out, mask)
	}}
}
