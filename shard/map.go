package shard

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Option configures Map.
type Option func(*mapConfig)

type mapConfig struct {
	comm *Comm
}

// WithComm makes Map add the bytes each device sends in collectives —
// in fn and in the backward pass of the call — to c.
func WithComm(c *Comm) Option { return func(m *mapConfig) { m.comm = c } }

// Map returns a function that runs fn once per device of mesh, all devices
// concurrently, each on its own block of every input: jax.shard_map.
//
// In and Out are pytrees (any Go values; see package pytree). inSpecs gives
// each tensor leaf of the input its partition spec and outSpecs each leaf
// of the output: the input is split accordingly (already-sharded inputs
// with that sharding are used in place), and the blocks fn returns are
// assembled into global sharded tensors. outSpecs is asked for the spec of
// each output leaf with device 0's block, so a SpecTree sees per-device
// shapes there. Non-tensor parts of In reach fn as they are; those of Out
// come from device 0.
//
// Inside fn, blocks are ordinary tensors marked with the mesh axes they vary
// over, and the Ctx offers the collectives. An output that varies over a
// mesh axis its out spec does not shard it over is an error, as with JAX's
// check_vma: reduce it first (Psum, Pmean, AllGatherInvariant) or shard it.
// The blocks fn returns are handed over to the outputs: once the call
// returns (outside autodiff), the tensors fn returned are donated
// (tensor.Donate) so that their storage can come back to the allocator
// cache with the outputs', and reading one that fn kept aside panics.
// Read the outputs instead (shard.Blocks gives each device's block). The
// blocks fn receives are likewise valid only during the call, as JAX's
// tracers are: Map donates them when it returns, and a tensor computed
// from them stays valid.
//
// The returned function is differentiable: autodiff can take gradients of
// a function that calls it, and fn can take gradients itself. If fn panics
// on any device, or the devices issue collectives inconsistently, every
// device is released and the call panics with a *DeviceError naming the
// device and the cause; MapErr returns that error instead. No goroutine
// outlives the call.
func Map[In, Out any](mesh *Mesh, inSpecs, outSpecs SpecTree, fn func(c *Ctx, in In) Out, opts ...Option) func(In) Out {
	checkMapArgs("shard.Map", mesh, fn == nil)
	f := MapErr(mesh, inSpecs, outSpecs, fn, opts...)
	return func(in In) Out {
		out, err := f(in)
		if err != nil {
			panic(err)
		}
		return out
	}
}

// checkMapArgs panics, naming op, on a nil mesh or function: they would
// otherwise fail in a nil dereference when the mapped function is called.
func checkMapArgs(op string, mesh *Mesh, nilFn bool) {
	switch {
	case mesh == nil:
		panic(op + ": mesh is nil")
	case nilFn:
		panic(op + ": fn is nil")
	}
}

// MapErr is Map returning device failures as an error (a *DeviceError)
// instead of panicking. Programmer errors outside fn (specs that do not fit
// the inputs, say) still panic.
//
// Only failures while the returned function runs are returned. When it is
// differentiated from outside (autodiff.Grad of a function that calls it),
// its backward pass runs later, inside the gradient call, which has no
// error result: a device failure there (fn's backward panicking on one
// device, collectives issued inconsistently) releases every device and
// panics with the *DeviceError, exactly as Map does. To have it as an
// error, recover around the gradient call and test the value with
// errors.As; or take the gradient inside fn, where the backward pass is
// part of the call and MapErr returns its failures like any other.
func MapErr[In, Out any](mesh *Mesh, inSpecs, outSpecs SpecTree, fn func(c *Ctx, in In) Out, opts ...Option) func(In) (Out, error) {
	checkMapArgs("shard.MapErr", mesh, fn == nil)
	var cfg mapConfig
	for _, o := range opts {
		o(&cfg)
	}
	return func(in In) (out Out, err error) {
		paths, _ := pytree.LeavesWithPath(in)
		leaves, st := pytree.Flatten(in)
		p := &mapParams{mesh: mesh, comm: cfg.comm}
		p.inSpecs = specsOf("shard.Map: in spec", mesh, inSpecs, paths, leaves)
		p.inPaths = paths
		outStructs := make([]pytree.Structure, mesh.Size())
		var outPaths []pytree.Path
		var mu sync.Mutex
		p.fn = func(c *Ctx, blocks []*tensor.Tensor) []*tensor.Tensor {
			o := fn(c, pytree.Unflatten[In](st, blocks))
			ls, os := pytree.Flatten(o)
			outStructs[c.env.dev] = os
			if c.env.dev == mesh.firstLocal() {
				mu.Lock()
				outPaths = pytree.Paths(o)
				mu.Unlock()
			}
			return ls
		}
		p.outSpecs = func(blocks []*tensor.Tensor) []Spec {
			f := mesh.firstLocal()
			for d, s := range outStructs {
				if mesh.isLocal(d) && !s.Equal(outStructs[f]) {
					panic(fmt.Sprintf("shard.Map: device %d returned %v but device %d returned %v", mesh.devices[d].ID(), s, mesh.devices[f].ID(), outStructs[f]))
				}
			}
			p.outPaths = outPaths
			ss := make([]Spec, len(blocks))
			for i, b := range blocks {
				s, err := outSpecs.SpecFor(outPaths[i], b)
				if err != nil {
					panic(fmt.Sprintf("shard.Map: out spec: %v", err))
				}
				ss[i] = s
			}
			return ss
		}
		defer func() {
			if r := recover(); r != nil {
				var de *DeviceError
				if e, ok := r.(error); ok && errors.As(e, &de) {
					err = de
					return
				}
				panic(r)
			}
		}()
		outs := tensor.ApplyN(mapOp, p, leaves...)
		return pytree.Unflatten[Out](outStructs[mesh.firstLocal()], outs), nil
	}
}

// mapParams is the static part of one Map call.
type mapParams struct {
	mesh    *Mesh
	comm    *Comm
	inSpecs []Spec
	// inPaths and outPaths name the leaves in messages (inName, outName);
	// a derived call's leaves repeat them.
	inPaths  []pytree.Path
	outPaths []pytree.Path
	fn       func(c *Ctx, blocks []*tensor.Tensor) []*tensor.Tensor
	outSpecs func(blocks []*tensor.Tensor) []Spec
	// outSh is set by the forward pass.
	outSh []Sharding
	// held is, per device, the storage of sharded input blocks.
	held []map[unsafe.Pointer]bool
}

// inName names input leaf i in messages (the leaves of a derived call
// repeat the call's).
func (p *mapParams) inName(i int) string { return leafName(p.inPaths[i%len(p.inPaths)]) }

// outName names output leaf j in messages, as inName does.
func (p *mapParams) outName(j int) string { return leafName(p.outPaths[j%len(p.outPaths)]) }

// mapState is what the backward pass of a Map call needs: each device's
// graph.
type mapState struct {
	envs   []*devEnv
	traces []*tensor.Trace
	leaves [][]*tensor.Tensor // per device: traced input blocks
	outs   [][]*tensor.Tensor // per device: traced output blocks
}

var mapOp *tensor.Op

func init() {
	mapOp = &tensor.Op{
		Name:   "shard_map",
		Traits: tensor.Traits{Placement: tensor.Distributed},
		ImplN: func(in []*tensor.Tensor, p any) ([]*tensor.Tensor, any) {
			return p.(*mapParams).forward(in, false)
		},
		ImplVJP: func(in []*tensor.Tensor, p any) ([]*tensor.Tensor, any) {
			return p.(*mapParams).forward(in, true)
		},
		VJPN: func(gs, in, _ []*tensor.Tensor, p, st any) []*tensor.Tensor {
			return p.(*mapParams).backward(gs, in, st.(*mapState))
		},
		// Forward mode through a Map is a Map of forward mode: every
		// device computes its blocks' tangents beside their values.
		JVP: func(prim, tan, outs []*tensor.Tensor, p any) []*tensor.Tensor {
			return p.(*mapParams).jvp(prim, tan, len(outs))
		},
		// A Map of a batch is a Map of Vmap: every device maps its blocks,
		// which hold the whole batch (a replicated dimension in front).
		Batch: func(in []*tensor.Tensor, batched []bool, p any) []*tensor.Tensor {
			return p.(*mapParams).batch(in, batched)
		},
	}
}

// derived returns a Map call like p over twice the operands or the
// results (forward mode) or with a batch dimension in front of every spec
// (Vmap), running fn on each device's blocks; outs maps fn's results to
// the call's.
func (p *mapParams) derived(inSpecs []Spec, fn func(c *Ctx, blocks []*tensor.Tensor) []*tensor.Tensor, outSpecs func(s []Spec) []Spec, nout func(int) int) *mapParams {
	q := &mapParams{mesh: p.mesh, comm: p.comm, inSpecs: inSpecs, fn: fn}
	q.inPaths = p.inPaths
	q.outSpecs = func(blocks []*tensor.Tensor) []Spec {
		ss := outSpecs(p.outSpecs(blocks[:nout(len(blocks))]))
		q.outPaths = p.outPaths
		return ss
	}
	return q
}

// jvp returns the tangents of the nout results of the Map call p at prim
// along tan (nil: zero): one Map of prim and tan whose devices compute
// their results' tangents in forward mode.
func (p *mapParams) jvp(prim, tan []*tensor.Tensor, nout int) []*tensor.Tensor {
	k := len(prim)
	in := append(slices.Clone(prim), make([]*tensor.Tensor, k)...)
	for i, x := range prim {
		in[k+i] = x // an integer operand's tangent: unused
		if tan[i] != nil {
			in[k+i] = tan[i]
		} else if x.DType().IsFloat() {
			in[k+i] = tensor.ZerosLike(x)
		}
	}
	q := p.derived(append(slices.Clone(p.inSpecs), p.inSpecs...), func(c *Ctx, blocks []*tensor.Tensor) []*tensor.Tensor {
		jt := tensor.NewJVPTrace()
		duals := make([]*tensor.Tensor, k)
		for i := range k {
			duals[i] = jt.Dual(blocks[i], blocks[k+i])
		}
		ys := p.fn(c, duals)
		out := make([]*tensor.Tensor, 2*len(ys))
		for j, y := range ys {
			out[j] = jt.Primal(y)
			if t := jt.Tangent(y); t != nil {
				out[len(ys)+j] = t
			} else {
				out[len(ys)+j] = out[j] // an integer result: no tangent
			}
		}
		return out
	}, func(s []Spec) []Spec { return append(slices.Clone(s), s...) }, func(n int) int { return n / 2 })
	return tensor.ApplyN(mapOp, q, in...)[nout:]
}

// batch is the batching rule of a Map call: the operands, given the batch
// first, are split as before with the batch dimension replicated, and
// each device maps fn over its blocks' batch.
func (p *mapParams) batch(in []*tensor.Tensor, batched []bool) []*tensor.Tensor {
	n := -1
	for i, b := range batched {
		if b {
			n = in[i].Dim(0)
			break
		}
	}
	xs := make([]*tensor.Tensor, len(in))
	specs := make([]Spec, len(in))
	for i, x := range in {
		xs[i] = x
		if !batched[i] {
			xs[i] = tensor.BroadcastTo(tensor.ExpandDims(x, 0), append([]int{n}, x.Shape()...)...)
		}
		specs[i] = append(Spec{nil}, p.inSpecs[i]...)
	}
	q := p.derived(specs, func(c *Ctx, blocks []*tensor.Tensor) []*tensor.Tensor {
		bt := tensor.NewBatchTrace(n)
		vals := make([]*tensor.Tensor, len(blocks))
		for i, b := range blocks {
			vals[i] = bt.Batched(b, 0)
		}
		ys := p.fn(c, vals)
		for j, y := range ys {
			ys[j] = bt.Unbatched(y, 0)
		}
		return ys
	}, func(s []Spec) []Spec {
		out := make([]Spec, len(s))
		for i, sp := range s {
			out[i] = append(Spec{nil}, sp...)
		}
		return out
	}, func(n int) int { return n })
	return tensor.ApplyN(mapOp, q, xs...)
}

func specMask(m *Mesh, s Spec) uint64 {
	var mask uint64
	for _, d := range s {
		for _, a := range d {
			mask |= 1 << uint(m.axis("shard.Map", a))
		}
	}
	return mask
}

func (p *mapParams) forward(in []*tensor.Tensor, diff bool) ([]*tensor.Tensor, any) {
	m := p.mesh
	n := m.Size()
	if m.firstLocal() < 0 {
		panic(fmt.Sprintf("shard.Map: process %d has no device of %v; a Map runs on the processes of its mesh", dist.rank, m))
	}
	envs := newEnvs(m)
	// The blocks of every input (their layout's own where it is already
	// in's), which each device wraps in headers of its own at its start
	// (deviceArgs): 8 devices' headers over a model's leaves made
	// serially here kept the other cores idle.
	blocks := make([][]*tensor.Tensor, len(in))
	same := make([]bool, len(in)) // in[i] is laid out by its in spec already
	masks := make([]uint64, len(in))
	for i, x := range in {
		if x.Local() != nil {
			panic(fmt.Sprintf("shard.Map: input %s %v is a block of another Map call; Map calls do not nest", p.inName(i), x))
		}
		s := NewSharding(m, p.inSpecs[i])
		blocks[i] = mapBlocks(x, s)
		cur, ok := ShardingOf(x)
		same[i] = ok && cur.Equal(s)
		masks[i] = specMask(m, p.inSpecs[i])
	}
	// Storage of input blocks that devices already hold (and are charged
	// for): an output returning such a block must not be charged again.
	p.held = make([]map[unsafe.Pointer]bool, n)
	var st *mapState
	if diff {
		st = &mapState{envs: envs, traces: make([]*tensor.Trace, n), leaves: make([][]*tensor.Tensor, n), outs: make([][]*tensor.Tensor, n)}
	}
	// views are, by device, the headers over input blocks made for this
	// call: fn's arguments, valid during the call only (donated when it
	// returns outside autodiff).
	views := make([][]*tensor.Tensor, n)
	outs := make([][]*tensor.Tensor, n)
	r := newRun(m, p.comm, "shard.Map")
	if err := r.exec(envs, func(d int) {
		var args []*tensor.Tensor
		args, views[d] = p.deviceArgs(envs[d], in, blocks, same, masks, st)
		outs[d] = p.fn(&Ctx{env: envs[d]}, args)
	}); err != nil {
		panic(err)
	}
	if st != nil {
		st.outs = outs
	}
	specs := p.outSpecs(outs[m.firstLocal()])
	p.outSh = make([]Sharding, len(specs))
	result := make([]*tensor.Tensor, len(specs))
	for j, s := range specs {
		blocks := make([]*tensor.Tensor, n)
		for d := range n {
			if !m.isLocal(d) {
				continue // another process's device
			}
			o := outs[d][j]
			if st != nil {
				o = st.traces[d].Primal(o)
			}
			if o.IsTraced() {
				// Only values fn closes over can carry another trace.
				panic(fmt.Sprintf("shard.Map: output %s %v depends on a traced tensor that fn closes over; pass it in through the input tree so its gradient flows", p.outName(j), o))
			}
			blocks[d] = o
		}
		p.outSh[j] = NewSharding(m, s)
		result[j] = keepAxes(p.assembleOutput(j, blocks, p.outSh[j]), blocks[m.firstLocal()])
	}
	if st == nil {
		donateDeviceOutputs(envs, outs)
		for _, vs := range views {
			tensor.Donate(vs...)
		}
		return result, nil
	}
	return result, st
}

// deviceArgs makes device e's arguments of a forward call on its
// goroutine: a header marked for the device over its block of each input
// (blocks[i][e.dev], with in[i]'s logical axes), traced leaves of st's
// trace for the device when the call is differentiated. It records the
// storage of the blocks the device already held (p.held) and returns the
// headers made (views) with the arguments.
func (p *mapParams) deviceArgs(e *devEnv, in []*tensor.Tensor, blocks [][]*tensor.Tensor, same []bool, masks []uint64, st *mapState) (args, views []*tensor.Tensor) {
	d := e.dev
	held := map[unsafe.Pointer]bool{}
	args = make([]*tensor.Tensor, len(in))
	views = make([]*tensor.Tensor, 0, 2*len(in))
	for i, x := range in {
		b := blocks[i][d]
		if same[i] {
			held[storageOf(b)] = true
		}
		mb := e.marked(b, masks[i])
		args[i] = keepAxes(mb, x)
		if mb != args[i] {
			views = append(views, mb)
		}
		views = append(views, args[i])
	}
	p.held[d] = held
	if st == nil {
		return args, views
	}
	st.traces[d] = tensor.NewCaptureTrace(func(x *tensor.Tensor) *tensor.Tensor {
		panic(fmt.Sprintf("shard.Map: fn uses the traced tensor %v that is not one of its inputs; pass it in through the input tree", x))
	})
	st.leaves[d] = make([]*tensor.Tensor, len(in))
	for i, b := range args {
		if b.DType().IsFloat() {
			b = st.traces[d].Leaf(b)
		}
		st.leaves[d][i] = b
	}
	return st.leaves[d], views
}

// mapBlocks is makeBlocks for Map's inputs and output cotangents, which
// Map wraps in headers of its own (marked for a device) and never hands
// out: the blocks of a tensor already laid out by s are taken as they are,
// without marking its layout shared, so that donating that tensor later
// (a trainer's previous parameters) still recycles its blocks once Map
// has donated its own headers.
func mapBlocks(x *tensor.Tensor, s Sharding) []*tensor.Tensor {
	if src, _ := x.Layout().(*layout); src != nil && len(src.partial) == 0 && src.sharding.Equal(s) {
		return slices.Clone(src.blocks)
	}
	return makeBlocks(x, s, false)
}

// donateDeviceOutputs donates the headers fn returned on each device once
// the outputs hold blocks of their own (assembleOutput's unmarked copies):
// a device's result, such as a psum's, is marked for its device, and the
// marked header would otherwise keep the storage from the allocator cache
// (tensor.Donate) after the global output is donated. Only headers marked
// for this call's devices are donated (never a tensor fn closes over), and
// only when no backward pass keeps the call's values.
func donateDeviceOutputs(envs []*devEnv, outs [][]*tensor.Tensor) {
	for d, os := range outs {
		for _, o := range os {
			if o == nil || o.IsTraced() {
				continue
			}
			if l := o.Local(); l != nil && l.Env == envs[d] {
				tensor.Donate(o)
			}
		}
	}
}

// assembleOutput checks the blocks of output j against its sharding and
// builds the global tensor.
func (p *mapParams) assembleOutput(j int, blocks []*tensor.Tensor, s Sharding) *tensor.Tensor {
	m := p.mesh
	f := m.firstLocal()
	b0 := blocks[f]
	if len(s.spec) > b0.Rank() {
		panic(fmt.Sprintf("shard.Map: output %s %v: out spec %v has more entries than dimensions", p.outName(j), b0, s.spec))
	}
	sm := specMask(m, s.spec)
	for d, b := range blocks {
		if b == nil {
			continue // another process's device
		}
		if b.DType() != b0.DType() || !slices.Equal(b.BorrowShape(), b0.BorrowShape()) {
			panic(fmt.Sprintf("shard.Map: output %s: device %d returned %v but device %d returned %v", p.outName(j), m.devices[d].ID(), b, m.devices[f].ID(), b0))
		}
		if l := b.Local(); l != nil {
			if env, ok := l.Env.(*devEnv); !ok || env.mesh != m {
				panic(fmt.Sprintf("shard.Map: output %s %v is a block of another Map call", p.outName(j), b))
			}
		}
		if extra := maskOf(b) &^ sm; extra != 0 {
			env := blocks[d].Local().Env.(*devEnv)
			axes := env.axesOf(extra)
			panic(fmt.Sprintf("shard.Map: output %s %v varies over %s but out spec %v does not shard it over %s; reduce it first (Psum, Pmean, AllGatherInvariant) or shard it",
				p.outName(j), b, axesLabel(axes), s.spec, axesLabel(axes)))
		}
	}
	shape := b0.Shape()
	for i := range shape {
		for _, a := range s.spec.dim(i) {
			shape[i] *= m.sizes[m.axis("shard.Map", a)]
		}
	}
	// The blocks' headers are made together and charged together: one
	// cleanup for the output, not one per block.
	l := (&layout{sharding: s, geo: s.geometry("shard.Map", shape), blocks: tensor.WithLocals(blocks, nil), owned: true}).number(false)
	charged := make([]*Device, 0, len(blocks))
	for d, b := range blocks {
		if b != nil && !p.held[d][storageOf(b)] {
			charged = append(charged, m.devices[d])
		}
	}
	if len(charged) > 0 {
		accountAll(charged, l.blocks[f], b0.Bytes())
	}
	return tensor.NewSharded(b0.DType(), shape, l)
}

func (p *mapParams) backward(gs, in []*tensor.Tensor, st *mapState) []*tensor.Tensor {
	m := p.mesh
	n := m.Size()
	// Cotangent blocks of the outputs, per device.
	cotBlocks := make([][]*tensor.Tensor, len(gs))
	for j, g := range gs {
		if g != nil && g.DType().IsFloat() {
			cotBlocks[j] = mapBlocks(g, p.outSh[j])
		}
	}
	cotIn := make([][]*tensor.Tensor, n)
	r := newRun(m, p.comm, "shard.Map (backward)")
	if err := r.exec(st.envs, func(d int) {
		e := st.envs[d]
		cots := make([]*tensor.Tensor, len(gs))
		for j := range gs {
			if cotBlocks[j] == nil {
				continue
			}
			sm := specMask(m, p.outSh[j].spec)
			b := e.marked(cotBlocks[j][d], sm)
			// An output invariant over axes its spec shards it over was
			// tiled from one value: its cotangent is the sum of the tiles.
			if extra := sm &^ maskOf(st.outs[d][j]); extra != 0 {
				b = psum(e, b, e.axesOf(extra))
			}
			cots[j] = b
		}
		cotIn[d] = tensor.Backward(st.traces[d], st.outs[d], cots, st.leaves[d], false)
	}); err != nil {
		panic(err)
	}
	res := make([]*tensor.Tensor, len(in))
	for i, x := range in {
		if !x.DType().IsFloat() {
			continue
		}
		s := NewSharding(m, p.inSpecs[i])
		blocks := make([]*tensor.Tensor, n)
		for d := range n {
			if m.isLocal(d) {
				blocks[d] = tensor.WithLocal(tensor.StopGradient(cotIn[d][i]), nil)
			}
		}
		geo := s.geometry("shard.Map", x.Shape())
		l := (&layout{sharding: s, geo: geo, blocks: blocks}).number(false)
		for d, b := range blocks {
			if b != nil {
				chargeBlock(m.devices[d], b)
			}
		}
		g := tensor.NewSharded(x.DType(), x.Shape(), l)
		if orig, ok := ShardingOf(x); ok {
			res[i] = Put(g, orig)
		} else {
			res[i] = Gather(g)
		}
		res[i] = keepAxes(res[i], x)
	}
	return res
}

// Residuals implements tensor.ResidualHolder: what every device's graph
// keeps for the backward pass, tagged with the device.
func (st *mapState) Residuals() []tensor.Residual {
	var out []tensor.Residual
	for d, outs := range st.outs {
		for _, r := range tensor.ResidualTensors(outs...) {
			r.Device = st.envs[d].mesh.devices[d].ID()
			out = append(out, r)
		}
	}
	return out
}
