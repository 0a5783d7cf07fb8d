package shard

import (
	"encoding/binary"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// opCall is one op call that propagation computes: the op, its parameters,
// the operands (placed or host) and their layouts (nil for host).
type opCall struct {
	op     *tensor.Op
	params any
	in     []*tensor.Tensor
	ls     []*layout
	mesh   *Mesh
}

// spec returns the spec of operand i (empty for a host operand), and its
// pending-sum axes.
func (c *opCall) spec(i int) Spec {
	if c.ls[i] == nil {
		return nil
	}
	return c.ls[i].sharding.spec
}

func (c *opCall) partial(i int) DimSpec {
	if c.ls[i] == nil {
		return nil
	}
	return c.ls[i].partial
}

// propRule is the sharding rule of one op: plan returns how to compute a call
// block by block, or nil when the rule does not cover these operands (the
// call then gathers them).
type propRule struct {
	// what summarises the rule for the table in the package doc.
	what string
	plan func(c *opCall) *step
	// compose, if set and not returning nil, computes the call from other
	// (propagated, differentiable) ops instead: a two-pass softmax over a
	// sharded axis, say. The operands may be traced.
	compose func(c *opCall) []*tensor.Tensor
}

// step is a rule's decision for one call: where each operand must be
// before computing (keep set: it stays as it is, pending sums included),
// how each output is laid out, and the per-device computation on blocks.
type step struct {
	in   []Sharding
	keep []bool
	out  []Sharding
	// outEach, if set, lays out the outputs after those out lists (all of
	// them if out is empty), however many the op returns.
	outEach Sharding
	partial []DimSpec // per output
	// local computes one device's output blocks from its operand blocks.
	local func(dev int, blocks []*tensor.Tensor) []*tensor.Tensor
	// perDevice makes every device compute, even replicas (local depends
	// on the device, not only on its blocks).
	perDevice bool
	// combine, per output, lists mesh axes whose devices' blocks are then
	// reduced at once with pmax (max) or pmin (min): a reduction over a
	// sharded dimension that cannot be left pending.
	combine []DimSpec
	min     bool
}

// apply computes the call: through a Distributed op whose forward is the
// step and whose VJP is op's own VJP applied to the placed cotangents,
// with each input cotangent then laid out like its input.
func (st *step) apply(op *tensor.Op, params any, in []*tensor.Tensor, m *Mesh) []*tensor.Tensor {
	w := &tensor.Op{Name: op.Name, Save: op.Save, SaveFor: op.SaveFor, Traits: tensor.Traits{Placement: tensor.Distributed}}
	fwd := func(prim []*tensor.Tensor) []*tensor.Tensor { return st.run(op.Name, prim, m) }
	diff := op.VJP != nil || op.VJPN != nil || op.VJPNeed != nil
	// fix lays each input cotangent out like its input. A cotangent that
	// moving replaced is dead when the VJP made it (it is not one of the
	// op's cotangents gs, operands or results, nor another input's
	// cotangent) and ran untraced (otherwise an outer trace, taking
	// gradients of gradients, may have saved it): it is donated, with its
	// pending summands.
	fix := func(res, ins, gs, outs []*tensor.Tensor) []*tensor.Tensor {
		orig := slices.Clone(res)
		untraced := !slices.ContainsFunc(ins, isTraced) && !slices.ContainsFunc(gs, isTraced) && !slices.ContainsFunc(outs, isTraced)
		for i, c := range res {
			if c != nil && i < len(ins) && ins[i].DType().IsFloat() {
				res[i] = cotangentLike(op.Name, c, ins[i])
				if res[i] != c && untraced && !c.IsTraced() && !slices.Contains(gs, c) && !slices.Contains(ins, c) &&
					!slices.Contains(outs, c) && !slices.Contains(orig[:i], c) && !slices.Contains(orig[i+1:], c) {
					tensor.Donate(c)
				}
			}
		}
		return res
	}
	if op.ImplN == nil {
		w.Impl = func(prim []*tensor.Tensor, _ any) *tensor.Tensor { return fwd(prim)[0] }
		if diff {
			w.VJPNeed = func(g *tensor.Tensor, ins []*tensor.Tensor, out *tensor.Tensor, p any, need uint64) []*tensor.Tensor {
				var res []*tensor.Tensor
				switch {
				case op.VJPNeed != nil:
					res = op.VJPNeed(g, ins, out, p, need)
				default:
					res = op.VJP(g, ins, out, p)
				}
				for i := range res {
					if !tensor.Wants(need, i) {
						res[i] = nil // an untraced operand (a host constant): no move for it
					}
				}
				return fix(res, ins, []*tensor.Tensor{g}, []*tensor.Tensor{out})
			}
		}
		return []*tensor.Tensor{tensor.Apply(w, params, in...)}
	}
	w.ImplN = func(prim []*tensor.Tensor, _ any) ([]*tensor.Tensor, any) { return fwd(prim), nil }
	if op.VJPN != nil {
		w.VJPN = func(gs, ins, outs []*tensor.Tensor, p, _ any) []*tensor.Tensor {
			return fix(op.VJPN(gs, ins, outs, p, nil), ins, gs, outs)
		}
	}
	return tensor.ApplyN(w, params, in...)
}

// isTraced reports whether x is traced (false for nil).
func isTraced(x *tensor.Tensor) bool { return x != nil && x.IsTraced() }

// run moves the (untraced) operands, computes every device's blocks in
// parallel and assembles the outputs.
func (st *step) run(opName string, in []*tensor.Tensor, m *Mesh) []*tensor.Tensor {
	needLocalDevice(opName, m)
	n := m.Size()
	blocks := make([][]*tensor.Tensor, n)
	for d := range blocks {
		blocks[d] = make([]*tensor.Tensor, len(in))
	}
	// The operands' blocks are read during the call only: they are not
	// marked shared, and the copies and sums moving them made (temps)
	// are donated once every device has computed.
	var temps []*tensor.Tensor
	for i, x := range in {
		var bs []*tensor.Tensor
		if st.keep != nil && st.keep[i] {
			bs = layoutOf(opName, x).blocks
		} else {
			var own bool
			bs, own = moveBlocks(opName, x, st.in[i])
			if own {
				temps = append(temps, bs...)
			}
		}
		for d := range n {
			blocks[d][i] = bs[d]
		}
	}
	// Replicas compute once: devices that hold the same blocks of every
	// operand (the same block indices, and the same summand of a pending
	// sum) compute the same output blocks, so one of them computes and the
	// others share the (immutable) result, as replicas of a value would
	// hold equal copies. Each device is still charged for its blocks.
	groups := st.replicaGroups(in, m)
	outs := make([][]*tensor.Tensor, n)
	parallelFor(len(groups), func(g int) {
		// Only this process's devices compute (all of them in one process).
		devs := localOf(m, groups[g])
		if len(devs) == 0 {
			return
		}
		o := st.local(devs[0], blocks[devs[0]])
		for _, d := range devs {
			outs[d] = o
		}
	})
	if st.outEach.mesh != nil {
		for len(st.out) < len(outs[m.firstLocal()]) {
			st.out = append(st.out, st.outEach)
		}
	}
	for j := range st.combine {
		if len(st.combine[j]) > 0 {
			combineExtreme(opName, m, outs, j, st.combine[j], st.min)
		}
	}
	// The outputs own their blocks (they are donated with them), so a
	// block that an operand or an earlier output holds (an op that
	// returns its operand, say) gets a header of its own.
	held := map[*tensor.Tensor]bool{}
	for d := range blocks {
		for _, b := range blocks[d] {
			if b != nil {
				held[b] = true
			}
		}
	}
	res := make([]*tensor.Tensor, len(st.out))
	first := m.firstLocal()
	for j, s := range st.out {
		b0 := outs[first][j]
		shape := b0.Shape()
		for i := range shape {
			for _, a := range s.spec.dim(i) {
				shape[i] *= m.sizes[m.axis("shard", a)]
			}
		}
		l := (&layout{sharding: s, geo: s.geometry("shard: op "+opName, shape), blocks: make([]*tensor.Tensor, n), owned: true}).number(false)
		if st.partial != nil {
			l.partial = st.partial[j]
			l.origin = opName
		}
		copies := map[*tensor.Tensor]*tensor.Tensor{}
		for d := range n {
			if outs[d] == nil {
				continue // another process's device
			}
			b := outs[d][j]
			if c, ok := copies[b]; ok {
				b = c
			} else if held[b] {
				c := tensor.WithLocal(b, nil)
				copies[b] = c
				b = c
			}
			l.blocks[d] = b
			chargeBlock(m.devices[d], b)
		}
		for d := range n {
			if outs[d] != nil {
				held[outs[d][j]] = true
			}
		}
		res[j] = tensor.NewSharded(b0.DType(), shape, l)
	}
	tensor.Donate(temps...)
	return res
}

// replicaGroups returns the devices grouped by the blocks they compute
// from: the block index of every operand where the step puts it, and for
// an operand kept with pending sums, the device's coordinates on the
// partial axes (each holds its own summand).
func (st *step) replicaGroups(in []*tensor.Tensor, m *Mesh) [][]int {
	n := m.Size()
	if st.perDevice {
		out := make([][]int, n)
		for d := range out {
			out[d] = []int{d}
		}
		return out
	}
	index := map[string]int{}
	var out [][]int
	key := make([]byte, 0, 64)
	for d := range n {
		key = key[:0]
		for i, x := range in {
			s := st.in[i]
			var partial DimSpec
			if st.keep != nil && st.keep[i] {
				l := layoutOf("shard", x)
				s, partial = l.sharding, l.partial
			}
			for _, b := range s.blockIndex(d, x.Rank()) {
				key = binary.AppendUvarint(key, uint64(b))
			}
			if len(partial) > 0 {
				c := m.Coords(d)
				for _, a := range partial {
					key = binary.AppendUvarint(key, uint64(c[m.axis("shard", a)]))
				}
			}
			key = append(key, 0xff)
		}
		g, ok := index[string(key)]
		if !ok {
			g = len(out)
			index[string(key)] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], d)
	}
	return out
}

// combineExtreme replaces output j of every device by the elementwise
// maximum (minimum) over the devices that differ only on axes: pmax, one
// shared result per group, charged as the collective.
func combineExtreme(op string, m *Mesh, outs [][]*tensor.Tensor, j int, axes DimSpec, isMin bool) {
	groups := groupsAlong(m, axes)
	res := make([]*tensor.Tensor, len(groups))
	parallelFor(len(groups), func(i int) {
		devs := localOf(m, groups[i])
		if len(devs) == 0 {
			return
		}
		r := outs[devs[0]][j]
		for _, d := range devs[1:] {
			if isMin {
				r = tensor.Minimum(r, outs[d][j])
			} else {
				r = tensor.Maximum(r, outs[d][j])
			}
		}
		res[i] = r
	})
	coll, red := pmaxColl, ReduceMax
	if isMin {
		coll, red = pminColl, ReduceMin
	}
	allreduceAcross(coll.kind+" of "+op, m, groups, res, red)
	for i, g := range groups {
		for _, d := range localOf(m, g) {
			outs[d][j] = res[i]
		}
	}
	g := int64(m.AxisSize(axes...))
	bb := int64(outs[m.firstLocal()][j].Bytes())
	charge(m, op, coll, func(int) int64 { return 2 * (g - 1) * bb / g })
}
