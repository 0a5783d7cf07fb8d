package shard

import (
	"slices"

	"github.com/gonox/gonox/tensor"
)

// alongAxis is the rule of ops that work along one axis independently for
// every other position (cumsum, argmax/argmin, sort, argsort, top_k, the
// take/scatter along an axis of their VJPs, split): that axis is gathered,
// the others keep the first operand's axes, and operands of the same rank
// follow it. Every output has the first operand's rank (less the axis for
// tensor.ShardAlongAxisReduce without keepdims).
func alongAxis(c *opCall) *step {
	p, ok := tensor.DescribeParams(c.op, c.params)
	if !ok || len(p.Axes) != 1 {
		return nil
	}
	x := c.in[0]
	r := x.Rank()
	axis := p.Axes[0]
	if axis < 0 {
		axis += r
	}
	spec := cloneSpec(c.spec(0), r)
	spec[axis] = nil
	st := &step{in: make([]Sharding, len(c.in))}
	for i, y := range c.in {
		if y.Rank() != r {
			return nil
		}
		for k := range r {
			if k != axis && y.Dim(k) != x.Dim(k) {
				return nil
			}
		}
		st.in[i] = NewSharding(c.mesh, spec)
	}
	out := spec
	if c.op.Sharding.Family == tensor.ShardAlongAxisReduce && !p.KeepDims {
		out = slices.Delete(slices.Clone(spec), axis, axis+1)
	}
	st.outEach = NewSharding(c.mesh, out) // split's pieces, sort's values and indices, ...
	st.local = implLocal(c)
	return st
}

// implLocal computes with the op's own implementation on the blocks, its
// parameters adapted to them.
func implLocal(c *opCall) func(int, []*tensor.Tensor) []*tensor.Tensor {
	op, params := c.op, c.params
	return func(_ int, bl []*tensor.Tensor) []*tensor.Tensor {
		p := tensor.BlockParams(op, params, bl)
		if op.ImplN != nil {
			return tensor.CallBlockN(op, bl, p)
		}
		return []*tensor.Tensor{tensor.CallBlock(op, bl, p)}
	}
}

// oneHotRule: the result [ids..., n] is laid out like the ids, its new
// class axis whole.
func oneHotRule(c *opCall) *step {
	spec := cloneSpec(c.spec(0), c.in[0].Rank())
	return &step{
		in:    []Sharding{NewSharding(c.mesh, spec)},
		out:   []Sharding{NewSharding(c.mesh, append(spec, nil))},
		local: implLocal(c),
	}
}

// concatRule: the concatenated axis is gathered, the others are merged
// like elementwise operands (the largest operand's axes first).
func concatRule(c *opCall) *step {
	p, _ := tensor.DescribeParams(c.op, c.params)
	axis := p.Axes[0]
	out := slices.Clone(c.in[0].Shape())
	out[axis] = -1 // never equal: the axis takes no operand's axes
	spec := mergeSpecs(c, out)
	spec[axis] = nil
	st := &step{in: make([]Sharding, len(c.in))}
	for i := range c.in {
		st.in[i] = NewSharding(c.mesh, spec)
	}
	st.out = []Sharding{NewSharding(c.mesh, spec)}
	st.local = implLocal(c)
	return st
}

// sliceRule: dimensions that are sliced are gathered; the others keep
// their axes and every device slices its block.
func sliceRule(c *opCall) *step {
	x := c.in[0]
	p, _ := tensor.DescribeParams(c.op, c.params)
	spec := cloneSpec(c.spec(0), x.Rank())
	for k := range spec {
		if p.Starts[k] != 0 || p.Limits[k] != x.Dim(k) {
			spec[k] = nil
		}
	}
	starts, limits := p.Starts, p.Limits
	return &step{
		in:  []Sharding{NewSharding(c.mesh, spec)},
		out: []Sharding{NewSharding(c.mesh, spec)},
		local: func(_ int, bl []*tensor.Tensor) []*tensor.Tensor {
			lim := slices.Clone(limits)
			for k := range lim {
				if len(spec[k]) > 0 {
					lim[k] = bl[0].Dim(k)
				}
			}
			return []*tensor.Tensor{tensor.Slice(bl[0], starts, lim)}
		},
	}
}

// padRule: padded dimensions are gathered; the others keep their axes.
func padRule(c *opCall) *step {
	x := c.in[0]
	p, ok := tensor.DescribeParams(c.op, c.params)
	if !ok {
		return nil
	}
	spec := cloneSpec(c.spec(0), x.Rank())
	for k := range spec {
		if p.Lo[k] != 0 || p.Hi[k] != 0 {
			spec[k] = nil
		}
	}
	return &step{
		in:    []Sharding{NewSharding(c.mesh, spec)},
		out:   []Sharding{NewSharding(c.mesh, spec)},
		local: implLocal(c),
	}
}

// flipRule: flipped dimensions are gathered, the others keep their axes.
func flipRule(c *opCall) *step {
	p, ok := tensor.DescribeParams(c.op, c.params)
	if !ok {
		return nil
	}
	spec := cloneSpec(c.spec(0), c.in[0].Rank())
	for _, a := range p.Axes {
		spec[a] = nil
	}
	return &step{
		in:    []Sharding{NewSharding(c.mesh, spec)},
		out:   []Sharding{NewSharding(c.mesh, spec)},
		local: implLocal(c),
	}
}

// scatterAddRule: x + scatter of updates at indices along axis. The axis
// of x is gathered and the dimensions of updates that the indices fill are
// gathered with it; the other dimensions keep x's axes (updates follow).
func scatterAddRule(c *opCall) *step {
	p, ok := tensor.DescribeParams(c.op, c.params)
	if !ok {
		return nil
	}
	x, idx := c.in[0], c.in[1]
	axis, r := p.Axes[0], idx.Rank()
	spec := cloneSpec(c.spec(0), x.Rank())
	spec[axis] = nil
	upd := append(append(cloneSpec(spec[:axis], axis), make(Spec, r)...), spec[axis+1:]...)
	return &step{
		in:    []Sharding{NewSharding(c.mesh, spec), Replicated(c.mesh), NewSharding(c.mesh, upd)},
		out:   []Sharding{NewSharding(c.mesh, spec)},
		local: implLocal(c),
	}
}

// mseCompose is tensor.MSE from propagated ops: the mean of the squared
// differences, whose sum is left partial by sharded operands and reduced
// once.
func mseCompose(c *opCall) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.Mean(tensor.Square(tensor.Sub(c.in[0], c.in[1])))}
}

// bincountRule is the rule of bincount (ids [and weights] -> [length]):
// every device counts its ids into a whole result, which is a partial sum
// over the axes the ids are split over.
func bincountRule(c *opCall) *step {
	spec := mergeSpecs(c, c.in[0].Shape())
	st := &step{in: make([]Sharding, len(c.in))}
	for i := range c.in {
		st.in[i] = NewSharding(c.mesh, spec)
	}
	st.out = []Sharding{Replicated(c.mesh)}
	if rows := spec.Axes(); len(rows) > 0 {
		st.partial = []DimSpec{rows}
	}
	st.local = implLocal(c)
	return st
}

// segmentSumRule is the rule of segment_sum (data [N, ...], ids [N] ->
// [segments, ...]): every device sums its rows into a whole result, which
// is a partial sum over the axes the rows are split over; the other
// dimensions of data keep their axes. segment_weighted_sum's weights [N]
// follow the ids.
func segmentSumRule(c *opCall) *step {
	data, ids := c.in[0], c.in[1]
	spec := cloneSpec(c.spec(0), data.Rank())
	if len(spec[0]) == 0 {
		spec[0] = slices.Clone(c.spec(1).dim(0))
		if len(without(spec[0], axisSet(spec[1:]...))) != len(spec[0]) || ids.Dim(0)%c.mesh.AxisSize(spec[0]...) != 0 {
			spec[0] = nil
		}
	}
	out := slices.Clone(spec)
	out[0] = nil
	st := &step{
		in:    []Sharding{NewSharding(c.mesh, spec), NewSharding(c.mesh, Spec{spec[0]})},
		out:   []Sharding{NewSharding(c.mesh, out)},
		local: implLocal(c),
	}
	if len(c.in) == 3 { // segment_weighted_sum: weights [N] split like the ids
		st.in = append(st.in, st.in[1])
	}
	if len(spec[0]) > 0 {
		st.partial = []DimSpec{spec[0]}
	}
	return st
}

// segmentTakeRule is segment_sum's transpose (g [segments, ...] at ids
// [N] -> [N, ...]): g is gathered along its segments, the result's rows
// follow the ids and its other dimensions g's.
func segmentTakeRule(c *opCall) *step {
	g := c.in[0]
	spec := cloneSpec(c.spec(0), g.Rank())
	spec[0] = nil
	ids := cloneSpec(c.spec(1), 1)
	if len(without(ids[0], axisSet(spec...))) != len(ids[0]) {
		ids[0] = nil
	}
	out := slices.Clone(spec)
	out[0] = ids[0]
	return &step{
		in:    []Sharding{NewSharding(c.mesh, spec), NewSharding(c.mesh, ids)},
		out:   []Sharding{NewSharding(c.mesh, out)},
		local: implLocal(c),
	}
}

// binGatherRule is bincount's transpose (g [length] read at ids x -> x's
// shape): g is gathered, the result is laid out like the ids.
func binGatherRule(c *opCall) *step {
	spec := cloneSpec(c.spec(1), c.in[1].Rank())
	return &step{
		in:    []Sharding{Replicated(c.mesh), NewSharding(c.mesh, spec)},
		out:   []Sharding{NewSharding(c.mesh, spec)},
		local: implLocal(c),
	}
}
