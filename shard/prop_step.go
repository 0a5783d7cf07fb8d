package shard

import (
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

// rule is the sharding rule of one op: plan returns how to compute a call
// block by block, or nil when the rule does not cover these operands (the
// call then gathers them).
type rule struct {
	// what summarises the rule for the table in the package doc.
	what string
	plan func(c *opCall) *step
}

// step is a rule's decision for one call: where each operand must be
// before computing (keep set: it stays as it is, pending sums included),
// how each output is laid out, and the per-device computation on blocks.
type step struct {
	in      []Sharding
	keep    []bool
	out     []Sharding
	partial []DimSpec // per output
	// local computes one device's output blocks from its operand blocks.
	local func(dev int, blocks []*tensor.Tensor) []*tensor.Tensor
}

// apply computes the call: through a Distributed op whose forward is the
// step and whose VJP is op's own VJP applied to the placed cotangents,
// with each input cotangent then laid out like its input.
func (st *step) apply(op *tensor.Op, params any, in []*tensor.Tensor, m *Mesh) []*tensor.Tensor {
	w := &tensor.Op{Name: op.Name, Distributed: true, Save: op.Save, SaveFor: op.SaveFor}
	fwd := func(prim []*tensor.Tensor) []*tensor.Tensor { return st.run(op.Name, prim, m) }
	diff := op.VJP != nil || op.VJPN != nil || op.VJPNeed != nil
	fix := func(res, ins []*tensor.Tensor) []*tensor.Tensor {
		for i, c := range res {
			if c != nil && i < len(ins) && ins[i].DType().IsFloat() {
				res[i] = cotangentLike(op.Name, c, ins[i])
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
				return fix(res, ins)
			}
		}
		return []*tensor.Tensor{tensor.Apply(w, params, in...)}
	}
	w.ImplN = func(prim []*tensor.Tensor, _ any) ([]*tensor.Tensor, any) { return fwd(prim), nil }
	if op.VJPN != nil {
		w.VJPN = func(gs, ins, outs []*tensor.Tensor, p, _ any) []*tensor.Tensor {
			return fix(op.VJPN(gs, ins, outs, p, nil), ins)
		}
	}
	return tensor.ApplyN(w, params, in...)
}

// run moves the (untraced) operands, computes every device's blocks in
// parallel and assembles the outputs.
func (st *step) run(opName string, in []*tensor.Tensor, m *Mesh) []*tensor.Tensor {
	n := m.Size()
	blocks := make([][]*tensor.Tensor, n)
	for d := range blocks {
		blocks[d] = make([]*tensor.Tensor, len(in))
	}
	for i, x := range in {
		var bs []*tensor.Tensor
		if st.keep != nil && st.keep[i] {
			bs = layoutOf(opName, x).blocks
		} else {
			bs = move(opName, x, st.in[i])
		}
		for d := range n {
			blocks[d][i] = bs[d]
		}
	}
	outs := make([][]*tensor.Tensor, n)
	parallelFor(n, func(d int) { outs[d] = st.local(d, blocks[d]) })
	res := make([]*tensor.Tensor, len(st.out))
	for j, s := range st.out {
		b0 := outs[0][j]
		shape := b0.Shape()
		for i := range shape {
			for _, a := range s.spec.dim(i) {
				shape[i] *= m.sizes[m.axis("shard", a)]
			}
		}
		l := &layout{sharding: s, geo: s.geometry("shard: op "+opName, shape), blocks: make([]*tensor.Tensor, n)}
		if st.partial != nil {
			l.partial = st.partial[j]
		}
		for d := range n {
			l.blocks[d] = outs[d][j]
			chargeBlock(m.devices[d], l.blocks[d])
		}
		res[j] = tensor.NewSharded(b0.DType(), shape, l)
	}
	return res
}
