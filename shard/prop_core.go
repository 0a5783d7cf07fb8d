package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/internal/box"
	"github.com/gonox/gonox/tensor"
)

// This file is the engine of sharding propagation: package tensor hands
// every op with a placed operand to propagate, which looks up the op's
// rule (prop_table.go), moves the operands where the rule wants them,
// computes every device's block in parallel and assembles the placed
// result. Differentiation goes through the op's own VJP applied to placed
// cotangents, which propagates again.

func init() { tensor.SetPlacer(placer{}) }

// placer is the tensor.Placer of package shard.
type placer struct{}

// Apply implements tensor.Placer.
func (placer) Apply(op *tensor.Op, params any, in []*tensor.Tensor) []*tensor.Tensor {
	return propagate(op, params, in)
}

// Settle implements tensor.Placer: a gradient with pending sums is reduced
// (psum over their axes), charged to the op that left them.
func (placer) Settle(x *tensor.Tensor) *tensor.Tensor {
	l := layoutOf("shard", x)
	if l == nil || len(l.partial) == 0 {
		return x
	}
	return moveTo(l.origin, x, l.sharding)
}

// layoutOf returns the layout of a placed tensor, or nil for a host one.
func layoutOf(op string, x *tensor.Tensor) *layout {
	lo := x.Layout()
	if lo == nil {
		return nil
	}
	l, ok := lo.(*layout)
	if !ok {
		panic(fmt.Sprintf("shard: op %q: operand %v has a layout %T that package shard did not make", op, x, lo))
	}
	return l
}

func isPartial(x *tensor.Tensor) bool {
	l, ok := x.Layout().(*layout)
	return ok && len(l.partial) > 0
}

// meshOf returns the mesh of the placed operands, panicking if they are on
// different meshes.
func meshOf(op string, in []*tensor.Tensor) *Mesh {
	var m *Mesh
	var first *tensor.Tensor
	for _, x := range in {
		l := layoutOf(op, x)
		if l == nil {
			continue
		}
		if m == nil {
			m, first = l.sharding.mesh, x
			continue
		}
		if !m.Equal(l.sharding.mesh) {
			a, b := meshesApart(m, l.sharding.mesh)
			panic(fmt.Sprintf("shard: op %q mixes %v on %s with %v on %s; move one onto the other's mesh with shard.Put (or Reshard) first",
				op, typeOf(first), a, typeOf(x), b))
		}
	}
	return m
}

// meshesApart returns the names of two different meshes for a message:
// their shapes, and their devices' ids where the shapes are alike (two
// meshes of 2 devices on devices 0-1 and 2-3 both print Mesh('dp': 2)).
func meshesApart(a, b *Mesh) (string, string) {
	as, bs := a.String(), b.String()
	if as != bs {
		return as, bs
	}
	ids := func(m *Mesh) string {
		s := make([]int, len(m.devices))
		for i, d := range m.devices {
			s[i] = d.ID()
		}
		return fmt.Sprint(s)
	}
	return as + " of devices " + ids(a), bs + " of devices " + ids(b)
}

// propagate is the tensor.Placer: it computes op on operands of which at
// least one is placed.
func propagate(op *tensor.Op, params any, in []*tensor.Tensor) []*tensor.Tensor {
	m := meshOf(op.Name, in)
	logs := explainLogs(m)
	r := propRuleFor(op)
	if op.ImplVJP != nil {
		// Its VJP needs a state that per-device runs cannot hand it.
		r = nil
	}
	var st *step
	if r != nil {
		c := &opCall{op: op, params: params, in: in, mesh: m}
		c.ls = make([]*layout, len(in))
		for i, x := range in {
			c.ls[i] = layoutOf(op.Name, x)
		}
		if r.compose != nil {
			if outs := r.compose(c); outs != nil {
				return outs // its ops were logged and charged themselves
			}
		}
		if r.plan != nil {
			st = r.plan(c)
		}
	}
	note := ""
	if st == nil {
		note = "no rule: gather"
		if strict(m) {
			parts := make([]string, len(in))
			for i, x := range in {
				parts[i] = typeOf(x)
			}
			why := "has no sharding rule"
			if r != nil {
				why = "has no sharding rule for these operands"
			}
			panic(fmt.Sprintf("shard: op %q on %s %s and would gather its operands (shard.Strict is on); gather or reshard them yourself, or add a rule",
				op.Name, joinTypes(parts), why))
		}
	}
	for _, l := range logs {
		l.begin(op.Name, in, note)
	}
	var outs []*tensor.Tensor
	if st == nil {
		outs = fallback(op, params, in, m)
	} else {
		outs = st.apply(op, params, in, m)
	}
	for _, l := range logs {
		l.end(outs)
	}
	return outs
}

func joinTypes(parts []string) string {
	s := ""
	for i, p := range parts {
		if i > 0 {
			s += ", "
		}
		s += p
	}
	return s
}

// fallback computes op without a sharded rule: every device gathers the
// operands (counted under the op's name) and computes the whole result,
// which is replicated. It is built from differentiable pieces (Gather, the
// op on host tensors, Put), so autodiff goes through it.
func fallback(op *tensor.Op, params any, in []*tensor.Tensor, m *Mesh) []*tensor.Tensor {
	hosts := make([]*tensor.Tensor, len(in))
	for i, x := range in {
		l := layoutOf(op.Name, x)
		if l == nil {
			hosts[i] = x
			continue
		}
		chargeMove(op.Name, l, Replicated(m))
		hosts[i] = Gather(x)
	}
	var outs []*tensor.Tensor
	if op.ImplN != nil {
		outs = tensor.ApplyN(op, params, hosts...)
	} else {
		outs = []*tensor.Tensor{tensor.Apply(op, params, hosts...)}
	}
	rep := Replicated(m)
	for i, o := range outs {
		outs[i] = Put(o, rep)
	}
	return outs
}

// reduced returns the layout with its pending sums done: blocks of the
// same coordinates off the partial axes are summed (one shared sum per
// group, as psum leaves it).
func (l *layout) reduced() *layout {
	if len(l.partial) == 0 {
		return l
	}
	m := l.sharding.mesh
	groups := groupsAlong(m, l.partial)
	res := make([]*tensor.Tensor, len(groups))
	parallelFor(len(groups), func(i int) {
		if devs := localOf(m, groups[i]); len(devs) > 0 {
			res[i] = sumBlocks(l.blocks, devs)
		}
	})
	allreduceAcross("psum of the pending sums of "+l.origin, m, groups, res, ReduceSum)
	// Float sums are new tensors of their own (see sumBlocks).
	dt := l.blockDType()
	own := dt == tensor.Float32 || isHalf(dt)
	out := (&layout{sharding: l.sharding, geo: l.geo, blocks: make([]*tensor.Tensor, len(l.blocks)), owned: own}).number(false)
	for i, g := range groups {
		for _, d := range localOf(m, g) {
			out.blocks[d] = res[i]
			chargeBlock(m.devices[d], res[i])
		}
	}
	return out
}

// groupsAlong returns the devices of m grouped by their coordinates off
// the given axes: the groups a collective over those axes runs among, in
// mesh order of their first members.
func groupsAlong(m *Mesh, axes DimSpec) [][]int {
	along := make([]bool, len(m.sizes))
	for _, a := range axes {
		along[m.axis("shard", a)] = true
	}
	index := map[int]int{}
	var out [][]int
	for d := range m.Size() {
		c := m.Coords(d)
		for k := range c {
			if along[k] {
				c[k] = 0
			}
		}
		key := m.Index(c)
		g, ok := index[key]
		if !ok {
			g = len(out)
			index[key] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], d)
	}
	return out
}

// sumBlocks returns the elementwise sum of the blocks of the given devices.
func sumBlocks(blocks []*tensor.Tensor, devs []int) *tensor.Tensor {
	b0 := blocks[devs[0]]
	switch b0.DType() {
	case tensor.Float32:
		out := tensor.Zeros(tensor.Float32, b0.Shape()...)
		ins := make([][]float32, len(devs))
		for i, d := range devs {
			ins[i] = blocks[d].BorrowFloat32() // not pinned: both may be recycled
		}
		sumFloat32(out.BorrowFloat32(), ins, 0, b0.Size())
		return out
	case tensor.BFloat16, tensor.Float16:
		// Accumulate in float32 and round once, as Psum does.
		out := tensor.Zeros(b0.DType(), b0.Shape()...)
		ins := make([][]uint16, len(devs))
		for i, d := range devs {
			ins[i] = blocks[d].RawUint16()
		}
		sumHalf(b0.DType(), out.RawUint16(), ins)
		return out
	default:
		out := blocks[devs[0]]
		for _, d := range devs[1:] {
			out = tensor.Add(out, blocks[d])
		}
		return out
	}
}

// blockBytes returns the bytes of one block of l.
func (l *layout) blockBytes(dt tensor.DType) int64 {
	n := int64(dt.Size())
	for _, d := range l.geo.block {
		n *= int64(d)
	}
	return n
}

// chargeMove charges the communication of moving a tensor laid out as src
// to sharding dst (resolving its pending sums) to op: a psum (all-reduce)
// or psum_scatter over the partial axes, then what each device must
// receive of its new block from the others: an all_gather when every new
// block contains the old one, an all_to_all otherwise. Slicing a block
// out of one the device holds is free.
func chargeMove(op string, src *layout, dst Sharding) {
	chargeReduce(op, src, dst)
	chargeReshard(op, src, dst)
}

// psumScatters reports whether moving partial src to dst reduce-scatters
// (dst shards over every partial axis) rather than all-reduces.
func psumScatters(src *layout, dst Sharding) bool {
	dstAxes := dst.spec.Axes()
	for _, a := range src.partial {
		if !slices.Contains(dstAxes, a) {
			return false
		}
	}
	return true
}

// chargeReduce charges the reduction of src's pending sums.
func chargeReduce(op string, src *layout, dst Sharding) {
	m := src.sharding.mesh
	dt := src.blockDType()
	if len(src.partial) > 0 {
		g := m.AxisSize(src.partial...)
		bb := src.blockBytes(dt)
		scatter := true
		dstAxes := dst.spec.Axes()
		for _, a := range src.partial {
			if !slices.Contains(dstAxes, a) {
				scatter = false
			}
		}
		if scatter {
			charge(m, op, psumScatterColl, func(int) int64 { return int64(g-1) * bb / int64(g) })
		} else {
			charge(m, op, psumColl, func(int) int64 { return 2 * int64(g-1) * bb / int64(g) })
		}
	}
}

// chargeReshard charges moving the blocks of src (pending sums done) to
// dst.
func chargeReshard(op string, src *layout, dst Sharding) {
	m := src.sharding.mesh
	dt := src.blockDType()
	if src.sharding.spec.Equal(dst.spec) {
		return
	}
	geo := dst.geometry("shard", src.geo.shape)
	to := &layout{sharding: dst, geo: geo}
	from := &layout{sharding: src.sharding, geo: src.geo}
	gathering := true
	recv := make([]int64, m.Size())
	moved := false
	for d := range m.Size() {
		toOff, fromOff := to.offset(d), from.offset(d)
		_, size, ok := box.Intersect(toOff, geo.block, fromOff, src.geo.block)
		have := int64(0)
		if ok {
			have = int64(numelOf(size))
		}
		need := int64(numelOf(geo.block))
		if have < int64(numelOf(src.geo.block)) {
			gathering = false
		}
		recv[d] = (need - have) * int64(dt.Size())
		if recv[d] > 0 {
			moved = true
		}
	}
	if !moved {
		return
	}
	coll := allToAllColl
	if gathering {
		coll = allGatherColl
	}
	charge(m, op, coll, func(d int) int64 { return recv[d] })
}

// moveBlocks returns the blocks of x (placed or host, untraced) laid out
// by dst, charging the communication to op. A host x is taken to be
// replicated on every device (uncommitted, as JAX treats host arrays), so
// placing it costs nothing. own reports that the distinct block headers
// are the caller's alone (copies or sums made for it), which it must
// donate once read or keep in a layout it owns; otherwise they are
// another layout's (or a host x's), whose layout is not marked shared: a
// caller that keeps them must take headers of its own (ownCopies).
func moveBlocks(op string, x *tensor.Tensor, dst Sharding) (bs []*tensor.Tensor, own bool) {
	src := layoutOf(op, x)
	if src == nil {
		return makeBlocks(x, dst, false), false
	}
	if bs := takePrefetched(src, dst); bs != nil {
		chargeReshard(op, src, dst)
		return bs, true
	}
	temp := false // src is a reduction made for this call alone
	if len(src.partial) > 0 {
		if psumScatters(src, dst) {
			chargeReduce(op, src, dst)
			if src.sharding.mesh.spans() {
				if bs := reduceScatterAcross(src, dst); bs != nil {
					chargeReshard(op, src, dst)
					return bs, false
				}
			}
			src = src.reduced()
			temp = src.owned
		} else {
			// All-reduce once, however many consumers read the sum.
			src.sumOnce.Do(func() {
				chargeReduce(op, src, dst)
				src.sum.Store(src.reduced())
			})
			src = src.sum.Load()
		}
		x = tensor.NewSharded(x.DType(), x.Shape(), src)
	}
	chargeReshard(op, src, dst)
	if src.sharding.Equal(dst) {
		return slices.Clone(src.blocks), temp
	}
	// The blocks are copies made here, also those assembled from what
	// other processes sent (reshardAcross builds every block afresh):
	// the caller drops them after use, so that FSDP's gathers of whole
	// weights, twice a step, reuse each other's storage.
	own = true
	bs = makeBlocks(x, dst, false)
	if temp {
		tensor.Donate(src.blocks...) // copied from: dead
	}
	return bs, own
}

// moveOp moves a placed tensor to a sharding (resolving pending sums),
// charging the op named in its params; its transpose moves the cotangent
// back.
var moveOp *tensor.Op

type moveParams struct {
	op  string
	dst Sharding
}

func init() {
	moveOp = &tensor.Op{
		Name:   "reshard",
		Traits: tensor.Traits{Placement: tensor.Distributed},
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			p := pp.(moveParams)
			x := in[0]
			geo := p.dst.geometry("shard", x.Shape())
			bs, own := moveBlocks(p.op, x, p.dst)
			if !own {
				// Headers of its own over blocks another layout holds,
				// so that the result owns what it holds.
				bs = ownCopies(bs)
			}
			return tensor.NewSharded(x.DType(), x.Shape(), (&layout{sharding: p.dst, geo: geo, blocks: bs, owned: true}).number(false))
		},
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, pp any) []*tensor.Tensor {
			p := pp.(moveParams)
			s, _ := ShardingOf(in[0])
			return []*tensor.Tensor{moveTo(p.op, g, s)}
		},
	}
}

// moveTo returns x laid out by s (differentiable), charging op.
func moveTo(op string, x *tensor.Tensor, s Sharding) *tensor.Tensor {
	l := layoutOf(op, x)
	if l != nil && len(l.partial) == 0 && l.sharding.Equal(s) {
		return x
	}
	if l == nil {
		return Put(x, s)
	}
	return keepAxes(tensor.Apply(moveOp, moveParams{op: op, dst: s}, x), x)
}

// cotangentLike returns the cotangent c (placed) laid out as the input x
// it belongs to: sharded like x, or a host tensor for a host x.
func cotangentLike(op string, c, x *tensor.Tensor) *tensor.Tensor {
	if c == nil || c.Layout() == nil {
		return c
	}
	if s, ok := ShardingOf(x); ok {
		if l := layoutOf(op, c); l.sharding.Equal(s) {
			// Laid out like x; a pending sum stays pending: cotangents
			// that meet at x add up first (one reduction for several
			// uses of x), and Backward settles what reaches a leaf.
			return c
		}
		return moveTo(op, c, s)
	}
	l := layoutOf(op, c)
	return Gather(moveTo(op, c, Replicated(l.sharding.mesh)))
}

func numelOf(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
