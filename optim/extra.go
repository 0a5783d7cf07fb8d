package optim

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Extra carries what some transforms read besides the gradients and the
// parameters: the loss, and a way to evaluate it elsewhere. It is optax's
// extra_args (value, value_fn) for GradientTransformationExtraArgs.
//
// ReduceOnPlateau reads Value; LBFGS (ScaleByZoomLinesearch) reads Value
// and Grad and calls ValueAndGrad at the trial points of its line search.
// Chain, Masked, Partition, MultiSteps, InjectHyperparams, ApplyIfFinite,
// Lookahead and ScheduleFree pass Extra on to the transforms they wrap.
type Extra struct {
	// Value is the loss at the current parameters (a scalar).
	Value *tensor.Tensor
	// Grad is the gradient at the current parameters, a tree of the
	// params' type: in a chain, the updates reaching a transform may be a
	// direction rather than the gradient (LBFGS's line search needs
	// both). StepExtra sets it to its grads when it is nil.
	Grad any
	// ValueAndGrad returns the loss and its gradient at other parameters,
	// a tree of the params' type. ValueAndGradOf adapts the function
	// autodiff.ValueAndGrad returns.
	ValueAndGrad func(params any) (*tensor.Tensor, any)
}

// ExtraTransform is a Transform whose update reads Extra, or passes it on
// to transforms it wraps. Update on such a transform is UpdateExtra with
// an empty Extra; the transforms that need a field of it panic, naming
// it, when it is missing.
type ExtraTransform interface {
	Transform
	UpdateExtra(grads any, state State, params any, extra Extra) (any, State)
}

// UpdateExtra is tx.UpdateExtra when tx is an ExtraTransform and tx.Update
// (which has no use for extra) otherwise.
func UpdateExtra(tx Transform, grads any, state State, params any, extra Extra) (any, State) {
	if e, ok := tx.(ExtraTransform); ok {
		return e.UpdateExtra(grads, state, params, extra)
	}
	return tx.Update(grads, state, params)
}

// StepExtra is Step for transforms that read Extra: it asks tx for the
// updates of grads, passing extra, and applies them to params.
//
//	loss, grads := lossAndGrad(model, batch)
//	model, state = optim.StepExtra(opt, model, grads, state, optim.Extra{Value: loss})
func StepExtra[M any](tx Transform, params, grads M, state State, extra Extra) (M, State) {
	if extra.Grad == nil {
		extra.Grad = grads
	}
	updates, state := UpdateExtra(tx, any(grads), state, any(params), extra)
	return Apply(params, updates), state
}

// ValueAndGradOf adapts a typed loss-and-gradient function, such as the one
// autodiff.ValueAndGrad returns, to Extra.ValueAndGrad. The adapted
// function panics if it is called with parameters of another type.
func ValueAndGradOf[M any](f func(M) (*tensor.Tensor, M)) func(params any) (*tensor.Tensor, any) {
	if f == nil {
		return nil
	}
	return func(params any) (*tensor.Tensor, any) {
		p, ok := params.(M)
		if !ok {
			var want M
			panic(fmt.Sprintf("optim.ValueAndGradOf: called with %T, want %T", params, want))
		}
		v, g := f(p)
		return v, any(g)
	}
}

// needValue returns the loss in extra as float64, panicking with the
// transform's name when there is none.
func needValue(op string, extra Extra) float64 {
	if extra.Value == nil {
		panic(fmt.Sprintf("%s: Update needs the loss: call optim.UpdateExtra or optim.StepExtra with optim.Extra{Value: loss}", op))
	}
	if extra.Value.Size() != 1 {
		panic(fmt.Sprintf("%s: Extra.Value is %v, want a scalar", op, extra.Value))
	}
	return extra.Value.Item()
}
