package parallel

import (
	"sync/atomic"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// updateInBackward makes the host step apply an elementwise optimizer to
// each parameter as soon as the backward pass has its final gradient
// (hostStepInBackward). A variable for the tests and the benchmark, which
// compare the step with and without.
var updateInBackward = true

// backwardSteps counts the host steps that updated in the backward pass,
// for the tests.
var backwardSteps atomic.Int64

// hostStepInBackward is the host step (no mesh) with the optimizer applied
// during the backward pass: each parameter is updated as soon as its
// gradient is final (autodiff.OnGradient), while that gradient is still in
// cache and the backward pass has the leaves used before it to go
// (PyTorch's optimizer-in-backward hooks). The optimizer's scalars (Adam's
// bias corrections, the learning rate) are computed once before the pass
// (optim.StepIntoOverStateLater), so every element gets the bits of
// optim.Step. It returns the loss, the gradients (for the caller to
// donate) and the new parameters and state, and ok false, doing nothing,
// where the update needs every gradient first or cannot take them one by
// one: clipping by global norm, micro-batches, an optimizer
// optim.TakesGradientsLater refuses, a parameter leaf that is not a
// float32 host tensor.
func (t *Trainer[M, B]) hostStepInBackward(b B, key tensor.Key, flow *stateFlow) (l *tensor.Tensor, g, p M, s optim.State, ok bool) {
	if !updateInBackward || !donateSteps || t.cfg.MicroBatches != 1 || t.cfg.ClipGlobalNorm > 0 || !optim.TakesGradientsLater(t.cfg.Optimizer) {
		return l, g, p, nil, false
	}
	leaves, tree := pytree.Flatten(t.params)
	for _, x := range leaves {
		if x == nil || x.DType() != tensor.Float32 || x.IsTraced() {
			return l, g, p, nil, false
		}
	}
	none := pytree.Unflatten[M](tree, make([]*tensor.Tensor, len(leaves)))
	dst := none // every result fresh
	if t.don.state {
		// The old state is the step's to give up: the new one goes over
		// it, the new parameters into storage from the allocator cache
		// (the parameters are read by the rest of the backward pass).
		fresh := make([]*tensor.Tensor, len(leaves))
		for i, x := range leaves {
			fresh[i] = tensor.Empty(tensor.Float32, x.Shape()...)
		}
		dst = pytree.Unflatten[M](tree, fresh)
	}
	p, s, steps, ok := optim.StepIntoOverStateLater(dst, t.cfg.Optimizer, t.params, none, t.params, t.opt)
	if !ok || len(steps) != len(leaves) {
		panic("parallel: the optimizer's step in the backward pass has no step for some parameters")
	}
	if t.don.state {
		// The new parameters' headers hold that storage now: without
		// the destinations' holds, donating them frees it to the cache.
		tensor.Donate(pytree.Leaves(dst)...)
	}
	// The leaves too small to split on their own are stepped together,
	// over the cores, once enough of them wait (tensor.StepGroup),
	// instead of one by one on the caller while the other cores idle.
	var group tensor.StepGroup
	stepped := make([]bool, len(leaves))
	final := autodiff.OnGradient(func(i int, x *tensor.Tensor) {
		stepLeaf(&group, steps[i], x)
		stepped[i] = true
	})
	l, g = t.hostGrads(b, key, flow, final)
	// A leaf the loss does not depend on has its zero gradient only now.
	gs, _ := pytree.Flatten(g)
	for i, x := range gs {
		if !stepped[i] {
			stepLeaf(&group, steps[i], x)
		}
	}
	group.Flush()
	backwardSteps.Add(1)
	return l, g, p, s, true
}

// groupSmallLeaves makes hostStepInBackward step the leaves too small to
// split on their own together (tensor.StepGroup) rather than one by one
// (tensor.StepFrom). A variable for the tests and the benchmark.
var groupSmallLeaves = true

// stepLeaf steps one leaf from its final gradient g: through group, or at
// once without groupSmallLeaves.
func stepLeaf(group *tensor.StepGroup, step tensor.PieceStep, g *tensor.Tensor) {
	if groupSmallLeaves {
		group.Add(step, g)
		return
	}
	tensor.StepFrom(step, g)
}
