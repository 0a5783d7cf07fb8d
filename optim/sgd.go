package optim

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// SGDOptions are the optional hyperparameters of SGD. The zero value is plain
// gradient descent, optax.sgd's defaults.
type SGDOptions struct {
	// Momentum is the decay of the momentum trace; 0 means no momentum and
	// no trace in the state (optax's momentum=None).
	Momentum float64
	// Nesterov uses Nesterov momentum (needs Momentum > 0 and no
	// Dampening, as PyTorch).
	Nesterov bool
	// Dampening is torch.optim.SGD's dampening, in [0, 1]: the trace adds
	// (1-Dampening)·g rather than g, from the second update on (needs
	// Momentum > 0). 0 is optax's (and PyTorch's default) SGD.
	Dampening float64
}

// SGDState is the state of SGD.
type SGDState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// Trace holds the momentum trace, a tree like the params; nil without
	// momentum.
	Trace any
}

// SGD returns stochastic gradient descent with optional (Nesterov) momentum
// (optax.sgd): with t the trace, g the gradient and μ the momentum,
//
//	t ← g + μ·t
//	u = -lr(step)·t             (or -lr(step)·(g + μ·t) with Nesterov)
//
// The trace accumulates raw gradients and the learning rate scales its
// output, so changing the learning rate takes effect at once. This is
// torch.optim.SGD(lr, momentum, dampening, nesterov); PyTorch's
// weight_decay is Chain(AddDecayedWeights(wd, nil), SGD(...)). With
// Dampening d the trace is PyTorch's
//
//	t ← g at the first update, t ← (1-d)·g + μ·t after
//
// and the update is not fused (StepInto and StepIntoOverStateLater run
// Update then Apply; TakesGradientsLater reports false).
func SGD(lr Schedule, opts ...SGDOptions) Transform {
	const op = "optim.SGD"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	checkUnit(op, "Momentum", o.Momentum, false)
	checkUnit(op, "Dampening", o.Dampening, true)
	if o.Nesterov && o.Momentum == 0 {
		panic(op + ": Nesterov needs Momentum > 0")
	}
	if o.Dampening != 0 {
		switch {
		case o.Momentum == 0:
			panic(fmt.Sprintf("%s: Dampening %v needs Momentum > 0", op, o.Dampening))
		case o.Nesterov:
			panic(fmt.Sprintf("%s: Nesterov needs Dampening 0 (PyTorch's rule), not %v", op, o.Dampening))
		}
		return &sgdDampened{sgd{lr: lr, o: o}}
	}
	return &sgd{lr: lr, o: o}
}

// sgdDampened is SGD with dampening: Update and Init only, so that the
// fused steps (which have no dampening) are not taken.
type sgdDampened struct{ s sgd }

func (d *sgdDampened) Init(params any) State { return d.s.Init(params) }

func (d *sgdDampened) Update(grads any, state State, _ any) (any, State) {
	const op = "optim.SGD"
	rejectHalf(op, "gradient", grads)
	st := stateAs[SGDState](op, state)
	n := countValue(op, st.Count)
	lr := -rateAt(op, d.s.lr, n)
	gw := 1 - d.s.o.Dampening
	if n == 0 {
		gw = 1 // PyTorch's first trace is the gradient itself
	}
	mu := float32(d.s.o.Momentum)
	r := func() []any {
		defer func() { sameStructure(op, recover(), traceRoles) }()
		return mapMulti(2, func(xs []*tensor.Tensor) []*tensor.Tensor {
			g, t := xs[0], xs[1]
			if g == nil {
				return []*tensor.Tensor{nil, t}
			}
			noState(op, g, t)
			gradFits(op, g, t, st.Trace)
			nt := tensor.Add(scale(g, gw), tensor.MulScalar(t, mu))
			return []*tensor.Tensor{scale(nt, lr), withAxesOf(nt, t)}
		}, grads, st.Trace)
	}()
	return r[0], SGDState{Count: incCount(st.Count, n), Trace: r[1]}
}

type sgd struct {
	lr Schedule
	o  SGDOptions
}

func (s *sgd) Init(params any) State {
	rejectHalf("optim.SGD", "parameter", params)
	st := SGDState{Count: newCount()}
	if s.o.Momentum != 0 {
		st.Trace = stateLike(params, 0)
	}
	return st
}

func (s *sgd) Update(grads any, state State, _ any) (any, State) {
	const op = "optim.SGD"
	rejectHalf(op, "gradient", grads)
	st := stateAs[SGDState](op, state)
	n := countValue(op, st.Count)
	lr := -rateAt(op, s.lr, n)
	out := SGDState{Count: incCount(st.Count, n)}
	if s.o.Momentum == 0 {
		return scaleTree(grads, lr), out
	}
	u, tr := traceStep(op, grads, st.Trace, s.o.Momentum, s.o.Nesterov, lr)
	out.Trace = tr
	return u, out
}

// scaleTree multiplies every leaf of a tree by s.
func scaleTree(tree any, s float64) any {
	return mapLeaves(tree, func(x *tensor.Tensor) *tensor.Tensor { return scale(x, s) })
}

// mapLeaves is pytree.Map on the float32 leaves of tree; other leaves are
// emptied (they carry no gradient).
func mapLeaves(tree any, f func(*tensor.Tensor) *tensor.Tensor) any {
	return mapMulti(1, func(xs []*tensor.Tensor) []*tensor.Tensor {
		if !isFloat(xs[0]) {
			return []*tensor.Tensor{nil}
		}
		return []*tensor.Tensor{f(xs[0])}
	}, tree)[0]
}

// traceStep is optax.trace followed by a scale: t' = g + μt, and the update
// is s·t' (or s·(g + μt') with Nesterov).
func traceStep(op string, grads, trace any, mu float64, nesterov bool, s float64) (updates, newTrace any) {
	defer func() { sameStructure(op, recover(), traceRoles) }()
	r := mapMulti(2, func(xs []*tensor.Tensor) []*tensor.Tensor {
		g, t := xs[0], xs[1]
		if g == nil {
			return []*tensor.Tensor{nil, t}
		}
		noState(op, g, t)
		gradFits(op, g, t, trace)
		nt := tensor.Add(g, tensor.MulScalar(t, float32(mu)))
		u := nt
		if nesterov {
			u = tensor.Add(g, tensor.MulScalar(nt, float32(mu)))
		}
		return []*tensor.Tensor{scale(u, s), withAxesOf(nt, t)}
	}, grads, trace)
	return r[0], r[1]
}

// traceRoles names the trees of traceStep's walk.
var traceRoles = roles("gradients", "optimizer state's Trace")

// TraceState is the state of Trace.
type TraceState struct {
	// Trace is the accumulated trace, a tree like the params.
	Trace any
}

// Trace returns optax.trace: it keeps t ← g + decay·t and outputs t (or
// g + decay·t with Nesterov). Chained before ScaleByLearningRate it is SGD
// with momentum.
func Trace(decay float64, nesterov bool) Transform {
	checkUnit("optim.Trace", "decay", decay, false)
	return &traceT{decay: decay, nesterov: nesterov}
}

type traceT struct {
	decay    float64
	nesterov bool
}

func (t *traceT) Init(params any) State {
	rejectHalf("optim.Trace", "parameter", params)
	return TraceState{Trace: stateLike(params, 0)}
}

func (t *traceT) Update(grads any, state State, _ any) (any, State) {
	rejectHalf("optim.Trace", "gradient", grads)
	st := stateAs[TraceState]("optim.Trace", state)
	u, tr := traceStep("optim.Trace", grads, st.Trace, t.decay, t.nesterov, 1)
	return u, TraceState{Trace: tr}
}

// fusedStep is Update followed by Apply in one pass over each parameter,
// its gradient and its trace (tensor.SGDStep): the bits of the two.
func (s *sgd) fusedStep(params, grads any, state State, done func([]*tensor.Tensor)) (any, State) {
	return s.step(nil, params, grads, state, done)
}

// intoStep is fusedStep writing the new parameters into dst's leaves
// (tensor.SGDStepInto).
func (s *sgd) intoStep(dst, params, grads any, state State, _ bool) (any, State) {
	return s.step(dst, params, grads, state, nil)
}

// laterStep is intoStep with a tensor.SGDStepIntoLater for each position
// later has a leaf at (StepIntoOverStateLater).
func (s *sgd) laterStep(dst, params, grads, later any, state State) (any, State, []tensor.PieceStep) {
	var steps []tensor.PieceStep
	p, st := s.stepLater(dst, params, grads, later, state, nil, &steps)
	return p, st, steps
}

// step is fusedStep, writing into the leaves of dst (a tree like params,
// or nil) where it has them.
func (s *sgd) step(dst, params, grads any, state State, done func([]*tensor.Tensor)) (any, State) {
	return s.stepLater(dst, params, grads, nil, state, done, nil)
}

// stepLater is step, where the positions later (a tree like params, or
// nil) has a leaf at get their gradient later: the step of each
// (tensor.SGDStepIntoLater) is appended to *steps.
func (s *sgd) stepLater(dst, params, grads, later any, state State, done func([]*tensor.Tensor), steps *[]tensor.PieceStep) (any, State) {
	const op = "optim.SGD"
	rejectHalf(op, "parameter", params)
	rejectHalf(op, "gradient", grads)
	st := stateAs[SGDState](op, state)
	n := countValue(op, st.Count)
	lr := float32(-rateAt(op, s.lr, n))
	out := SGDState{Count: incCount(st.Count, n)}
	trees, nOut := []any{params, grads}, 1 // results: the parameter and, with momentum, the trace
	if s.o.Momentum != 0 {
		trees, nOut = append(trees, st.Trace), 2
	}
	at, lt := len(trees), -1 // the destination's operand and the later tree's, if any
	if dst != nil {
		trees = append(trees, dst)
	}
	if later != nil {
		lt = len(trees)
		trees = append(trees, later)
	}
	defer func() {
		if r := recover(); r != nil {
			sameStructure(op, r, func(i int) string {
				switch {
				case i == lt:
					return "later gradients"
				case i == at:
					return "destinations"
				}
				return roles("parameters", "gradients", "optimizer state's Trace")(i)
			})
		}
	}()
	r := mapMulti(nOut, reporting(done, func(xs []*tensor.Tensor) []*tensor.Tensor {
		p, g := xs[0], xs[1]
		var t, d *tensor.Tensor
		if s.o.Momentum != 0 {
			t = xs[2]
		}
		if dst != nil {
			d = xs[at]
		}
		if lt >= 0 && xs[lt] != nil {
			laterOnly(p, g)
		}
		if lt >= 0 && xs[lt] != nil && g == nil {
			if t == nil && s.o.Momentum != 0 {
				noState(op, p, t)
			}
			p2, t2, step := tensor.SGDStepIntoLater(d, p, t, float32(s.o.Momentum), lr, s.o.Nesterov)
			*steps = append(*steps, step)
			return []*tensor.Tensor{p2, t2}[:nOut]
		}
		switch {
		case g == nil || !isFloat(g) && s.o.Momentum == 0:
			return []*tensor.Tensor{p, t}[:nOut]
		case p == nil:
			panic(fmt.Sprintf("optim.Apply: update %v for a nil parameter", g))
		}
		gradFits(op, g, p, params)
		if t != nil {
			noState(op, g, t)
			stateShaped(op, p, t)
		}
		p2, t2 := tensor.SGDStepInto(d, p, g, t, float32(s.o.Momentum), lr, s.o.Nesterov)
		return []*tensor.Tensor{p2, t2}[:nOut]
	}), trees...)
	if s.o.Momentum != 0 {
		out.Trace = r[1]
	}
	return r[0], out
}

// elementwise: dampened SGD updates each element from its own gradient and
// trace, as SGD.
func (d *sgdDampened) elementwise() bool { return true }
