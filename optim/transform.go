package optim

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// State is an optimizer state: a pytree (any Go value the pytree package
// walks) whose tensor leaves are the moments, accumulators and step counters
// of a Transform. Each Transform documents the concrete type it returns
// (AdamState, ChainState, ...). States are ordinary trees, so they can be
// printed with pytree.Format, saved by package checkpoint and placed on a mesh
// like parameters.
type State = any

// Transform is a gradient transformation, optax's GradientTransformation:
// a pair of pure functions over pytrees.
//
// Init returns the initial state for a tree of parameters. State leaves that
// mirror parameters (moments, accumulators) have the parameters' shapes and
// logical axis names, and are nil where a parameter is not a float32 tensor.
//
// Update maps a tree of gradients (or of updates produced by an earlier
// transform) to a tree of updates of the same structure, and returns the new
// state. params is the current parameter tree; transforms that do not need it
// accept nil, the others panic without it. A nil gradient leaf gives a nil
// update and leaves the state of that leaf as it was.
//
// Neither method modifies its arguments: tensors are immutable, and new trees
// are returned. A Transform holds only hyperparameters, so one value may serve
// several models and goroutines at once.
type Transform interface {
	Init(params any) State
	Update(grads any, state State, params any) (updates any, newState State)
}

// Apply returns params + updates leaf by leaf: optax.apply_updates. Leaves
// whose update is nil (non-float parameters, frozen ones) are returned
// unchanged. The result has the type of params and keeps each parameter's
// logical axes. updates must have the structure of params, and each
// update the shape and dtype of its parameter (an update is never
// broadcast); Apply panics naming the first difference and the
// parameter's path otherwise ("optim.Apply: update of Layers[0].W is
// f32[3], parameter f32[4,3]").
func Apply[M any](params M, updates any) M {
	const op = "optim.Apply"
	defer func() { sameStructure(op, recover(), applyRoles) }()
	out := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		p, u := xs[0], xs[1]
		switch {
		case u == nil:
			return p
		case p == nil:
			panic(fmt.Sprintf("optim.Apply: update %v for a nil parameter", u))
		}
		if u.DType() != p.DType() || !slices.Equal(u.BorrowShape(), p.BorrowShape()) {
			panic(fmt.Sprintf("%s: %s is %v, parameter %v", op, leafOf("update", any(params), p), u, p))
		}
		return tensor.Add(p, u)
	}, any(params), updates)
	return out.(M)
}

// applyRoles names the trees of Apply's walk.
var applyRoles = roles("parameters", "updates")

// Step performs one optimization step: it asks tx for the updates of grads
// and applies them to params. It is
//
//	updates, state = tx.Update(grads, state, params)
//	params = optim.Apply(params, updates)
//
// with params and grads of the model's own type M, which is what a training
// loop needs:
//
//	loss, grads := lossAndGrad(model, batch)
//	model, state = optim.Step(opt, model, grads, state)
//
// Transforms that are one elementwise pass (Adam, AdamW) update each
// parameter in the same pass that computes its update, as PyTorch's fused
// optimizers do: the same bits as Update then Apply, with less memory
// traffic and no update tree.
//
// grads must have the structure of params and each gradient the shape and
// dtype of its parameter: Step panics naming the optimizer, the
// parameter's path and both operands otherwise ("optim.Adam: gradient of
// Layers[1].W is f32[3,4], parameter f32[4,3]"). The check allocates
// nothing.
func Step[M any](tx Transform, params, grads M, state State) (M, State) {
	return StepWith(tx, params, grads, state, nil)
}

// StepWith is Step that, where the transform updates parameter by
// parameter in one pass (Adam, AdamW, SGD without Dampening: the fused steps), calls done
// with the inputs of each parameter's update that its results do not
// reuse — the old parameter, its gradient and its old state leaves — as
// soon as they are read for the last time. optim never donates; a caller
// that owns those tensors (a training loop's step boundary, as
// parallel.Trainer's) may donate them there (tensor.Donate), and so holds
// one copy of the parameters and state through the update rather than
// two. Other transforms never call done. A nil done is Step.
func StepWith[M any](tx Transform, params, grads M, state State, done func(dead []*tensor.Tensor)) (M, State) {
	if f, ok := tx.(fusedStepper); ok {
		p, s := f.fusedStep(any(params), any(grads), state, done)
		return p.(M), s
	}
	updates, state := tx.Update(any(grads), state, any(params))
	return Apply(params, updates), state
}

// StepInto is Step writing each new parameter into the storage of dst's
// leaf at its position (destination first, as gonum's methods): dst has
// the structure of params, and a nil leaf (or a nil dst) leaves that
// parameter to fresh storage. A training step whose parameters must end
// up in a buffer it does not own saves copying them there: the sharded
// update of package parallel writes each updated block straight into the
// all-gather's result (shard.GatherTarget). Adam, AdamW, NAdam, NAdamW,
// ScaleByAdam and SGD (without Dampening) write into dst (tensor.AdamStepsInto,
// tensor.SGDStepInto: see there what a destination may be), with the
// bits of Step; a position without
// a gradient keeps its parameter. Other transforms run Step and leave
// dst alone: a caller that needs the values in dst compares the storage
// of the result with dst's and copies where they differ.
func StepInto[M any](dst M, tx Transform, params, grads M, state State) (M, State) {
	return stepInto(dst, tx, params, grads, state, false)
}

// StepIntoOverState is StepInto for a caller whose old optimizer state is
// dead once it returns (a training step that replaces it): Adam and its
// variants write the new moments of each parameter with a destination
// over the old moments' storage (tensor.AdamStepsIntoOverMoments), so the
// update streams no fresh buffer but dst's, with the bits of Step. The
// old state's tensors must not be read after the call (their storage may
// hold the new values); the caller still owns them, and donating them
// drops their holds only. Other transforms run StepInto.
func StepIntoOverState[M any](dst M, tx Transform, params, grads M, state State) (M, State) {
	return stepInto(dst, tx, params, grads, state, true)
}

// StepIntoOverStateLater is StepIntoOverState for a step some of whose
// gradients are not ready when it starts and will arrive in pieces: the
// positions where later (a tree like params) has a leaf, whose gradient
// leaf must be nil in grads. It updates the other positions as
// StepIntoOverState does and returns the new parameters and state for
// all, and steps: one tensor.PieceStep for each leaf of later, in
// pytree.Flatten's order, which updates a range of that parameter's
// elements (into dst's leaf where it has one) and of its state (over the
// old state's storage) from their gradient. The new values of those
// positions are there once their step has been given every element
// exactly once, each with the bits Step gives it: the step's scalars
// (Adam's bias corrections, the learning rate of the step count) are
// computed once, here, for every leaf. A training step hands each step
// to the producer of the gradient (shard.FoldedGradient.WaitThen), so
// that the gradient is used while it is in cache and never stored whole.
//
// Only transforms TakesGradientsLater accepts can: for the others it
// does nothing and returns ok false, and the caller computes the
// gradients and calls StepIntoOverState.
func StepIntoOverStateLater[M any](dst M, tx Transform, params, grads, later M, state State) (p M, s State, steps []tensor.PieceStep, ok bool) {
	l, ok := tx.(laterStepper)
	if !ok {
		return p, nil, nil, false
	}
	pa, s, steps := l.laterStep(any(dst), any(params), any(grads), any(later), state)
	return pa.(M), s, steps, true
}

// TakesGradientsLater reports whether StepIntoOverStateLater can leave
// some of tx's gradients for later: Adam, AdamW, NAdam, NAdamW and
// ScaleByAdam, and SGD (with or without momentum, without Dampening). Transforms that need
// every gradient before updating any parameter (a global norm's clipping,
// a Chain, a Mask) or that optim does not run as one pass per element
// (Lion, the other Adam variants) cannot.
func TakesGradientsLater(tx Transform) bool {
	_, ok := tx.(laterStepper)
	return ok
}

// laterOnly panics unless g, the gradient given for parameter p at a
// position where StepIntoOverStateLater's later tree has a leaf, is nil:
// a step that also updated p now would return one PieceStep fewer than
// later has leaves, and the caller would hand each gradient to another
// leaf's step.
func laterOnly(p, g *tensor.Tensor) {
	if g != nil {
		panic(fmt.Sprintf("optim.StepIntoOverStateLater: parameter %v has both a gradient %v and a leaf in later; a gradient that comes later must be nil in grads", p, g))
	}
}

// laterStepper is a Transform with a fused step for
// StepIntoOverStateLater.
type laterStepper interface {
	laterStep(dst, params, grads, later any, state State) (any, State, []tensor.PieceStep)
}

// stepInto is StepInto, and StepIntoOverState if over.
func stepInto[M any](dst M, tx Transform, params, grads M, state State, over bool) (M, State) {
	if f, ok := tx.(intoStepper); ok {
		p, s := f.intoStep(any(dst), any(params), any(grads), state, over)
		return p.(M), s
	}
	return Step(tx, params, grads, state)
}

// intoStepper is a Transform with a fused step for StepInto; over says
// the old state is dead after the call (StepIntoOverState).
type intoStepper interface {
	intoStep(dst, params, grads any, state State, over bool) (any, State)
}

// StepDonating is Step for a caller that gives params, grads and state up,
// as a training step whose old values are dead once it returns (JAX's
// donate_argnums on a jitted step): their tensors are donated
// (tensor.Donate) by the call, except those the results hold. Adam and
// AdamW then write each new parameter and moment over the old one's
// storage where nothing else holds it (tensor.AdamStepsDonating): the same
// bits as Step, and an update that streams four slices a parameter instead
// of seven, which matters once they leave the cache (an ensemble's
// stacked leaves). Other transforms run Step, then donate.
func StepDonating[M any](tx Transform, params, grads M, state State) (M, State) {
	if d, ok := tx.(donatingStepper); ok {
		p, s := d.donatingStep(any(params), any(grads), state)
		return p.(M), s
	}
	p, s := Step(tx, params, grads, state)
	live := map[*tensor.Tensor]bool{}
	for _, x := range pytree.Leaves([]any{p, s}) {
		live[x] = true
	}
	for _, x := range pytree.Leaves([]any{params, grads, state}) {
		if !live[x] {
			live[x] = true
			tensor.Donate(x)
		}
	}
	return p, s
}

// donatingStepper is a Transform with a fused step for StepDonating.
type donatingStepper interface {
	donatingStep(params, grads any, state State) (any, State)
}

// fusedStepper is a Transform whose Update and Apply can run as one pass:
// fusedStep returns the new params (of the type of params) and state,
// calling done (if not nil) after each parameter's update (see StepWith).
type fusedStepper interface {
	fusedStep(params, grads any, state State, done func([]*tensor.Tensor)) (any, State)
}

// reporting returns f, calling done after each call with the inputs its
// results do not hold (nil leaves left out); f itself if done is nil.
func reporting(done func([]*tensor.Tensor), f func([]*tensor.Tensor) []*tensor.Tensor) func([]*tensor.Tensor) []*tensor.Tensor {
	if done == nil {
		return f
	}
	return func(xs []*tensor.Tensor) []*tensor.Tensor {
		r := f(xs)
		report(done, xs, r)
		return r
	}
}

// report calls done (if not nil) with the inputs xs of one parameter's
// update that its results r do not hold (nil leaves left out), if any.
func report(done func([]*tensor.Tensor), xs, r []*tensor.Tensor) {
	if done == nil {
		return
	}
	var dead []*tensor.Tensor
	for _, x := range xs {
		if x != nil && !slices.Contains(r, x) && !slices.Contains(dead, x) {
			dead = append(dead, x)
		}
	}
	if len(dead) > 0 {
		done(dead)
	}
}

// EmptyState is the state of transforms that keep none (optax.EmptyState).
type EmptyState struct{}

// Identity returns a transform that leaves updates unchanged
// (optax.identity). Its state is EmptyState.
func Identity() Transform { return identity{} }

type identity struct{}

func (identity) Init(any) State { return EmptyState{} }
func (identity) Update(grads any, state State, _ any) (any, State) {
	return grads, state
}

// Stateless returns a transform that keeps no state and computes the updates
// with f (optax.stateless). f receives the incoming updates and the params
// (nil if the caller passed none) and returns a tree of the same structure.
func Stateless(f func(updates, params any) any) Transform {
	if f == nil {
		panic("optim.Stateless: nil func")
	}
	return stateless(f)
}

type stateless func(updates, params any) any

func (stateless) Init(any) State { return EmptyState{} }
func (s stateless) Update(grads any, state State, params any) (any, State) {
	return s(grads, params), state
}

// Zero requests a literal zero for a hyperparameter whose zero value means
// "optax's default". For example AdamOptions{B1: optim.Zero} is Adam without
// a first moment (b1 = 0), AdamWOptions{WeightDecay: optim.Zero} turns weight
// decay off. It is the smallest positive float64, which no hyperparameter uses
// as a real value; the options treat it as exactly 0.
const Zero = math.SmallestNonzeroFloat64

// orDefault resolves an option: 0 means def, Zero means 0.
func orDefault(v, def float64) float64 {
	switch v {
	case 0:
		return def
	case Zero:
		return 0
	}
	return v
}

// ---- helpers shared by the transforms ----

// rejectHalf panics if tree has a bfloat16 or float16 leaf, naming op, the
// leaf's path and type: optimizer state and updates are float32, and a
// half parameter left out silently would never train. role says what the
// tree holds ("parameter", "gradient").
func rejectHalf(op, role string, tree any) {
	if tree == nil {
		return
	}
	found := false
	for _, x := range pytree.Leaves(tree) {
		if x != nil && (x.DType() == tensor.BFloat16 || x.DType() == tensor.Float16) {
			found = true
			break
		}
	}
	if !found {
		return
	}
	paths, leaves := pytree.LeavesWithPath(tree)
	for i, x := range leaves {
		if x != nil && (x.DType() == tensor.BFloat16 || x.DType() == tensor.Float16) {
			panic(fmt.Sprintf("%s: %s %s is %s: optimizers update float32 parameters only; keep float32 master weights and compute in %v with nn.Policy, convert the leaf with tensor.Convert, or freeze it (optim.Masked and a nil gradient)",
				op, role, paths[i], x.Type(), x.DType()))
		}
	}
}

// isFloat reports whether x is a leaf that gets optimizer state: float32,
// or float64 (whose state and updates are float64).
func isFloat(x *tensor.Tensor) bool {
	return x != nil && (x.DType() == tensor.Float32 || x.DType() == tensor.Float64)
}

// like returns a tensor of x's shape and dtype filled with v, placed like x:
// sharded the same way if x is a global sharded tensor, marked as the same
// block if x is a block inside shard.Map (tensor.FullLike does both). The
// caller's pytree.Map gives it x's logical axes.
func like(x *tensor.Tensor, v float64) *tensor.Tensor {
	if v == 0 {
		return tensor.ZerosLike(x)
	}
	return tensor.FullLike(x, v)
}

// stateLike returns a tree like params holding v-filled tensors for the
// float32 leaves and nil elsewhere.
func stateLike(params any, v float64) any {
	return pytree.Map(params, func(p *tensor.Tensor) *tensor.Tensor {
		if !isFloat(p) {
			return nil
		}
		return like(p, v)
	})
}

// withAxesOf gives x the logical axes of old when x has none and the same
// rank: state computed by ops keeps the axes its previous value had.
func withAxesOf(x, old *tensor.Tensor) *tensor.Tensor {
	if x == nil || old == nil || x.LogicalAxes() != nil || x.Rank() != old.Rank() {
		return x
	}
	if ax := old.LogicalAxes(); ax != nil {
		return tensor.WithLogicalAxes(x, ax...)
	}
	return x
}

// mapMulti maps f over the leaves of trees of one structure, like
// pytree.MapN, but f returns nOut tensors and mapMulti returns nOut trees,
// each with the structure of trees[0], walking each tree once
// (pytree.MapNOut). Positions nil in every tree are skipped.
func mapMulti(nOut int, f func(xs []*tensor.Tensor) []*tensor.Tensor, trees ...any) []any {
	return pytree.MapNOut(nOut, f, trees...)
}

// selected returns, for a mask predicate evaluated on params, a tree like
// params holding the selected leaves and nil elsewhere; with a nil mask
// every leaf is selected.
func selected(params any, mask pytree.Predicate) any {
	if mask == nil {
		return params
	}
	return pytree.Filter(params, mask)
}

// ---- step counters ----

// newCount returns a zero int32 step counter.
func newCount() *tensor.Tensor { return tensor.ScalarInt(0) }

// countValue reads a step counter, panicking with the transform's name if
// the state has none (a zero-value state rather than one from Init).
func countValue(op string, c *tensor.Tensor) int {
	if c == nil {
		panic(fmt.Sprintf("%s: state has no step count; create it with Init", op))
	}
	if c.DType() != tensor.Int32 || c.Size() != 1 {
		panic(fmt.Sprintf("%s: step count is %v, want i32[]", op, c))
	}
	return int(c.Item())
}

// incCount returns c+1, saturating at the largest int32 like optax's
// safe_increment, marked as the same shard.Map block as c.
func incCount(c *tensor.Tensor, n int) *tensor.Tensor {
	if n < math.MaxInt32 {
		n++
	}
	r := tensor.ScalarInt(int32(n))
	if l := c.Local(); l != nil {
		r = tensor.WithLocal(r, l)
	}
	return r
}

// stateAs asserts that a state has the type a transform expects.
func stateAs[S any](op string, state State) S {
	s, ok := state.(S)
	if !ok {
		var want S
		panic(fmt.Sprintf("%s: state is %T, want %T (the state Init returned)", op, state, want))
	}
	return s
}

// noState panics if a gradient leaf has no state to go with it: the state
// was built by Init from a different parameter tree.
func noState(op string, g *tensor.Tensor, states ...*tensor.Tensor) {
	for _, s := range states {
		if s == nil {
			panic(fmt.Sprintf("%s: gradient %v has no optimizer state (was Init given these params?)", op, g))
		}
	}
}

// stateShaped panics unless each state of the elementwise optimizer op
// (moments, trace) has the shape of its parameter p: state built by Init
// from another model whose leaves line up.
func stateShaped(op string, p *tensor.Tensor, states ...*tensor.Tensor) {
	for _, s := range states {
		if !slices.Equal(s.BorrowShape(), p.BorrowShape()) {
			panic(fmt.Sprintf("%s: parameter %v has optimizer state %v (was Init given these params?)", op, p, s))
		}
	}
}

// needParams panics if a transform that reads params got none.
func needParams(op string, params any) {
	if params == nil {
		panic(fmt.Sprintf("%s: Update needs params", op))
	}
}

// scale returns x*s as float32, skipping the multiplication when s is 1.
func scale(x *tensor.Tensor, s float64) *tensor.Tensor {
	if s == 1 {
		return x
	}
	return tensor.MulScalar(x, float32(s))
}

// ema returns b*m + (1-b)*x, the exponential moving average step.
func ema(m, x *tensor.Tensor, b float64) *tensor.Tensor {
	if b == 0 {
		return x
	}
	return tensor.Add(tensor.MulScalar(m, float32(b)), tensor.MulScalar(x, float32(1-b)))
}

// checkUnit panics unless 0 <= v < 1 (or <= 1 when closed).
func checkUnit(op, name string, v float64, closed bool) {
	if v < 0 || v > 1 || (!closed && v == 1) || math.IsNaN(v) {
		iv := "[0, 1)"
		if closed {
			iv = "[0, 1]"
		}
		panic(fmt.Sprintf("%s: %s %v outside %s", op, name, v, iv))
	}
}

// checkNonNeg panics unless v >= 0.
func checkNonNeg(op, name string, v float64) {
	if !(v >= 0) {
		panic(fmt.Sprintf("%s: %s %v is negative", op, name, v))
	}
}

// oneOpt returns the single options value of a variadic options argument.
func oneOpt[O any](op string, opts []O) O {
	var o O
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		panic(fmt.Sprintf("%s: %d option structs, want at most 1", op, len(opts)))
	}
	return o
}

// needSchedule panics if a required learning rate is nil. It does not
// call the schedule: a schedule runs when an update needs its rate (rateAt
// checks it there), from the step count that optimizer starts at (1 for
// ScheduleFree, as in optax), never once more where the optimizer is
// built; a Constant that is not finite panics in Constant.
func needSchedule(op string, lr Schedule) {
	if lr == nil {
		panic(fmt.Sprintf("%s: nil learning rate schedule (use optim.Constant for a fixed rate)", op))
	}
}

// rateAt returns the learning rate lr gives at step n (the number of
// updates made so far), panicking naming op, the value and the step if it
// is NaN or infinite: a schedule that goes wrong at some step (a division
// by a length of 0, an exponent that overflows) would otherwise turn the
// parameters into NaN without a word. Each optimizer reads its rate here,
// once per update. Negative and zero rates are accepted, as in optax (a
// negative rate ascends the gradient); PyTorch rejects negative ones.
func rateAt(op string, lr Schedule, n int) float64 {
	v := lr(n)
	if !finite(v) {
		panic(fmt.Sprintf("%s: learning rate schedule gave %v at step %d, want a finite rate", op, v, n))
	}
	return v
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
