package optim

import (
	"fmt"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// LookaheadParams are the parameters Lookahead trains: the fast weights the
// inner optimizer updates every step and the slow weights that follow
// them every sync period (optax.LookaheadParams). Evaluate the model with
// Slow; gradients are taken at Fast.
type LookaheadParams[M any] struct {
	Fast, Slow M
}

// NewLookaheadParams returns LookaheadParams with both weights at params
// (optax's LookaheadParams.init_synced).
func NewLookaheadParams[M any](params M) LookaheadParams[M] {
	return LookaheadParams[M]{Fast: params, Slow: params}
}

// lookaheadPair lets Lookahead, which sees trees as any, read and build
// LookaheadParams of any model type.
type lookaheadPair interface {
	fastSlow() (fast, slow any)
	pair(fast, slow any) any
}

func (p LookaheadParams[M]) fastSlow() (any, any) { return p.Fast, p.Slow }

func (LookaheadParams[M]) pair(fast, slow any) any {
	return LookaheadParams[M]{Fast: fast.(M), Slow: slow.(M)}
}

// LookaheadOptions are the options of Lookahead.
type LookaheadOptions struct {
	// ResetState restarts the fast optimizer's state (Init on the fast
	// weights) at every synchronisation.
	ResetState bool
}

// LookaheadState is the state of Lookahead.
type LookaheadState struct {
	// FastState is the fast optimizer's state.
	FastState State
	// StepsSinceSync counts the steps since the last synchronisation
	// (i32[], 0 to syncPeriod-1).
	StepsSinceSync *tensor.Tensor
}

// Lookahead wraps a fast optimizer in the Lookahead scheme (Zhang et al.
// 2019, optax.lookahead): the fast weights take fast's steps, and every
// syncPeriod-th step the slow weights move slowStepSize of the way to the
// fast ones and the fast weights are reset to them:
//
//	slow ← slow + α·(fast' - slow),  fast ← slow      (α = slowStepSize)
//
// with fast' the fast weights after that step's update. The params are
// LookaheadParams; the gradients may be those of the fast model (a tree of
// the model's type) or LookaheadParams whose Fast holds them, as Step needs:
//
//	lp := optim.NewLookaheadParams(model)
//	opt := optim.Lookahead(optim.Adam(lr), 5, 0.5)
//	state := opt.Init(lp)
//	for ... {
//		_, grads := lossAndGrad(lp.Fast, batch)
//		lp, state = optim.Step(opt, lp, optim.LookaheadParams[Model]{Fast: grads}, state)
//	}
//	evalModel := lp.Slow
//
// The updates are LookaheadParams; between synchronisations those of Slow
// are nil (no change). It panics unless syncPeriod >= 1 and 0 <=
// slowStepSize <= 1.
func Lookahead(fast Transform, syncPeriod int, slowStepSize float64, opts ...LookaheadOptions) Transform {
	const op = "optim.Lookahead"
	if fast == nil {
		panic(op + ": nil fast optimizer")
	}
	if syncPeriod < 1 {
		panic(fmt.Sprintf("%s: syncPeriod %d, want >= 1", op, syncPeriod))
	}
	checkUnit(op, "slowStepSize", slowStepSize, true)
	return &lookahead{fast: fast, period: syncPeriod, alpha: slowStepSize, o: oneOpt(op, opts)}
}

type lookahead struct {
	fast   Transform
	period int
	alpha  float64
	o      LookaheadOptions
}

// Init builds the fast optimizer's state from the fast weights; given a
// plain model rather than LookaheadParams, from the model itself (as optax
// allows).
func (l *lookahead) Init(params any) State {
	fast := params
	if p, ok := params.(lookaheadPair); ok {
		fast, _ = p.fastSlow()
	}
	return LookaheadState{FastState: l.fast.Init(fast), StepsSinceSync: newCount()}
}

func (l *lookahead) Update(grads any, state State, params any) (any, State) {
	return l.UpdateExtra(grads, state, params, Extra{})
}

// UpdateExtra passes extra on to the fast optimizer.
func (l *lookahead) UpdateExtra(grads any, state State, params any, extra Extra) (any, State) {
	const op = "optim.Lookahead"
	st := stateAs[LookaheadState](op, state)
	n := countValue(op, st.StepsSinceSync)
	p, ok := params.(lookaheadPair)
	if !ok {
		panic(fmt.Sprintf("%s: params are %T, want optim.LookaheadParams (see NewLookaheadParams)", op, params))
	}
	fast, slow := p.fastSlow()
	if g, ok := grads.(lookaheadPair); ok {
		grads, _ = g.fastSlow()
	}
	gradsFit(op, grads, fast)
	u, fastState := UpdateExtra(l.fast, grads, st.FastState, fast, extra)
	sync := n == l.period-1
	next := newCount()
	if l.period > 1 && !sync {
		next = incCount(st.StepsSinceSync, n)
	} else if loc := st.StepsSinceSync.Local(); loc != nil {
		next = tensor.WithLocal(next, loc)
	}
	out := LookaheadState{FastState: fastState, StepsSinceSync: next}
	if !sync {
		return p.pair(u, pytree.Map(slow, func(*tensor.Tensor) *tensor.Tensor { return nil })), out
	}
	if l.o.ResetState {
		out.FastState = l.fast.Init(fast)
	}
	// diff = fast + u - slow; slow moves by α·diff, fast by u - (1-α)·diff.
	us := mapMulti(2, func(xs []*tensor.Tensor) []*tensor.Tensor {
		f, u, s := xs[0], xs[1], xs[2]
		if u == nil {
			return []*tensor.Tensor{nil, nil}
		}
		diff := tensor.Sub(tensor.Add(f, u), s)
		return []*tensor.Tensor{
			tensor.Sub(u, scale(diff, 1-l.alpha)),
			scale(diff, l.alpha),
		}
	}, fast, u, slow)
	return p.pair(us[0], us[1]), out
}
