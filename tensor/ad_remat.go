package tensor

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Remat evaluates f(in...) so that its intermediate values are not kept for
// the backward pass: only the values saveable selects (and f's inputs) are
// kept, and backward recomputes the rest. This is jax.checkpoint (remat);
// package autodiff wraps it as Checkpoint with named policies.
//
// Remat runs f once, recording the ops it performs, and compiles them into
// a small program. Backward replays only the ops whose results the VJPs
// need and that were not saved. f must be deterministic. Traced tensors
// that f closes over (model parameters, say) are found while it runs and
// become inputs of the checkpoint too, so their gradients flow as usual.
//
// When the trace differentiating the checkpoint recycles its
// intermediates (Trace.RecycleIntermediates), so does the checkpoint: the
// values f computed that backward does not keep are donated once
// compiled, and those backward recomputes or saveable kept once it is
// done.
//
// saveable is asked once per recorded op; nil saves nothing. Remat supports
// first-order differentiation through the checkpoint; a second derivative
// treats saved values as constants.
func Remat(f func(in []*Tensor) []*Tensor, saveable func(NodeInfo) bool, in ...*Tensor) []*Tensor {
	out, _, _ := remat(f, saveable, in)
	return out
}

// RematCompiled returns a function that computes Remat(f, saveable,
// in...), tracing and compiling f on its first traced call only: later
// calls replay the program compiled then, without calling f, as
// jax.checkpoint's body inside lax.scan is traced once. One program then
// serves every call, where Remat keeps one per call until its backward
// pass (a loop of checkpointed segments would keep one per segment).
//
// Every call must pass inputs of the first call's number, dtypes and
// shapes (the returned function panics otherwise), and f must be a pure
// function of its inputs and of the values it closes over, which must be
// the same tensors at every call (model parameters): a replay uses those
// the first call captured, and the values f created untraced then
// (constants) again. Calls before one that any trace records (none of
// the values involved is traced) run f as Remat does.
func RematCompiled(f func(in []*Tensor) []*Tensor, saveable func(NodeInfo) bool) func(in ...*Tensor) []*Tensor {
	var (
		mu       sync.Mutex
		prog     *rematProgram
		captured []*Tensor
	)
	return func(in ...*Tensor) []*Tensor {
		mu.Lock()
		p, capt := prog, captured
		mu.Unlock()
		if p == nil {
			out, np, nc := remat(f, saveable, in)
			if np != nil {
				mu.Lock()
				if prog == nil {
					prog, captured = np, nc
				}
				mu.Unlock()
			}
			return out
		}
		if len(in) != p.nin-len(capt) {
			panic(fmt.Sprintf("tensor.RematCompiled: %d inputs; the compiled program takes %d", len(in), p.nin-len(capt)))
		}
		for i, x := range in {
			checkNil("tensor.RematCompiled", "input", x)
			if a := p.inAvals[i]; x.dtype != a.dtype || !sameShape(x.shape, a.shape) {
				panic(fmt.Sprintf("tensor.RematCompiled: input %d is %v; the compiled program takes %v", i, x, a))
			}
		}
		return applyNIn(rematOp, p, append(slices.Clone(in), capt...))
	}
}

// remat is Remat, also returning the program it compiled and the values
// f captured (nil when no trace records the checkpoint).
func remat(f func(in []*Tensor) []*Tensor, saveable func(NodeInfo) bool, in []*Tensor) ([]*Tensor, *rematProgram, []*Tensor) {
	var (
		mu        sync.Mutex
		captured  []*Tensor
		capLeaves []*Tensor
		capIdx    = map[*Tensor]int{}
	)
	var c *Trace
	c = NewCaptureTrace(func(x *Tensor) *Tensor {
		mu.Lock()
		defer mu.Unlock()
		if i, ok := capIdx[x]; ok {
			return capLeaves[i]
		}
		l := c.Leaf(StopGradient(x))
		capIdx[x] = len(captured)
		captured = append(captured, x)
		capLeaves = append(capLeaves, l)
		return l
	})
	c.recordAll = true
	leaves := make([]*Tensor, len(in))
	for i, x := range in {
		leaves[i] = c.Leaf(StopGradient(x))
	}
	outsC := f(leaves)

	// The trace that will record the checkpoint: the innermost among
	// its inputs and the values f closed over.
	var outer *Trace
	for _, x := range append(slices.Clone(in), captured...) {
		if x.node != nil && (outer == nil || x.node.trace.id > outer.id) {
			outer = x.node.trace
		}
	}
	if outer == nil {
		out := make([]*Tensor, len(outsC))
		for i, o := range outsC {
			out[i] = stripTrace(o, c)
		}
		c.releaseRecording(nil, false, false)
		return out, nil, nil
	}
	prog, state := compileRemat(c, in, leaves, capLeaves, outsC, saveable)
	all := append(slices.Clone(in), captured...)
	prog.saveable = saveable
	prog.pending = &rematResult{outs: make([]*Tensor, len(outsC)), state: state, in: all}
	keep := map[*Tensor]bool{}
	for i, o := range outsC {
		prog.pending.outs[i] = state.outHeader(stripTrace(o, c))
		keep[stripTrace(o, c)] = true
	}
	for _, v := range state.saved {
		keep[v] = true
	}
	for _, v := range prog.consts {
		keep[v] = true // f may have used one of its values untraced (StopGradient)
	}
	// A trace that recycles its intermediates (Trace.RecycleIntermediates)
	// donates those of its checkpoints too: the values f computed that
	// backward does not keep, now, and those backward recomputes or the
	// policy saved, after it.
	prog.recycle = outer.recycle
	c.releaseRecording(keep, prog.recycle, false)
	return applyNIn(rematOp, prog, all), prog, captured
}

// releaseRecording drops what the nodes recorded by c hold (compileRemat
// has copied what the program needs: saved values and constants, which
// stay held unless consts is set), and if donate is set donates every
// value the recorded ops computed that is not in keep: after the
// recording run those are dead.
func (c *Trace) releaseRecording(keep map[*Tensor]bool, donate, consts bool) {
	c.recMu.Lock()
	nodes := c.recorded
	c.recorded = nil
	c.recMu.Unlock()
	for _, n := range nodes {
		for k, x := range n.buf().rec.raw {
			if consts || n.inputs[k].n != nil {
				x.release() // a leaf or an intermediate; constants stay held
			}
		}
		for _, o := range n.buf().rec.rawOuts {
			o.release()
		}
		n.releaseResiduals(false, nil, nil)
		n.free()
	}
	if !donate {
		for _, n := range nodes {
			n.buf().rec = nil
		}
		return
	}
	for _, n := range nodes {
		for _, o := range n.buf().rec.rawOuts {
			if !keep[o] && o.node == nil {
				keep[o] = true // once
				Donate(o)
			}
		}
		n.buf().rec = nil
	}
}

// stripTrace returns the value of x without the node of trace c.
func stripTrace(x *Tensor, c *Trace) *Tensor {
	if x.node != nil && x.node.trace == c {
		return x.primal
	}
	return x
}

type slotKind uint8

const (
	slotInput slotKind = iota
	slotNode
	slotConst
)

type rslot struct {
	kind slotKind
	i    int // input, node or const index
	out  int // output index for slotNode
}

type rnode struct {
	op       *Op
	params   any
	info     NodeInfo
	ins      []rslot
	inAvals  []*Tensor
	outAvals []*Tensor
	// recompute: backward runs this node again; save: its outputs (and
	// state) are kept from the forward pass.
	recompute, save bool
}

type rematProgram struct {
	nin      int
	inAvals  []*Tensor
	nodes    []rnode
	consts   []*Tensor
	outs     []rslot
	outAvals []*Tensor
	// save selects the program inputs backward reads.
	save SaveMask
	// saveable is the policy the program was compiled with (a batching
	// rule compiles the batched program with it).
	saveable func(NodeInfo) bool
	// pending carries the results of the recording run to the first
	// ImplN call; later calls (replays inside an outer remat) recompute.
	pending *rematResult
	mu      sync.Mutex
	// recycle: backward donates the values it recomputed once it is done
	// (the trace differentiating the checkpoint recycles intermediates).
	recycle bool
}

type rematResult struct {
	outs  []*Tensor
	state *rematState
	// in are the operands the recording ran on: the results are those of
	// a call on them, or on their primal values under the traces that
	// record the checkpoint, not on values a Vmap or JVP level unwrapped.
	in []*Tensor
}

// matches reports whether the recording run computed the results of a
// call on in: each operand is the recorded one or one of its primals.
func (r *rematResult) matches(in []*Tensor) bool {
	if len(in) != len(r.in) {
		return false
	}
	for i, x := range in {
		t := r.in[i]
		for t != nil && t != x {
			t = t.primal
		}
		if t == nil {
			return false
		}
	}
	return true
}

// rematState is what a checkpoint keeps for backward beyond its inputs.
type rematState struct {
	prog   *rematProgram
	saved  map[rslot]*Tensor
	states map[int]any // op states of saved ImplN nodes
}

func compileRemat(c *Trace, in, leaves, capLeaves, outsC []*Tensor, saveable func(NodeInfo) bool) (*rematProgram, *rematState) {
	p := &rematProgram{nin: len(in) + len(capLeaves)}
	inputOf := map[*node]int{}
	for i, l := range leaves {
		inputOf[l.node] = i
	}
	for j, l := range capLeaves {
		inputOf[l.node] = len(in) + j
	}
	p.inAvals = make([]*Tensor, p.nin)
	for i, l := range leaves {
		p.inAvals[i] = aval(l)
	}
	for j, l := range capLeaves {
		p.inAvals[len(in)+j] = aval(l)
	}
	// Collect the recorded nodes reachable from the outputs.
	seen := map[*node]bool{}
	var nodes []*node
	var stack []*node
	for _, o := range outsC {
		if o.node != nil && o.node.trace == c && !seen[o.node] {
			seen[o.node] = true
			stack = append(stack, o.node)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.op != leafOp {
			nodes = append(nodes, n)
		}
		for _, e := range n.inputs {
			if e.n != nil && !seen[e.n] {
				seen[e.n] = true
				stack = append(stack, e.n)
			}
		}
	}
	slices.SortFunc(nodes, func(a, b *node) int { return int(a.seq) - int(b.seq) })
	index := map[*node]int{}
	for i, n := range nodes {
		index[n] = i
	}
	constIdx := map[*Tensor]int{}
	slotOf := func(e edge, raw *Tensor) rslot {
		if e.n != nil {
			if i, ok := inputOf[e.n]; ok {
				return rslot{kind: slotInput, i: i}
			}
			return rslot{kind: slotNode, i: index[e.n], out: e.out}
		}
		if i, ok := constIdx[raw]; ok {
			return rslot{kind: slotConst, i: i}
		}
		constIdx[raw] = len(p.consts)
		p.consts = append(p.consts, raw)
		return rslot{kind: slotConst, i: len(p.consts) - 1}
	}
	p.nodes = make([]rnode, len(nodes))
	for i, n := range nodes {
		// Fresh placeholders: a node's own (n.outAval) may point into
		// the node, and a program holding one would keep the node, and
		// through it every value the recording computed, alive until
		// the checkpoint's backward: O(T) memory for a scan of
		// checkpointed segments instead of O(√T).
		rn := rnode{op: n.op, params: n.params, info: n.info(), outAvals: make([]*Tensor, int(n.nout))}
		for k := range int(n.nout) {
			rn.outAvals[k] = aval(n.buf().rec.rawOuts[k])
		}
		rn.ins = make([]rslot, len(n.inputs))
		rn.inAvals = make([]*Tensor, len(n.inputs))
		for k, e := range n.inputs {
			rn.ins[k] = slotOf(e, n.buf().rec.raw[k])
			rn.inAvals[k] = aval(n.buf().rec.raw[k])
		}
		p.nodes[i] = rn
	}
	p.outs = make([]rslot, len(outsC))
	p.outAvals = make([]*Tensor, len(outsC))
	for i, o := range outsC {
		if o.node != nil && o.node.trace == c {
			p.outs[i] = slotOf(edge{o.node, int(o.outIdx)}, nil)
		} else {
			p.outs[i] = slotOf(edge{}, o)
		}
		p.outAvals[i] = aval(o)
	}
	p.plan(saveable)
	st := &rematState{prog: p, saved: map[rslot]*Tensor{}, states: map[int]any{}}
	for i, n := range nodes {
		if !p.nodes[i].save {
			continue
		}
		for k, o := range n.buf().rec.rawOuts {
			st.saved[rslot{kind: slotNode, i: i, out: k}] = o
		}
		if n.state != nil {
			st.states[i] = n.state
		}
	}
	return p, st
}

// plan decides which node results backward needs, and for each whether it
// is saved (policy allows) or recomputed (its inputs are then needed).
func (p *rematProgram) plan(saveable func(NodeInfo) bool) {
	need := map[rslot]bool{}
	needNode := make([]bool, len(p.nodes)) // state or outputs needed
	for i, n := range p.nodes {
		if !n.op.differentiable() {
			continue
		}
		mask := n.op.saveMask(n.params)
		for k, s := range n.ins {
			if mask.input(k) {
				need[s] = true
			}
		}
		if mask&SaveOutput != 0 {
			for k := range n.outAvals {
				need[rslot{kind: slotNode, i: i, out: k}] = true
			}
		}
		if n.op.VJPN != nil && n.op.ImplN != nil {
			needNode[i] = true // its state
		}
	}
	for i := len(p.nodes) - 1; i >= 0; i-- {
		n := &p.nodes[i]
		needed := needNode[i]
		for k := range n.outAvals {
			if need[rslot{kind: slotNode, i: i, out: k}] {
				needed = true
			}
		}
		if !needed {
			continue
		}
		// A pvary is a mark on a shared view of its operand: saving it
		// would keep the operand (an all-gathered weight, say) alive
		// through the backward pass whatever the policy says of the
		// operand, and recomputing it costs nothing.
		if saveable != nil && saveable(n.info) && n.op != pvaryOp {
			n.save = true
			continue
		}
		n.recompute = true
		for _, s := range n.ins {
			need[s] = true
		}
	}
	for s := range need {
		switch {
		case s.kind != slotInput:
		case s.i < maxMaskInput:
			p.save |= SaveInputs(s.i)
		default:
			p.save |= SaveAllInputs
		}
	}
}

var rematOp *Op

func init() {
	rematOp = &Op{
		Name: "checkpoint",
		ImplN: func(in []*Tensor, params any) ([]*Tensor, any) {
			p := params.(*rematProgram)
			p.mu.Lock()
			r := p.pending
			p.pending = nil
			p.mu.Unlock()
			if r != nil && r.matches(in) {
				return r.outs, r.state
			}
			return p.forward(in)
		},
		VJPN: func(gs, in, _ []*Tensor, params, state any) []*Tensor {
			return params.(*rematProgram).backward(gs, in, state.(*rematState))
		},
		SaveFor: func(params any) SaveMask { return params.(*rematProgram).save },
		// The tangents of the program's results: the program replayed on
		// primal-and-tangent values.
		JVP: func(prim, tan, outs []*Tensor, params any) []*Tensor {
			p := params.(*rematProgram)
			jt := NewJVPTrace()
			args := make([]*Tensor, len(prim))
			for i, x := range prim {
				args[i] = jt.Dual(x, tan[i])
			}
			res, _ := p.forward(args)
			ts := make([]*Tensor, len(res))
			for i, r := range res {
				if outs[i].dtype.IsFloat() {
					ts[i] = jt.Tangent(r)
				}
			}
			return ts
		},
		// A checkpoint of the program replayed on the batch (the batching
		// of the checkpoint's program, under the same policy).
		Batch: func(in []*Tensor, batched []bool, params any) []*Tensor {
			p := params.(*rematProgram)
			n := batchSize(in, batched)
			return Remat(func(leaves []*Tensor) []*Tensor {
				bt := NewBatchTrace(n)
				args := make([]*Tensor, len(leaves))
				for i, l := range leaves {
					args[i] = l
					if batched[i] {
						args[i] = bt.wrap(l)
					}
				}
				outs, _ := p.forward(args)
				for i, o := range outs {
					outs[i] = bt.Unbatched(o, 0)
				}
				return outs
			}, p.saveable, in...)
		},
		Traits: Traits{
			// The program's ops meet batched and primal-and-tangent values
			// themselves when a trace records the checkpoint inside a Vmap
			// or a JVP.
			Through: ThroughVmap | ThroughJVP,
			// The program replays ops, which compute on placed operands
			// themselves (through the placer), and vary over shard.Map
			// axes as their operands do.
			Placement: Distributed | HandlesVary,
			// The cotangents backward returns are its caller's (which the
			// pass's ownership rules check for), or made inside from
			// them: sums and VJP results, or views of those, all dead
			// inside.
			Reuse: FreshVJP,
		},
	}
}

// value returns the value of a slot from the inputs, constants and vals.
func (p *rematProgram) value(s rslot, in []*Tensor, vals map[rslot]*Tensor) *Tensor {
	switch s.kind {
	case slotInput:
		return in[s.i]
	case slotConst:
		return p.consts[s.i]
	}
	return vals[s]
}

// forward runs the whole program (a replay inside an outer remat).
func (p *rematProgram) forward(in []*Tensor) ([]*Tensor, any) {
	vals := map[rslot]*Tensor{}
	st := &rematState{prog: p, saved: map[rslot]*Tensor{}, states: map[int]any{}}
	for i, n := range p.nodes {
		args := make([]*Tensor, len(n.ins))
		for k, s := range n.ins {
			args[k] = p.value(s, in, vals)
		}
		outs, state := applyCore(n.op, n.params, args)
		for k, o := range outs {
			s := rslot{kind: slotNode, i: i, out: k}
			vals[s] = o
			if n.save {
				st.saved[s] = o
			}
		}
		if n.save && state != nil {
			st.states[i] = state
		}
	}
	outs := make([]*Tensor, len(p.outs))
	for i, s := range p.outs {
		outs[i] = st.outHeader(p.value(s, in, vals))
	}
	return outs, st
}

// outHeader returns v, a result of the checkpoint, as the caller gets it:
// a second header over its storage if the checkpoint saved v for its
// backward, so that the caller (a trace recycling its intermediates) and
// the checkpoint's backward each donate their own header once done with
// it, and the storage goes to the allocator cache with the later one.
func (st *rematState) outHeader(v *Tensor) *Tensor {
	for _, s := range st.saved {
		if s == v {
			return v.shallow()
		}
	}
	return v
}

// rematDrops counts the cotangents checkpoints' backward passes donated
// (a figure for tests).
var rematDrops atomic.Int64

// backward is the checkpoint's VJP: it recomputes what the program's VJPs
// need and was not saved, runs those VJPs in reverse order, and, when the
// differentiating trace recycles its intermediates, donates the values it
// recomputed.
func (p *rematProgram) backward(gs, in []*Tensor, st *rematState) []*Tensor {
	// The maps live on this function's stack: the phases get them, never
	// keep them.
	b := rematBackward{p: p, in: in, vals: map[rslot]*Tensor{}, states: map[int]any{},
		cots: map[rslot]*Tensor{}, fresh: map[*Tensor]bool{}, seen: map[*Tensor]bool{}}
	recomputed := p.recompute(in, st, b.vals, b.states)
	b.start(gs)
	for i, s := range p.outs {
		b.acc(s, gs[i], p.outAvals[i], "the checkpoint's caller")
	}
	for i := len(p.nodes) - 1; i >= 0; i-- {
		b.visit(i)
	}
	res := make([]*Tensor, p.nin)
	for i := range res {
		res[i] = b.cots[rslot{kind: slotInput, i: i}]
	}
	if p.recycle && b.recycle {
		p.donateRecomputed(recomputed, in, gs, res, st, b.cots)
	}
	return res
}

// recompute fills vals with the values backward reads (the saved ones and
// those it recomputes now) and states with the op states of the nodes,
// and returns the recomputed values.
func (p *rematProgram) recompute(in []*Tensor, st *rematState, vals map[rslot]*Tensor, states map[int]any) (recomputed []*Tensor) {
	for s, v := range st.saved {
		vals[s] = v
	}
	for i, s := range st.states {
		states[i] = s
	}
	for i, n := range p.nodes {
		if !n.recompute {
			continue
		}
		args := make([]*Tensor, len(n.ins))
		for k, s := range n.ins {
			args[k] = p.value(s, in, vals)
			if args[k] == nil {
				panic(fmt.Sprintf("tensor: remat: recomputing %q needs a value that was neither saved nor recomputed", n.op.Name))
			}
		}
		outs, state := applyCore(n.op, n.params, args)
		for k, o := range outs {
			vals[rslot{kind: slotNode, i: i, out: k}] = o
			recomputed = append(recomputed, o)
		}
		if state != nil {
			states[i] = state
		}
	}
	return recomputed
}

// rematBackward is the backward pass through a checkpoint's program.
//
// Cotangents made inside it (fresh results of its VJPs and sums) die once
// consumed: they are donated (tensor.Donate) when the pass runs untraced,
// so that the next step's products reuse their storage. A value is fresh
// only if it is none of the values the VJPs were given (the caller's
// cotangents, the program's inputs, saved and recomputed values: seen).
type rematBackward struct {
	p      *rematProgram
	in     []*Tensor
	vals   map[rslot]*Tensor
	states map[int]any
	cots   map[rslot]*Tensor
	fresh  map[*Tensor]bool
	seen   map[*Tensor]bool
	// recycle: the pass runs untraced and may donate what dies in it.
	recycle bool
}

// start notes the values the VJPs are given, and whether the pass may
// recycle, for the caller's cotangents gs.
func (b *rematBackward) start(gs []*Tensor) {
	for _, g := range gs {
		b.seen[g] = true
	}
	for _, x := range b.in {
		b.seen[x] = true
	}
	for _, v := range b.vals {
		b.seen[v] = true
	}
	b.recycle = cotangentReuse
	for _, g := range gs {
		if g != nil && g.IsTraced() {
			b.recycle = false // gradients of gradients: an outer trace may keep them
		}
	}
}

// drop donates g if the pass made it and it is dead.
func (b *rematBackward) drop(g *Tensor) {
	if b.recycle && b.fresh[g] && !g.IsTraced() {
		delete(b.fresh, g)
		Donate(g)
		rematDrops.Add(1)
	}
}

// acc accumulates cotangent g, produced by who, into slot s (whose value
// looks like want).
func (b *rematBackward) acc(s rslot, g *Tensor, want *Tensor, who string) {
	if g == nil || s.kind == slotConst {
		return
	}
	if !sameShape(g.shape, want.shape) || g.dtype != want.dtype {
		panic(fmt.Sprintf("tensor.Backward: %s produced cotangent %v for %v", who, g, want))
	}
	if prev := b.cots[s]; prev != nil {
		sum := Add(prev, g)
		if sum != prev && sum != g {
			b.drop(prev)
			b.drop(g)
			if !b.seen[sum] {
				b.fresh[sum] = true
			}
		}
		g = sum
	}
	b.cots[s] = g
}

// visit runs the VJP of the program's node i on the cotangents its outputs
// received and accumulates the results into its inputs' slots.
func (b *rematBackward) visit(i int) {
	p, n := b.p, b.p.nodes[i]
	if !n.op.differentiable() {
		return
	}
	ng := make([]*Tensor, len(n.outAvals))
	hasCot := false
	for k := range n.outAvals {
		s := rslot{kind: slotNode, i: i, out: k}
		ng[k] = b.cots[s]
		delete(b.cots, s)
		if ng[k] != nil {
			hasCot = true
		}
	}
	if !hasCot {
		return
	}
	mask := n.op.saveMask(n.params)
	args := make([]*Tensor, len(n.ins))
	for k, s := range n.ins {
		if mask.input(k) {
			args[k] = p.value(s, b.in, b.vals)
		} else {
			args[k] = n.inAvals[k]
		}
	}
	outs := make([]*Tensor, len(n.outAvals))
	for k := range outs {
		if mask&SaveOutput != 0 {
			outs[k] = b.vals[rslot{kind: slotNode, i: i, out: k}]
		} else {
			outs[k] = n.outAvals[k]
		}
	}
	var need uint64
	for k, s := range n.ins {
		if s.kind != slotConst {
			need |= needBit(k)
		}
	}
	res := callVJP(n.op, n.params, b.states[i], ng, args, outs, need)
	for j, r := range res {
		if r == nil {
			continue
		}
		if slices.Contains(res[:j], r) {
			delete(b.fresh, r) // one value for two inputs: two holders
			continue
		}
		if !b.seen[r] && !slices.Contains(ng, r) && !slices.Contains(args, r) && !slices.Contains(outs, r) {
			b.fresh[r] = true
		}
	}
	for _, g := range ng {
		// Consumed by this VJP. A shard.Map block only after a VJP that
		// computes on the device alone or is synchronous (dropConsumed's
		// rule: a collective started asynchronously reads it later).
		if g != nil && !slices.Contains(res, g) && doneWith(n.op, g) {
			b.drop(g)
		}
	}
	for k, s := range n.ins {
		b.acc(s, res[k], n.inAvals[k], "VJP of "+n.op.Name)
	}
}

// donateRecomputed donates the values backward recomputed and those the
// forward pass saved for it, which are dead now, unless one of them is
// also an input or a constant (an op may return its operand) or went on
// as a cotangent. A saved result of the checkpoint is the caller's under
// a header of its own (outHeader).
func (p *rematProgram) donateRecomputed(recomputed, in, gs, res []*Tensor, st *rematState, cots map[rslot]*Tensor) {
	spare := map[*Tensor]bool{}
	for _, list := range [][]*Tensor{in, p.consts, gs, res} {
		for _, x := range list {
			spare[x] = true
		}
	}
	for _, g := range cots {
		spare[g] = true
	}
	for _, v := range recomputed {
		if !spare[v] && v.node == nil {
			spare[v] = true
			Donate(v)
		}
	}
	for _, v := range st.saved {
		if !spare[v] && v.node == nil {
			spare[v] = true
			Donate(v)
		}
	}
}

// Residuals reports the values a checkpoint keeps beyond its inputs.
func (st *rematState) Residuals() []Residual {
	var out []Residual
	for s, v := range st.saved {
		out = append(out, Residual{Tensor: v, Label: st.prog.nodes[s.i].info.Label, Device: -1})
	}
	return out
}
