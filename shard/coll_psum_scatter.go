package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// psumScatterColl is the reduce-scatter (see collective): Ctx.PsumScatter,
// the transpose of all_gather, and propagation's sum of a pending sum
// wanted sharded. Between processes (crossPsumScatter) one float32 block
// per process is reduce-scattered straight into the parts when they are
// contiguous, other float32 blocks are all-reduced whole, anything else
// brings the parts the local members read.
var psumScatterColl = &collective{kind: "psum_scatter", cross: eachGroup(crossPsumScatter), needs: partAlong, quiet: quietPsumScatter}

// quietPsumScatter reports whether every group of a started
// psum_scatter's slot exchanges with pairScatter, which waits by polling.
func quietPsumScatter(r *run, s *slot) bool {
	for _, x := range r.crossGroups(s, s.calls[r.first]) {
		if !x.pairs() {
			return false
		}
	}
	return true
}

var psumScatterOp *tensor.Op

func init() {
	psumScatterOp = &tensor.Op{
		Name: "psum_scatter",
		// Moves 16-bit data itself; its VJP reads the cotangent before it returns.
		Traits: tensor.Traits{Half: tensor.NativeHalf, Placement: tensor.SyncVJP, Types: tensor.TypesFloat64 | tensor.TypesInt64},
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return psumScatterImpl(in[0], pp.(*collParams))
		},
		VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(*collParams)
			return []*tensor.Tensor{allGather(p.env, g, p.axes, p.dim, p.tiled, false)}
		},
		JVP:   collLinearJVP(&psumScatterOp),
		Batch: collBatch(&psumScatterOp, true),
	}
	register(psumScatterColl, psumScatterOp)
}

func psumScatter(e *devEnv, x *tensor.Tensor, axes []string, dim int, tiled bool) *tensor.Tensor {
	x, p := psumScatterArgs("shard.Ctx.PsumScatter", e, x, axes, dim, tiled)
	return tensor.Apply(psumScatterOp, p, x)
}

// psumScatterArgs checks the operands of a psum_scatter (op names the
// caller) and returns the block marked varying over the axes and the
// collective's parameters.
func psumScatterArgs(op string, e *devEnv, x *tensor.Tensor, axes []string, dim int, tiled bool) (*tensor.Tensor, *collParams) {
	if x.Rank() == 0 {
		panic(fmt.Sprintf("%s: %v: needs at least one dimension", op, x))
	}
	d := normDim(op, x, dim, 0)
	m := e.maskOf(op, axes)
	g := e.group(op, axes)
	n := x.Dim(d)
	if tiled && n%g.size != 0 {
		panic(fmt.Sprintf("%s: %v: dim %d (%d) is not divisible by %s=%d", op, x, d, n, axesLabel(axes), g.size))
	}
	if !tiled && n != g.size {
		panic(fmt.Sprintf("%s: %v: untiled scatter needs dim %d (%d) equal to %s=%d", op, x, d, n, axesLabel(axes), g.size))
	}
	if x.DType() == tensor.Bool {
		panic(fmt.Sprintf("%s: %v: bool blocks cannot be summed", op, x))
	}
	x = tensor.Vary(x, e.Local(maskOf(x)|m))
	return x, &collParams{env: e, axes: slices.Clone(axes), mask: m, dim: d, tiled: tiled}
}

func psumScatterImpl(x *tensor.Tensor, p *collParams) *tensor.Tensor {
	e := p.env
	if e.group("shard.PsumScatter", p.axes).size == 1 {
		return psumScatterOne(e, x, p)
	}
	s := e.run.meet(e, psumScatterCall(x, p))
	defer e.run.leave(s)
	return psumScatterDone(e, x, p, s)
}

// psumScatterOne is a psum_scatter over one device: x itself (without
// the scattered dimension if untiled), a view of its storage, with no
// rendezvous or copy (as psumImpl over one device). It is still a call,
// of 0 bytes.
func psumScatterOne(e *devEnv, x *tensor.Tensor, p *collParams) *tensor.Tensor {
	e.account(psumScatterColl, 0)
	y := x
	if !p.tiled {
		y = tensor.Squeeze(x, p.dim)
	}
	return e.marked(y, maskOf(x)|p.mask)
}

// psumScatterCall is what a device brings to a psum_scatter.
func psumScatterCall(x *tensor.Tensor, p *collParams) *call {
	// The group reads its own blocks only: in one process it meets on
	// its own (call.members).
	return &call{coll: psumScatterColl, axes: p.axes, x: x, p: p, extra: collKey("dim", p.dim, p.tiled),
		members: p.env.group("shard.PsumScatter", p.axes).members}
}

// psumScatterDone computes this device's part of a psum_scatter once
// every device has arrived in its slot s (and the other processes' part
// is in it).
func psumScatterDone(e *devEnv, x *tensor.Tensor, p *collParams, s *slot) *tensor.Tensor {
	g := e.group("shard.PsumScatter", p.axes)
	size := x.Dim(p.dim) / g.size
	dt := x.DType()
	// done meets the other members (the blocks are read until every
	// member is done) and hands out out, this member's part, a tensor of
	// the collective's own.
	done := func(out *tensor.Tensor) *tensor.Tensor {
		e.run.barrier(e, s)
		if !p.tiled {
			out = squeezeFresh(out, p.dim)
		}
		e.account(psumScatterColl, int64(g.size-1)*int64(x.Bytes())/int64(g.size))
		return e.markedFresh(out, maskOf(x)|p.mask)
	}
	if v, ok := s.remote.Load(g.key); ok {
		if _, ok := v.(scattered); ok {
			// Reduce-scattered with the other processes: the shared
			// result is this process's member's part (reduceScatter).
			return done(sharedResult(s, g.key, nil))
		}
		// All-reduced whole with the other processes (crossPsumScatter): this
		// member's part of the sum.
		full := sharedResult(s, g.key, nil)
		out := done(scatterSum(x, p.dim, size, g.rank, func(int) *tensor.Tensor { return full }, 1))
		e.doneWithShared(s, g, full)
		return out
	}
	if dt == tensor.Float32 || isHalf(dt) {
		return done(scatterSum(x, p.dim, size, g.rank, func(r int) *tensor.Tensor { return s.calls[g.members[r]].x }, g.size))
	}
	var out *tensor.Tensor
	for _, m := range g.members {
		part := sliceAxis(tensor.WithLocal(s.calls[m].x, nil), p.dim, g.rank*size, size)
		if out == nil {
			out = part
		} else {
			out = tensor.Add(out, part)
		}
	}
	return done(out)
}

// scatterSum returns part rank (of size along dim) of the sum of the n
// blocks block(0..n-1), shaped like x: each run of contiguous elements of
// the part is summed straight from every block by the psum kernel (in the
// psum's order, so the part is bit for bit that part of a psum), with no
// intermediate slices or partial sums. Half blocks are summed in float32
// and rounded once.
func scatterSum(x *tensor.Tensor, dim, size, rank int, block func(int) *tensor.Tensor, n int) *tensor.Tensor {
	shape := x.BorrowShape() // read only
	outer, inner := 1, 1
	for _, d := range shape[:dim] {
		outer *= d
	}
	for _, d := range shape[dim+1:] {
		inner *= d
	}
	run, stride := size*inner, shape[dim]*inner
	outShape := slices.Clone(shape)
	outShape[dim] = size
	out := tensor.Empty(x.DType(), outShape...) // every run is written
	if x.DType() == tensor.Float32 {
		// Borrowed, not pinned: the blocks and the result may still be
		// donated once every member is past the collective's barrier.
		scatterSumFloat32(out.BorrowFloat32(), outer, run, stride, rank, block, n)
		return out
	}
	dst := out.RawUint16()
	src := make([][]uint16, n)
	ins := make([][]uint16, n)
	for r := range n {
		src[r] = block(r).RawUint16()
	}
	for o := range outer {
		at := o*stride + rank*run
		for r := range n {
			ins[r] = src[r][at : at+run]
		}
		sumHalf(x.DType(), dst[o*run:(o+1)*run], ins)
	}
	return out
}

// scatterSumFloat32 writes into dst (outer runs of run elements) part
// rank of the sum of the float32 blocks block(0..n-1), whose runs lie
// stride elements apart: each run summed by the psum kernel from every
// block, in the psum's order (scatterSum).
func scatterSumFloat32(dst []float32, outer, run, stride, rank int, block func(int) *tensor.Tensor, n int) {
	var buf [2][8][]float32 // a group's streams on the stack, up to 8 devices
	src, ins := buf[0][:0], buf[1][:0]
	if n > len(buf[0]) {
		src, ins = make([][]float32, 0, n), make([][]float32, 0, n)
	}
	src, ins = src[:n], ins[:n]
	for r := range n {
		src[r] = block(r).BorrowFloat32()
	}
	for o := range outer {
		at := o*stride + rank*run
		for r := range n {
			ins[r] = src[r][at : at+run]
		}
		sumFloat32(dst[o*run:(o+1)*run], ins, 0, run)
	}
}

// PsumScatter sums x over the axes and leaves each device one part of the
// sum along scatterDim (a reduce-scatter): with tiled, dimension scatterDim
// is split into equal parts; without, it must equal the number of devices
// and is removed. The result varies over the axes.
func (c *Ctx) PsumScatter(x *tensor.Tensor, axes Axes, scatterDim int, tiled bool) *tensor.Tensor {
	checkLocal("shard.Ctx.PsumScatter", c, x)
	return psumScatter(c.env, x, axes, scatterDim, tiled)
}

// crossPsumScatter is the cross-process exchange of a psum_scatter.
func crossPsumScatter(x *crossGroup) {
	switch {
	case x.c0.background && x.pairScatter():
	case x.reduceScatter():
	case x.c0.x.DType() == tensor.Float32:
		// All-reduced whole, straight from and into the blocks' storage
		// (MPI_Allreduce), and each member takes its part: twice the
		// bytes of a reduce-scatter on the wire, but none of parts'
		// packing, unpacking and fresh buffers, which cost more than the
		// wire between processes of one machine.
		x.allreduceSum()
	default:
		x.parts()
	}
}

// scattered marks, in slot.remote, a psum_scatter that reduceScatter
// reduce-scattered: the shared result under the key is this process's
// member's part itself.
type scattered struct{}

// reduceScatter reduce-scatters a float32 block per process straight
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
func (x *crossGroup) reduceScatter() bool {
	if len(x.procs) != 2 && !sumsInRankOrder(x.g) {
		return false
	}
	c, part := x.contiguousParts(x.soleFloat32Call())
	if c == nil {
		return false
	}
	out := tensor.Empty(tensor.Float32, part...) // written whole
	x.g.ReduceScatterFloat32(c.x.BorrowFloat32(), out.BorrowFloat32(), ReduceSum)
	storeRemote(x.s, x.key, out, scattered{})
	return true
}

// contiguousParts returns c, this process's call (soleFloat32Call or
// pairCall: each process has one member in the group, ranked in process
// order), and the shape of a part when the parts are contiguous in the
// block (the scattered dimension has no larger dimension before it); nil
// otherwise.
func (x *crossGroup) contiguousParts(c *call) (*call, []int) {
	if c == nil {
		return nil, nil
	}
	xs := c.x.Shape()
	for _, d := range xs[:c.p.dim] {
		if d != 1 {
			return nil, nil
		}
	}
	part := slices.Clone(xs)
	part[c.p.dim] /= len(x.members)
	return c, part
}

// pairCall is soleFloat32Call for the dtypes pairScatter sums: float32,
// bfloat16 and float16 (a gradient reduced in 16 bits, half the bytes on
// the wire: parallel.Config.ReduceDType).
func (x *crossGroup) pairCall() *call {
	return x.soleCall(func(dt tensor.DType) bool { return dt == tensor.Float32 || isHalf(dt) })
}

// pairs reports whether pairScatter can exchange the group's blocks: two
// processes not sharing memory, with non-blocking sends, one float32,
// bfloat16 or float16 block each whose parts are contiguous.
func (x *crossGroup) pairs() bool {
	if len(x.procs) != 2 {
		return false
	}
	switch x.g.(type) {
	case *shmGroup, shmAsyncGroup:
		return false // one host: through shared memory
	}
	if _, ok := x.g.(AsyncGroup); !ok {
		return false
	}
	c, _ := x.contiguousParts(x.pairCall())
	return c != nil
}

// pairScatter reduce-scatters a started psum_scatter (PsumScatterStart)
// of float32, bfloat16 or float16 blocks between two processes that do
// not share memory, as reduceScatter would float32 ones, with
// non-blocking sends (AsyncGroup): each process sends the other its part
// of its block and adds the part it receives to its own, in rank order
// (16-bit parts widened, summed in float32 and rounded once, as the
// in-process psum_scatter does). A sum of two values does not depend on their order, so
// this is bit for bit what MPI_Reduce_scatter computes. While the device
// computes it waits for the transfers by testing them every ProgressEnv
// interval and sleeping in between (PollingRequest), where a blocking MPI
// collective would spin and take the core from that computation (the
// simulated hosts of cluster.sh share the machine's cores); once the
// device waits for it (slot.release), with Request.Wait, which moves the
// bytes at once. It reports whether it did.
func (x *crossGroup) pairScatter() bool {
	if !x.pairs() {
		return false
	}
	ag := x.g.(AsyncGroup)
	c, part := x.contiguousParts(x.pairCall())
	dt := c.x.DType()
	me := x.g.Rank()
	peer := 1 - me
	blk := borrowBytes(c.x)
	nb := len(blk) / 2
	recv := tensor.Empty(dt, part...)
	tag := x.s.k % 32768 // MPI guarantees tags up to 32767
	waitAll([]Request{
		ag.IrecvBytes(borrowBytes(recv), peer, tag),
		ag.IsendBytes(blk[peer*nb:(peer+1)*nb], peer, tag),
	}, x.s.release)
	out := tensor.Empty(dt, part...) // written whole
	if dt == tensor.Float32 {
		own, n := c.x.BorrowFloat32(), nb/4
		ins := [][]float32{own[me*n : (me+1)*n], recv.BorrowFloat32()}
		if me == 1 {
			ins[0], ins[1] = ins[1], ins[0]
		}
		sumFloat32(out.BorrowFloat32(), ins, 0, n)
	} else {
		// As the in-process psum_scatter of 16-bit blocks (scatterSum):
		// widened, summed in float32, rounded once.
		own, n := c.x.RawUint16(), nb/2
		ins := [][]uint16{own[me*n : (me+1)*n], recv.RawUint16()}
		if me == 1 {
			ins[0], ins[1] = ins[1], ins[0]
		}
		sumHalf(dt, out.RawUint16(), ins)
	}
	tensor.Donate(recv)
	storeRemote(x.s, x.key, out, scattered{})
	return true
}
