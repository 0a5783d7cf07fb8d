package tensor

import (
	"fmt"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// AdamStepIntoOverMomentsLater is AdamStepsIntoOverMoments of one
// parameter whose gradient is not known yet: it returns the results now,
// p2 a header of its own over dst's storage and mu2 and nu2 over mu's and
// nu's (fresh where AdamStepsIntoOverMoments would write them fresh: all
// three when dst is nil, as for a parameter without a destination there),
// and step, which updates elements [at,
// at+len(g)) of all three from their gradient g, reading p, mu and nu
// there first. The results hold their new values once step has been
// called for every element exactly once (in any order; steps of disjoint
// ranges may run at once, as StepFrom runs them); the gradient need never
// exist whole: SumProductsPartThen hands it over block by block, while
// each block is in cache. Each element gets the bits AdamSteps gives it
// (the same kernel). The caller
// must not read mu, nu or dst until then, nor mu or nu after (as
// AdamStepsIntoOverMoments); the operands are those of
// AdamStepsIntoOverMoments without the gradient, and the call panics
// otherwise. step runs on the calling goroutine and is not
// differentiable.
func AdamStepIntoOverMomentsLater(dst, p, mu, nu *Tensor, c AdamCoeffs) (p2, mu2, nu2 *Tensor, step PieceStep) {
	const op = "tensor.AdamStepIntoOverMomentsLater"
	in := []*Tensor{p, mu, nu}
	checkNil(op, "p mu nu", in...)
	out := laterResults(op, dst, in)
	p2, mu2, nu2 = out[0], out[1], out[2]
	vc := vecAdam(c)
	pd, md, nd := p.f32(), mu.f32(), nu.f32()
	pw, mw, nw := p2.f32(), mu2.f32(), nu2.f32()
	step = func(at int, g []float32) {
		hi := checkPiece(op, at, len(g), len(pd))
		c := vc // captured by value: the closure is the step's one allocation
		vec.AdamStep(pw[at:hi], mw[at:hi], nw[at:hi], pd[at:hi], g, md[at:hi], nd[at:hi], &c)
	}
	return p2, mu2, nu2, step
}

// SGDStepIntoLater is SGDStepInto of a parameter whose gradient is not
// known yet, as AdamStepIntoOverMomentsLater is for Adam: it returns the
// new parameter p2 (over dst's storage, fresh if dst is nil) and trace t2
// (nil without momentum: t nil; else over t's storage, which the caller
// gives up, or fresh where it overlaps another operand), and step, which
// computes elements [at, at+len(g)) of both from their gradient g, with
// the bits of SGDStep (both fresh when dst is nil). The results hold their
// values once step has been called for every element exactly once.
func SGDStepIntoLater(dst, p, t *Tensor, mu, s float32, nesterov bool) (p2, t2 *Tensor, step PieceStep) {
	const op = "tensor.SGDStepIntoLater"
	checkNil(op, "p", p)
	in := []*Tensor{p}
	if t != nil {
		in = append(in, t)
	}
	out := laterResults(op, dst, in)
	p2 = out[0]
	pd, pw := p.f32(), p2.f32()
	var td, tw []float32
	if t != nil {
		t2 = out[1]
		td, tw = t.f32(), t2.f32()
	}
	step = func(at int, g []float32) {
		hi := checkPiece(op, at, len(g), len(pd))
		var a, b []float32
		if td != nil {
			a, b = tw[at:hi], td[at:hi]
		}
		vec.SGDStep(pw[at:hi], a, pd[at:hi], g, b, mu, s, nesterov)
	}
	return p2, t2, step
}

// laterResults checks the operands in (the parameter first, then its
// state: float32 host tensors of one shape; three at most) and the
// destination dst (nil: fresh) of a Later step, as AdamStepsInto does, and
// returns the results, in in's order: with a destination, the
// parameter's over it and each state's over its own storage where it
// overlaps no other operand; the others fresh.
func laterResults(op string, dst *Tensor, in []*Tensor) (out [3]*Tensor) {
	for _, x := range in {
		if x.dtype != Float32 || !sameShape(x.shape, in[0].shape) {
			panic(fmt.Sprintf("%s: %s: want float32 tensors of one shape", op, operands(",", in...)))
		}
	}
	for _, x := range in {
		if x.node != nil || x.layout() != nil || x.xv() != nil || x.donated {
			panic(fmt.Sprintf("%s: %s: want untraced, unbatched float32 host operands", op, operands(",", in...)))
		}
	}
	if dst != nil {
		checkInto(op, []*Tensor{dst}, [][]*Tensor{in}, []int{0})
		out[0] = intoHeader(op, dst, in[0], in)
	}
	for m := range in {
		switch {
		case m == 0 && dst != nil:
			continue
		case m > 0 && dst != nil && alone(in, m):
			out[m] = intoHeader(op, in[m], in[m], in)
			continue
		}
		y := newOutUninit(Float32, in[m].shape)
		if loc := unionOf(op, in); loc != nil {
			y.setLocal(loc)
		}
		out[m] = namedLike(y, in[m])
	}
	return out
}

// checkPiece panics unless elements [at, at+n) lie within a parameter of
// size elements, naming op, and returns at+n.
func checkPiece(op string, at, n, size int) int {
	if at < 0 || n < 0 || at > size || n > size-at { // at+n may overflow
		panic(fmt.Sprintf("%s: step of elements [%d, %d) of a parameter of %d", op, at, at+n, size))
	}
	return at + n
}

// StepFrom runs step (a PieceStep of a parameter of g's size) on every
// element of g, the parameter's whole gradient, splitting the range over
// the cores as AdamSteps does: an optimizer applied in the backward pass
// as each gradient becomes final (autodiff.OnGradient) updates a leaf
// while its gradient is in cache. g must be a float32 host tensor of the
// parameter's size (a view is gathered first); the call panics otherwise,
// and if step is nil. (A PieceStep does not know its parameter's size: a
// g larger than the parameter panics in step, naming step's op; a smaller
// one updates only the parameter's first elements.)
// The pieces run on disjoint elements, concurrently where the range is
// split.
func StepFrom(step PieceStep, g *Tensor) {
	d := pieceGradient("tensor.StepFrom", step, g)
	if serial(len(d)*costMath, g.local() != nil) {
		step(0, d)
		return
	}
	parallelFor(len(d), costMath, 16, false, func(lo, hi int) { step(lo, d[lo:hi]) })
}

// pieceGradient checks the operands of StepFrom (and StepGroup.Add),
// naming op, and returns the elements of the gradient g on the host.
func pieceGradient(op string, step PieceStep, g *Tensor) []float32 {
	if step == nil {
		panic(op + ": nil step")
	}
	checkNil(op, "g", g)
	if g.dtype != Float32 || g.node != nil || g.xv() != nil {
		panic(fmt.Sprintf("%s: %s: want an untraced, unbatched float32 host gradient", op, operands(",", g)))
	}
	return g.host(op).f32()
}
