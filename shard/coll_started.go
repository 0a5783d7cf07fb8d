package shard

import (
	"fmt"
	"time"

	"github.com/gonox/gonox/tensor"
)

// This file holds the started reductions: PsumStart and PsumScatterStart
// take the device's place in the collective at once (its slot, in issue
// order, as the synchronous psum and psum_scatter do) and return; on a
// mesh spanning processes the cross-process exchange runs on a goroutine
// of the run (run.exchange), after every exchange issued before it, while
// the device computes, and Wait computes the device's result from the
// slot exactly as the synchronous collective does, so a started reduction
// gives the synchronous one's result bit for bit. This is how a
// data-parallel step reduces each gradient while the backward pass still
// computes the others (PyTorch DDP's buckets).

// PsumStart starts Psum(x, axes...) and returns at once; h.Wait() returns
// what Psum would have, bit for bit. Between processes the sum travels
// while the device computes: the exchanges of started collectives run one
// after another, in issue order, on a goroutine of the Map call, and a
// synchronous collective issued meanwhile waits for them (every device
// must issue its collectives, started or not, in the same order).
//
// An exchange that would spin while it waits for the other processes (a
// blocking MPI collective, a shared-memory fence) takes the core the
// device computes on, and costs more than it hides when every core
// computes: such a started exchange waits until the device waits for a
// started collective or issues another one, and overlaps nothing. Only a
// reduce-scatter between two processes that share no memory (one process
// per host) travels during the computation, with non-blocking sends
// waited for by polling; a started psum always waits.
//
// Unlike PpermuteStart it is not differentiable: x's cotangent does not
// flow back through it. It is meant for values no longer differentiated,
// such as the gradients a training step reduces (autodiff.OnGradient).
// Wait must be called once, inside the fn that started it, on the same
// device; a handle never waited on fails the Map call.
func (c *Ctx) PsumStart(x *tensor.Tensor, axes ...string) *Handle {
	const op = "shard.Ctx.PsumStart"
	checkLocal(op, c, x)
	e := c.env
	if len(axes) == 0 {
		return &Handle{c: c, kind: "psum", fin: func() *tensor.Tensor { return x }}
	}
	x, p := psumArgs(op, e, x, axes)
	if e.group(op, axes).size == 1 {
		// As Psum: no rendezvous, a call of 0 bytes.
		return &Handle{c: c, kind: "psum", fin: func() *tensor.Tensor { return psumImpl(x, p) }}
	}
	if staged(e, x) {
		g := e.group(op, axes)
		stage(e, e.run.next(e), g, x)
		return e.startReduction(c, &call{coll: psumColl, axes: p.axes, x: x, members: g.members}, func(s *slot) *tensor.Tensor {
			return psumStaged(e, x, p, s)
		})
	}
	own := snapshotOf(x)
	return e.startReduction(c, &call{coll: psumColl, axes: p.axes, x: own}, func(s *slot) *tensor.Tensor {
		defer dropSnapshot(x, own)
		return psumDone(e, x, p, s)
	})
}

// snapshotOf returns a header of its own over block x, for the other
// devices of a started collective (and its exchange) to read while the
// device goes on: the device's own header may still change meanwhile (a
// backward pass names a gradient in place after autodiff.OnGradient
// handed it over), and reading it from another goroutine would race.
// dropSnapshot(x, own) donates the snapshot's hold on the storage; the
// reduction calls it once every device is past the collective's barrier. A traced x (which
// nothing renames) is its own snapshot.
func snapshotOf(x *tensor.Tensor) *tensor.Tensor {
	if x.IsTraced() {
		return x
	}
	return tensor.WithLocal(x, x.Local())
}

// dropSnapshot donates the snapshot own of x (see snapshotOf).
func dropSnapshot(x, own *tensor.Tensor) {
	if own != x {
		tensor.Donate(own)
	}
}

// PsumScatterStart starts PsumScatter(x, axes, scatterDim, tiled) and
// returns at once; h.Wait() returns what PsumScatter would have, bit for
// bit (see PsumStart).
func (c *Ctx) PsumScatterStart(x *tensor.Tensor, axes Axes, scatterDim int, tiled bool) *Handle {
	const op = "shard.Ctx.PsumScatterStart"
	checkLocal(op, c, x)
	e := c.env
	x, p := psumScatterArgs(op, e, x, axes, scatterDim, tiled)
	if e.group(op, axes).size == 1 {
		return &Handle{c: c, kind: "psum_scatter", fin: func() *tensor.Tensor { return psumScatterOne(e, x, p) }}
	}
	own := snapshotOf(x)
	return e.startReduction(c, psumScatterCall(own, p), func(s *slot) *tensor.Tensor {
		defer dropSnapshot(x, own)
		return psumScatterDone(e, x, p, s)
	})
}

// startReduction brings the device's call to its slot without waiting
// (the cross-process exchange, if any, runs in the background) and
// returns the handle whose Wait waits for the slot and computes the
// device's result with done.
func (e *devEnv) startReduction(c *Ctx, cl *call, done func(s *slot) *tensor.Tensor) *Handle {
	return e.startReductionAt(c, cl, nil, done)
}

// startReductionAt is startReduction in slot at, which the device
// reserved (run.reserve), or in its next slot if at is nil.
func (e *devEnv) startReductionAt(c *Ctx, cl *call, at *slot, done func(s *slot) *tensor.Tensor) *Handle {
	cl.background = true
	r := e.run
	var s *slot
	if at == nil {
		s = r.post(e, cl)
	} else {
		s = r.postAt(e, cl, at.k)
	}
	st := &started{f: inflight{run: r, s: s, c: cl}, e: e, done: done}
	st.h = Handle{c: c, kind: cl.coll.kind, red: st}
	r.addPending(e.dev, &st.f)
	return &st.h
}

// started is a started reduction: its handle, its entry among the device's
// pending collectives and what its Wait computes, in one allocation.
type started struct {
	h    Handle
	f    inflight
	e    *devEnv
	done func(s *slot) *tensor.Tensor
}

// wait is Handle.Wait of a started reduction.
func (st *started) wait() *tensor.Tensor {
	e, r, s := st.e, st.f.run, st.f.s
	if e.run != r {
		panic(fmt.Sprintf("shard.Handle.Wait: %v was started in another shard.Map call (or its backward pass)", st.f.c))
	}
	r.dropPending(e.dev, &st.f)
	r.releaseStarted()
	r.await(e, s, time.Now())
	defer r.leave(s)
	return st.done(s)
}
