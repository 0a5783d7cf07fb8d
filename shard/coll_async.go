package shard

import (
	"fmt"
	"slices"
	"time"

	"github.com/gonox/gonox/tensor"
)

// This file holds the asynchronous collectives: a start that posts the
// transfer and returns at once, and a Wait that returns the result, so
// that a device computes while its block travels (the ppermute_start /
// ppermute_done pairs of XLA's collective matmuls).
//
// Inside one process, a started ppermute is a registration in the same
// slot a synchronous one meets in: the device goes on without waiting for
// the others, and Wait blocks until every device of the group has started
// it, then takes the sender's block (a pointer handoff, as the synchronous
// ppermute does). Between processes the last local device to start it
// posts MPI_Isend/MPI_Irecv (through a Group that implements AsyncGroup,
// as package shard/mpi's does), and Wait completes them.

// Handle is an asynchronous collective in flight, returned by a Ctx's
// ...Start methods. Call Wait exactly once, on the device that started it
// and before fn returns: a handle never waited on fails the Map call.
type Handle struct {
	c    *Ctx
	p    *asyncParams
	tok  *tensor.Tensor
	done bool
	// fin, for a collective done at the start (over one device, say),
	// returns the result, and red is a started reduction (PsumStart,
	// PsumScatterStart) to wait for; kind names either.
	fin  func() *tensor.Tensor
	red  *started
	kind string
}

// asyncParams are the parameters of one start/wait pair; the start's
// Impl leaves the transfer in cur, the wait's Impl takes it. rev links
// the pair's VJPs: the wait's VJP starts the reverse transfer of the
// cotangent, the start's VJP waits for it.
type asyncParams struct {
	coll       *collParams
	collective *collective // ppermuteStartColl
	dtype      tensor.DType
	shape      []int
	mask       uint64 // the result's mark
	cur        *inflight
	rev        *asyncParams
	// tan is the transfer of the block's tangent (forward mode), started
	// by the start's JVP and taken by the wait's.
	tan *asyncParams
}

// inflight is one device's started collective.
type inflight struct {
	run *run
	s   *slot
	c   *call
}

// ppermuteStartColl is the started ppermute (see collective):
// Ctx.PpermuteStart and Ctx.RingShiftStart, counted as a ppermute. Its
// ops are the start, which registers the block in the slot without
// waiting, and the wait (Handle.Wait), which takes the result; its
// cross-process exchange (exchangeAsync) posts non-blocking transfers.
var ppermuteStartColl = &collective{kind: "ppermute", cross: exchangeAsync, needs: ppermuteNeeds}

var asyncStartOp, asyncWaitOp *tensor.Op

func init() {
	asyncStartOp = &tensor.Op{
		Name:   "ppermute_start",
		Traits: tensor.Traits{Half: tensor.NativeHalf, Types: tensor.TypesAll}, // moves data of any dtype
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			p := pp.(*asyncParams)
			p.start(in[0])
			// The token links the wait to the start in the graph.
			return tensor.Zeros(tensor.Float32)
		},
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(*asyncParams)
			rp := p.rev
			if rp == nil {
				panic(fmt.Sprintf("shard: internal error: backward of a %s start without its wait's", p.collective.kind))
			}
			p.rev = nil
			return []*tensor.Tensor{remark(tensor.Apply(asyncWaitOp, rp, g), in[0])}
		},
		// The tangent travels beside the block: a second transfer
		// started here, whose token is the tangent of the start's, and
		// waited for by the wait's JVP.
		JVP: func(prim, tan, _ []*tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(*asyncParams)
			tp, tok := ppermuteStart(p.coll.env, likeMarked(tan[0], prim[0]), p.coll.axes, p.coll.perm)
			p.tan = tp
			return []*tensor.Tensor{tok}
		},
		// The batch travels as one block (every device maps the same
		// batch); the token is per example.
		Batch: func(in []*tensor.Tensor, _ []bool, pp any) []*tensor.Tensor {
			p := pp.(*asyncParams)
			p.shape = in[0].Shape()
			tok := tensor.Apply(asyncStartOp, p, in[0])
			return []*tensor.Tensor{tensor.BroadcastTo(tensor.Reshape(tok, 1), in[0].Dim(0))}
		},
	}
	asyncWaitOp = &tensor.Op{
		Name:   "ppermute_done",
		Traits: tensor.Traits{Half: tensor.NativeHalf},
		Impl: func(_ []*tensor.Tensor, pp any) *tensor.Tensor {
			return pp.(*asyncParams).wait()
		},
		VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			// The transpose of a ppermute is the reverse ppermute, itself
			// started here and waited for where the forward one started.
			p := pp.(*asyncParams)
			inv := make([][2]int, len(p.coll.perm))
			for i, pr := range p.coll.perm {
				inv[i] = [2]int{pr[1], pr[0]}
			}
			rp, tok := ppermuteStart(p.coll.env, g, p.coll.axes, inv)
			p.rev = rp
			return []*tensor.Tensor{tok}
		},
		JVP: func(_, tan, _ []*tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(*asyncParams)
			tp := p.tan
			if tp == nil {
				return []*tensor.Tensor{nil} // the block had no tangent
			}
			p.tan = nil
			return []*tensor.Tensor{tensor.Apply(asyncWaitOp, tp, tan[0])}
		},
		// The wait of a batch's start returns the batch.
		Batch: func(in []*tensor.Tensor, _ []bool, pp any) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Apply(asyncWaitOp, pp, in[0])}
		},
	}
	register(ppermuteStartColl, asyncStartOp, asyncWaitOp)
}

// ppermuteStart validates and starts an asynchronous ppermute of x.
func ppermuteStart(e *devEnv, x *tensor.Tensor, axes []string, perm [][2]int) (*asyncParams, *tensor.Tensor) {
	const op = "shard.Ctx.PpermuteStart"
	m := e.maskOf(op, axes)
	g := e.group(op, axes)
	checkPerm(op, g, axes, perm)
	x = tensor.Vary(x, e.Local(maskOf(x)|m))
	p := &asyncParams{
		coll:       &collParams{env: e, axes: slices.Clone(axes), mask: m, perm: slices.Clone(perm)},
		collective: ppermuteStartColl, dtype: x.DType(), shape: x.Shape(), mask: maskOf(x) | m,
	}
	return p, tensor.Apply(asyncStartOp, p, x)
}

// start registers the device's block in the collective's slot without
// waiting for the other devices.
func (p *asyncParams) start(x *tensor.Tensor) {
	e := p.coll.env
	if p.cur != nil {
		panic(fmt.Sprintf("shard: internal error: %s started twice", p.collective.kind))
	}
	c := &call{coll: ppermuteStartColl, axes: p.coll.axes, x: x, p: p.coll, extra: fmt.Sprintf("perm %v, async", p.coll.perm)}
	s := e.run.post(e, c)
	f := &inflight{run: e.run, s: s, c: c}
	e.run.addPending(e.dev, f)
	p.cur = f
}

// addPending records that device dev started f (checkPending fails the
// device if it returns before waiting for it).
func (r *run) addPending(dev int, f *inflight) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = make([][]*inflight, r.mesh.Size())
	}
	r.pending[dev] = append(r.pending[dev], f)
}

// dropPending records that device dev waits for f.
func (r *run) dropPending(dev int, f *inflight) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending[dev] = slices.DeleteFunc(r.pending[dev], func(g *inflight) bool { return g == f })
}

// wait blocks until every device of the group has started the collective
// and returns this device's result.
func (p *asyncParams) wait() *tensor.Tensor {
	e := p.coll.env
	f := p.cur
	if f == nil {
		panic(fmt.Sprintf("shard: internal error: %s waited for without a start", p.collective.kind))
	}
	p.cur = nil
	r := f.run
	if r != e.run {
		panic(fmt.Sprintf("shard.Handle.Wait: %v was started in another shard.Map call (or its backward pass)", f.c))
	}
	r.dropPending(e.dev, f)
	s := f.s
	t0 := time.Now()
	r.await(e, s, t0)
	defer r.leave(s)
	if e.mesh.spans() {
		if v, ok := s.shared.Load(asyncKey{}); ok {
			t1 := time.Now()
			v.(*asyncExchange).wait(r)
			r.comm.addWait(e.mesh.devices[e.dev], time.Since(t1))
		}
	}
	g := e.group("shard.Ppermute", p.coll.axes)
	me := g.meshRank[g.rank]
	var out *tensor.Tensor
	sent := int64(0)
	for _, pr := range p.coll.perm {
		if pr[1] == me {
			src := g.members[slices.Index(g.meshRank, pr[0])]
			out = tensor.WithLocal(s.calls[src].x, nil) // shares the sender's block
		}
		if pr[0] == me && pr[1] != me {
			sent = int64(f.c.x.Bytes())
		}
	}
	if out == nil {
		out = tensor.Zeros(p.dtype, p.shape...)
	}
	e.account(ppermuteStartColl, sent)
	return e.markedFresh(out, p.mask)
}

// post brings the k-th collective of device dev to its slot without
// waiting (the start of an asynchronous collective). The last local
// device to arrive checks that every device issued the same collective
// and, on a mesh spanning processes, posts the transfers to and from the
// other processes; then s.ready is closed.
func (r *run) post(e *devEnv, c *call) *slot {
	k := e.seq
	e.seq++
	return r.postAt(e, c, k)
}

// postAt is post at slot k, which the device reserved (run.reserve).
func (r *run) postAt(e *devEnv, c *call, k int) *slot {
	s := r.arriveAt(e, c, k)
	select {
	case <-r.abort:
		panic(abortSignal{})
	default:
	}
	return s
}

// checkPending fails the device if it returns with a started collective
// it never waited for (called by exec after fn returns).
func (r *run) checkPending(dev int) {
	r.mu.Lock()
	var left []*inflight
	if r.pending != nil {
		left = r.pending[dev]
	}
	r.mu.Unlock()
	if len(left) == 0 {
		return
	}
	f := left[0]
	panic(fmt.Sprintf("%s returned with %d asynchronous collective(s) never waited for, the first #%d %v; call Wait on every Handle before fn returns", r.name, len(left), f.s.k, f.c))
}

// PpermuteStart starts Ppermute(x, axes, perm) and returns at once: the
// device computes meanwhile, and h.Wait() returns what Ppermute would
// have. Every device of the mesh must start (and wait for) the same
// asynchronous collectives in the same order as its other collectives;
// in debug mode a mismatch fails the Map call as for the synchronous
// ones. Between processes the blocks travel with MPI_Isend and MPI_Irecv
// while the device computes.
//
// It is differentiable: the transpose of a started ppermute is the
// reverse ppermute, started where the forward one is waited for and
// waited for where it started, so the backward pass overlaps too.
func (c *Ctx) PpermuteStart(x *tensor.Tensor, axes Axes, perm [][2]int) *Handle {
	checkLocal("shard.Ctx.PpermuteStart", c, x)
	p, tok := ppermuteStart(c.env, x, axes, perm)
	return &Handle{c: c, p: p, tok: tok}
}

// RingShiftStart starts RingShift(x, axes, offset) (see PpermuteStart).
func (c *Ctx) RingShiftStart(x *tensor.Tensor, axes Axes, offset int) *Handle {
	checkLocal("shard.Ctx.RingShiftStart", c, x)
	return c.PpermuteStart(x, axes, ringPerm(c.env.group("shard.Ctx.RingShiftStart", axes), offset))
}

// Wait blocks until the collective is done on this device and returns its
// result. It must be called once, inside the fn that started it, on the
// same device.
func (h *Handle) Wait() *tensor.Tensor {
	if h.fin != nil || h.red != nil {
		if h.done {
			panic(fmt.Sprintf("shard.Handle.Wait: the started %s was already waited for", h.kind))
		}
		h.done = true
		if h.red != nil {
			return h.red.wait()
		}
		return h.fin()
	}
	if h.done {
		panic(fmt.Sprintf("shard.Handle.Wait: the %s of %v%v was already waited for", h.p.collective.kind, h.p.dtype, h.p.shape))
	}
	h.done = true
	return tensor.Apply(asyncWaitOp, h.p, h.tok)
}
