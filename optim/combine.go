package optim

import (
	"fmt"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// ChainState is the state of Chain: one state per transform, in order.
type ChainState []State

// Chain returns a transform that applies txs in order, each to the updates
// of the one before (optax.chain). Its state is a ChainState.
//
//	opt := optim.Chain(
//		optim.ClipByGlobalNorm(1),
//		optim.AdamW(optim.Constant(3e-4), optim.AdamWOptions{WeightDecay: 0.1}),
//	)
func Chain(txs ...Transform) Transform {
	for i, tx := range txs {
		if tx == nil {
			panic(fmt.Sprintf("optim.Chain: transform %d is nil", i))
		}
	}
	return chain(append([]Transform(nil), txs...))
}

type chain []Transform

func (c chain) Init(params any) State {
	st := make(ChainState, len(c))
	for i, tx := range c {
		st[i] = tx.Init(params)
	}
	return st
}

func (c chain) Update(grads any, state State, params any) (any, State) {
	return c.UpdateExtra(grads, state, params, Extra{})
}

// UpdateExtra passes extra on to every transform of the chain.
func (c chain) UpdateExtra(grads any, state State, params any, extra Extra) (any, State) {
	st := stateAs[ChainState]("optim.Chain", state)
	if len(st) != len(c) {
		panic(fmt.Sprintf("optim.Chain: state has %d entries for %d transforms", len(st), len(c)))
	}
	out := make(ChainState, len(c))
	u := grads
	for i, tx := range c {
		u, out[i] = UpdateExtra(tx, u, st[i], params, extra)
	}
	return u, out
}

// MaskedState is the state of Masked.
type MaskedState struct {
	// Inner is the inner transform's state, built from the selected
	// parameters only (nil state leaves elsewhere).
	Inner State
}

// Masked returns a transform that applies inner only to the leaves mask
// selects and passes the other updates through unchanged (optax.masked).
// inner sees trees of the full structure in which the unselected leaves are
// nil, so it keeps no state for them. The mask is evaluated on the params
// (by path and value: pytree.PathGlob, a rank test, logical axes), or on
// the updates when Update gets no params.
//
//	// weight decay on matrices only
//	optim.Masked(optim.AddDecayedWeights(1e-4, nil),
//		func(_ pytree.Path, x *tensor.Tensor) bool { return x.Rank() >= 2 })
func Masked(inner Transform, mask pytree.Predicate) Transform {
	if inner == nil || mask == nil {
		panic("optim.Masked: nil inner transform or mask")
	}
	return &masked{op: "optim.Masked", inner: inner, mask: mask}
}

type masked struct {
	op    string // the name its panics carry: "optim.Masked", or a Partition's
	inner Transform
	mask  pytree.Predicate
}

func (m *masked) Init(params any) State {
	return MaskedState{Inner: m.inner.Init(pytree.Filter(params, m.mask))}
}

func (m *masked) Update(grads any, state State, params any) (any, State) {
	return m.UpdateExtra(grads, state, params, Extra{})
}

// UpdateExtra passes extra on to the inner transform unchanged.
func (m *masked) UpdateExtra(grads any, state State, params any, extra Extra) (any, State) {
	st := stateAs[MaskedState]("optim.Masked", state)
	defer func() { sameStructure(m.op, recover(), gradParamRoles) }()
	var sel any // the selected leaves of params (or of grads)
	if params != nil {
		sel = pytree.Filter(params, m.mask)
	} else {
		sel = pytree.Filter(grads, m.mask)
	}
	keep := func(xs []*tensor.Tensor) *tensor.Tensor {
		if xs[1] == nil {
			return nil
		}
		return xs[0]
	}
	in := pytree.MapN(keep, grads, sel)
	var inParams any
	if params != nil {
		inParams = sel
	}
	u, inner := UpdateExtra(m.inner, in, st.Inner, inParams, extra)
	out := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		if xs[2] != nil {
			return xs[0]
		}
		return xs[1]
	}, u, grads, sel)
	return out, MaskedState{Inner: inner}
}

// MultiStepsOptions are the options of MultiSteps.
type MultiStepsOptions struct {
	// Sum accumulates the sum of the gradients instead of their mean
	// (optax's use_grad_mean=False).
	Sum bool
}

// MultiStepsState is the state of MultiSteps.
type MultiStepsState struct {
	// MiniStep counts the gradients accumulated since the last update
	// (i32[], 0 to k-1).
	MiniStep *tensor.Tensor
	// GradientStep counts the updates of the inner transform (i32[]).
	GradientStep *tensor.Tensor
	// Inner is the inner transform's state.
	Inner State
	// Acc is the running mean (or sum) of the gradients since the last
	// update, a tree like the params.
	Acc any
}

// HasUpdated reports whether the Update that returned s applied the inner
// transform (optax's MultiSteps.has_updated): it is what a training loop
// checks to log or evaluate once per real step.
func (s MultiStepsState) HasUpdated() bool {
	return s.MiniStep != nil && s.MiniStep.Item() == 0 && s.GradientStep != nil && s.GradientStep.Item() > 0
}

// MultiSteps returns a transform that accumulates gradients over k calls
// and applies inner once every k with their mean (optax.MultiSteps):
// gradient accumulation, for batches k times larger than fit at once. The
// first k-1 calls return zero updates and leave inner's state alone; the
// k-th passes the mean of the k gradients (updated in place with Welford's
// running mean, acc + (g-acc)/(n+1)) to inner, returns its updates, and
// resets the accumulator. A gradient leaf that is nil at the k-th call gets
// a nil update. It panics unless k >= 1.
func MultiSteps(inner Transform, k int, opts ...MultiStepsOptions) Transform {
	const op = "optim.MultiSteps"
	if inner == nil {
		panic(op + ": nil inner transform")
	}
	if k < 1 {
		panic(fmt.Sprintf("%s: k %d, want >= 1", op, k))
	}
	return &multiSteps{inner: inner, k: k, o: oneOpt(op, opts)}
}

type multiSteps struct {
	inner Transform
	k     int
	o     MultiStepsOptions
}

func (m *multiSteps) Init(params any) State {
	rejectHalf("optim.MultiSteps", "parameter", params)
	return MultiStepsState{
		MiniStep:     newCount(),
		GradientStep: newCount(),
		Inner:        m.inner.Init(params),
		Acc:          stateLike(params, 0),
	}
}

// multiStepsRoles names the trees of multiSteps.accumulate's walk.
var multiStepsRoles = roles("optimizer state's Acc", "gradients")

// accumulate returns the accumulator acc with the gradients of mini-step n
// (0, 1, ...) added: their sum, or their mean.
func (m *multiSteps) accumulate(op string, acc, grads any, n int) any {
	defer func() { sameStructure(op, recover(), multiStepsRoles) }()
	return pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		a, g := xs[0], xs[1]
		if g == nil {
			return a
		}
		noState(op, g, a)
		gradFits(op, g, a, acc)
		var r *tensor.Tensor
		if m.o.Sum {
			r = tensor.Add(a, g)
		} else {
			r = tensor.Add(a, tensor.MulScalar(tensor.Sub(g, a), float32(1/float64(n+1))))
		}
		return withAxesOf(r, a)
	}, acc, grads)
}

func (m *multiSteps) Update(grads any, state State, params any) (any, State) {
	return m.UpdateExtra(grads, state, params, Extra{})
}

// UpdateExtra passes extra on to the inner transform when it is applied.
func (m *multiSteps) UpdateExtra(grads any, state State, params any, extra Extra) (any, State) {
	const op = "optim.MultiSteps"
	rejectHalf(op, "gradient", grads)
	st := stateAs[MultiStepsState](op, state)
	n := countValue(op, st.MiniStep)
	gs := countValue(op, st.GradientStep)
	if n >= m.k {
		panic(fmt.Sprintf("%s: state MiniStep %d, want < k = %d", op, n, m.k))
	}
	acc := m.accumulate(op, st.Acc, grads, n)
	if n < m.k-1 {
		zeros := mapLeaves(grads, func(g *tensor.Tensor) *tensor.Tensor { return like(g, 0) })
		return zeros, MultiStepsState{
			MiniStep:     incCount(st.MiniStep, n),
			GradientStep: st.GradientStep,
			Inner:        st.Inner,
			Acc:          acc,
		}
	}
	// The k-th call: hand the accumulated gradient to inner where this
	// call has a gradient.
	in := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		if xs[1] == nil {
			return nil
		}
		return xs[0]
	}, acc, grads)
	u, inner := UpdateExtra(m.inner, in, st.Inner, params, extra)
	zero := tensor.ScalarInt(0)
	if l := st.MiniStep.Local(); l != nil {
		zero = tensor.WithLocal(zero, l)
	}
	return u, MultiStepsState{
		MiniStep:     zero,
		GradientStep: incCount(st.GradientStep, gs),
		Inner:        inner,
		Acc:          stateLike(acc, 0),
	}
}
