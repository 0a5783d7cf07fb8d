package tensor

import (
	"fmt"
	"slices"
	"sort"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// AdamCoeffs are the per-step scalars of an Adam update (see AdamUpdate).
type AdamCoeffs struct {
	// B1 and B2 are the moment decays, G1 and G2 their complements 1-B1
	// and 1-B2 (computed in float64 by the caller: 1-float32(0.999) is
	// 1.3e-5 off).
	B1, B2, G1, G2 float32
	// A and B weigh the new first moment and the gradient in the
	// numerator: 1/(1-b1^t) and 0 for Adam, Nesterov's pair otherwise.
	A, B float32
	// C2 is 1/(1-b2^t), the second moment's bias correction.
	C2 float32
	// Eps is added to the root, EpsRoot under it.
	Eps, EpsRoot float32
	// WD is the decoupled weight decay (AdamW), Post the final scale (the
	// negated learning rate, or 1).
	WD, Post float32
}

type adamParams struct{ c AdamCoeffs }

var adamOp *Op

func init() {
	adamOp = &Op{
		Name:     "adam_update",
		Sharding: ShardingRule{Family: ShardElementwise},
		ImplN: func(in []*Tensor, pp any) ([]*Tensor, any) {
			c := pp.(adamParams).c
			g, mu, nu := in[0], in[1], in[2]
			var p []float32
			if len(in) > 3 {
				p = in[3].f32()
			}
			u, mu2, nu2 := newOutUninit(Float32, g.shape), newOutUninit(Float32, g.shape), newOutUninit(Float32, g.shape)
			vc := vecAdam(c)
			kernel := func(lo, hi int) {
				var ps []float32
				if p != nil {
					ps = p[lo:hi]
				}
				vec.Adam(u.f32()[lo:hi], mu2.f32()[lo:hi], nu2.f32()[lo:hi], g.f32()[lo:hi], mu.f32()[lo:hi], nu.f32()[lo:hi], ps, &vc)
			}
			n := len(g.f32())
			if serial(n*costMath, isLocal(in...)) {
				kernel(0, n)
			} else {
				parallelFor(n, costMath, 8, false, kernel)
			}
			return []*Tensor{u, mu2, nu2}, nil
		},
		Batch: materializeBatch(&adamOp),
	}
}

// AdamUpdate computes one Adam (or AdamW) step for a parameter in a single
// pass over its gradient g and moments mu and nu:
//
//	mu' = B1·mu + G1·g
//	nu' = B2·nu + G2·g²
//	u   = Post · ((A·mu' + B·g) / (sqrt(C2·nu' + EpsRoot) + Eps) + WD·p)
//
// returning the update u and the new moments. p is the parameter, needed
// only with weight decay (nil otherwise). It is what package optim's Adam
// runs: one pass instead of a dozen elementwise ops, each allocating its
// result. Large tensors are split over the cores outside shard.Map. It is
// not differentiable. The results carry the logical axes
// (WithLogicalAxes) of the values they stand for: u those of g, mu' of
// mu, nu' of nu, as pytree.Map would give them, without a second header
// over their storage.
func AdamUpdate(g, mu, nu, p *Tensor, c AdamCoeffs) (u, mu2, nu2 *Tensor) {
	checkNil("tensor.AdamUpdate", "g mu nu", g, mu, nu)
	in := []*Tensor{g, mu, nu}
	if c.WD != 0 {
		if p == nil {
			panic("tensor.AdamUpdate: weight decay needs the parameter p")
		}
		in = append(in, p)
	}
	for _, x := range in {
		if (x.dtype != Float32 && x.dtype != Float64) || x.dtype != g.dtype || !sameShape(x.shape, g.shape) {
			panic(fmt.Sprintf("tensor.AdamUpdate: %s: want float32 (or float64) tensors of one shape", operands(",", in...)))
		}
	}
	if g.dtype == Float64 { // composed: the fused kernel is float32
		u, mu2, nu2 := adam64(g, mu, nu, p, c)
		return namedLike(u, g), namedLike(mu2, mu), namedLike(nu2, nu)
	}
	out := ApplyN(adamOp, adamParams{c}, in...)
	return namedLike(out[0], g), namedLike(out[1], mu), namedLike(out[2], nu)
}

var adamStepOp *Op

func init() {
	adamStepOp = &Op{
		Name:     "adam_step",
		Sharding: ShardingRule{Family: ShardElementwise},
		ImplN: func(in []*Tensor, pp any) ([]*Tensor, any) {
			c := pp.(adamParams).c
			p, g, mu, nu := in[0], in[1], in[2], in[3]
			p2, mu2, nu2 := newOutUninit(Float32, g.shape), newOutUninit(Float32, g.shape), newOutUninit(Float32, g.shape)
			vc := vecAdam(c)
			kernel := func(lo, hi int) {
				vec.AdamStep(p2.f32()[lo:hi], mu2.f32()[lo:hi], nu2.f32()[lo:hi], p.f32()[lo:hi], g.f32()[lo:hi], mu.f32()[lo:hi], nu.f32()[lo:hi], &vc)
			}
			n := len(g.f32())
			if serial(n*costMath, isLocal(in...)) {
				kernel(0, n)
			} else {
				parallelFor(n, costMath, 8, false, kernel)
			}
			return []*Tensor{p2, mu2, nu2}, nil
		},
		Batch: materializeBatch(&adamStepOp),
	}
}

// AdamStep is AdamUpdate followed by the update's addition to the
// parameter, in one pass over p, g, mu and nu (PyTorch's fused AdamW):
//
//	p' = p + Post · ((A·mu' + B·g) / (sqrt(C2·nu' + EpsRoot) + Eps) + WD·p)
//
// with mu' and nu' as in AdamUpdate. It returns the new parameter and
// moments, the same bits as AdamUpdate then Add, with the logical axes of
// p, mu and nu. It is not differentiable.
func AdamStep(p, g, mu, nu *Tensor, c AdamCoeffs) (p2, mu2, nu2 *Tensor) {
	checkNil("tensor.AdamStep", "p g mu nu", p, g, mu, nu)
	in := []*Tensor{p, g, mu, nu}
	for _, x := range in {
		if (x.dtype != Float32 && x.dtype != Float64) || x.dtype != g.dtype || !sameShape(x.shape, g.shape) {
			panic(fmt.Sprintf("tensor.AdamStep: %s: want float32 (or float64) tensors of one shape", operands(",", in...)))
		}
	}
	if g.dtype == Float64 {
		u, mu2, nu2 := adam64(g, mu, nu, p, c)
		return namedLike(Add(p, u), p), namedLike(mu2, mu), namedLike(nu2, nu)
	}
	out := ApplyN(adamStepOp, adamParams{c}, in...)
	return namedLike(out[0], p), namedLike(out[1], mu), namedLike(out[2], nu)
}

// adamStepsParams are the coefficients of AdamSteps, one per parameter.
type adamStepsParams struct{ cs []AdamCoeffs }

var adamStepsOp *Op

func init() {
	adamStepsOp = &Op{
		Name: "adam_steps",
		// No sharding rule: AdamSteps hands placed parameters to AdamStep
		// one by one, so placed operands never reach this op through it.
		ImplN: func(in []*Tensor, pp any) ([]*Tensor, any) {
			cs := pp.(adamStepsParams).cs
			out := make([]*Tensor, 3*len(cs))
			for i := range cs {
				for j := range 3 {
					out[3*i+j] = newOutUninit(Float32, in[4*i].shape)
				}
			}
			adamStepsKernel(in, out, cs)
			return out, nil
		},
		Batch: materializeBatch(&adamStepsOp),
	}
}

// adamStepsKernel computes adam_steps: parameter i's operands are
// in[4i:4i+4] (p, g, mu, nu) and its results out[3i:3i+3] (p', mu', nu'),
// which may be p, mu and nu themselves.
func adamStepsKernel(in, out []*Tensor, cs []AdamCoeffs) {
	vcs := make([]vec.AdamCoeffs, len(cs))
	off := make([]int, len(cs)+1) // parameter i's elements are [off[i], off[i+1]) of all
	for i, c := range cs {
		vcs[i] = vecAdam(c)
		off[i+1] = off[i] + len(in[4*i].f32())
	}
	kernel := func(lo, hi int) {
		for i := max(0, sort.SearchInts(off, lo+1)-1); i < len(cs) && off[i] < hi; i++ {
			a, b := max(lo, off[i])-off[i], min(hi, off[i+1])-off[i]
			if a >= b {
				continue
			}
			p, g, mu, nu := in[4*i].f32(), in[4*i+1].f32(), in[4*i+2].f32(), in[4*i+3].f32()
			vec.AdamStep(out[3*i].f32()[a:b], out[3*i+1].f32()[a:b], out[3*i+2].f32()[a:b], p[a:b], g[a:b], mu[a:b], nu[a:b], &vcs[i])
		}
	}
	n := off[len(cs)]
	if serial(n*costMath, isLocal(in...)) {
		kernel(0, n)
	} else {
		parallelFor(n, costMath, 16, false, kernel)
	}
}

// AdamSteps is AdamStep over several parameters in one pass (PyTorch's
// multi-tensor "foreach" Adam): parameter i is ps[i] with its gradient
// gs[i], its moments mus[i] and nus[i], and its coefficients cs[i] (which
// may differ, say in weight decay). It returns the new parameters and
// moments, the same bits as AdamStep on each, with the logical axes of ps,
// mus and nus. The parameters' elements are split over the cores together,
// as one range: parameters too small to split on their own share a
// parallel region with the others instead of running one after another on
// one core. Placed (package shard) and float64 parameters, and blocks
// inside shard.Map (whose marks are per parameter), are updated by
// AdamStep one by one. It is not differentiable.
func AdamSteps(ps, gs, mus, nus []*Tensor, cs []AdamCoeffs) (p2, mu2, nu2 []*Tensor) {
	k := len(ps)
	in, one := adamStepsOperands("tensor.AdamSteps", ps, gs, mus, nus, cs)
	p2, mu2, nu2 = make([]*Tensor, k), make([]*Tensor, k), make([]*Tensor, k)
	if one {
		for i := range k {
			p2[i], mu2[i], nu2[i] = AdamStep(ps[i], gs[i], mus[i], nus[i], cs[i])
		}
		return p2, mu2, nu2
	}
	out := ApplyN(adamStepsOp, adamStepsParams{slices.Clone(cs)}, in...)
	for i := range k {
		p2[i], mu2[i], nu2[i] = namedLike(out[3*i], ps[i]), namedLike(out[3*i+1], mus[i]), namedLike(out[3*i+2], nus[i])
	}
	return p2, mu2, nu2
}

// adamStepsOperands checks the operands of op, AdamSteps or
// AdamStepsDonating (as many of each, of one shape and dtype a parameter,
// none nil or donated) and returns them in the order of adam_steps (p, g,
// mu, nu a parameter), and whether some parameter must go through
// AdamStep alone (placed, float64, local).
func adamStepsOperands(op string, ps, gs, mus, nus []*Tensor, cs []AdamCoeffs) (in []*Tensor, one bool) {
	k := len(ps)
	if len(gs) != k || len(mus) != k || len(nus) != k || len(cs) != k {
		panic(fmt.Sprintf("%s: %d parameters, %d gradients, %d and %d moments, %d coefficients: want as many of each",
			op, k, len(gs), len(mus), len(nus), len(cs)))
	}
	in = make([]*Tensor, 0, 4*k)
	for i := range k {
		x := []*Tensor{ps[i], gs[i], mus[i], nus[i]}
		if slices.ContainsFunc(x, func(t *Tensor) bool { return t == nil || t.donated || t.primal != nil && t.IsDonated() }) {
			checkNil(op, fmt.Sprintf("ps[%d] gs[%d] mus[%d] nus[%d]", i, i, i, i), x...)
		}
		for _, t := range x {
			if (t.dtype != Float32 && t.dtype != Float64) || t.dtype != ps[i].dtype || !sameShape(t.shape, ps[i].shape) {
				panic(fmt.Sprintf("%s: parameter %d: %s: want float32 (or float64) tensors of one shape", op, i, operands(",", x...)))
			}
			one = one || t.dtype == Float64 || t.layout() != nil || t.local() != nil
		}
		in = append(in, x...)
	}
	return in, one
}

// vecAdam converts the coefficients for package vec's kernels.
func vecAdam(c AdamCoeffs) vec.AdamCoeffs {
	return vec.AdamCoeffs{B1: c.B1, B2: c.B2, G1: c.G1, G2: c.G2, A: c.A, B: c.B, C2: c.C2, Eps: c.Eps, EpsRoot: c.EpsRoot, WD: c.WD, Post: c.Post}
}

type sgdParams struct {
	mu, s    float32
	nesterov bool
}

var sgdStepOp *Op

func init() {
	sgdStepOp = &Op{
		Name:     "sgd_step",
		Sharding: ShardingRule{Family: ShardElementwise},
		ImplN: func(in []*Tensor, pp any) ([]*Tensor, any) {
			c := pp.(sgdParams)
			p, g := in[0], in[1]
			p2 := newOutUninit(Float32, g.shape)
			var t, t2 *Tensor
			if len(in) > 2 {
				t, t2 = in[2], newOutUninit(Float32, g.shape)
			}
			kernel := func(lo, hi int) {
				if t == nil {
					vec.SGDStep(p2.f32()[lo:hi], nil, p.f32()[lo:hi], g.f32()[lo:hi], nil, c.mu, c.s, c.nesterov)
					return
				}
				vec.SGDStep(p2.f32()[lo:hi], t2.f32()[lo:hi], p.f32()[lo:hi], g.f32()[lo:hi], t.f32()[lo:hi], c.mu, c.s, c.nesterov)
			}
			n := len(g.f32())
			if serial(n*costCheap, isLocal(in...)) {
				kernel(0, n)
			} else {
				parallelFor(n, costCheap, 8, false, kernel)
			}
			if t == nil {
				return []*Tensor{p2}, nil
			}
			return []*Tensor{p2, t2}, nil
		},
		Batch: materializeBatch(&sgdStepOp),
	}
}

// SGDStep is one step of SGD applied to the parameter in one pass over p,
// g and the momentum trace t (nil without momentum): with s the negated
// learning rate,
//
//	t' = g + mu·t
//	p' = p + s·t'             (p + s·(g + mu·t') with nesterov)
//
// or p' = p + s·g without a trace. It returns p' and t' (nil without a
// trace), the bits of the same steps done as separate elementwise ops
// (each product rounded on its own), with the logical axes of p and t. It
// is not differentiable.
func SGDStep(p, g, t *Tensor, mu, s float32, nesterov bool) (p2, t2 *Tensor) {
	checkNil("tensor.SGDStep", "p g", p, g)
	in := []*Tensor{p, g}
	if t != nil {
		in = append(in, t)
	}
	for _, x := range in {
		if (x.dtype != Float32 && x.dtype != Float64) || x.dtype != g.dtype || !sameShape(x.shape, g.shape) {
			panic(fmt.Sprintf("tensor.SGDStep: %s: want float32 (or float64) tensors of one shape", operands(",", in...)))
		}
	}
	if g.dtype == Float64 {
		p2, t2 := sgd64(p, g, t, float64(mu), float64(s), nesterov)
		if t == nil {
			return namedLike(p2, p), nil
		}
		return namedLike(p2, p), namedLike(t2, t)
	}
	out := ApplyN(sgdStepOp, sgdParams{mu: mu, s: s, nesterov: nesterov}, in...)
	if t == nil {
		return namedLike(out[0], p), nil
	}
	return namedLike(out[0], p), namedLike(out[1], t)
}

// namedLike gives y, a result an op of this package has just made (no one
// else holds its header), the logical axes of x when y has none and the
// same rank, in place: naming it costs no second header over its storage.
func namedLike(y, x *Tensor) *Tensor {
	if x.axes() != nil && y.axes() == nil && len(x.axes()) == len(y.shape) && y != x {
		y.setAxes(x.axes()) // names are never changed once set: shared
	}
	return y
}
