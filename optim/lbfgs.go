package optim

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// LBFGSOptions are the optional parameters of LBFGS and ScaleByLBFGS. Zero
// fields take optax's defaults.
type LBFGSOptions struct {
	// MemorySize is the number of past differences of parameters and
	// gradients kept (default 10).
	MemorySize int
	// NoScaleInitPrecond leaves the initial inverse-Hessian estimate at the
	// identity instead of scaling it by ⟨s, y⟩/⟨y, y⟩ of the last pair
	// (and the first step by min(1, 1/‖g‖)): optax's
	// scale_init_precond=False.
	NoScaleInitPrecond bool
	// LearningRate, when set, multiplies the direction (with the line
	// search, it scales the search's starting step); nil means 1, as
	// optax's learning_rate=None. LBFGS only.
	LearningRate Schedule
	// Linesearch replaces the default line search,
	// ScaleByZoomLinesearch(20, {InitialGuess: GuessOne}); NoLinesearch
	// uses none. LBFGS only.
	Linesearch   Transform
	NoLinesearch bool
}

// LBFGSState is the state of ScaleByLBFGS.
type LBFGSState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// Params and Updates are the parameters and incoming updates
	// (gradients) of the last update, trees like the params.
	Params, Updates any
	// DiffParams and DiffUpdates are the memory: MemorySize trees of the
	// differences s = Δparams and y = Δgradients, used as a ring.
	DiffParams, DiffUpdates []any
	// Weights are the 1/⟨s, y⟩ of the memory (f32[MemorySize], 0 for an
	// empty slot or ⟨s, y⟩ = 0).
	Weights *tensor.Tensor
}

// LBFGS returns the limited-memory BFGS optimizer with a zoom line search
// (Nocedal and Wright, Algorithm 7.4; optax.lbfgs): the chain of
// ScaleByLBFGS, the learning rate (or -1) and ScaleByZoomLinesearch(20,
// GuessOne). Its state is a ChainState of an LBFGSState, a ScheduleState or
// EmptyState, and a ZoomLinesearchState.
//
// LBFGS evaluates the loss itself: each update runs a line search that
// calls Extra.ValueAndGrad at params + η·d for each step size η it tries
// (once when the first, η = 1, is accepted, at most 20 times). So update
// with StepExtra, giving the loss and gradient at the current parameters
// and a function to evaluate them anywhere; the line search leaves the
// loss and gradient at the new parameters in the state, and
// ValueAndGradFromState returns them instead of computing them again:
//
//	vg := autodiff.ValueAndGrad(loss)       // func(M) (*tensor.Tensor, M)
//	opt := optim.LBFGS()
//	state := opt.Init(params)
//	for range 50 {
//		value, grads := optim.ValueAndGradFromState(vg, params, state)
//		params, state = optim.StepExtra(opt, params, grads, state,
//			optim.Extra{Value: value, ValueAndGrad: optim.ValueAndGradOf(vg)})
//	}
//
// LBFGS suits deterministic losses (full-batch fitting, small problems):
// on minibatch gradients the memory pairs mix different losses. Its
// scalars are read back to the host, so run it on host tensors or on
// global placed ones (propagation), not inside shard.Map.
func LBFGS(opts ...LBFGSOptions) Transform {
	const op = "optim.LBFGS"
	o := oneOpt(op, opts)
	var base Transform = Scale(-1)
	if o.LearningRate != nil {
		base = ScaleByLearningRate(o.LearningRate)
	}
	ls := o.Linesearch
	switch {
	case ls != nil && o.NoLinesearch:
		panic(op + ": Linesearch and NoLinesearch together")
	case o.NoLinesearch:
		ls = Identity()
	case ls == nil:
		ls = ScaleByZoomLinesearch(20, ZoomLinesearchOptions{InitialGuess: GuessOne})
	}
	return Chain(newLBFGS(op, o), base, ls)
}

// ScaleByLBFGS returns the L-BFGS preconditioner alone
// (optax.scale_by_lbfgs): it records the differences of the parameters and
// of the incoming updates (gradients) since the last call, then returns the
// updates multiplied by the L-BFGS approximation of the inverse Hessian
// (two-loop recursion). The direction is not negated and not scaled by a
// step size: LBFGS chains -1 and a line search. Update needs params.
func ScaleByLBFGS(opts ...LBFGSOptions) Transform {
	const op = "optim.ScaleByLBFGS"
	o := oneOpt(op, opts)
	if o.LearningRate != nil || o.Linesearch != nil || o.NoLinesearch {
		panic(op + ": LearningRate, Linesearch and NoLinesearch are options of LBFGS")
	}
	return newLBFGS(op, o)
}

type lbfgs struct {
	op        string
	memory    int
	scaleInit bool
}

func newLBFGS(op string, o LBFGSOptions) *lbfgs {
	l := &lbfgs{op: op, memory: o.MemorySize, scaleInit: !o.NoScaleInitPrecond}
	if l.memory == 0 {
		l.memory = 10
	}
	if l.memory < 1 {
		panic(fmt.Sprintf("%s: MemorySize %d, want >= 1", op, o.MemorySize))
	}
	return l
}

func (l *lbfgs) Init(params any) State {
	rejectHalf(l.op, "parameter", params)
	st := LBFGSState{Count: newCount(), Params: stateLike(params, 0), Updates: stateLike(params, 0),
		DiffParams: make([]any, l.memory), DiffUpdates: make([]any, l.memory),
		Weights: tensor.Zeros(tensor.Float32, l.memory)}
	for i := range l.memory {
		st.DiffParams[i], st.DiffUpdates[i] = stateLike(params, 0), stateLike(params, 0)
	}
	return st
}

func (l *lbfgs) Update(updates any, state State, params any) (any, State) {
	op := l.op
	rejectHalf(op, "update", updates)
	needParams(op, params)
	st := stateAs[LBFGSState](op, state)
	n := countValue(op, st.Count)
	if len(st.DiffParams) != l.memory || len(st.DiffUpdates) != l.memory || st.Weights == nil || st.Weights.Size() != l.memory {
		panic(fmt.Sprintf("%s: state has a memory of %d, %d and %v, want %d (create it with Init)", op, len(st.DiffParams), len(st.DiffUpdates), st.Weights, l.memory))
	}
	m := l.memory
	memIdx, prevIdx := n%m, (n-1+m)%m

	// 1. Record s = params - last params, y = updates - last updates.
	dp, du := zerosOf(params), zerosOf(params)
	weight := 0.0
	if n > 0 {
		dp, du = floatDiff(params, st.Params), floatDiff(updates, st.Updates)
		if v := vdot(du, dp); v != 0 {
			weight = 1 / v
		}
	}
	diffP, diffU := append([]any(nil), st.DiffParams...), append([]any(nil), st.DiffUpdates...)
	diffP[prevIdx], diffU[prevIdx] = keepAxes(dp, st.DiffParams[prevIdx]), keepAxes(du, st.DiffUpdates[prevIdx])
	rho := st.Weights.Float64s()
	rho[prevIdx] = float64(float32(weight))

	// 2. The scale of the initial inverse Hessian.
	gamma := 1.0
	if l.scaleInit {
		if n > 0 {
			if den := vdot(du, du); den > 0 {
				gamma = vdot(du, dp) / den
			}
		} else {
			gamma = math.Min(1, 1/math.Sqrt(vdot(updates, updates)))
		}
	}

	// 3. The two-loop recursion, oldest pair last in the first loop.
	order := make([]int, m)
	for i := range order {
		order[i] = (memIdx + i) % m
	}
	v := updates
	alpha := make([]float64, m)
	for k := m - 1; k >= 0; k-- {
		i := order[k]
		alpha[k] = rho[i] * vdot(diffP[i], v)
		v = addScaled(v, -alpha[k], diffU[i])
	}
	v = scaleTree(v, gamma)
	for k := range m {
		i := order[k]
		beta := rho[i] * vdot(diffU[i], v)
		v = addScaled(v, alpha[k]-beta, diffP[i])
	}
	w := tensor.FromFloat64(rho, m)
	return v, LBFGSState{Count: incCount(st.Count, n), Params: keepAxes(floatLeaves(params), st.Params),
		Updates: keepAxes(floatLeaves(updates), st.Updates), DiffParams: diffP, DiffUpdates: diffU, Weights: w}
}

// floatLeaves returns tree with its non-float32 leaves emptied.
func floatLeaves(tree any) any {
	return mapLeaves(tree, func(x *tensor.Tensor) *tensor.Tensor { return x })
}

// zerosOf returns zeros like the float32 leaves of tree.
func zerosOf(tree any) any { return stateLike(tree, 0) }

// floatDiff returns a - b over the float32 leaves (zeros where a has none).
func floatDiff(a, b any) any {
	return pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		x, y := xs[0], xs[1]
		switch {
		case y == nil:
			return nil
		case !isFloat(x):
			return like(y, 0)
		}
		return tensor.Sub(x, y)
	}, a, b)
}

// addScaled returns v + c·d leaf by leaf (v where d is nil).
func addScaled(v any, c float64, d any) any {
	if c == 0 {
		return v
	}
	return pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		if xs[0] == nil || xs[1] == nil {
			return xs[0]
		}
		return tensor.Add(xs[0], scale(xs[1], c))
	}, v, d)
}

// keepAxes returns tree with, at each leaf, the logical axes of old's leaf
// at the same place (ops do not keep them).
func keepAxes(tree, old any) any {
	return pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor { return withAxesOf(xs[0], xs[1]) }, tree, old)
}

// ValueAndGradFromState returns the loss and gradient at params: those a
// line search left in state, if it holds a ZoomLinesearchState (directly,
// or in a ChainState such as LBFGS's) with a finite value, and f(params)
// otherwise, at the first step (optax.value_and_grad_from_state). The
// stored values are those at the parameters the last step produced, so
// pass the params that step returned.
func ValueAndGradFromState[M any](f func(M) (*tensor.Tensor, M), params M, state State) (*tensor.Tensor, M) {
	const op = "optim.ValueAndGradFromState"
	st, ok := findState[ZoomLinesearchState](state)
	if !ok {
		panic(fmt.Sprintf("%s: state is %T, which holds no ZoomLinesearchState", op, state))
	}
	v := scalarState(op, "Value", st.Value)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return f(params)
	}
	g, ok := st.Grad.(M)
	if !ok {
		var want M
		panic(fmt.Sprintf("%s: the state's gradient is %T, want %T", op, st.Grad, want))
	}
	return st.Value, g
}
