package optim

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// AdamOptions are the optional hyperparameters of Adam and ScaleByAdam.
// Zero fields take optax's defaults; use Zero for a literal 0.
type AdamOptions struct {
	// B1 is the decay of the first moment (default 0.9).
	B1 float64
	// B2 is the decay of the second moment (default 0.999).
	B2 float64
	// Eps is added to the denominator outside the square root (default 1e-8).
	Eps float64
	// EpsRoot is added inside the square root (default 0); set it when
	// differentiating through the optimizer (meta-learning).
	EpsRoot float64
	// Nesterov uses Nesterov momentum (NAdam, Dozat 2016), as optax's
	// nesterov=True.
	Nesterov bool
}

// AdamWOptions are the optional hyperparameters of AdamW. Zero fields take
// optax's defaults; use Zero for a literal 0.
type AdamWOptions struct {
	// B1, B2, Eps, EpsRoot and Nesterov are as in AdamOptions.
	B1, B2, Eps, EpsRoot float64
	Nesterov             bool
	// WeightDecay is the decoupled weight decay rate (default 1e-4). It is
	// multiplied by the learning rate, as in optax and PyTorch.
	WeightDecay float64
	// Mask selects the parameters that are decayed, by path and value; nil
	// decays every float parameter. Biases and norm scales are commonly left
	// out: pytree.Not(pytree.PathGlob("**.B")), or a predicate on x.Rank().
	Mask pytree.Predicate
}

// AdamState is the state of Adam, AdamW and ScaleByAdam.
type AdamState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// Mu and Nu are the first and second moments, trees like the params
	// with the params' logical axes (nil for non-float leaves).
	Mu, Nu any
}

// Adam returns the Adam optimizer (optax.adam). For gradient g at update
// number t = 1, 2, ... (the state's Count before the update is t-1):
//
//	m ← b1·m + (1-b1)·g
//	v ← b2·v + (1-b2)·g²
//	u = -lr(t-1) · (m/(1-b1^t)) / (sqrt(v/(1-b2^t) + epsRoot) + eps)
//
// This is torch.optim.Adam (eps outside the root, after the bias
// correction). PyTorch's Adam(weight_decay=wd) is L2 regularisation, wd·p
// added to the gradient before the moments: Chain(AddDecayedWeights(wd,
// nil), Adam(lr)); the decoupled decay of torch.optim.AdamW is AdamW.
func Adam(lr Schedule, opts ...AdamOptions) Transform {
	const op = "optim.Adam"
	needSchedule(op, lr)
	return newAdam(op, lr, oneOpt(op, opts), 0, nil)
}

// AdamW returns Adam with decoupled weight decay (optax.adamw): the Adam
// direction plus WeightDecay·param for the parameters Mask selects, all
// scaled by -lr:
//
//	u = -lr(t-1) · (adam(g) + wd·p)
//
// Update needs params.
func AdamW(lr Schedule, opts ...AdamWOptions) Transform {
	const op = "optim.AdamW"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	wd := orDefault(o.WeightDecay, 1e-4)
	checkNonNeg(op, "WeightDecay", wd)
	return newAdam(op, lr, AdamOptions{B1: o.B1, B2: o.B2, Eps: o.Eps, EpsRoot: o.EpsRoot, Nesterov: o.Nesterov}, wd, o.Mask)
}

// ScaleByAdam returns the Adam rescaling alone, without the learning rate
// and sign (optax.scale_by_adam): u = m̂/(sqrt(v̂ + epsRoot) + eps). Chain it
// with ScaleByLearningRate.
func ScaleByAdam(opts ...AdamOptions) Transform {
	const op = "optim.ScaleByAdam"
	return newAdam(op, nil, oneOpt(op, opts), 0, nil)
}

type adam struct {
	op                   string
	lr                   Schedule // nil: no learning rate (ScaleByAdam)
	b1, b2, eps, epsRoot float64
	nesterov             bool
	wd                   float64
	mask                 pytree.Predicate
}

func newAdam(op string, lr Schedule, o AdamOptions, wd float64, mask pytree.Predicate) *adam {
	a := &adam{
		op: op, lr: lr,
		b1:       orDefault(o.B1, 0.9),
		b2:       orDefault(o.B2, 0.999),
		eps:      orDefault(o.Eps, 1e-8),
		epsRoot:  orDefault(o.EpsRoot, 0),
		nesterov: o.Nesterov,
		wd:       wd, mask: mask,
	}
	checkUnit(op, "B1", a.b1, false)
	checkUnit(op, "B2", a.b2, false)
	checkNonNeg(op, "Eps", a.eps)
	checkNonNeg(op, "EpsRoot", a.epsRoot)
	return a
}

func (a *adam) Init(params any) State {
	rejectHalf(a.op, "parameter", params)
	return AdamState{Count: newCount(), Mu: stateLike(params, 0), Nu: stateLike(params, 0)}
}

func (a *adam) Update(grads any, state State, params any) (any, State) {
	rejectHalf(a.op, "gradient", grads)
	st := stateAs[AdamState](a.op, state)
	n := countValue(a.op, st.Count)
	trees := []any{grads, st.Mu, st.Nu}
	if a.wd != 0 {
		needParams(a.op, params)
		trees = append(trees, selected(params, a.mask))
	}
	base := a.coeffs(n)
	defer func() { sameStructure(a.op, recover(), adamRoles) }()
	r := mapMulti(3, func(xs []*tensor.Tensor) []*tensor.Tensor {
		g, mu, nu := xs[0], xs[1], xs[2]
		if g == nil {
			return []*tensor.Tensor{nil, mu, nu}
		}
		noState(a.op, g, mu, nu)
		gradFits(a.op, g, mu, st.Mu)
		// One fused pass (tensor.AdamUpdate) computes the new moments and
		// u = post·((A·mu' + B·g)/(sqrt(nu'/bc2 + epsRoot) + eps) + wd·p).
		c := base
		var p *tensor.Tensor
		if a.wd != 0 && xs[3] != nil {
			c.WD, p = float32(a.wd), xs[3]
		}
		u, mu2, nu2 := tensor.AdamUpdate(g, mu, nu, p, c)
		return []*tensor.Tensor{u, mu2, nu2}
	}, trees...)
	return r[0], AdamState{Count: incCount(st.Count, n), Mu: r[1], Nu: r[2]}
}

// adamRoles names the trees of adam.Update's walk.
var adamRoles = roles("gradients", "optimizer state's Mu", "optimizer state's Nu", "parameters")

// coeffs returns the scalars of update number n+1, without weight decay.
func (a *adam) coeffs(n int) tensor.AdamCoeffs {
	t := float64(n) + 1
	bc1 := 1 - math.Pow(a.b1, t)
	bc2 := 1 - math.Pow(a.b2, t)
	post := 1.0 // the scalar the final update is multiplied by
	if a.lr != nil {
		post = -rateAt(a.op, a.lr, n)
	}
	c := tensor.AdamCoeffs{
		B1: float32(a.b1), B2: float32(a.b2), G1: float32(1 - a.b1), G2: float32(1 - a.b2),
		A: float32(1 / bc1), C2: float32(1 / bc2),
		Eps: float32(a.eps), EpsRoot: float32(a.epsRoot),
		Post: float32(post),
	}
	if a.nesterov {
		c.A = float32(a.b1 / (1 - math.Pow(a.b1, t+1)))
		c.B = float32((1 - a.b1) / bc1)
	}
	return c
}

// fusedStep is Update followed by Apply in one pass over each parameter,
// its gradient and its moments (tensor.AdamSteps): the same bits as the
// two, with four fewer full passes over memory per parameter. Parameters
// are updated in runs of consecutive ones of about adamBucket elements,
// each run one tensor.AdamSteps (one parallel region, PyTorch's
// multi-tensor Adam), so small parameters are not updated one after
// another on one core; done hears of a run's inputs once it is computed,
// so the update holds at most one run's new tensors beside the old ones.
func (a *adam) fusedStep(params, grads any, state State, done func([]*tensor.Tensor)) (any, State) {
	return a.step(nil, params, grads, state, done, runOperands{})
}

// intoStep is fusedStep writing the new parameters into dst's leaves
// (tensor.AdamStepsInto), and the new moments over the old ones if over
// (tensor.AdamStepsIntoOverMoments).
func (a *adam) intoStep(dst, params, grads any, state State, over bool) (any, State) {
	at := runOperands{over: over}
	return a.step(dst, params, grads, state, nil, at)
}

// laterStep is intoStep over the old moments for the positions with a
// gradient, and a tensor.AdamStepIntoOverMomentsLater for each position
// later has a leaf at (StepIntoOverStateLater).
func (a *adam) laterStep(dst, params, grads, later any, state State) (any, State, []tensor.PieceStep) {
	var steps []tensor.PieceStep
	p, s := a.step(dst, params, grads, state, nil, runOperands{over: true, later: later, steps: &steps})
	return p, s, steps
}

// donatingStep is fusedStep for StepDonating: each run is one
// tensor.AdamStepsDonating, and the old count is donated.
func (a *adam) donatingStep(params, grads any, state State) (any, State) {
	return a.step(nil, params, grads, state, nil, runOperands{donating: true})
}

// step is fusedStep, through tensor.AdamStepsDonating if donating, or
// tensor.AdamStepsInto where dst (a tree like params, or nil) has a leaf.
func (a *adam) step(dst, params, grads any, state State, done func([]*tensor.Tensor), how runOperands) (any, State) {
	rejectHalf(a.op, "parameter", params)
	rejectHalf(a.op, "gradient", grads)
	st := stateAs[AdamState](a.op, state)
	n := countValue(a.op, st.Count)
	trees := []any{params, grads, st.Mu, st.Nu}
	donating := how.donating
	at := runOperands{dst: -1, sel: -1, over: how.over, at: -1, steps: how.steps}
	if dst != nil {
		at.dst = len(trees)
		trees = append(trees, dst)
	}
	if how.later != nil {
		at.at = len(trees)
		trees = append(trees, how.later)
	}
	if a.wd != 0 {
		at.sel = len(trees)
		trees = append(trees, selected(params, a.mask))
	}
	base := a.coeffs(n)
	defer func() {
		if r := recover(); r != nil {
			sameStructure(a.op, r, func(i int) string {
				switch i {
				case at.dst:
					return "destinations"
				case at.at:
					return "later gradients"
				}
				return roles("parameters", "gradients", "optimizer state's Mu", "optimizer state's Nu")(i)
			})
		}
	}()
	giveUp := donating
	var res [][]*tensor.Tensor
	var deferred []*tensor.Tensor
	// One walk of each tree: every position's operands, in the trees'
	// order, then the results at their positions.
	r := pytree.MapNOutAll(3, func(pos [][]*tensor.Tensor) [][]*tensor.Tensor {
		for _, xs := range pos {
			p, g := xs[0], xs[1]
			if g != nil && p == nil {
				panic(fmt.Sprintf("optim.Apply: update %v for a nil parameter", g))
			}
			if g != nil {
				gradFits(a.op, g, p, params)
				noState(a.op, g, xs[2], xs[3])
				stateShaped(a.op, p, xs[2], xs[3])
			}
		}
		if donating && repeatsLeaf(pos) {
			// A tensor at two positions (tied weights): updated out of
			// place, and the dead inputs donated once every run has read
			// them.
			donating = false
			done = func(d []*tensor.Tensor) { deferred = append(deferred, d...) }
		}
		res = a.updateRuns(pos, at, base, done, donating)
		return res
	}, trees...)
	count := incCount(st.Count, n)
	if giveUp {
		donateUnheld(deferred, res)
		tensor.Donate(st.Count)
	}
	return r[0], AdamState{Count: count, Mu: r[1], Nu: r[2]}
}

// runOperands says where, among the operands of a position of Adam's
// step (parameter, gradient, moments, then these), the destination, the
// parameter selected for weight decay and the leaf of the later tree are:
// -1 if absent; and how the step writes: donating (StepDonating), or over
// the old moments (StepIntoOverState). later is StepIntoOverStateLater's
// tree (given to step; at is its operand), and the PieceSteps of its
// leaves are appended to *steps.
type runOperands struct {
	dst, sel, at   int
	donating, over bool
	later          any
	steps          *[]tensor.PieceStep
}

// updateRuns returns the new parameter and moments of each position of
// pos (parameter, gradient, moments and, as at says, the destination and
// the selected parameter), updating the positions with a gradient in runs
// of about adamBucket elements, each one tensor.AdamSteps
// (AdamStepsDonating if donating, AdamStepsInto with destinations); done
// hears of each run's dead inputs.
func (a *adam) updateRuns(pos [][]*tensor.Tensor, at runOperands, base tensor.AdamCoeffs, done func([]*tensor.Tensor), donating bool) [][]*tensor.Tensor {
	res := make([][]*tensor.Tensor, len(pos))
	resBuf := make([]*tensor.Tensor, 3*len(pos)) // res's slices, cut from one
	resAt := func(i int, p, mu, nu *tensor.Tensor) {
		r := resBuf[3*i : 3*i+3 : 3*i+3]
		r[0], r[1], r[2] = p, mu, nu
		res[i] = r
	}
	var run []int // positions of the run being gathered
	size := 0
	flush := func() {
		if len(run) == 0 {
			return
		}
		k := len(run)
		ops := make([]*tensor.Tensor, 4*k)
		ps, gs, mus, nus := ops[:k:k], ops[k:2*k:2*k], ops[2*k:3*k:3*k], ops[3*k:]
		cs := make([]tensor.AdamCoeffs, k)
		var dsts []*tensor.Tensor
		for j, i := range run {
			xs := pos[i]
			ps[j], gs[j], mus[j], nus[j], cs[j] = xs[0], xs[1], xs[2], xs[3], base
			if at.sel >= 0 && xs[at.sel] != nil {
				cs[j].WD = float32(a.wd)
			}
			if at.dst >= 0 && xs[at.dst] != nil {
				if dsts == nil {
					dsts = make([]*tensor.Tensor, k)
				}
				dsts[j] = xs[at.dst]
			}
		}
		steps := tensor.AdamSteps
		switch {
		case donating:
			steps = tensor.AdamStepsDonating
		case dsts != nil:
			into := tensor.AdamStepsInto
			if at.over {
				into = tensor.AdamStepsIntoOverMoments
			}
			steps = func(ps, gs, mus, nus []*tensor.Tensor, cs []tensor.AdamCoeffs) ([]*tensor.Tensor, []*tensor.Tensor, []*tensor.Tensor) {
				return into(dsts, ps, gs, mus, nus, cs)
			}
		}
		p2, mu2, nu2 := steps(ps, gs, mus, nus, cs)
		for j, i := range run {
			resAt(i, p2[j], mu2[j], nu2[j])
			report(done, pos[i], res[i])
		}
		run, size = run[:0], 0
	}
	for i, xs := range pos {
		if at.at >= 0 && xs[at.at] != nil {
			laterOnly(xs[0], xs[1])
		}
		if xs[1] == nil && at.at >= 0 && xs[at.at] != nil {
			p, mu, nu := a.laterRun(xs, at, base)
			resAt(i, p, mu, nu)
			continue
		}
		if xs[1] == nil {
			resAt(i, xs[0], xs[2], xs[3])
			continue
		}
		if size > 0 && size+xs[1].Size() > adamBucket {
			flush()
		}
		run = append(run, i)
		size += xs[1].Size()
	}
	flush()
	return res
}

// laterRun returns the results of the position whose operands are xs and
// whose gradient comes later, and appends the step that computes them to
// *at.steps (tensor.AdamStepIntoOverMomentsLater).
func (a *adam) laterRun(xs []*tensor.Tensor, at runOperands, base tensor.AdamCoeffs) (p, mu, nu *tensor.Tensor) {
	noState(a.op, xs[0], xs[2], xs[3])
	c := base
	if at.sel >= 0 && xs[at.sel] != nil {
		c.WD = float32(a.wd)
	}
	var d *tensor.Tensor
	if at.dst >= 0 {
		d = xs[at.dst]
	}
	p, mu, nu, step := tensor.AdamStepIntoOverMomentsLater(d, xs[0], xs[2], xs[3], c)
	*at.steps = append(*at.steps, step)
	return p, mu, nu
}

// repeatsLeaf reports whether a tensor is an operand (parameter,
// gradient or moment) at more than one position of pos.
func repeatsLeaf(pos [][]*tensor.Tensor) bool {
	var all []*tensor.Tensor
	for _, xs := range pos {
		for _, x := range xs[:4] {
			if x != nil {
				all = append(all, x)
			}
		}
	}
	if len(all) > 64 {
		seen := make(map[*tensor.Tensor]bool, len(all))
		for _, x := range all {
			if seen[x] {
				return true
			}
			seen[x] = true
		}
		return false
	}
	for i, x := range all {
		if slices.Contains(all[:i], x) {
			return true
		}
	}
	return false
}

// donateUnheld donates the tensors of dead that no result in res holds.
func donateUnheld(dead []*tensor.Tensor, res [][]*tensor.Tensor) {
	for _, x := range dead {
		if !slices.ContainsFunc(res, func(r []*tensor.Tensor) bool { return slices.Contains(r, x) }) {
			tensor.Donate(x)
		}
	}
}

// adamBucket is about how many elements of parameters fusedStep updates in
// one tensor.AdamSteps: as many as the largest parameters of a small
// transformer, so a run is worth splitting over the cores, and its new
// values (three tensors of it, 6 MiB at most) are a small part of the
// parameters and moments the update holds.
const adamBucket = 1 << 19
