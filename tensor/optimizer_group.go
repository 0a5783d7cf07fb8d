package tensor

import (
	"runtime"
	"sort"
)

// A StepGroup runs the PieceSteps of parameters too small to split over
// the cores on their own together, as one range split over the cores (as
// the multi-tensor kernels of PyTorch's foreach optimizers do): an
// optimizer applied in the backward pass (autodiff.OnGradient) adds each
// parameter's step and whole gradient as the gradient becomes final.
// Add steps a parameter large enough to split at once, as StepFrom does;
// a smaller one waits in the group until the waiting parameters together
// have the work of one split, and then all of them are stepped in one
// call; Flush steps those still waiting. Each element gets the bits
// StepFrom gives it: the pieces of a parameter start at multiples of 16
// of its elements, as StepFrom's do, and the kernels are elementwise.
//
// A waiting step reads its gradient when the group runs it, not when it is
// added: the caller must neither modify nor donate a gradient it has added
// before the group has run its step (before Flush). The zero StepGroup is
// empty and ready to use; a StepGroup is used by one goroutine at a time.
// Gradients inside shard.Map (blocks with a Local mark) are stepped at once
// on the calling goroutine, as StepFrom steps them, and so is every
// gradient at GOMAXPROCS 1 (no split: nothing to wait for).
type StepGroup struct {
	steps []PieceStep
	gs    [][]float32
	n     int // the waiting gradients' elements
}

// Add runs step (a PieceStep of a parameter of g's size) on every element
// of g, the parameter's whole gradient: now if the parameter splits over
// the cores on its own (as StepFrom), is a block inside shard.Map or
// GOMAXPROCS is 1; otherwise once enough work waits in the group, or at
// the next Flush. g must be a float32 host tensor of the parameter's size
// (a view is gathered first); the call panics otherwise, and if step is
// nil, as StepFrom does. A PieceStep does not know its parameter's size:
// a g larger than the parameter panics in step, naming step's op, and a
// smaller one updates only the parameter's first elements. A step's panic
// reaches the caller of the call that ran it (Add, or the Flush of a
// waiting step, possibly far from the Add that gave it), once the steps
// running with it have finished; the group is then empty.
func (q *StepGroup) Add(step PieceStep, g *Tensor) {
	d := pieceGradient("tensor.(*StepGroup).Add", step, g)
	if !serial(len(d)*costMath, false) || g.local() != nil || runtime.GOMAXPROCS(0) < 2 {
		StepFrom(step, g)
		return
	}
	q.steps = append(q.steps, step)
	q.gs = append(q.gs, d)
	q.n += len(d)
	if !serial(q.n*costMath, false) {
		q.Flush()
	}
}

// Flush runs the steps waiting in the group, split over the cores when
// their work together is enough, and leaves the group empty, also when a
// step panics (the first panic is raised again once every step has run).
// Flush of an empty group does nothing.
func (q *StepGroup) Flush() {
	defer q.reset()
	steps, gs := q.steps, q.gs
	if serial(q.n*costMath, false) {
		// Every step runs, as in a split: a panic of one is raised once
		// the others have run.
		var fault any
		for k, step := range steps {
			if f := runPiece(step, gs[k]); f != nil && fault == nil {
				fault = f
			}
		}
		if fault != nil {
			panic(fault)
		}
		return
	}
	// The parameters' elements one after the other, each starting at a
	// multiple of 16 (parallelFor's chunks start at multiples of 16).
	at := make([]int, len(gs)+1)
	for k, g := range gs {
		at[k+1] = at[k] + (len(g)+15)&^15
	}
	parallelFor(at[len(gs)], costMath, 16, false, func(lo, hi int) {
		// The first parameter ending after lo, then each one starting
		// before hi.
		for k := sort.SearchInts(at[1:], lo+1); k < len(gs) && at[k] < hi; k++ {
			a, b := max(lo, at[k])-at[k], min(hi-at[k], len(gs[k]))
			if a < b {
				steps[k](a, gs[k][a:b])
			}
		}
	})
}

// runPiece runs step on all of g and returns what it panicked with.
func runPiece(step PieceStep, g []float32) (fault any) {
	defer func() { fault = recover() }()
	step(0, g)
	return nil
}

// reset empties the group, keeping its slices' capacity and dropping their
// references.
func (q *StepGroup) reset() {
	clear(q.steps)
	clear(q.gs)
	q.steps, q.gs, q.n = q.steps[:0], q.gs[:0], 0
}
