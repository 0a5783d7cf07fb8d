package tensor

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gonox/gonox/tensor/internal/vec"
	"github.com/gonox/gonox/tensor/internal/vec/f64"
)

// Losses and the numerically stable functions they are built on.
//
// The two softmax cross-entropies are fused primitives. When the logits
// are traced they have a second, hidden output (the softmax, or the
// log-softmax for target distributions) that the VJP reads instead of
// recomputing it. Because that residual is an output of the op, not a
// constant captured by the VJP, gradients of gradients are right too: the
// VJP also accepts a cotangent for the hidden output. Untraced calls run a
// forward-only op that does not materialise the softmax.

// MSE returns the mean of (pred - target)² over all elements, a float32
// scalar: jnp.mean((pred - target) ** 2), PyTorch's mse_loss. The shapes
// must match exactly: MSE does not broadcast, because a broadcast here
// (f32[B,1] against f32[B]) is almost always a bug. The mean of no
// elements is NaN, as in JAX.
//
// MSE is one fused primitive (and its backward pass another) that returns
// exactly the bits of Mean(Square(Sub(pred, target))) and of its gradients.
func MSE(pred, target *Tensor) *Tensor {
	checkNil("tensor.MSE", "pred target", pred, target)
	if !sameFloat(pred, target) {
		panic(floatMismatch("tensor.MSE: "+operands("", pred, target), "operands must be float32", pred, target))
	}
	if !sameShape(pred.shape, target.shape) {
		panic(fmt.Sprintf("tensor.MSE: %s: shapes must match exactly (MSE does not broadcast)", operands("", pred, target)))
	}
	if pred.dtype == Float64 { // composed: the fused op is float32
		return Mean(Square(Sub(pred, target)))
	}
	return Apply(mseOp, nil, pred, target)
}

var mseOp, mseGradOp *Op

func init() {
	mseOp = &Op{
		Name:     "mse",
		Sharding: ShardingRule{Family: ShardMSE},
		Impl: func(in []*Tensor, _ any) *Tensor {
			a, b := in[0], in[1]
			out := newOut(Float32, nil)
			// As Mean(Square(Sub)): float32 squares summed in float64 in
			// SumF64's order, rounded, then scaled by the float32 1/n.
			s := mseSum(a.f32(), b.f32(), isLocal(a, b))
			out.f32()[0] = float32(float32(s) * (1 / float32(len(a.f32()))))
			return out
		},
		VJPNeed: func(g *Tensor, in []*Tensor, _ *Tensor, _ any, need uint64) []*Tensor {
			if plainOperand(g) && plainOperand(in[0]) && plainOperand(in[1]) {
				// What ApplyN would compute, without the dispatch and
				// its operand slice (as applyBwd), and without the
				// target's cotangent unless it is traced.
				return mseGrad(g, in[0], in[1], Wants(need, 1))
			}
			return ApplyN(mseGradOp, nil, g, in[0], in[1])
		},
		Save:   SaveAllInputs,
		Traits: Traits{Reuse: FreshVJP}, // mse_grad's results, or mseGrad's
		// d mean((a-b)²) = 2/n·Σ (a-b)·(da-db).
		JVP: func(x, t, _ []*Tensor, _ any) []*Tensor {
			d := subTangents(t[0], t[1])
			return one1(MulScalar(Sum(Mul(Sub(x[0], x[1]), d)), 2/float32(x[0].Size())))
		},
		// Per example: Mean(Square(Sub)), whose bits MSE's are.
		Batch: func(in []*Tensor, batched []bool, _ any) []*Tensor {
			x := alignBatch(in, batched, maxExampleRank(in, batched))
			d := Square(Sub(x[0], x[1]))
			return one1(Mean(d, exampleAxes(d)...))
		},
	}
	// mse_grad returns g/n·2(pred - target) and its negation in one sweep,
	// rounded as the unfused backward pass rounds them.
	mseGradOp = &Op{
		Name: "mse_grad",
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			return mseGrad(in[0], in[1], in[2], true), nil
		},
		VJPN: func(cs []*Tensor, in []*Tensor, _ []*Tensor, _ any, _ any) []*Tensor {
			// ga = s·2(a-b)·g with s = 1/n, gb = -ga.
			g, a, b := in[0], in[1], in[2]
			var c *Tensor
			switch {
			case cs[0] != nil && cs[1] != nil:
				c = Sub(cs[0], cs[1])
			case cs[0] != nil:
				c = cs[0]
			default:
				c = Neg(cs[1])
			}
			s := 1 / float32(a.Size())
			cg := MulScalar(c, 2*s)
			gg := Reshape(Sum(Mul(cg, Sub(a, b))), g.shape...)
			ga := Mul(cg, g)
			return []*Tensor{gg, ga, Neg(ga)}
		},
		Save: SaveAllInputs,
		// ga = 2/n·g·(a-b): d ga = 2/n·(dg·(a-b) + g·(da-db)), d gb = -d ga.
		JVP: func(x, t, _ []*Tensor, _ any) []*Tensor {
			g, a, b := x[0], x[1], x[2]
			var d *Tensor
			if t[0] != nil {
				d = Mul(t[0], Sub(a, b))
			}
			if dab := subTangents(t[1], t[2]); dab != nil {
				d = addTangents(d, Mul(g, dab))
			}
			d = MulScalar(toShapeOf(d, a), 2/float32(a.Size()))
			return []*Tensor{d, Neg(d)}
		},
		// Per example: (a-b)·2·(g·(1/n)), rounded as the kernel rounds.
		Batch: func(in []*Tensor, batched []bool, _ any) []*Tensor {
			x := alignBatch(in, batched, maxExampleRank(in[1:], batched[1:]))
			g, a, b := x[0], x[1], x[2]
			n := numel(exampleShape(in[1], batched[1]))
			gs := MulScalar(g, 1/float32(n))
			ga := Mul(MulScalar(Sub(a, b), 2), gs) // the batch first: g's, a's or b's
			return []*Tensor{ga, Neg(ga)}
		},
	}
}

// mseGrad returns mse_grad's results for the float32 host operands g, a
// and b; the second (b's cotangent) is nil unless wantB.
func mseGrad(g, a, b *Tensor, wantB bool) []*Tensor {
	// The result slice with ga's header: one allocation (the backward
	// pass reads the slice and goes on with ga).
	front := &struct {
		res [2]*Tensor
		ga  tensorBox
	}{}
	var ga, gb *Tensor
	if len(a.shape) <= len(front.ga.dims) {
		ga = front.ga.header(Float32, a.shape)
		ga.allocData("tensor", numel(a.shape), false)
	} else {
		ga = newOutUninit(Float32, a.shape)
	}
	var dgb []float32
	if wantB {
		gb = newOutUninit(Float32, a.shape)
		dgb = gb.f32()
	}
	gs := float32(g.f32()[0] * (1 / float32(len(a.f32()))))
	da, db, dga := a.f32(), b.f32(), ga.f32()
	if n := len(da); serial(n*costCheap, isLocal(g, a, b)) {
		mseGradRange(dga, dgb, da, db, gs)
	} else { // the closure only here: it escapes
		parallelFor(n, costCheap, 8, false, func(lo, hi int) {
			var sb []float32
			if dgb != nil {
				sb = dgb[lo:hi]
			}
			mseGradRange(dga[lo:hi], sb, da[lo:hi], db[lo:hi], gs)
		})
	}
	front.res = [2]*Tensor{ga, gb}
	return front.res[:]
}

// mseGradRange sets ga = (a-b)·2·gs and gb = -ga (gb nil: ga only).
func mseGradRange(ga, gb, a, b []float32, gs float32) {
	vec.SubVV(ga, a, b)
	vec.MulVS(ga, ga, 2)
	vec.MulVS(ga, ga, gs)
	if gb == nil {
		return
	}
	gb = gb[:len(ga)]
	for i, v := range ga {
		gb[i] = -v
	}
}

// mseSum returns Σ float32((a-b)²) in SumF64's order, blocks split over
// goroutines when large.
func mseSum(a, b []float32, local bool) float64 {
	n := len(a)
	if serial(n*costCheap, local) || n <= vec.SumBlock {
		return vec.SumSqDiffF64(a, b)
	}
	return blockSum(n, local, func(lo, hi int) float64 { return vec.SumSqDiffF64(a[lo:hi], b[lo:hi]) })
}

var xentOp, xentFwdOp, xentProbsOp, xentProbsFwdOp, xentGradOp *Op

func init() {
	xentOp = &Op{
		Name:     "softmax_cross_entropy",
		Sharding: ShardingRule{Family: ShardCrossEntropy},
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			sm := newOutUninit(Float32, in[0].shape) // every row written
			return []*Tensor{xentImpl(in[0], in[1], sm), sm}, nil
		},
		VJPN: func(gs []*Tensor, in []*Tensor, outs []*Tensor, _ any, _ any) []*Tensor {
			labels, sm := in[1], outs[1]
			var gz *Tensor
			if gs[0] != nil {
				// d loss / d logits = softmax - onehot(label), fused
				gz = Apply(xentGradOp, nil, gs[0], sm, labels)
			}
			if gs[1] != nil { // only in higher-order derivatives
				gz = xentAdd(gz, Apply(softmaxGradOp, len(sm.shape)-1, gs[1], sm))
			}
			if gz == nil {
				gz = ZerosLike(in[0])
			}
			return []*Tensor{gz, nil}
		},
		Save: SaveInputs(1) | SaveOutput,
		// d loss = Σ (softmax - onehot)·dz; d softmax = softmax_grad(dz).
		JVP: func(x, t, outs []*Tensor, _ any) []*Tensor {
			sm := outs[1]
			r := len(sm.shape)
			dl := Sum(Mul(Sub(sm, xentOnehot(x[1], sm.shape[r-1])), t[0]), -1)
			return []*Tensor{dl, Apply(softmaxGradOp, r-1, t[0], sm)}
		},
		Batch:  materializeBatch(&xentOp),
		Traits: Traits{Reuse: FreshVJP}, // the fused gradient kernel's result
	}
	// xentGradOp computes g·(softmax - onehot(label)) in one sweep.
	xentGradOp = &Op{
		Name:     "softmax_cross_entropy_grad",
		Sharding: ShardingRule{Family: ShardRowwise},
		Impl: func(in []*Tensor, _ any) *Tensor {
			g, sm, labels := in[0], in[1], in[2]
			out := newOutUninit(Float32, sm.shape)
			c := sm.shape[len(sm.shape)-1]
			rows := len(g.f32())
			srtParallel(rows, rows*c*2, srtLocal(g, sm, labels), func(lo, hi int) {
				if !vec.XentGradRows(out.f32()[lo*c:hi*c], sm.f32()[lo*c:hi*c], c, g.f32()[lo:hi], labels.i32()[lo:hi]) {
					panic(fmt.Sprintf("tensor.SoftmaxCrossEntropy: a label of %v out of range [0,%d)", labels, c))
				}
			})
			return out
		},
		VJP: func(ct *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			g, sm, labels := in[0], in[1], in[2]
			c := sm.shape[len(sm.shape)-1]
			onehot := AsType(Equal(ExpandDims(labels, -1), Arange(c)), Float32)
			return []*Tensor{Sum(Mul(ct, Sub(sm, onehot)), -1), Mul(ExpandDims(g, -1), ct), nil}
		},
		Save: SaveAllInputs,
		// z = g·(sm - onehot): dz = dg·(sm - onehot) + g·dsm.
		JVP: func(x, t, _ []*Tensor, _ any) []*Tensor {
			g, sm := x[0], x[1]
			var d *Tensor
			if t[0] != nil {
				d = Mul(ExpandDims(t[0], -1), Sub(sm, xentOnehot(x[2], sm.shape[len(sm.shape)-1])))
			}
			if t[1] != nil {
				d = addTangents(d, Mul(ExpandDims(g, -1), t[1]))
			}
			return one1(d)
		},
		Batch: materializeBatch(&xentGradOp),
	}
	xentFwdOp = &Op{
		Name:     "softmax_cross_entropy",
		Sharding: ShardingRule{Family: ShardCrossEntropy},
		Impl:     func(in []*Tensor, _ any) *Tensor { return xentImpl(in[0], in[1], nil) },
		Batch:    materializeBatch(&xentFwdOp),
	}
	xentProbsOp = &Op{
		Name:     "softmax_cross_entropy_probs",
		Sharding: ShardingRule{Family: ShardRowReduce},
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			lsm := newOutUninit(Float32, in[0].shape)
			return []*Tensor{xentProbsImpl(in[0], in[1], lsm), lsm}, nil
		},
		VJPN: func(gs []*Tensor, in []*Tensor, outs []*Tensor, _ any, _ any) []*Tensor {
			// loss = -Σ p·lsm = lse·Σp - Σ p·z, so
			// d/dz = softmax·Σp - p and d/dp = -lsm.
			p, lsm := in[1], outs[1]
			var gz, gp *Tensor
			if gs[0] != nil {
				sm := Exp(lsm)
				g0 := ExpandDims(gs[0], -1)
				gz = Mul(g0, Sub(Mul(sm, SumKeep(p, -1)), p))
				gp = Neg(Mul(g0, lsm))
			}
			if gs[1] != nil { // only in higher-order derivatives
				gz = xentAdd(gz, Apply(logSoftmaxGradOp, len(lsm.shape)-1, gs[1], lsm))
			}
			if gz == nil {
				gz = ZerosLike(in[0])
			}
			return []*Tensor{gz, gp}
		},
		Save: SaveInputs(1) | SaveOutput,
		// loss = -Σ p·lsm: d loss = -Σ (dp·lsm + p·dlsm), with
		// dlsm = dz - Σ softmax·dz.
		JVP: func(x, t, outs []*Tensor, _ any) []*Tensor {
			p, lsm := x[1], outs[1]
			var dlsm, dl *Tensor
			if t[0] != nil {
				dlsm = Sub(t[0], SumKeep(Mul(Exp(lsm), t[0]), -1))
				dl = Neg(Sum(Mul(p, dlsm), -1))
			}
			if t[1] != nil {
				dl = subTangents(dl, Sum(Mul(t[1], lsm), -1))
			}
			return []*Tensor{dl, dlsm}
		},
		Batch: materializeBatch(&xentProbsOp),
	}
	xentProbsFwdOp = &Op{
		Name:     "softmax_cross_entropy_probs",
		Sharding: ShardingRule{Family: ShardRowReduce},
		Impl:     func(in []*Tensor, _ any) *Tensor { return xentProbsImpl(in[0], in[1], nil) },
		Batch:    materializeBatch(&xentProbsFwdOp),
	}
}

func xentAdd(a, b *Tensor) *Tensor {
	if a == nil {
		return b
	}
	return Add(a, b)
}

// xentImpl returns the per-example loss and, if sm is not nil, writes the
// softmax into it.
func xentImpl(logits, labels, sm *Tensor) *Tensor {
	r := len(logits.shape)
	c := logits.shape[r-1]
	loss := newOutUninit(Float32, logits.shape[:r-1])
	rows := len(loss.f32())
	srtParallel(rows, rows*c*8, srtLocal(logits, labels), func(lo, hi int) {
		// Blocks of rows, each row's maximum and exponentials first, then
		// the logs: a short row's kernels are chains of dependent
		// instructions, and rows in one loop overlap (10 classes: 2x).
		var ms, sums [xentBlock]float64
		for b := lo; b < hi; b += xentBlock {
			e := min(b+xentBlock, hi)
			if c <= xentShort {
				xentShortRows(logits.f32()[b*c:e*c], sm, b, c, ms[:e-b], sums[:e-b])
			} else {
				for i := b; i < e; i++ {
					ms[i-b], sums[i-b] = softmaxRowSum(logits.f32()[i*c:(i+1)*c], xentRowOf(sm, i, c), false)
				}
			}
			for i := b; i < e; i++ {
				row := logits.f32()[i*c : (i+1)*c]
				m := ms[i-b]
				var lse float64
				if c <= xentShort { // the softmax finished by xentShortRows
					lse = math.Log(sums[i-b])
				} else {
					lse = softmaxRowEnd(row, xentRowOf(sm, i, c), false, m, sums[i-b])
				}
				// lse + m - z_label, with the large terms cancelled first.
				loss.f32()[i] = float32(lse - (float64(row[labels.i32()[i]]) - m))
			}
		}
	})
	return loss
}

// xentBlock is how many rows xentImpl takes through each of its phases at
// a time.
const xentBlock = 32

// xentShort is the longest row (classes) that xentShortRows takes.
const xentShort = 16

// xentShortRows is softmaxRowSum (without log) for the rows of c ≤
// xentShort classes in block, rows b... of the logits, with their bits,
// and for a non-nil sm softmaxRowEnd's normalisation of sm's rows: one
// vec.SoftmaxRows call for the block instead of two kernel calls and a
// loop a row (for a nil sm, vec.ExpShiftRows into scratch).
func xentShortRows(block []float32, sm *Tensor, b, c int, ms, sums []float64) {
	var m32 [xentBlock]float32
	if sm != nil {
		vec.SoftmaxRows(sm.f32()[b*c:b*c+len(block)], block, c, m32[:len(ms)], sums)
	} else {
		var scratch [xentBlock * xentShort]float32
		vec.ExpShiftRows(scratch[:len(block)], block, c, m32[:len(ms)], sums)
	}
	for i, m := range m32[:len(ms)] {
		ms[i] = float64(m)
	}
}

// xentRowOf returns row i of sm (rows of c), or nil for a nil sm.
func xentRowOf(sm *Tensor, i, c int) []float32 {
	if sm == nil {
		return nil
	}
	return sm.f32()[i*c : (i+1)*c]
}

// xentProbsImpl returns -Σ p·log_softmax(z) per row and, if lsm is not
// nil, writes the log-softmax into it. Terms with p == 0 count as 0 even
// where the log-softmax is -Inf.
func xentProbsImpl(logits, probs, lsm *Tensor) *Tensor {
	r := len(logits.shape)
	c := logits.shape[r-1]
	loss := newOutUninit(Float32, logits.shape[:r-1])
	rows := len(loss.f32())
	srtParallel(rows, rows*c*8, srtLocal(logits, probs), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row, p := logits.f32()[i*c:(i+1)*c], probs.f32()[i*c:(i+1)*c]
			var dst []float32
			if lsm != nil {
				dst = lsm.f32()[i*c : (i+1)*c]
			}
			m, lse := softmaxRow(row, dst, true)
			s := 0.0
			for j, v := range row {
				if p[j] != 0 {
					s += float64(p[j]) * (float64(v) - m - lse)
				}
			}
			loss.f32()[i] = float32(-s)
		}
	})
	return loss
}

// xentIndex renders the multi-index of flat element i of shape: "[2,0]".
func xentIndex(shape []int, i int) string {
	idx := make([]string, len(shape))
	for k := len(shape) - 1; k >= 0; k-- {
		idx[k] = strconv.Itoa(i % shape[k])
		i /= shape[k]
	}
	return "[" + strings.Join(idx, ",") + "]"
}

// SoftmaxCrossEntropy returns the cross-entropy between softmax(logits)
// and integer class labels, per example, like
// optax.softmax_cross_entropy_with_integer_labels: for logits f32[..., C]
// and labels i32[...] the result is f32[...] holding
// logsumexp(logits) - logits[label]. It is computed stably (logits of any
// finite size work) as one fused op whose VJP, (softmax - onehot)·g, reads
// the softmax saved by the forward pass. Average the result yourself
// (Mean) to get a batch loss.
//
// It panics if a label is outside [0, C), naming the label and its
// position in labels, or if labels' shape is not logits' shape without
// its last axis.
func SoftmaxCrossEntropy(logits, labels *Tensor) *Tensor {
	checkNil("tensor.SoftmaxCrossEntropy", "logits labels", logits, labels)
	const name = "tensor.SoftmaxCrossEntropy"
	desc := func() string { return operands("", logits, labels) }
	if !logits.dtype.IsFloat() {
		panic(fmt.Sprintf("%s: %s: logits must be float32", name, desc()))
	}
	if labels.dtype != Int32 {
		panic(fmt.Sprintf("%s: %s: labels must be int32 class indices (for target distributions use SoftmaxCrossEntropyProbs)", name, desc()))
	}
	r := len(logits.shape)
	if r == 0 {
		panic(fmt.Sprintf("%s: %s: logits need a class axis", name, desc()))
	}
	if !sameShape(labels.shape, logits.shape[:r-1]) {
		panic(fmt.Sprintf("%s: %s: labels must have shape %v (logits without the class axis)", name, desc(), logits.shape[:r-1]))
	}
	c := logits.shape[r-1]
	if labels.layout() == nil { // a sharded operand is refused by Apply
		for i, l := range labels.i32() {
			if l < 0 || int(l) >= c {
				panic(fmt.Sprintf("%s: %s: label %d at %s out of range [0,%d)", name, desc(), l, xentIndex(labels.shape, i), c))
			}
		}
	}
	if logits.dtype == Float64 { // composed: the fused op is float32
		lsm := LogSoftmax(logits, -1)
		return Neg(Squeeze(TakeAlongAxis(lsm, ExpandDims(labels, -1), -1), -1))
	}
	if !mayDiff(logits) {
		return Apply(xentFwdOp, nil, logits, labels)
	}
	return ApplyN(xentOp, nil, logits, labels)[0]
}

// SoftmaxCrossEntropyProbs returns the cross-entropy between softmax(logits)
// and target distributions probs, per example, like
// optax.softmax_cross_entropy: for logits and probs f32[..., C] the result
// is f32[...] holding -Σ_c probs_c·log_softmax(logits)_c. It is what
// distillation and label smoothing need. Terms with probs_c == 0 count as
// 0, also where the logit is -Inf. probs are not checked to sum to 1.
//
// It is differentiable with respect to both operands: softmax·Σprobs -
// probs for the logits and -log_softmax(logits) for probs. The shapes must
// match exactly.
func SoftmaxCrossEntropyProbs(logits, probs *Tensor) *Tensor {
	checkNil("tensor.SoftmaxCrossEntropyProbs", "logits probs", logits, probs)
	const name = "tensor.SoftmaxCrossEntropyProbs"
	desc := func() string { return operands("", logits, probs) }
	if !sameFloat(logits, probs) {
		panic(floatMismatch(name+": "+desc(), "operands must be float32 (for integer labels use SoftmaxCrossEntropy)", logits, probs))
	}
	if len(logits.shape) == 0 {
		panic(fmt.Sprintf("%s: %s: logits need a class axis", name, desc()))
	}
	if !sameShape(logits.shape, probs.shape) {
		panic(fmt.Sprintf("%s: %s: shapes must match exactly", name, desc()))
	}
	if logits.dtype == Float64 { // composed: the fused op is float32
		// A zero probability counts 0 also at a -Inf log-softmax; the
		// derivative in probs is -log_softmax, as the fused op's.
		lsm := LogSoftmax(logits, -1)
		lsm = Where(LogicalOr(IsFinite(lsm), NotEqual(probs, ScalarFloat64(0))), lsm, ScalarFloat64(0))
		return Neg(Sum(Mul(probs, lsm), -1))
	}
	if !mayDiff(logits) && !mayDiff(probs) {
		return Apply(xentProbsFwdOp, nil, logits, probs)
	}
	return ApplyN(xentProbsOp, nil, logits, probs)[0]
}

var softplusOp, logSigmoidOp *Op

func init() {
	softplusOp = withFloat64(unaryOpCost("softplus", costSlow, vec.Softplus, nil, nil,
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{Mul(g, Sigmoid(in[0]))}
		}, SaveInputs(0), Traits{}), costSlow, f64.Softplus)
	logSigmoidOp = withFloat64(unaryOpCost("log_sigmoid", costSlow, vec.LogSigmoid, nil, nil,
		func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{Mul(g, Sigmoid(Neg(in[0])))}
		}, SaveInputs(0), Traits{}), costSlow, f64.LogSigmoid)
}

func lossUnary(name string, op *Op, x *Tensor) *Tensor {
	if !x.dtype.IsFloat() {
		panic(fmt.Sprintf("%s: %v: not defined for %v", name, x, x.dtype))
	}
	return Apply(op, nil, x)
}

// Softplus returns log(1 + e^x) elementwise, like jax.nn.softplus,
// computed as max(x, 0) + log1p(e^-|x|) so it neither overflows for large
// x nor loses small values for very negative x. Its derivative is
// sigmoid(x).
func Softplus(x *Tensor) *Tensor {
	checkNil("tensor.Softplus", "x", x)
	return lossUnary("tensor.Softplus", softplusOp, x)
}

// LogSigmoid returns log(sigmoid(x)) = -softplus(-x) elementwise, like
// jax.nn.log_sigmoid, computed stably. Its derivative is sigmoid(-x).
func LogSigmoid(x *Tensor) *Tensor {
	checkNil("tensor.LogSigmoid", "x", x)
	return lossUnary("tensor.LogSigmoid", logSigmoidOp, x)
}

// SigmoidBinaryCrossEntropy returns, per element, the cross-entropy of
// sigmoid(logits) against labels in [0, 1], like
// optax.sigmoid_binary_cross_entropy:
// -labels·log σ(logits) - (1-labels)·log σ(-logits), each log-sigmoid
// computed stably, as optax computes it. (The shorter softplus(logits) -
// labels·logits rounds a confident correct prediction's loss away: for
// logits 30 and label 1 it gives 0, not 9.36e-14.) Labels may be soft
// (probabilities).
// Both operands are float32 of exactly the same shape (no broadcasting);
// the result has that shape. It is differentiable in both: σ(logits) -
// labels and -logits.
func SigmoidBinaryCrossEntropy(logits, labels *Tensor) *Tensor {
	checkNil("tensor.SigmoidBinaryCrossEntropy", "logits labels", logits, labels)
	const name = "tensor.SigmoidBinaryCrossEntropy"
	if !sameFloat(logits, labels) {
		panic(floatMismatch(name+": "+operands("", logits, labels), "operands must be float32", logits, labels))
	}
	if !sameShape(logits.shape, labels.shape) {
		panic(fmt.Sprintf("%s: %s: shapes must match exactly", name, operands("", logits, labels)))
	}
	pos := Mul(labels, LogSigmoid(logits))
	neg := Mul(Sub(Scalar(1), labels), LogSigmoid(Neg(logits)))
	return Neg(Add(pos, neg))
}

// subTangents returns a - b where either may be nil (zero).
func subTangents(a, b *Tensor) *Tensor {
	switch {
	case b == nil:
		return a
	case a == nil:
		return Neg(b)
	}
	return Sub(a, b)
}

// exampleAxes returns the axes of one example of a batch x (all but the
// first).
func exampleAxes(x *Tensor) []int {
	axes := make([]int, len(x.shape)-1)
	for i := range axes {
		axes[i] = i + 1
	}
	return axes
}

// xentOnehot returns the one-hot float32 rows of labels over c classes.
func xentOnehot(labels *Tensor, c int) *Tensor {
	return AsType(Equal(ExpandDims(labels, -1), Arange(c)), Float32)
}
