package parallel

import (
	"fmt"
	"slices"
	"sync"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Loss maps predictions and targets to one loss per example, f32[batch].
type Loss func(pred, target *tensor.Tensor) *tensor.Tensor

// MSE is the sum over the last axis of the squared error, per example (the
// loss of the JAX sharding guide's examples).
func MSE(pred, target *tensor.Tensor) *tensor.Tensor {
	return tensor.Sum(tensor.Square(tensor.Sub(pred, target)), -1)
}

// CrossEntropy is the softmax cross-entropy of logits against int32 class
// labels, per example.
func CrossEntropy(logits, labels *tensor.Tensor) *tensor.Tensor {
	return tensor.SoftmaxCrossEntropy(logits, labels)
}

// Config configures a Trainer.
type Config struct {
	// Strategy and Mesh say where the model lives. Mesh is ignored (and
	// may be nil) for Single; TP and FSDPTP need a mesh axis "tp".
	Strategy Strategy
	Mesh     *shard.Mesh
	// Loss gives per-example losses; the training loss is their mean over
	// the whole batch. Nil means MSE.
	Loss Loss
	// Optimizer updates the parameters (required).
	Optimizer optim.Transform
	// ClipGlobalNorm, if positive, clips gradients to that global norm
	// first; the norm is summed across devices correctly for every
	// strategy.
	ClipGlobalNorm float64
	// Remat is the checkpoint policy around each FSDP layer; nil keeps
	// everything but the all-gathered weights.
	Remat autodiff.Policy
}

// Trainer trains an nn.MLP with a parallel strategy. Its methods are not
// safe for concurrent use.
type Trainer struct {
	cfg      Config
	rules    shard.Rules
	dataAxes []string
	params   nn.MLP
	state    optim.State
	comm     shard.Comm

	step  func(stepIn) stepOut
	grads func(gradIn) gradOut
}

type stepIn struct {
	Params nn.MLP
	State  optim.State
	X, Y   *tensor.Tensor
}

type stepOut struct {
	Params nn.MLP
	State  optim.State
	Loss   *tensor.Tensor
}

type gradIn struct {
	Params nn.MLP
	X, Y   *tensor.Tensor
}

type gradOut struct {
	Loss  *tensor.Tensor
	Grads nn.MLP
}

// New returns a trainer for model. The model's parameters are named with
// Annotate and placed by the strategy's rules; the optimizer state is
// initialised and placed the same way.
func New(model nn.MLP, cfg Config) *Trainer {
	if cfg.Optimizer == nil {
		panic("parallel.New: Config.Optimizer is nil")
	}
	if cfg.Loss == nil {
		cfg.Loss = MSE
	}
	if cfg.Remat == nil {
		cfg.Remat = autodiff.SaveAnythingExceptTheseNames("all_gather")
	}
	if cfg.Strategy != Single && cfg.Mesh == nil {
		panic(fmt.Sprintf("parallel.New: strategy %v needs a mesh", cfg.Strategy))
	}
	t := &Trainer{cfg: cfg, params: Annotate(model)}
	if cfg.Strategy == Single {
		t.state = t.optimizer(nil).Init(t.params)
		return t
	}
	t.rules = cfg.Strategy.Rules(cfg.Mesh)
	t.dataAxes = cfg.Strategy.DataAxes(cfg.Mesh)
	if err := t.rules.Validate(t.params); err != nil {
		panic(fmt.Sprintf("parallel.New: %v", err))
	}
	if cfg.Strategy != DP {
		t.params = shard.FilterShard(t.params, cfg.Mesh, t.rules)
	}
	t.state = t.optimizer(nil).Init(t.params)
	if cfg.Strategy != DP {
		t.state = shard.FilterShard(t.state, cfg.Mesh, t.rules)
	}
	specs := stepSpecs{t}
	t.grads = shard.Map(cfg.Mesh, specs, specs, func(c *shard.Ctx, in gradIn) gradOut {
		l, g := autodiff.ValueAndGrad(func(p nn.MLP) *tensor.Tensor { return t.loss(c, p, in.X, in.Y) })(in.Params)
		return gradOut{Loss: l, Grads: g}
	}, shard.WithComm(&t.comm))
	if cfg.Strategy != DP {
		t.step = shard.Map(cfg.Mesh, specs, specs, func(c *shard.Ctx, in stepIn) stepOut {
			l, g := autodiff.ValueAndGrad(func(p nn.MLP) *tensor.Tensor { return t.loss(c, p, in.X, in.Y) })(in.Params)
			p, s := optim.Step(t.optimizer(c.Psum), in.Params, g, in.State)
			return stepOut{Params: p, State: s, Loss: l}
		}, shard.WithComm(&t.comm))
	}
	return t
}

// optimizer returns the configured optimizer, clipping first if asked,
// with psum as the cross-device sum of the global norm (nil on the host).
func (t *Trainer) optimizer(psum optim.PsumFunc) optim.Transform {
	if t.cfg.ClipGlobalNorm <= 0 {
		return t.cfg.Optimizer
	}
	return optim.Chain(optim.ClipByGlobalNorm(t.cfg.ClipGlobalNorm, optim.ClipOptions{Psum: psum}), t.cfg.Optimizer)
}

// stepSpecs places the leaves of the step's input and output trees: the
// batch over the data axes, everything else by the rules.
type stepSpecs struct{ t *Trainer }

func (s stepSpecs) SpecFor(path pytree.Path, x *tensor.Tensor) (shard.Spec, error) {
	if len(path) > 0 && path[0].Kind == pytree.FieldElem && (path[0].Name == "X" || path[0].Name == "Y") {
		return shard.P(s.t.dataAxes), nil
	}
	return s.t.rules.SpecFor(path, x)
}

// BatchSharding returns where batches go: rows split over the data axes.
// Pass batches placed there (a data.Loader can do it) to save a copy.
func (t *Trainer) BatchSharding() shard.Sharding {
	return shard.NewSharding(t.cfg.Mesh, shard.P(t.dataAxes))
}

// Step runs one training step on a batch (inputs x, targets y) and returns
// the loss before the update.
func (t *Trainer) Step(x, y *tensor.Tensor) float64 {
	t.comm.Reset()
	switch t.cfg.Strategy {
	case Single:
		l, g := autodiff.ValueAndGrad(func(p nn.MLP) *tensor.Tensor {
			return tensor.Mean(t.cfg.Loss(p.Forward(x), y))
		})(t.params)
		t.params, t.state = optim.Step(t.optimizer(nil), t.params, g, t.state)
		return l.Item()
	case DP:
		out := t.grads(gradIn{Params: t.params, X: x, Y: y})
		// The gradients of replicated parameters are the same on every
		// device: update once, on the host.
		g := pytree.Map(out.Grads, shard.Gather)
		t.params, t.state = optim.Step(t.optimizer(nil), t.params, g, t.state)
		return out.Loss.Item()
	}
	out := t.step(stepIn{Params: t.params, State: t.state, X: x, Y: y})
	t.params, t.state = out.Params, out.State
	return out.Loss.Item()
}

// LossAndGrad returns the loss and the gradient of the current parameters
// on a batch, gathered to host tensors, without updating anything.
func (t *Trainer) LossAndGrad(x, y *tensor.Tensor) (float64, nn.MLP) {
	t.comm.Reset()
	if t.cfg.Strategy == Single {
		l, g := autodiff.ValueAndGrad(func(p nn.MLP) *tensor.Tensor {
			return tensor.Mean(t.cfg.Loss(p.Forward(x), y))
		})(t.params)
		return l.Item(), g
	}
	out := t.grads(gradIn{Params: t.params, X: x, Y: y})
	return out.Loss.Item(), pytree.Map(out.Grads, shard.Gather)
}

// Params returns the current parameters as host tensors.
func (t *Trainer) Params() nn.MLP { return pytree.Map(t.params, shard.Gather) }

// PlacedParams returns the current parameters as they are placed.
func (t *Trainer) PlacedParams() nn.MLP { return t.params }

// State returns the optimizer state as it is placed.
func (t *Trainer) State() optim.State { return t.state }

// SetState replaces the parameters and optimizer state, for example with
// ones restored from a checkpoint. They must have the structure of
// PlacedParams and State; they are placed as the strategy places them.
func (t *Trainer) SetState(params nn.MLP, state optim.State) {
	params = Annotate(params)
	if t.cfg.Strategy != Single && t.cfg.Strategy != DP {
		params = shard.FilterShard(params, t.cfg.Mesh, t.rules)
		state = shard.FilterShard(state, t.cfg.Mesh, t.rules)
	} else {
		params = pytree.Map(params, shard.Gather)
		state = pytree.Map(state, shard.Gather)
	}
	t.params, t.state = params, state
}

// Comm returns the bytes each device sent in the last Step or LossAndGrad.
func (t *Trainer) Comm() *shard.Comm { return &t.comm }

// loss is the mean per-example loss over the whole batch, computed inside
// Map on this device's rows.
func (t *Trainer) loss(c *shard.Ctx, p nn.MLP, x, y *tensor.Tensor) *tensor.Tensor {
	h := x
	for i, l := range p.Layers {
		h = t.linear(c, h, l)
		act := p.Activation
		if i == len(p.Layers)-1 {
			act = p.FinalActivation
		}
		if act != nil {
			h = act(h)
		}
	}
	l := tensor.Mean(t.cfg.Loss(h, y))
	if len(t.dataAxes) == 0 {
		// TP on a mesh with no data axis: every device has the whole batch.
		return l
	}
	return c.Pmean(l, t.dataAxes...)
}

type linIn struct {
	X, W, B *tensor.Tensor
}

// linear applies one layer inside Map: weights split over data axes are
// gathered first (FSDP), a layer whose input dimension is split over "tp"
// sums its partial products (the row-parallel half of a Megatron pair).
func (t *Trainer) linear(c *shard.Ctx, x *tensor.Tensor, l nn.Linear) *tensor.Tensor {
	ws := t.mustSpec(l.W)
	var bs shard.Spec
	if l.B != nil {
		bs = t.mustSpec(l.B)
	}
	f := func(in linIn) *tensor.Tensor {
		y := tensor.MatMul(in.X, t.gatherData(c, in.W, ws))
		if len(ws) > 0 && slices.Contains(ws[0], TPAxis) && !slices.Contains(t.dataAxes, TPAxis) {
			y = c.Psum(y, TPAxis)
		}
		if in.B != nil {
			y = tensor.Add(y, t.gatherData(c, in.B, bs))
		}
		return y
	}
	if t.cfg.Strategy == FSDP || t.cfg.Strategy == FSDPTP {
		f = autodiff.Checkpoint(f, t.cfg.Remat)
	}
	return f(linIn{X: x, W: l.W, B: l.B})
}

func (t *Trainer) mustSpec(x *tensor.Tensor) shard.Spec {
	s, err := t.rules.SpecFor(nil, x)
	if err != nil {
		panic(fmt.Sprintf("parallel: %v", err))
	}
	return s
}

// gatherData all-gathers the dimensions of a block split over data axes.
func (t *Trainer) gatherData(c *shard.Ctx, x *tensor.Tensor, s shard.Spec) *tensor.Tensor {
	for d, axes := range s {
		var data shard.Axes
		for _, a := range axes {
			if slices.Contains(t.dataAxes, a) {
				data = append(data, a)
			}
		}
		if len(data) > 0 {
			x = c.AllGather(x, data, d, true)
		}
	}
	return x
}

// Stats describes the cost of a strategy on one device (device 0 of the
// mesh; the strategies are symmetric).
type Stats struct {
	// CommBytes are the bytes device 0 sent in the last step, by
	// collective kind.
	CommBytes map[string]int64
	// Residuals is what device 0's backward pass keeps alive.
	Residuals tensor.ResidualReport
	// ParamBytes and StateBytes are the bytes of parameters and optimizer
	// state device 0 holds (a replica in full under DP and Single).
	ParamBytes, StateBytes int64
}

// Stats measures the trainer on a batch: it runs one forward pass to
// measure residuals (on device 0) and reads the communication of the last
// step.
func (t *Trainer) Stats(x, y *tensor.Tensor) Stats {
	st := Stats{CommBytes: map[string]int64{}}
	if t.cfg.Strategy == Single {
		st.Residuals = autodiff.Residuals(func(p nn.MLP) *tensor.Tensor {
			return tensor.Mean(t.cfg.Loss(p.Forward(x), y))
		}, t.params)
	} else {
		for _, k := range t.comm.Kinds() {
			st.CommBytes[k] = t.comm.Bytes(t.cfg.Mesh.Devices()[0], k)
		}
		var mu sync.Mutex
		specs := stepSpecs{t}
		shard.Map(t.cfg.Mesh, specs, shard.P(), func(c *shard.Ctx, in gradIn) *tensor.Tensor {
			r := autodiff.Residuals(func(p nn.MLP) *tensor.Tensor { return t.loss(c, p, in.X, in.Y) }, in.Params)
			if c.Device() == t.cfg.Mesh.Devices()[0] {
				mu.Lock()
				st.Residuals = r
				mu.Unlock()
			}
			return tensor.Scalar(0)
		})(gradIn{Params: t.params, X: x, Y: y})
	}
	st.ParamBytes = deviceBytes(t.params)
	st.StateBytes = deviceBytes(t.state)
	return st
}

// deviceBytes sums the bytes of the blocks device 0 holds of a tree's
// leaves (a host leaf counts whole).
func deviceBytes(tree any) int64 {
	var n int64
	for _, x := range pytree.Leaves(tree) {
		if x.Layout() == nil {
			n += int64(x.Bytes())
			continue
		}
		n += int64(shard.Blocks(x)[0].Bytes())
	}
	return n
}

// withAxes is tensor.WithLogicalAxes for a possibly nil tensor.
func withAxes(x *tensor.Tensor, names ...string) *tensor.Tensor {
	if x == nil {
		return nil
	}
	return tensor.WithLogicalAxes(x, names...)
}
