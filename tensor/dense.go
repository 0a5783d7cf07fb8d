package tensor

import "fmt"

// dense computes act(x @ w + b), a Linear layer with its bias and an
// activation whose derivative reads the output (relu, tanh, sigmoid) or
// none, as one op: composed, the product and bias_act are two nodes of
// the trace, two headers and two dispatches forward and, backward, the
// activation's derivative, the bias's sum and the two products as
// separate VJP calls. The fused op writes the product into its result and
// adds the bias and applies the activation there (the bits of MatMul then
// BiasAct); its VJP is the two VJPs composed (the same ops, the same
// bits) in one call. It keeps x, w and the output, as the composition
// does (the product's output is the activation's input, which relu,
// tanh and sigmoid do not need).

// denseParams are dense's parameters: the product's and the activation.
type denseParams struct {
	mm   *matmulParams
	act  Activation
	prod matmulParams // mm's storage, in the same allocation
}

var denseOp *Op

func init() {
	denseOp = &Op{
		Name: "dense",
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*denseParams)
			x, w, b := in[0], in[1], in[2]
			out := matmulF32(x, w, p.mm)
			// b is [N], or under Vmap a batch of biases [B, N] (rows of
			// out find theirs: addBiasActRows).
			addBiasAct(out.f32(), out.f32(), b.f32(), b.shape[len(b.shape)-1], p.act, isLocal(x, w, b))
			return out
		},
		VJPNeed: func(g *Tensor, in []*Tensor, out *Tensor, pp any, need uint64) []*Tensor {
			p := pp.(*denseParams)
			x, w, b := in[0], in[1], in[2]
			gz := g
			if p.act != ActIdentity {
				// gz is read here only: over a donated g, in place.
				gz = applyBwdOver(p.act.bwd(), g, out)
			}
			// The weight's cotangent may be taken over (a folded
			// reduce-scatter, foldWeightCotangent): not asked for then.
			need = need&^3 | foldWeightCotangent(gz, x, w, p.mm, need&3)
			res := denseCotangents(gz, x, w, b, need)
			if res == nil {
				var db *Tensor
				if Wants(need, 2) {
					db = biasGrad(gz, b)
				}
				res = append(matmulCotangents(gz, x, w, p.mm, need&3, matmulT), db)
			}
			if gz != g && !gz.IsTraced() && gz.layout() == nil {
				Donate(gz)
			}
			return res
		},
		SaveFor: func(pp any) SaveMask {
			if pp.(*denseParams).act == ActIdentity {
				return SaveInputs(0, 1)
			}
			return SaveInputs(0, 1) | SaveOutput
		},
		// The product's rule, then bias_act's (which reads only the
		// output and, for its shape, its input: the output's shape).
		JVP: func(x, t, outs []*Tensor, pp any) []*Tensor {
			p := pp.(*denseParams)
			var ty *Tensor
			if t[0] != nil || t[1] != nil {
				ty = matmulOp.JVP(x[:2], t[:2], nil, p.mm)[0]
			}
			return biasActOp.JVP([]*Tensor{outs[0], x[2]}, []*Tensor{ty, t[2]}, outs, p.act)
		},
		// A batch of weights (an ensemble's layers) on plain operands:
		// denseBatch; otherwise the composition's batching rules.
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			p := pp.(*denseParams)
			if batched[1] && plainBatch(in) {
				return denseBatch(in, batched, p)
			}
			y := matmulBatchRule(in[:2], batched[:2], p.mm)[0]
			ys, bs := [2]*Tensor{y, in[2]}, [2]bool{batched[0] || batched[1], batched[2]}
			out := biasActBatch(ys[:], bs[:], p.act)
			if out[0] != y && !y.IsTraced() && y.layout() == nil {
				// The product is dead (bias_act's result is fresh): its
				// storage serves the next step's (the fused op has no
				// such intermediate; under Vmap, without this, every
				// step allocated it anew).
				Donate(y)
			}
			return out
		},
		// Package shard never meets the op: MatMulBiasAct composes for
		// placed operands. The VJP consumes a donated cotangent at most
		// once, in the activation's bwd op.
		Traits: Traits{Reuse: FreshVJP | TakesCotangent},
	}
}

// denseBatch is dense's batching rule for a batch of weights on plain
// operands (no trace, level or placement records what it computes): one
// dense call with the product's params widened to the batch, each
// example's bias added in place over its rows of the product, where the
// composition's rules made a product, a bias_act result and a view of
// the biases per layer. The same kernels on the same values: the bits of
// the composition.
func denseBatch(in []*Tensor, batched []bool, p *denseParams) []*Tensor {
	x := alignBatch(in[:2], batched[:2], 2)
	buf := &struct {
		d  denseParams
		rc ruleCall
	}{}
	p.mm.batchedInto(&buf.d.prod, batchSize(in, batched))
	buf.d.mm, buf.d.act = &buf.d.prod, p.act
	buf.rc.args[0], buf.rc.args[1], buf.rc.args[2] = x[0], x[1], in[2]
	return buf.rc.call(denseOp, &buf.d, 3)
}

// denseCotangents returns the cotangents of x, w and b (those need asks
// for) of dense's VJP given gz (the activation's derivative applied) on
// plain float32 operands (see plainOperand; b is only read for its
// shape), x [M, K], w [K, N] and b [N] with M, N > 1, and nil otherwise:
// matmulCotangents' products and biasGrad's sums, their bits, with the
// result slice and the three headers in one allocation besides the
// storage rather than six. Holding one of the cotangents keeps the three
// headers (about 500 bytes, not their storage, which each releases on its
// own): a layer's gradients are held together anyway, and x's cotangent is
// consumed by the backward pass at once.
func denseCotangents(gz, x, w, b *Tensor, need uint64) []*Tensor {
	if !plainOperand(gz) || !plainOperand(x) || !plainOperand(w) || b.dtype != Float32 || b.node != nil || b.ext != nil ||
		len(x.shape) != 2 || len(w.shape) != 2 || len(b.shape) != 1 {
		return nil
	}
	m, k, n := x.shape[0], x.shape[1], w.shape[1]
	if m == 1 || n == 1 {
		return nil // an inner dimension of 1: matmulT's outer product
	}
	rec := &struct {
		res [3]*Tensor
		box [3]tensorBox // x's, w's and b's cotangents
	}{}
	if Wants(need, 0) {
		rec.res[0] = gemmOut(rec.box[0].header(Float32, x.shape), gz, w, false, true, m, k, n)
	}
	if Wants(need, 1) {
		rec.res[1] = gemmOut(rec.box[1].header(Float32, w.shape), x, gz, true, false, k, n, m)
	}
	if Wants(need, 2) {
		db := rec.box[2].header(Float32, b.shape)
		db.allocData("tensor", n, false)
		sumColsF32(db.f32(), gz.f32(), m, n, false)
		rec.res[2] = db
	}
	return rec.res[:]
}

// plainBatch reports whether every operand is a float32 host tensor with
// data and no trace, Vmap or forward-mode level, or placement.
func plainBatch(xs []*Tensor) bool {
	for _, x := range xs {
		if !plainF32(x) || x.xv() != nil {
			return false
		}
	}
	return true
}

// hostF32 reports whether every operand is a float32 tensor that is not
// placed.
func hostF32(xs ...*Tensor) bool {
	for _, x := range xs {
		if x.dtype != Float32 || x.layout() != nil {
			return false
		}
	}
	return true
}

// MatMulBiasAct returns act(x @ w + b) for x [M, K], w [K, N] and a bias b
// [N]: BiasAct(MatMul(x, w), b, act) as one op (dense) when the operands
// are float32 host tensors and act is relu, tanh, sigmoid or identity,
// whose derivatives read the output; other activations, dtypes, shapes
// and placed operands compose. Values and gradients are those of the
// composition bit for bit.
func MatMulBiasAct(x, w, b *Tensor, act Activation) *Tensor {
	checkNil("tensor.MatMulBiasAct", "x w b", x, w, b)
	if act >= numActivations {
		panic(fmt.Sprintf("tensor.MatMulBiasAct: %s: unknown activation %v", operands("@", x, w), act))
	}
	if len(x.shape) != 2 || len(w.shape) != 2 || len(b.shape) != 1 || act.fromInput() || !hostF32(x, w, b) {
		return BiasAct(MatMul(x, w), b, act)
	}
	// The params and the operands passed to Apply in one allocation.
	buf := &struct {
		d  denseParams
		rc ruleCall
	}{}
	d := &buf.d
	d.act = act
	d.prod.check("tensor.MatMulBiasAct", x, w, false, false, x, w)
	d.mm = &d.prod
	if b.shape[0] != d.mm.n {
		panic(fmt.Sprintf("tensor.MatMulBiasAct: %s, b %v: the bias must be a vector of %d", operands("@", x, w), b, d.mm.n))
	}
	buf.rc.args[0], buf.rc.args[1], buf.rc.args[2] = x, w, b
	return buf.rc.call(denseOp, d, 3)[0]
}
