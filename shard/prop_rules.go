package shard

import (
	"slices"

	"github.com/gonox/gonox/tensor"
)

// without returns d without the axes in drop.
func without(d DimSpec, drop map[string]bool) DimSpec {
	var out DimSpec
	for _, a := range d {
		if !drop[a] {
			out = append(out, a)
		}
	}
	return out
}

func axisSet(specs ...DimSpec) map[string]bool {
	m := map[string]bool{}
	for _, d := range specs {
		for _, a := range d {
			m[a] = true
		}
	}
	return m
}

func cloneSpec(s Spec, rank int) Spec {
	out := make(Spec, rank)
	for i := range rank {
		out[i] = slices.Clone(s.dim(i))
	}
	return out
}

// matmulRule: C[batch, M, N] = A[batch, M, K] · B[batch, K, N] (either
// operand may be stored transposed). The result is sharded like the free
// dimensions (batch, M from A, N from B); a mesh axis wanted by two of
// them stays with the first and the other operand is gathered along it.
// A contracting dimension sharded the same way on both sides gives a
// partial-sum result over those axes, reduced lazily by its consumer. If
// only one side shards it, the other side is sliced to match (free) when
// the later reduction of the result costs less than gathering the sharded
// side, which is gathered otherwise.
func matmulRule(c *opCall) *step {
	a, b := c.in[0], c.in[1]
	if a.Rank() < 2 || b.Rank() < 2 {
		return nil
	}
	p, _ := tensor.DescribeParams(c.op, c.params)
	ra, rb := a.Rank(), b.Rank()
	am, ak := ra-2, ra-1
	if p.TransA {
		am, ak = ak, am
	}
	bk, bn := rb-2, rb-1
	if p.TransB {
		bk, bn = bn, bk
	}
	sa, sb := c.spec(0), c.spec(1)
	// Batch dimensions, broadcast like elementwise operands.
	batchA, batchB := a.Shape()[:ra-2], b.Shape()[:rb-2]
	nb := max(len(batchA), len(batchB))
	batch := make([]int, nb)
	for i := range batch {
		batch[i] = 1
	}
	for _, s := range [][]int{batchA, batchB} {
		for i, d := range s {
			if d != 1 {
				batch[nb-len(s)+i] = d
			}
		}
	}
	bspec := make(Spec, nb)
	used := map[string]bool{}
	for _, o := range []struct {
		shape []int
		spec  Spec
	}{{batchA, sa}, {batchB, sb}} {
		off := nb - len(o.shape)
		for i, d := range o.shape {
			ax := o.spec.dim(i)
			if len(ax) == 0 || d != batch[off+i] || len(bspec[off+i]) > 0 {
				continue
			}
			if len(without(ax, used)) != len(ax) {
				continue
			}
			bspec[off+i] = slices.Clone(ax)
			for _, x := range ax {
				used[x] = true
			}
		}
	}
	mAx := without(sa.dim(am), used)
	if len(mAx) != len(sa.dim(am)) {
		mAx = nil
	}
	for _, x := range mAx {
		used[x] = true
	}
	nAx := without(sb.dim(bn), used)
	if len(nAx) != len(sb.dim(bn)) {
		nAx = nil
	}
	for _, x := range nAx {
		used[x] = true
	}
	kA, kB := without(sa.dim(ak), used), without(sb.dim(bk), used)
	if len(kA) != len(sa.dim(ak)) {
		kA = nil
	}
	if len(kB) != len(sb.dim(bk)) {
		kB = nil
	}
	var k DimSpec
	outBytes := int64(a.DType().Size())
	for _, d := range batch {
		outBytes *= int64(d)
	}
	outBytes *= int64(a.Dim(am)) * int64(b.Dim(bn))
	// later psum of the result vs all-gather of the sharded operand
	cheaperPartial := func(x *tensor.Tensor, ax DimSpec) bool {
		g := int64(c.mesh.AxisSize(ax...))
		return 2*outBytes/g <= int64(x.Bytes())
	}
	switch {
	case slices.Equal(kA, kB):
		k = kA
	case len(kB) == 0 && len(kA) > 0 && cheaperPartial(a, kA) && b.Dim(bk)%c.mesh.AxisSize(kA...) == 0:
		k = kA
	case len(kA) == 0 && len(kB) > 0 && cheaperPartial(b, kB) && a.Dim(ak)%c.mesh.AxisSize(kB...) == 0:
		k = kB
	}
	ta := specFor(batchA, batch, bspec)
	ta = append(ta, make(Spec, 2)...)
	ta[am], ta[ak] = mAx, k
	tb := specFor(batchB, batch, bspec)
	tb = append(tb, make(Spec, 2)...)
	tb[bk], tb[bn] = k, nAx
	out := append(bspec, mAx, nAx)
	transA, transB, dt := p.TransA, p.TransB, p.DType
	st := &step{
		in:  []Sharding{NewSharding(c.mesh, ta), NewSharding(c.mesh, tb)},
		out: []Sharding{NewSharding(c.mesh, out)},
		local: func(_ int, bl []*tensor.Tensor) []*tensor.Tensor {
			if dt != 0 { // MatMulTo: the result dtype asked for
				return []*tensor.Tensor{tensor.MatMulTo(bl[0], bl[1], transA, transB, dt)}
			}
			return []*tensor.Tensor{tensor.MatMulT(bl[0], bl[1], transA, transB)}
		},
	}
	if len(k) > 0 {
		st.partial = []DimSpec{k}
	}
	return st
}

// reduceSumRule: each device sums its block; a reduced dimension that is
// sharded leaves a partial sum over its axes (pending sums of the operand
// carry over), reduced by the consumer: psum when it wants the value
// replicated, psum_scatter when it wants it sharded.
func reduceSumRule(c *opCall) *step {
	x := c.in[0]
	p, _ := tensor.DescribeParams(c.op, c.params)
	s := c.spec(0)
	var out Spec
	partial := slices.Clone(c.partial(0))
	for i := range x.Rank() {
		if slices.Contains(p.Axes, i) {
			partial = append(partial, s.dim(i)...)
			if p.KeepDims {
				out = append(out, nil)
			}
			continue
		}
		out = append(out, slices.Clone(s.dim(i)))
	}
	axes, keep := p.Axes, p.KeepDims
	insh := Replicated(c.mesh)
	if c.ls[0] != nil {
		insh = c.ls[0].sharding
	}
	st := &step{
		in:   []Sharding{insh},
		keep: []bool{c.ls[0] != nil},
		out:  []Sharding{NewSharding(c.mesh, out)},
		local: func(_ int, bl []*tensor.Tensor) []*tensor.Tensor {
			if keep {
				return []*tensor.Tensor{tensor.SumKeep(bl[0], axes...)}
			}
			return []*tensor.Tensor{tensor.Sum(bl[0], axes...)}
		},
	}
	if len(partial) > 0 {
		st.partial = []DimSpec{partial}
	}
	return st
}

// reduceExtremeRule is the rule of max and min: every device reduces its
// block, then the devices along the axes of reduced sharded dimensions
// combine their results with pmax (pmin) — the first pass of a two-pass
// softmax.
func reduceExtremeRule(c *opCall) *step {
	x := c.in[0]
	p, ok := tensor.DescribeParams(c.op, c.params)
	if !ok {
		return nil
	}
	s := cloneSpec(c.spec(0), x.Rank())
	var out Spec
	var axes DimSpec
	for i := range x.Rank() {
		if slices.Contains(p.Axes, i) {
			axes = append(axes, s[i]...)
			if p.KeepDims {
				out = append(out, nil)
			}
			continue
		}
		out = append(out, s[i])
	}
	return &step{
		in:      []Sharding{NewSharding(c.mesh, s)},
		out:     []Sharding{NewSharding(c.mesh, out)},
		local:   implLocal(c),
		combine: []DimSpec{axes},
		min:     c.op.Sharding.Family == tensor.ShardReduceMin,
	}
}

// transposeRule permutes the spec; pending sums carry over.
func transposeRule(c *opCall) *step {
	p, _ := tensor.DescribeParams(c.op, c.params)
	s := c.spec(0)
	out := make(Spec, len(p.Perm))
	for i, q := range p.Perm {
		out[i] = slices.Clone(s.dim(q))
	}
	perm := p.Perm
	return passThrough(c, out, func(b *tensor.Tensor) *tensor.Tensor { return tensor.Transpose(b, perm...) })
}

// passThrough is a step for a linear one-operand op that keeps the
// operand where it is (pending sums included) and lays the result out by
// out.
func passThrough(c *opCall, out Spec, f func(*tensor.Tensor) *tensor.Tensor) *step {
	if c.ls[0] == nil {
		return nil
	}
	st := &step{
		in:    []Sharding{c.ls[0].sharding},
		keep:  []bool{true},
		out:   []Sharding{NewSharding(c.mesh, out)},
		local: func(_ int, bl []*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{f(bl[0])} },
	}
	if p := c.partial(0); len(p) > 0 {
		st.partial = []DimSpec{slices.Clone(p)}
	}
	return st
}

// reshapeRule keeps a sharded dimension sharded when its blocks stay
// contiguous runs of the result: the dimension starts a result dimension
// (the same product of dimensions before it), which divides by the axes
// (the dimension is split with its axes on the leading part, or merged as
// the major part with the dimensions after it). Other sharded dimensions,
// such as the minor dimensions of a merge, are gathered first.
func reshapeRule(c *opCall) *step {
	x := c.in[0]
	p, _ := tensor.DescribeParams(c.op, c.params)
	in, outShape := x.Shape(), p.Shape
	s := cloneSpec(c.spec(0), len(in))
	out := make(Spec, len(outShape))
	prefix := func(shape []int, i int) int {
		n := 1
		for _, d := range shape[:i] {
			n *= d
		}
		return n
	}
	gathered := false
	for i := range in {
		if len(s[i]) == 0 {
			continue
		}
		g := c.mesh.AxisSize(s[i]...)
		found := false
		for j := range outShape {
			if prefix(outShape, j) != prefix(in, i) || outShape[j]%g != 0 || len(out[j]) > 0 {
				continue
			}
			// Merged with the dims after it, dim i stays the major part of
			// out[j]; those dims start inside out[j], match no result dim
			// and are gathered below.
			out[j] = s[i]
			found = true
			break
		}
		if !found {
			s[i] = nil
			gathered = true
		}
	}
	local := make([]int, len(outShape))
	for j, d := range outShape {
		local[j] = d / c.mesh.AxisSize(out[j]...)
	}
	f := func(b *tensor.Tensor) *tensor.Tensor { return tensor.Reshape(b, local...) }
	if gathered || c.ls[0] == nil {
		return &step{
			in:    []Sharding{NewSharding(c.mesh, s)},
			out:   []Sharding{NewSharding(c.mesh, out)},
			local: func(_ int, bl []*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{f(bl[0])} },
		}
	}
	return passThrough(c, out, f)
}

// broadcastRule: new leading dimensions and broadcast (size-1)
// dimensions are replicated; the others keep their axes.
func broadcastRule(c *opCall) *step {
	x := c.in[0]
	p, _ := tensor.DescribeParams(c.op, c.params)
	s := c.spec(0)
	off := len(p.Shape) - x.Rank()
	out := make(Spec, len(p.Shape))
	for i := range x.Rank() {
		if x.Dim(i) == p.Shape[off+i] {
			out[off+i] = slices.Clone(s.dim(i))
		}
	}
	local := make([]int, len(p.Shape))
	for j, d := range p.Shape {
		local[j] = d / c.mesh.AxisSize(out[j]...)
	}
	return passThrough(c, out, func(b *tensor.Tensor) *tensor.Tensor { return tensor.BroadcastTo(b, local...) })
}

// rowwise is the rule of ops that work along their last (class or
// softmax) axis independently for every leading position: softmax,
// log_softmax and their backward kernels along the last axis, and the
// cross-entropy family (logits [..., C], labels [...]). The leading
// dimensions are merged like elementwise operands; the last axis is
// gathered. The first result of a row reduction (tensor.ShardRowReduce,
// tensor.ShardCrossEntropy) has one value per row, the others full rows.
func rowwise(c *opCall) *step {
	full := 0
	for i, x := range c.in {
		if x.Rank() > c.in[full].Rank() {
			full = i
		}
	}
	r := c.in[full].Rank()
	if p, ok := tensor.DescribeParams(c.op, c.params); ok && len(p.Axes) == 1 {
		if ax := p.Axes[0]; ax != -1 && ax != r-1 {
			// softmax along another axis: gather it

			return nil
		}
	}
	lead := c.in[full].Shape()[:r-1]
	spec := make(Spec, r-1)
	used := map[string]bool{}
	for _, i := range bySize(c.in) {
		x := c.in[i]
		for k := range min(x.Rank(), r-1) {
			ax := c.spec(i).dim(k)
			if len(ax) == 0 || len(spec[k]) > 0 || x.Dim(k) != lead[k] || len(without(ax, used)) != len(ax) {
				continue
			}
			spec[k] = slices.Clone(ax)
			for _, a := range ax {
				used[a] = true
			}
		}
	}
	at := func(rank int) Sharding {
		s := cloneSpec(spec, min(rank, r-1))
		if rank == r {
			s = append(s, nil)
		}
		return NewSharding(c.mesh, s)
	}
	st := &step{in: make([]Sharding, len(c.in))}
	for i, x := range c.in {
		if x.Rank() != r && x.Rank() != r-1 {
			return nil
		}
		st.in[i] = at(x.Rank())
	}
	switch c.op.Sharding.Family {
	case tensor.ShardRowReduce, tensor.ShardCrossEntropy:
		st.out = []Sharding{at(r - 1)}
		st.outEach = at(r) // the further results, if any
	default:
		st.outEach = at(r)
	}
	st.local = implLocal(c)
	return st
}

// takeRule: x[..., V, ...] indexed along axis by ids. The ids keep their
// sharding (a batch of tokens stays split over the data axes); x is
// gathered along the indexed axis and along any axis the ids use, and the
// result is laid out like x before and after the indexed axis and like the
// ids in it. An embedding table sharded by embed and ids by batch need no
// communication.
func takeRule(c *opCall) *step {
	x, ids := c.in[0], c.in[1]
	p, _ := tensor.DescribeParams(c.op, c.params)
	axis := p.Axes[0]
	sx := cloneSpec(c.spec(0), x.Rank())
	si := cloneSpec(c.spec(1), ids.Rank())
	sx[axis] = nil
	used := axisSet(si...)
	for k := range sx {
		if len(without(sx[k], used)) != len(sx[k]) {
			sx[k] = nil
		}
	}
	out := append(append(cloneSpec(sx[:axis], axis), si...), sx[axis+1:]...)
	return &step{
		in:  []Sharding{NewSharding(c.mesh, sx), NewSharding(c.mesh, si)},
		out: []Sharding{NewSharding(c.mesh, out)},
		local: func(_ int, bl []*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Take(bl[0], bl[1], axis)}
		},
	}
}

// takeGradRule is the rule of take's VJP in the table, a scatter-add of
// g [..., ids..., ...] into [..., V, ...] at the ids along axis: every
// device scatters its block of g into a whole V axis, so the dimensions
// of g that the ids index leave a partial sum over their axes (psum'd or
// psum_scatter'd into the table's sharding by the consumer); the other
// dimensions keep g's axes.
func takeGradRule(c *opCall) *step {
	ids, g := c.in[0], c.in[1]
	p, _ := tensor.DescribeParams(c.op, c.params)
	axis, r := p.Axes[0], ids.Rank()
	sg := cloneSpec(c.spec(1), g.Rank())
	si := make(Spec, r)
	var partial DimSpec
	for k := range r {
		d := sg[axis+k]
		if len(d) == 0 {
			d = c.spec(0).dim(k)
			if len(without(d, axisSet(sg...))) != len(d) {
				d = nil
			}
			sg[axis+k] = d
		}
		si[k] = slices.Clone(d)
		partial = append(partial, d...)
	}
	out := append(append(cloneSpec(sg[:axis], axis), DimSpec(nil)), sg[axis+r:]...)
	op, params := c.op, c.params
	st := &step{
		in:  []Sharding{NewSharding(c.mesh, si), NewSharding(c.mesh, sg)},
		out: []Sharding{NewSharding(c.mesh, out)},
		local: func(_ int, bl []*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.CallBlock(op, bl, tensor.BlockParams(op, params, bl))}
		},
	}
	if len(partial) > 0 {
		st.partial = []DimSpec{partial}
	}
	return st
}

// classAxisSharded reports whether the last axis of operand i is sharded.
func classAxisSharded(c *opCall, i int) bool {
	x := c.in[i]
	return x.Rank() > 0 && len(c.spec(i).dim(x.Rank()-1)) > 0
}

// softmaxTwoPass computes softmax or log_softmax along a sharded last axis
// in the numerically stable two-pass form: the row maximum (local max,
// then pmax over the axis's devices) and the sum of exponentials (local
// sums, then psum), the rows never gathered. It is built from propagated
// ops, so it differentiates like any of them.
func softmaxTwoPass(c *opCall) []*tensor.Tensor {
	p, _ := tensor.DescribeParams(c.op, c.params)
	x := c.in[0]
	if ax := p.Axes[0]; (ax != -1 && ax != x.Rank()-1) || !classAxisSharded(c, 0) {
		return nil
	}
	z := tensor.Sub(x, tensor.StopGradient(tensor.MaxKeep(x, -1)))
	if c.op.Sharding.Family == tensor.ShardLogSoftmax {
		return []*tensor.Tensor{tensor.Sub(z, tensor.Log(tensor.SumKeep(tensor.Exp(z), -1)))}
	}
	e := tensor.Exp(z)
	return []*tensor.Tensor{tensor.Div(e, tensor.SumKeep(e, -1))}
}

// crossEntropyTwoPass is softmax cross-entropy with integer labels over
// logits whose class axis is sharded (vocabulary-parallel): the loss is
// logsumexp (two passes, as softmaxTwoPass) minus the logit of the label,
// which each device picks from its block with a one-hot mask (zero
// outside it) and a psum adds up.
func crossEntropyTwoPass(c *opCall) []*tensor.Tensor {
	if !classAxisSharded(c, 0) {
		return nil
	}
	z, labels := c.in[0], c.in[1]
	z = tensor.Sub(z, tensor.StopGradient(tensor.MaxKeep(z, -1)))
	lse := tensor.Log(tensor.Sum(tensor.Exp(z), -1))
	onehot := tensor.AsType(tensor.OneHot(labels, z.Dim(-1)), z.DType())
	loss := tensor.Sub(lse, tensor.Sum(tensor.Mul(z, onehot), -1))
	if c.op.ImplN == nil {
		return []*tensor.Tensor{loss}
	}
	return []*tensor.Tensor{loss, tensor.Exp(tensor.Sub(z, tensor.ExpandDims(lse, -1)))}
}
