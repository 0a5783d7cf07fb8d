package parallel

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Config configures a Trainer for models of type M and batches of type B.
// Exactly one of Loss, LossWithKey, StateLoss and DeviceLoss is set.
type Config[M, B any] struct {
	// Loss is the mean loss of model on a batch. On a mesh it runs once
	// per device on that device's rows of the batch (every tensor leaf of
	// B of rank one or more is split along its first dimension over the
	// strategy's data axes), and the trainer averages the devices' losses,
	// so it must be a mean over the rows it is given.
	//
	// The intermediates of the loss (activations, the values its backward
	// pass keeps) are recycled once the gradients are computed
	// (autodiff.RecycleIntermediates), and by Eval once it has read the
	// loss (tensor.Recycling), as the buffers of a jitted step are
	// in JAX: a loss must not keep one past its call (for logging, say);
	// using it later panics naming the op. The same holds for LossWithKey
	// and DeviceLoss.
	Loss func(model M, batch B) *tensor.Tensor
	// LossWithKey is Loss with a random key, for dropout and other noise.
	// Each step and micro-batch gets its own key, derived from Key with
	// tensor.FoldIn. By propagation the loss sees the whole batch and draws
	// the numbers a single-device run draws; on the Map step (DP) each
	// data-parallel device gets its own key for its rows.
	LossWithKey func(model M, batch B, key tensor.Key) *tensor.Tensor
	// DeviceLoss is the manual escape hatch (shard.Map's): the mean loss of
	// one device's rows, computed inside shard.Map with the device's Ctx,
	// for models that call collectives themselves. Parameters reach it as
	// their Placement.Compute specs say (gathered in full if nil).
	DeviceLoss func(c *shard.Ctx, model M, batch B, key tensor.Key) *tensor.Tensor
	// StateLoss is LossWithKey for a model with state (nn.State: the
	// running statistics of BatchNorm): it returns the loss and the state
	// after the batch. The trainer carries the state from step to step,
	// starting from ModelState: micro-batches pass it on in order, and on
	// a mesh it is replicated — every device computes the same new state
	// when its layers reduce over the whole batch (BatchNorm's default);
	// a state that differs between devices (BatchNorm with PerDevice) is
	// averaged over the data axes. LossAndGrad and Eval read the state
	// and leave it unchanged.
	StateLoss func(model M, state nn.State, batch B, key tensor.Key) (*tensor.Tensor, nn.State)
	// ModelState is the state StateLoss starts from (nn.MakeWithState).
	ModelState nn.State
	// Key seeds LossWithKey, StateLoss and DeviceLoss.
	Key tensor.Key

	// Optimizer updates the parameters (required). Its state is placed
	// like the parameters unless the strategy says otherwise. Without a
	// mesh, an optimizer that takes its gradients one by one
	// (optim.TakesGradientsLater: Adam, AdamW, NAdam, SGD) updates each
	// parameter during the backward pass, as soon as its gradient is
	// final, with the bits of updating after the pass; not with
	// ClipGlobalNorm or MicroBatches above one.
	Optimizer optim.Transform
	// Mesh is where the model lives; nil trains on the host.
	Mesh *shard.Mesh
	// Strategy places the model on Mesh. Nil means Single without a mesh
	// and DP with one.
	Strategy Strategy

	// BatchSize, if positive, is the number of rows of the batches to come:
	// New then reports a size that does not split evenly over the data
	// axes and micro-batches (Step checks every batch in any case).
	BatchSize int
	// MicroBatches, if more than 1, splits every batch into that many
	// micro-batches whose gradients are averaged before one update
	// (gradient accumulation): the same step with less activation memory.
	// On the Map step (DP) the gradients are all-reduced once per step,
	// each starting as soon as the last micro-batch's backward pass has
	// finished it; by propagation each micro-batch's backward pass
	// reduces its own.
	MicroBatches int
	// ClipGlobalNorm, if positive, clips the gradients to that global norm
	// before the optimizer sees them; the norm is the global one under
	// every strategy.
	ClipGlobalNorm float64
	// ReduceAfterBackward makes the DP step reduce the gradients only
	// once the backward pass is done. By default each gradient's
	// reduce-scatter (or all-reduce) starts as soon as the backward pass
	// has finished it and travels while the gradients of earlier layers
	// are computed (PyTorch DDP's buckets); the results are the same bit
	// for bit either way, so this is a baseline for measuring the overlap
	// (Stats.ExposedComm).
	ReduceAfterBackward bool
	// ReduceDType, if tensor.BFloat16 or tensor.Float16, is the dtype in
	// which the DP step reduce-scatters its float32 gradients (PyTorch
	// FSDP's MixedPrecision reduce_dtype; DDP's bf16_compress_hook): each
	// is rounded to it, reduce-scattered in it, half the bytes between
	// devices and processes, its two or more parts summed in float32 and
	// rounded once, and widened back for the update, which stays float32
	// like the parameters and optimizer state. The gradients then carry
	// the dtype's precision (bfloat16: 8 bits), so the step is not the
	// float32 step's bit for bit; leaves the update keeps whole (a bias
	// the data devices do not divide) are reduced in float32. Zero (the
	// default) reduces in the gradients' own dtype. Only the DP step with
	// a sharded update (an elementwise optimizer) uses it; New rejects it
	// for other strategies.
	ReduceDType tensor.DType
	// UnfoldedGradients makes the DP step with a sharded update compute
	// each weight gradient whole on every device and reduce-scatter it
	// after. By default the reduce-scatter of a split float32 matrix's
	// gradient (one whose part on a device has at least 32 768 elements)
	// is folded into the products that compute it
	// (shard.Ctx.FoldPsumScatter): each device computes its part of the
	// summed gradient from every device's layer inputs and output
	// cotangents, writing 1/n of the gradient and summing nothing after.
	// The results agree up to the order of the sums, so this is a
	// baseline for measuring the fold. Folding
	// needs the default overlap (not ReduceAfterBackward), one
	// micro-batch and no ReduceDType; otherwise the gradients are
	// unfolded.
	UnfoldedGradients bool
	// Remat is the checkpoint policy around the loss on the Map step
	// (Placement.MapStep) when parameters are gathered before it; nil keeps
	// everything but the gathered copies
	// (autodiff.SaveAnythingExceptTheseNames("all_gather")).
	Remat autodiff.Policy
}

// Trainer trains a model of type M on batches of type B with a strategy.
// Its methods are not safe for concurrent use.
type Trainer[M, B any] struct {
	cfg      Config[M, B]
	strategy Strategy
	mesh     *shard.Mesh
	dataAxes []string
	specs    pathSpecs      // where each parameter is stored
	gather   pathGathers    // what each device gathers of a parameter
	state    shard.SpecTree // where the optimizer state is stored
	// stateLike, unless nil, gives the optimizer state of each parameter
	// its spec (by parameter path); resolveState turns it into state.
	stateLike pathSpecs
	// host: parameters and state stay on the host and are updated there;
	// on a mesh the devices only compute loss and gradients (DP with an
	// optimizer that is not elementwise).
	host bool
	// zero: the Map step of parameters replicated over the data axes
	// (or split over some of them only, as EP splits experts over "ep")
	// with an elementwise optimizer (DP, EP): the gradients of replicated
	// parameters are reduce-scattered, each device updates its block of
	// every such parameter and of the optimizer state (stored split over
	// the data axes, ZeRO-1/2), and the parameters are all-gathered.
	// zeroDims holds, by parameter path, the dimension split over the data
	// axes (-1: a leaf left whole, all-reduced over the data axes it is
	// not split over and updated on every device); zeroSums, by path, the
	// axes a leaf is reduced over. zeroPlan holds both by leaf, in
	// pytree.Flatten's order of the parameters (leafPlans).
	zero     bool
	zeroDims map[string]int
	zeroSums map[string][]string
	zeroPlan struct {
		dims []int
		sums [][]string
		own  []bool // a split leaf's state block lies on one device alone (stateDead)
	}
	// prop: the loss runs on placed tensors (sharding propagation), not
	// inside shard.Map.
	prop   bool
	remat  bool
	params M
	opt    optim.State
	mstate nn.State // the model's state (StateLoss), placed replicated on a mesh
	steps  uint32
	comm   shard.Comm
	// stepTime is the wall time of the last Step, LossAndGrad or Eval.
	stepTime time.Duration
	// guard: the losses of the running Step are checked for NaN and
	// infinities (checkLoss); set by Step before any device starts.
	guard bool
	don   donation // what Step may donate (donate.go)

	grads func(stepIn[M, B]) gradOut[M]
	step  func(stepIn[M, B]) stepOut[M]
	eval  func(stepIn[M, B]) *tensor.Tensor
	// evalDone holds what the devices of the last eval Map have to
	// recycle (evalLoss), run once the Map has returned.
	evalDone evalRecycles
}

type stepIn[M, B any] struct {
	Params     M
	State      optim.State
	ModelState nn.State
	Batch      B
	Key        tensor.Key
}

type stepOut[M any] struct {
	Params     M
	State      optim.State
	ModelState nn.State
	Loss       *tensor.Tensor
}

type gradOut[M any] struct {
	Loss       *tensor.Tensor
	Grads      M
	ModelState nn.State
}

// stateFlow carries a model's state through one step's micro-batches:
// s[i] is the state micro-batch i starts from, s[i+1] the one it ends
// with, so that a forward pass replayed by a checkpoint reads the state
// its first run read. nil for a loss without state.
type stateFlow struct {
	s []nn.State
}

func newFlow(s nn.State, stateful bool) *stateFlow {
	if !stateful {
		return nil
	}
	return &stateFlow{s: []nn.State{s}}
}

// run calls loss on the state micro-batch i starts from and records the
// state it ends with.
func (f *stateFlow) run(i int, loss func(nn.State) (*tensor.Tensor, nn.State)) *tensor.Tensor {
	l, out := loss(f.s[i])
	for len(f.s) <= i+1 {
		f.s = append(f.s, nn.State{})
	}
	f.s[i+1] = out
	return l
}

// final returns the state after the last micro-batch (the zero State
// without a flow).
func (f *stateFlow) final() nn.State {
	if f == nil {
		return nn.State{}
	}
	return f.s[len(f.s)-1]
}

// New returns a trainer for model (a pytree of tensors on the host): it asks
// the strategy where the parameters go, places them and the optimizer
// state there, and builds the step. Configuration a user can get wrong — no
// loss or optimizer, a mesh without an axis the strategy needs, a parameter
// whose logical axes no rule covers or whose dimension the mesh does not
// divide — is returned as an error naming the parameter, the axis and the
// mesh.
func New[M, B any](model M, cfg Config[M, B]) (*Trainer[M, B], error) {
	n := 0
	for _, set := range []bool{cfg.Loss != nil, cfg.LossWithKey != nil, cfg.DeviceLoss != nil, cfg.StateLoss != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("parallel.New: set exactly one of Config.Loss, Config.LossWithKey, Config.StateLoss and Config.DeviceLoss")
	}
	if cfg.StateLoss == nil && cfg.ModelState.Values != nil {
		return nil, errors.New("parallel.New: Config.ModelState is set, but the state is only carried for Config.StateLoss")
	}
	if cfg.Optimizer == nil {
		return nil, errors.New("parallel.New: Config.Optimizer is nil")
	}
	if !slices.ContainsFunc(pytree.Leaves(model), func(x *tensor.Tensor) bool { return x != nil && x.DType().IsFloat() }) {
		return nil, fmt.Errorf("parallel.New: the model %T has no float tensor to train (a zero value? build it with its constructor)", model)
	}
	if cfg.MicroBatches < 0 {
		return nil, fmt.Errorf("parallel.New: Config.MicroBatches is %d; want 0 or more", cfg.MicroBatches)
	}
	if cfg.MicroBatches == 0 {
		cfg.MicroBatches = 1
	}
	if cfg.Remat == nil {
		cfg.Remat = autodiff.SaveAnythingExceptTheseNames("all_gather")
	}
	s := cfg.Strategy
	if s == nil {
		s = Single
		if cfg.Mesh != nil {
			s = DP
		}
	}
	if cfg.DeviceLoss != nil && cfg.Mesh == nil {
		return nil, errors.New("parallel.New: Config.DeviceLoss runs inside shard.Map and needs a Mesh")
	}
	pl, err := s.Place(cfg.Mesh, model)
	if err != nil {
		return nil, err
	}
	t := &Trainer[M, B]{cfg: cfg, strategy: s, mesh: cfg.Mesh, params: model, mstate: cfg.ModelState}
	if cfg.Mesh != nil {
		t.mstate = replicate(cfg.Mesh, t.mstate)
	}
	if cfg.Mesh == nil {
		if cfg.BatchSize > 0 && cfg.BatchSize%cfg.MicroBatches != 0 {
			return nil, fmt.Errorf("parallel: batch size %d does not split evenly over %d micro-batches", cfg.BatchSize, cfg.MicroBatches)
		}
		t.host = true
		t.opt = t.optimizer(nil).Init(model)
		t.don.state = fresh(t.opt, model) // the model is the caller's
		return t, nil
	}
	for _, a := range pl.DataAxes {
		if !slices.Contains(cfg.Mesh.AxisNames(), a) {
			return nil, fmt.Errorf("parallel: strategy %v splits batches over mesh axis %q; mesh is %v", s, a, cfg.Mesh)
		}
	}
	t.dataAxes = slices.Clone(pl.DataAxes)
	if n := cfg.MicroBatches * cfg.Mesh.AxisSize(t.dataAxes...); cfg.BatchSize > 0 && cfg.BatchSize%n != 0 {
		return nil, fmt.Errorf("parallel: batch size %d does not split evenly over the %d devices of data axes %v of %v times %d micro-batches",
			cfg.BatchSize, cfg.Mesh.AxisSize(t.dataAxes...), t.dataAxes, cfg.Mesh, cfg.MicroBatches)
	}
	if t.specs, err = resolveSpecs(cfg.Mesh, model, pl.Params); err != nil {
		return nil, fmt.Errorf("parallel: strategy %v on %v: %w", s, cfg.Mesh, err)
	}
	t.prop = !pl.MapStep && cfg.DeviceLoss == nil
	compute := pl.Compute
	if cfg.DeviceLoss == nil {
		// Only a loss that calls collectives can compute on blocks.
		compute = nil
	}
	if t.gather, err = gatherPlan(model, t.specs, compute); err != nil {
		return nil, fmt.Errorf("parallel: strategy %v on %v: %w", s, cfg.Mesh, err)
	}
	t.remat = t.gather.any()
	t.host = !t.prop && !t.specs.sharded() && pl.State == nil
	t.state = pl.State
	if t.state == nil {
		t.stateLike = t.specs
	}
	if !t.prop && !t.remat && pl.State == nil && len(t.dataAxes) > 0 && optim.Elementwise(cfg.Optimizer) && t.specs.within(t.dataAxes) {
		t.host, t.zero = false, true
		t.stateLike = t.planZeRO(model)
	}
	switch {
	case cfg.ReduceDType == 0:
	case cfg.ReduceDType != tensor.BFloat16 && cfg.ReduceDType != tensor.Float16:
		return nil, fmt.Errorf("parallel.New: Config.ReduceDType is %v; want bfloat16, float16 or zero", cfg.ReduceDType)
	case !t.zero:
		return nil, fmt.Errorf("parallel.New: Config.ReduceDType is for the DP step with a sharded update (an elementwise optimizer); strategy %v on %v does not reduce-scatter its gradients", s, cfg.Mesh)
	}
	if !t.host {
		if err := t.placeAll(model, nil); err != nil {
			return nil, err
		}
	} else {
		// The state stays on the host (it is never placed).
		t.opt = t.optimizer(nil).Init(model)
		t.state = shard.LikeParams(model, t.stateLike)
	}
	if t.prop {
		return t, nil
	}
	t.build()
	return t, nil
}

// resolveState sets t.state, unless the strategy placed the state itself,
// to the spec of every leaf of state by its path: each like the parameter
// of params it belongs to (shard.LikeParams over t.stateLike). Kept as a
// LikeParams, it would keep params alive: the host model, whole in every
// process of an FSDP job.
func (t *Trainer[M, B]) resolveState(params M, state optim.State) error {
	if t.stateLike == nil {
		return nil
	}
	specs, err := resolveSpecs(t.mesh, state, shard.LikeParams(params, t.stateLike))
	if err != nil {
		return err
	}
	t.state = specs
	return nil
}

// placeAll places params and the optimizer state (initialised from the
// params when state is nil), catching a placement that panics.
func (t *Trainer[M, B]) placeAll(params M, state optim.State) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parallel: placing the model with strategy %v on %v: %v", t.strategy, t.mesh, r)
		}
	}()
	given, givenState := params, state
	params = shard.FilterShard(params, t.mesh, t.specs)
	if state == nil {
		state = t.optimizer(nil).Init(params)
	}
	if err := t.resolveState(params, state); err != nil {
		return err
	}
	t.params, t.opt = params, shard.FilterShard(state, t.mesh, t.state)
	// Copies placing made (and a state Init made) are the trainer's own:
	// the first step may donate them.
	t.don.params = fresh(t.params, given, givenState)
	t.don.state = fresh(t.opt, given, givenState)
	return nil
}

// build makes the Map calls of a mesh trainer.
func (t *Trainer[M, B]) build() {
	io := ioSpecs{params: t.specs, state: t.state, data: shard.P(t.dataAxes)}
	opt := []shard.Option{shard.WithComm(&t.comm)}
	t.grads = shard.Map(t.mesh, io, io, func(c *shard.Ctx, in stepIn[M, B]) gradOut[M] {
		flow := newFlow(in.ModelState, t.cfg.StateLoss != nil)
		l, g := t.deviceGrads(c, in.Params, in.Batch, in.Key, flow)
		return gradOut[M]{Loss: l, Grads: g, ModelState: t.replicatedState(c, flow)}
	}, opt...)
	t.eval = shard.Map(t.mesh, io, shard.P(), func(c *shard.Ctx, in stepIn[M, B]) *tensor.Tensor {
		flow := newFlow(in.ModelState, t.cfg.StateLoss != nil)
		l, recycle := evalLoss(in.Params, t.rowsLossFunc(c, in.Batch, in.Key, 0, flow))
		l = t.dataMean(c, l)
		t.evalDone.add(recycle)
		return l
	}, opt...)
	switch {
	case t.zero:
		t.step = shard.Map(t.mesh, io, io, t.zeroStep, opt...)
	case !t.host:
		t.step = shard.Map(t.mesh, io, io, func(c *shard.Ctx, in stepIn[M, B]) stepOut[M] {
			flow := newFlow(in.ModelState, t.cfg.StateLoss != nil)
			l, g := t.deviceGrads(c, in.Params, in.Batch, in.Key, flow)
			p, s := optim.Step(t.optimizer(c.Psum), in.Params, g, in.State)
			// The gradients are dead once applied, unless the update
			// returned one of them as it is.
			donateDead([]any{p, s}, g)
			return stepOut[M]{Params: p, State: s, Loss: l, ModelState: t.replicatedState(c, flow)}
		}, opt...)
	}
}

// optimizer returns the configured optimizer, clipping first if asked,
// with psum the cross-device sum of the global norm (nil on the host).
func (t *Trainer[M, B]) optimizer(psum optim.PsumFunc) optim.Transform {
	if t.cfg.ClipGlobalNorm <= 0 {
		return t.cfg.Optimizer
	}
	return optim.Chain(optim.ClipByGlobalNorm(t.cfg.ClipGlobalNorm, optim.ClipOptions{Psum: psum}), t.cfg.Optimizer)
}

// userLoss calls the configured loss (c is nil on the host) on
// micro-batch micro, a StateLoss on the state flow gives it.
func (t *Trainer[M, B]) userLoss(c *shard.Ctx, m M, b B, key tensor.Key, micro int, flow *stateFlow) *tensor.Tensor {
	switch {
	case t.cfg.Loss != nil:
		return t.checkLoss(t.cfg.Loss(m, b))
	case t.cfg.LossWithKey != nil:
		return t.checkLoss(t.cfg.LossWithKey(m, b, key))
	case t.cfg.StateLoss != nil:
		return t.checkLoss(flow.run(micro, func(s nn.State) (*tensor.Tensor, nn.State) { return t.cfg.StateLoss(m, s, b, key) }))
	}
	return t.checkLoss(t.cfg.DeviceLoss(c, m, b, key))
}

// ErrNonFiniteLoss is what a Step whose loss is NaN or infinite returns,
// wrapped in a *NonFiniteLossError: errors.Is(err, ErrNonFiniteLoss).
var ErrNonFiniteLoss = errors.New("non-finite loss")

// NonFiniteLossError is the error of a Step whose loss is NaN or
// infinite. The step was skipped: the parameters, the optimizer state and
// the model state are those before it, as if the batch had not been seen
// (only the step's key was used up: the next Step draws the key it would
// have drawn anyway).
type NonFiniteLossError struct {
	// Step counts the trainer's steps, this one included (1 for the
	// first).
	Step int
	// Loss is the non-finite value: the loss of the batch, or of a
	// micro-batch, or on the DP step of one device's rows (the mean over
	// the devices is then non-finite too).
	Loss float64
}

// Error describes the skipped step.
func (e *NonFiniteLossError) Error() string {
	return fmt.Sprintf("parallel: step %d: the loss is %v; the update was skipped (parameters, optimizer and model state unchanged)", e.Step, e.Loss)
}

// Is reports whether target is ErrNonFiniteLoss.
func (e *NonFiniteLossError) Is(target error) bool { return target == ErrNonFiniteLoss }

// checkLoss returns l, a loss the user's function returned, or during a
// Step panics with a *NonFiniteLossError if it is a NaN or an infinity:
// before the backward pass and any update, on the device that computed
// it (shard.Map then stops the others where they wait for it, before
// their updates too). Step recovers the panic and returns the error.
func (t *Trainer[M, B]) checkLoss(l *tensor.Tensor) *tensor.Tensor {
	if !t.guard || l == nil || l.Size() != 1 || !l.DType().IsFloat() {
		return l
	}
	if v := l.Item(); math.IsNaN(v) || math.IsInf(v, 0) {
		panic(&NonFiniteLossError{Step: int(t.steps), Loss: v})
	}
	return l
}

// skipped turns the panic of checkLoss, also as the cause of a device's
// failure in shard.Map, into its error; nil for any other value.
func skipped(r any) *NonFiniteLossError {
	err, ok := r.(error)
	if !ok {
		return nil
	}
	var nf *NonFiniteLossError
	if errors.As(err, &nf) {
		return nf
	}
	return nil
}

// replicate places every leaf of a model state replicated on mesh.
func replicate(mesh *shard.Mesh, s nn.State) nn.State {
	if s.Values == nil {
		return s
	}
	r := shard.NewSharding(mesh, shard.P())
	return pytree.Map(s, func(x *tensor.Tensor) *tensor.Tensor {
		if have, ok := shard.ShardingOf(x); ok && have.Equal(r) {
			return x
		}
		return shard.Put(x, r)
	})
}

// replicatedState returns the state a device's flow ended with, averaged
// over the data axes where it differs between devices (state computed
// from each device's rows alone).
func (t *Trainer[M, B]) replicatedState(c *shard.Ctx, flow *stateFlow) nn.State {
	s := flow.final()
	if s.Values == nil || len(t.dataAxes) == 0 {
		return s
	}
	return pytree.Map(s, func(x *tensor.Tensor) *tensor.Tensor {
		if l := x.Local(); l != nil && l.Mask != 0 && x.DType().IsFloat() {
			return c.Pmean(x, l.AxisNames()...)
		}
		return x
	})
}

// deviceLoss is the loss of micro-batch micro of this device's rows,
// averaged over the data axes: each device gathers the parameters it
// needs (inside a checkpoint, so backward gathers again), then runs the
// user's loss.
func (t *Trainer[M, B]) deviceLoss(c *shard.Ctx, p M, b B, key tensor.Key, micro int, flow *stateFlow) *tensor.Tensor {
	return t.dataMean(c, t.rowsLoss(c, p, b, key, micro, flow))
}

// dataMean is l averaged over the data axes.
func (t *Trainer[M, B]) dataMean(c *shard.Ctx, l *tensor.Tensor) *tensor.Tensor {
	if len(t.dataAxes) > 0 {
		l = c.Pmean(l, t.dataAxes...)
	}
	return l
}

// rowsLoss is deviceLoss before the mean over the data axes: the loss of
// this device's rows alone.
func (t *Trainer[M, B]) rowsLoss(c *shard.Ctx, p M, b B, key tensor.Key, micro int, flow *stateFlow) *tensor.Tensor {
	f := t.rowsLossFunc(c, b, key, micro, flow)
	if t.remat {
		f = autodiff.Checkpoint(f, t.cfg.Remat)
	}
	return f(p)
}

// rowsLossFunc is rowsLoss as a function of the parameters, without the
// checkpoint (Eval, which has no backward pass, runs it as it is).
func (t *Trainer[M, B]) rowsLossFunc(c *shard.Ctx, b B, key tensor.Key, micro int, flow *stateFlow) func(M) *tensor.Tensor {
	if len(t.dataAxes) > 0 {
		key = tensor.FoldIn(key, uint32(c.AxisIndex(t.dataAxes...)))
	}
	key = tensor.FoldIn(key, uint32(micro))
	return func(p M) *tensor.Tensor {
		return t.userLoss(c, gatherTree(t.gather, c, p, t.dataAxes), b, key, micro, flow)
	}
}

// deviceGrads returns the loss and gradients of this device's rows,
// accumulated over the micro-batches.
func (t *Trainer[M, B]) deviceGrads(c *shard.Ctx, p M, b B, key tensor.Key, flow *stateFlow) (*tensor.Tensor, M) {
	k := t.cfg.MicroBatches
	if k == 1 {
		return valueAndGrad(p, func(p M) *tensor.Tensor { return t.deviceLoss(c, p, b, key, 0, flow) })
	}
	if t.remat || len(t.dataAxes) == 0 {
		return accumulate(k, p, b, func(p M, mb B, i int) *tensor.Tensor { return t.deviceLoss(c, p, mb, key, i, flow) })
	}
	// Differentiate with respect to per-device copies of the parameters,
	// so that each micro-batch's gradients stay on the device, and sum them
	// over the data axes once: one all-reduce per step, not one per
	// micro-batch (PyTorch DDP's no_sync).
	pv := pytree.Map(p, func(x *tensor.Tensor) *tensor.Tensor {
		if !x.DType().IsFloat() {
			return x
		}
		return c.Vary(x, t.dataAxes...)
	})
	l, g := accumulate(k, pv, b, func(p M, mb B, i int) *tensor.Tensor { return t.deviceLoss(c, p, mb, key, i, flow) })
	return l, pytree.Map(g, func(x *tensor.Tensor) *tensor.Tensor { return c.Psum(x, t.dataAxes...) })
}

// valueAndGrad returns the loss and its gradient at p. The backward pass
// recycles the loss's intermediates (autodiff.RecycleIntermediates), so
// that the next step's activations reuse their storage: a loss function
// given to a Trainer must not keep an intermediate past its call (a
// later use panics naming the op; return what you need from the loss
// instead).
func valueAndGrad[M any](p M, loss func(M) *tensor.Tensor, opts ...autodiff.Option) (*tensor.Tensor, M) {
	if !donateSteps {
		return autodiff.ValueAndGrad(loss, opts...)(p)
	}
	opts = append(opts, autodiff.RecycleIntermediates())
	return autodiff.ValueAndGradWith(func(p M, _ struct{}) *tensor.Tensor { return loss(p) }, opts...)(p, struct{}{})
}

// valueAndGradAux is valueAndGrad for a loss with auxiliary outputs,
// which the backward pass spares.
func valueAndGradAux[M, A any](p M, loss func(M) (*tensor.Tensor, A), opts ...autodiff.Option) (*tensor.Tensor, A, M) {
	if !donateSteps {
		return autodiff.ValueAndGradAux(loss, opts...)(p)
	}
	opts = append(opts, autodiff.RecycleIntermediates())
	return autodiff.ValueAndGradWithAux(func(p M, _ struct{}) (*tensor.Tensor, A) { return loss(p) }, opts...)(p, struct{}{})
}

// accumulate averages the losses and gradients of loss over k equal
// micro-batches of b.
func accumulate[M, B any](k int, p M, b B, loss func(M, B, int) *tensor.Tensor) (*tensor.Tensor, M) {
	return accumulateThen(k, p, b, loss, nil)
}

// accumulateThen is accumulate that, if final is not nil, hands final each
// leaf's averaged gradient (by its index among the gradient tree's
// leaves) as soon as the last micro-batch's backward pass has finished
// that leaf (autodiff.OnGradient), computed with the same ops as after it
// (so bit for bit the same), and returns those very tensors in the tree:
// a reduction of the leaves started there overlaps the rest of that
// backward pass, as with one micro-batch.
func accumulateThen[M, B any](k int, p M, b B, loss func(M, B, int) *tensor.Tensor, final func(i int, g *tensor.Tensor)) (*tensor.Tensor, M) {
	var total *tensor.Tensor
	var sum M
	scale := float32(1) / float32(k)
	// average is the last step for one leaf: the running sum s plus the
	// last micro-batch's gradient g, scaled; the sum is dead after.
	average := func(s, g *tensor.Tensor) *tensor.Tensor {
		a := namedFresh(tensor.Add(s, g), s)
		out := namedFresh(tensor.MulScalar(a, scale), a)
		donateValue(a)
		return out
	}
	var early []*tensor.Tensor // the averages final got, by leaf
	for i := range k {
		mb := microBatch(b, i, k)
		var opts []autodiff.Option
		if i == k-1 && i > 0 && final != nil {
			prev := pytree.Leaves(sum)
			early = make([]*tensor.Tensor, len(prev))
			opts = append(opts, autodiff.OnGradient(func(j int, g *tensor.Tensor) {
				if j < len(prev) && prev[j] != nil && g != nil {
					early[j] = average(prev[j], g)
					final(j, early[j])
				}
			}))
		}
		l, g := valueAndGrad(p, func(p M) *tensor.Tensor { return loss(p, mb, i) }, opts...)
		if i == 0 {
			total, sum = l, g
			continue
		}
		nt := tensor.Add(total, l)
		if early != nil {
			leaves, tree := pytree.Flatten(g)
			sums := pytree.Leaves(sum)
			for j, x := range leaves {
				if early[j] == nil && x != nil {
					early[j] = average(sums[j], x)
				}
			}
			copy(leaves, early)
			grads := pytree.Unflatten[M](tree, leaves)
			mean := tensor.MulScalar(nt, scale)
			donateDead([]any{mean, grads}, total, l, nt, sum, g)
			return mean, grads
		}
		ns := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor { return namedFresh(tensor.Add(xs[0], xs[1]), xs[0]) }, sum, g)
		donateDead([]any{nt, ns}, total, l, sum, g)
		total, sum = nt, ns
	}
	mean := tensor.MulScalar(total, scale)
	grads := pytree.Map(sum, func(x *tensor.Tensor) *tensor.Tensor { return namedFresh(tensor.MulScalar(x, scale), x) })
	donateDead([]any{mean, grads}, total, sum)
	return mean, grads
}

// microBatch returns rows [i·n/k, (i+1)·n/k) of every leaf of rank one or
// more of b. Of a placed leaf it takes those rows of each device's block,
// without communication: another partition of the examples into
// micro-batches than on the host, with the same mean.
func microBatch[B any](b B, i, k int) B {
	return pytree.Map(b, func(x *tensor.Tensor) *tensor.Tensor {
		if x.Rank() == 0 {
			return x
		}
		s, placed := shard.ShardingOf(x)
		if !placed {
			n := x.Dim(0) / k
			return tensor.SliceAxis(x, 0, i*n, (i+1)*n)
		}
		blocks := shard.Blocks(x)
		out := make([]*tensor.Tensor, len(blocks))
		for d, blk := range blocks {
			if blk == nil {
				continue // another process's device
			}
			n := blk.Dim(0) / k
			out[d] = tensor.SliceAxis(blk, 0, i*n, (i+1)*n)
		}
		shape := slices.Clone(x.Shape())
		shape[0] /= k
		y, err := shard.FromBlocks(s, shape, out)
		if err != nil {
			panic(fmt.Sprintf("parallel: micro-batch of %v: %v", x, err))
		}
		return y
	})
}

// hostGrads is the loss and gradients on the host; opts (autodiff.OnGradient)
// are for one micro-batch.
func (t *Trainer[M, B]) hostGrads(b B, key tensor.Key, flow *stateFlow, opts ...autodiff.Option) (*tensor.Tensor, M) {
	loss := func(p M, mb B, i int) *tensor.Tensor {
		return t.userLoss(nil, p, mb, tensor.FoldIn(key, uint32(i)), i, flow)
	}
	if t.cfg.MicroBatches == 1 {
		return valueAndGrad(t.params, func(p M) *tensor.Tensor { return loss(p, b, 0) }, opts...)
	}
	return accumulate(t.cfg.MicroBatches, t.params, b, loss)
}

// checkBatch reports a batch whose rows do not split evenly over the data
// axes and micro-batches.
func (t *Trainer[M, B]) checkBatch(b B) error {
	n := t.cfg.MicroBatches
	if t.mesh != nil && len(t.dataAxes) > 0 {
		n *= t.mesh.AxisSize(t.dataAxes...)
	}
	paths, leaves := pytree.LeavesWithPath(b)
	if len(leaves) == 0 {
		return errors.New("parallel: the batch has no tensors")
	}
	for i, x := range leaves {
		if x.Rank() == 0 || x.Dim(0)%n == 0 {
			continue
		}
		what := fmt.Sprintf("%d micro-batches", t.cfg.MicroBatches)
		if t.mesh != nil && len(t.dataAxes) > 0 {
			what = fmt.Sprintf("the %d devices of data axes %v times %s", t.mesh.AxisSize(t.dataAxes...), t.dataAxes, what)
		}
		return fmt.Errorf("parallel: batch leaf %s %v: %d rows do not split evenly over %s", leafName(paths[i]), x, x.Dim(0), what)
	}
	return nil
}

// nextKey returns this step's key and counts the step.
func (t *Trainer[M, B]) nextKey() tensor.Key {
	t.steps++
	return tensor.FoldIn(t.cfg.Key, t.steps)
}

// peekKey returns the key the next Step will use, without counting a
// step: LossAndGrad and Eval see it, so how often a run evaluates does not
// change the keys (dropout masks) of its training steps.
func (t *Trainer[M, B]) peekKey() tensor.Key { return tensor.FoldIn(t.cfg.Key, t.steps+1) }

// Step runs one training step on batch and returns the mean loss before
// the update. A batch that does not split evenly over the data axes and
// micro-batches is an error.
//
// A loss that is NaN or infinite (a bad batch, a diverging run) is a
// *NonFiniteLossError (errors.Is(err, ErrNonFiniteLoss)), returned with
// that loss: the step is skipped before its backward pass, so the
// parameters, optimizer state and model state stay as they were, and the
// caller decides, as with PyTorch's GradScaler skipping a step or Keras's
// TerminateOnNaN, whether to go on with the next batch or stop. Only the
// loss is checked; to skip updates whose gradients are not finite while
// the loss is, wrap the optimizer in optim.ApplyIfFinite. In a job over
// several processes a device's failure ends the job (see shard.Map), a
// non-finite loss on the DP step included.
func (t *Trainer[M, B]) Step(batch B) (loss float64, err error) {
	if err := t.checkBatch(batch); err != nil {
		return 0, err
	}
	defer t.begin()()
	key := t.nextKey()
	t.guard = true
	defer func() {
		t.guard = false
		if r := recover(); r != nil {
			nf := skipped(r)
			if nf == nil {
				panic(r)
			}
			loss, err = nf.Loss, nf
		}
	}()
	var l *tensor.Tensor
	var g M
	stateful := t.cfg.StateLoss != nil
	switch {
	case t.mesh == nil:
		flow := newFlow(t.mstate, stateful)
		if l, g, p, s, ok := t.hostStepInBackward(batch, key, flow); ok {
			t.setModelState(flow)
			oldP, oldS := t.params, t.opt
			t.params, t.opt = p, s
			loss = l.Item()
			t.donateStep(oldP, oldS, g, l)
			return loss, nil
		}
		l, g = t.hostGrads(batch, key, flow)
		t.setModelState(flow)
	case t.prop:
		stop := shard.Record(t.mesh, &t.comm)
		defer stop()
		flow := newFlow(t.mstate, stateful)
		l, g = t.propGrads(batch, key, flow)
		t.setModelState(flow)
	case t.host:
		// Replicated parameters have the same gradient on every device:
		// update once, on the host.
		out := t.grads(stepIn[M, B]{Params: t.params, ModelState: t.mstate, Batch: batch, Key: key})
		l, g = out.Loss, pytree.Map(out.Grads, shard.Gather)
		if stateful {
			t.mstate = out.ModelState
		}
	default:
		out := t.step(stepIn[M, B]{Params: t.params, State: t.opt, ModelState: t.mstate, Batch: batch, Key: key})
		oldP, oldS := t.params, t.opt
		t.params, t.opt = out.Params, out.State
		if stateful {
			t.mstate = out.ModelState
		}
		loss = out.Loss.Item()
		t.donateStep(oldP, oldS, out.Loss)
		return loss, nil
	}
	oldP, oldS := t.params, t.opt
	t.params, t.opt = optim.StepWith(t.optimizer(nil), t.params, g, t.opt, t.early(g))
	loss = l.Item()
	t.donateStep(oldP, oldS, g, l)
	return loss, nil
}

// LossAndGrad returns the loss and the gradient of the current parameters
// on batch, gathered to host tensors, without updating anything.
func (t *Trainer[M, B]) LossAndGrad(batch B) (float64, M, error) {
	var zero M
	if err := t.checkBatch(batch); err != nil {
		return 0, zero, err
	}
	defer t.begin()()
	key := t.peekKey()
	stateful := t.cfg.StateLoss != nil
	if t.mesh == nil {
		l, g := t.hostGrads(batch, key, newFlow(t.mstate, stateful))
		return l.Item(), g, nil
	}
	if t.prop {
		stop := shard.Record(t.mesh, &t.comm)
		defer stop()
		l, g := t.propGrads(batch, key, newFlow(t.mstate, stateful))
		return l.Item(), pytree.Map(g, shard.Gather), nil
	}
	out := t.grads(stepIn[M, B]{Params: t.params, ModelState: t.mstate, Batch: batch, Key: key})
	return out.Loss.Item(), pytree.Map(out.Grads, shard.Gather), nil
}

// Eval returns the mean loss of the current parameters on batch, without
// gradients. The loss sees the key the next Step will use; Eval does not
// count as a step.
//
// As a step's backward pass does, Eval recycles the intermediates of the
// loss (tensor.Recycling) once it has read the loss, on every strategy:
// their storage goes to the allocator cache, where the next Step's
// activations find it, so evaluating every few steps does not raise the
// peak memory of a run. The loss is bit for bit the one an evaluation
// without recycling returns, and a loss function must not keep an
// intermediate past its call (see Config.Loss). Having no backward pass,
// Eval runs the loss without the checkpoint of Config.Remat.
func (t *Trainer[M, B]) Eval(batch B) (float64, error) {
	if err := t.checkBatch(batch); err != nil {
		return 0, err
	}
	defer t.begin()()
	key := t.peekKey()
	flow := newFlow(t.mstate, t.cfg.StateLoss != nil)
	var l *tensor.Tensor
	var recycle func()
	switch {
	case t.mesh == nil:
		l, recycle = evalLoss(t.params, func(p M) *tensor.Tensor { return t.userLoss(nil, p, batch, key, 0, flow) })
	case t.prop:
		stop := shard.Record(t.mesh, &t.comm)
		defer stop()
		l, recycle = evalLoss(t.params, func(p M) *tensor.Tensor { return t.propLoss(p, batch, key, flow) })
	default:
		l = t.eval(stepIn[M, B]{Params: t.params, ModelState: t.mstate, Batch: batch, Key: key})
		recycle = t.evalDone.run
	}
	loss := l.Item()
	recycle()
	donateValue(l)
	return loss, nil
}

// BatchSharding returns where a batch leaf goes: rows split over the data
// axes. Place batches there (a data.Loader can) to save a copy per step.
// It is the zero Sharding without a mesh.
func (t *Trainer[M, B]) BatchSharding() shard.Sharding {
	if t.mesh == nil {
		return shard.Sharding{}
	}
	return shard.NewSharding(t.mesh, shard.P(t.dataAxes))
}

// DataAxes returns the mesh axes batches are split over.
func (t *Trainer[M, B]) DataAxes() []string { return slices.Clone(t.dataAxes) }

// Strategy returns the trainer's strategy.
func (t *Trainer[M, B]) Strategy() Strategy { return t.strategy }

// Mesh returns the trainer's mesh (nil on the host).
func (t *Trainer[M, B]) Mesh() *shard.Mesh { return t.mesh }

// Params returns the current parameters as host tensors.
func (t *Trainer[M, B]) Params() M {
	t.don.expose()
	return pytree.Map(t.params, shard.Gather)
}

// PlacedParams returns the current parameters as they are placed.
func (t *Trainer[M, B]) PlacedParams() M {
	t.don.expose()
	return t.params
}

// State returns the optimizer state as it is placed.
func (t *Trainer[M, B]) State() optim.State {
	t.don.expose()
	return t.opt
}

// SetState replaces the parameters and the optimizer state, for example
// with ones restored from a checkpoint. They must have the structure of
// PlacedParams and State; they are placed as the strategy places them,
// whatever their placement was.
func (t *Trainer[M, B]) SetState(params M, state optim.State) error {
	if state == nil {
		return errors.New("parallel: SetState: nil optimizer state")
	}
	t.don.expose()
	if t.host {
		t.params = pytree.Map(params, shard.Gather)
		t.opt = pytree.Map(state, shard.Gather)
		return nil
	}
	return t.placeAll(params, state)
}

// ModelState returns the model's state (Config.StateLoss) as host
// tensors: the running statistics after the last Step. Evaluate with it
// and nn.InferenceMode(params, true).
func (t *Trainer[M, B]) ModelState() nn.State {
	if t.mstate.Values == nil {
		return t.mstate
	}
	return pytree.Map(t.mstate, shard.Gather)
}

// SetModelState replaces the model's state, for example with one
// restored from a checkpoint; on a mesh it is placed replicated.
func (t *Trainer[M, B]) SetModelState(s nn.State) error {
	if t.cfg.StateLoss == nil {
		return errors.New("parallel: SetModelState: the trainer's loss is not a Config.StateLoss")
	}
	if t.mesh == nil {
		t.mstate = pytree.Map(s, shard.Gather)
		return nil
	}
	t.mstate = replicate(t.mesh, s)
	return nil
}

// setModelState takes the state a host or propagation step ended with
// (replicated on a mesh).
func (t *Trainer[M, B]) setModelState(flow *stateFlow) {
	if flow == nil {
		return
	}
	s := flow.final()
	if t.mesh != nil {
		s = replicate(t.mesh, s)
	}
	t.mstate = s
}

// begin starts measuring a step: it forgets the last one's communication
// and returns the function that records its wall time.
func (t *Trainer[M, B]) begin() func() {
	t.comm.Reset()
	t0 := time.Now()
	return func() { t.stepTime = time.Since(t0) }
}

// Comm returns the bytes each device sent in the last Step, LossAndGrad or
// Eval.
func (t *Trainer[M, B]) Comm() *shard.Comm { return &t.comm }

// Stats describes the cost of a strategy on one device (device 0 of the
// mesh; the shipped strategies are symmetric).
type Stats struct {
	// CommBytes are the bytes device 0 sent in the last step, by
	// collective kind.
	CommBytes map[string]int64
	// Residuals is what device 0's backward pass keeps alive.
	Residuals tensor.ResidualReport
	// ParamBytes and StateBytes are the bytes of parameters and optimizer
	// state device 0 holds (a full replica when they are replicated).
	ParamBytes, StateBytes int64
	// StepTime is the wall time of the last Step, LossAndGrad or Eval.
	// ExposedComm is the part of it device 0 spent waiting for
	// collectives (shard.Comm.Waited): the communication its computation
	// did not hide (on the DP step, the gradients' reductions still in
	// flight when the backward pass ends, the parameters' all-gather and
	// the loss's mean), and in one process the time it waited for slower
	// devices. It is measured on the Map step (DP, DeviceLoss); under
	// sharding propagation (FSDP, TP, FSDPTP) it is not measured yet and
	// stays zero.
	StepTime, ExposedComm time.Duration
}

// Stats measures the trainer on batch: it runs one forward pass to
// measure residuals (on the mesh's first device of this process, device
// 0 in one process) and reads the communication of the last
// Step, LossAndGrad or Eval.
func (t *Trainer[M, B]) Stats(batch B) (Stats, error) {
	if err := t.checkBatch(batch); err != nil {
		return Stats{}, err
	}
	st := Stats{CommBytes: map[string]int64{}}
	key := tensor.FoldIn(t.cfg.Key, t.steps)
	if t.mesh == nil {
		st.Residuals = autodiff.Residuals(func(p M) *tensor.Tensor {
			return t.userLoss(nil, p, batch, key, 0, newFlow(t.mstate, t.cfg.StateLoss != nil))
		}, t.params)
	} else {
		dev0 := firstLocalDevice(t.mesh)
		for _, k := range t.comm.Kinds() {
			st.CommBytes[k] = t.comm.Bytes(dev0, k)
		}
		st.ExposedComm = t.comm.Waited(dev0)
	}
	switch {
	case t.mesh == nil:
	case t.prop:
		st.Residuals = t.propResiduals(batch, key)
	default:
		dev0 := firstLocalDevice(t.mesh)
		var mu sync.Mutex
		io := ioSpecs{params: t.specs, state: t.state, data: shard.P(t.dataAxes)}
		shard.Map(t.mesh, io, shard.P(), func(c *shard.Ctx, in stepIn[M, B]) *tensor.Tensor {
			r := autodiff.Residuals(func(p M) *tensor.Tensor {
				return t.deviceLoss(c, p, in.Batch, in.Key, 0, newFlow(in.ModelState, t.cfg.StateLoss != nil))
			}, in.Params)
			if c.Device() == dev0 {
				mu.Lock()
				st.Residuals = r
				mu.Unlock()
			}
			return tensor.Scalar(0)
		})(stepIn[M, B]{Params: t.params, ModelState: t.mstate, Batch: batch, Key: key})
	}
	st.ParamBytes = deviceBytes(t.params)
	st.StateBytes = deviceBytes(t.opt)
	st.StepTime = t.stepTime
	return st, nil
}

// deviceBytes sums the bytes of the blocks this process's first device
// holds of a tree's leaves (a host leaf counts whole).
func deviceBytes(tree any) int64 {
	var n int64
	for _, x := range pytree.Leaves(tree) {
		if x.Layout() == nil {
			n += int64(x.Bytes())
			continue
		}
		n += int64(firstLocalBlock(x).Bytes())
	}
	return n
}

// firstLocalBlock returns the block of a placed tensor on this process's
// first device of its mesh (under mpirun the blocks of other processes'
// devices are nil). It panics if this process has no device of the mesh.
func firstLocalBlock(x *tensor.Tensor) *tensor.Tensor {
	for _, b := range shard.Blocks(x) {
		if b != nil {
			return b
		}
	}
	panic(fmt.Sprintf("parallel: %v has no block on a device of process %d", x, shard.ProcessIndex()))
}

// firstLocalDevice returns the mesh's first device in this process (the
// first device of the mesh in a job of one process).
func firstLocalDevice(m *shard.Mesh) *shard.Device {
	for _, d := range m.Devices() {
		if d.IsLocal() {
			return d
		}
	}
	panic(fmt.Sprintf("parallel: process %d has no device of %v", shard.ProcessIndex(), m))
}
