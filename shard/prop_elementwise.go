package shard

import (
	"slices"

	"github.com/gonox/gonox/tensor"
)

// broadcastShape returns the NumPy broadcast of the operands' shapes.
func broadcastShape(in []*tensor.Tensor) []int {
	r := 0
	for _, x := range in {
		r = max(r, x.Rank())
	}
	out := make([]int, r)
	for i := range out {
		out[i] = 1
	}
	for _, x := range in {
		off := r - x.Rank()
		for i, d := range x.Shape() {
			if d != 1 {
				out[off+i] = d
			}
		}
	}
	return out
}

// bySize returns operand indices, the largest operand first (ties in
// operand order): shardings are taken from the operands that are costliest
// to move.
func bySize(in []*tensor.Tensor) []int {
	idx := make([]int, len(in))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return in[b].Size() - in[a].Size() })
	return idx
}

// mergeSpecs returns the spec of a result of shape out whose dimensions
// come from the operands (right-aligned, as broadcasting aligns them):
// each result dimension takes the mesh axes of the largest operand that
// shards it, unless those axes are already used by another dimension.
func mergeSpecs(c *opCall, out []int) Spec {
	spec := make(Spec, len(out))
	used := map[string]bool{}
	for _, i := range bySize(c.in) {
		if c.ls[i] == nil {
			continue
		}
		x := c.in[i]
		off := len(out) - x.Rank()
		for k := range x.Rank() {
			j := off + k
			d := c.ls[i].sharding.spec.dim(k)
			if len(d) == 0 || len(spec[j]) > 0 || x.Dim(k) != out[j] {
				continue
			}
			free := true
			for _, a := range d {
				if used[a] {
					free = false
				}
			}
			if !free {
				continue
			}
			for _, a := range d {
				used[a] = true
			}
			spec[j] = slices.Clone(d)
		}
	}
	return spec
}

// specFor returns the spec of an operand of the given shape broadcast
// into a result laid out by outSpec: its dimensions of full size take the
// result's axes; broadcast ones (size 1) are replicated.
func specFor(shape []int, out []int, outSpec Spec) Spec {
	off := len(out) - len(shape)
	s := make(Spec, len(shape))
	for k, d := range shape {
		if d == out[off+k] {
			s[k] = slices.Clone(outSpec.dim(off + k))
		}
	}
	return s
}

// elementwise is the rule of ops that compute each element of their
// results from the elements at the same (broadcast) position of the
// operands (tensor.ShardElementwise): the operands' shardings are merged,
// the others moved to it. Every result (however many the op returns) has
// the broadcast shape and is laid out alike.
func elementwise(c *opCall) *step {
	out := broadcastShape(c.in)
	spec := mergeSpecs(c, out)
	st := &step{in: make([]Sharding, len(c.in))}
	for i, x := range c.in {
		st.in[i] = NewSharding(c.mesh, specFor(x.Shape(), out, spec))
	}
	st.outEach = NewSharding(c.mesh, spec)
	st.local = implLocal(c)
	return st
}

// linear is the rule of elementwise ops linear in each operand (add, sub,
// a name: tensor.ShardLinear): it keeps pending sums through the op when
// every operand has the same ones and the same layout and shape (a sum of
// partial sums is a partial sum: cotangents meeting at a value add up
// before their one reduction), and is elementwise otherwise.
func linear(c *opCall) *step {
	if st := linearPartial(c); st != nil {
		return st
	}
	return elementwise(c)
}

// linearPartial is linear's step for operands with the same pending sums,
// or nil.
func linearPartial(c *opCall) *step {
	l0 := c.ls[0]
	if l0 == nil || len(l0.partial) == 0 {
		return nil
	}
	for i, l := range c.ls {
		if l == nil || !slices.Equal(l.partial, l0.partial) || !l.sharding.Equal(l0.sharding) || !slices.Equal(c.in[i].Shape(), c.in[0].Shape()) {
			return nil
		}
	}
	op, params := c.op, c.params
	keep := make([]bool, len(c.in))
	in := make([]Sharding, len(c.in))
	for i := range keep {
		keep[i], in[i] = true, l0.sharding
	}
	return &step{
		in: in, keep: keep,
		out:     []Sharding{l0.sharding},
		partial: []DimSpec{slices.Clone(l0.partial)},
		local: func(_ int, bl []*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.CallBlock(op, bl, tensor.BlockParams(op, params, bl))}
		},
	}
}
