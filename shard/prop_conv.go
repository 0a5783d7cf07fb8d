package shard

import (
	"slices"

	"github.com/gonox/gonox/tensor"
)

// The rules of the convolution ops and the windowed reductions.
//
// A convolution's operands and result are channels first, spatial last:
// an image batch [N, C, spatial...] and a kernel [O, C/G, k...]. The
// spatial dimensions are never split (a block would need its neighbours'
// edges): they are gathered. What can be split is the batch N, the input
// channels C and the output channels O:
//
//	conv              y[N, O]  = Σ_C w[O, C] ⋆ x[N, C]
//	conv_transpose    dx[N, C] = Σ_O w[O, C] ⋆ dy[N, O]
//	conv_kernel_grad  dw[O, C] = Σ_N dy[N, O] ⋆ x[N, C]
//
// Each result keeps the axes of its two free indices, taken from the
// operands (the batch first, then C, then O, a mesh axis going to the
// first that wants it; the other operand is gathered along it), and a
// contracted index split the same way on both operands leaves a partial
// sum over its axes: batch-parallel needs no communication, output
// channels over tp are column-parallel, input channels over tp leave
// partial sums that the consumer reduces (row-parallel). With feature
// groups the channels are gathered (a block would not hold whole groups).

// convIndex is an index of a convolution: the batch N, the input
// channels C or the output channels O.
type convIndex uint8

const (
	convN convIndex = iota
	convC
	convO
)

// convForm gives, for one op of the family, the indices of the
// dimensions 0 and 1 of its operands and result, and the index it sums
// over.
type convForm struct {
	in  [2][2]convIndex
	out [2]convIndex
	sum convIndex
}

var convForms = map[tensor.ShardFamily]convForm{
	tensor.ShardConv:           {in: [2][2]convIndex{{convN, convC}, {convO, convC}}, out: [2]convIndex{convN, convO}, sum: convC},
	tensor.ShardConvTranspose:  {in: [2][2]convIndex{{convN, convO}, {convO, convC}}, out: [2]convIndex{convN, convC}, sum: convO},
	tensor.ShardConvKernelGrad: {in: [2][2]convIndex{{convN, convC}, {convN, convO}}, out: [2]convIndex{convO, convC}, sum: convN},
}

func convRule(c *opCall) *step {
	f := convForms[c.op.Sharding.Family]
	p, ok := tensor.DescribeParams(c.op, c.params)
	if !ok {
		return nil
	}
	// In every form the free indices are on one operand each and the
	// summed index on both: it keeps its axes only where both agree.
	var axes [3]DimSpec
	var seen [3]bool
	for i := range 2 {
		spec := c.spec(i)
		for d, idx := range f.in[i] {
			ax := spec.dim(d)
			if idx != convN && p.N > 1 {
				ax = nil // feature groups: channels whole
			}
			if seen[idx] && !slices.Equal(axes[idx], ax) {
				ax = nil
			}
			axes[idx], seen[idx] = slices.Clone(ax), true
		}
	}
	// A mesh axis at most once: the batch first, then C, then O.
	used := map[string]bool{}
	for _, idx := range []convIndex{convN, convC, convO} {
		if len(without(axes[idx], used)) != len(axes[idx]) {
			axes[idx] = nil
		}
		for _, a := range axes[idx] {
			used[a] = true
		}
	}
	specOf := func(idx [2]convIndex, rank int) Spec {
		s := make(Spec, rank)
		s[0], s[1] = slices.Clone(axes[idx[0]]), slices.Clone(axes[idx[1]])
		return s
	}
	st := &step{
		in:    []Sharding{NewSharding(c.mesh, specOf(f.in[0], c.in[0].Rank())), NewSharding(c.mesh, specOf(f.in[1], c.in[1].Rank()))},
		out:   []Sharding{NewSharding(c.mesh, specOf(f.out, c.in[0].Rank()))},
		local: implLocal(c),
	}
	if len(axes[f.sum]) > 0 {
		st.partial = []DimSpec{slices.Clone(axes[f.sum])}
	}
	return st
}

// windowRule: the dimensions before the windowed ones (OpParams.N: the
// batch and the channels of a pooling) keep the axes of the first operand
// on every operand and the result; the windowed dimensions are gathered.
func windowRule(c *opCall) *step {
	p, ok := tensor.DescribeParams(c.op, c.params)
	if !ok {
		return nil
	}
	lead := cloneSpec(c.spec(0), p.N)
	specOf := func(rank int) Spec {
		s := make(Spec, rank)
		copy(s, lead)
		return s
	}
	st := &step{local: implLocal(c)}
	for _, x := range c.in {
		st.in = append(st.in, NewSharding(c.mesh, specOf(x.Rank())))
	}
	st.out = []Sharding{NewSharding(c.mesh, specOf(c.in[0].Rank()))}
	return st
}
