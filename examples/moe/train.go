package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/expert"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// strategy says where the model lives.
type strategy int

const (
	single strategy = iota // one device
	epOnly                 // experts over ep, tokens over ep, the rest replicated
	dpEP                   // tokens over dp×ep, experts over ep, the rest replicated
	fsdpEP                 // dpEP with every "embed" dimension split over dp (FSDP)
)

var strategyNames = []string{"single", "ep", "dp_ep", "fsdp_ep"}

func (s strategy) String() string { return strategyNames[s] }

func parseStrategy(name string) (strategy, error) {
	i := slices.Index(strategyNames, name)
	if i < 0 {
		return 0, fmt.Errorf("-strategy %q: want one of %s, or compare", name, strings.Join(strategyNames, ", "))
	}
	return strategy(i), nil
}

// defaultMesh is the mesh a strategy uses without -mesh, on n devices.
func (s strategy) defaultMesh(n int) string {
	switch s {
	case epOnly:
		return fmt.Sprintf("ep=%d", n)
	case dpEP, fsdpEP:
		return fmt.Sprintf("dp=%d,ep=%d", max(1, n/4), min(n, 4))
	}
	return ""
}

// trainer trains a Model with one strategy. Sharded strategies run one
// shard.Map per step in which every device computes the loss on its rows,
// differentiates it and updates its parameter blocks (the experts it holds,
// its FSDP shards, and its copy of the replicated rest).
type trainer struct {
	strat   strategy
	mesh    *shard.Mesh
	ecfg    expert.Config
	rules   shard.Rules
	specs   []shard.Spec // per parameter leaf, for FSDP gathers
	opt     optim.Transform
	senders int // single: the capacity rule (0: global)

	params Model
	state  optim.State
	comm   shard.Comm

	step  func(stepIn) stepOut
	grads func(gradIn) gradOut
	eval  func(gradIn) evalOut
}

type stepIn struct {
	Params Model
	State  optim.State
	X, Y   *tensor.Tensor
}

// stats are the per-step monitoring figures, the same on every device.
type stats struct {
	Loss, CE *tensor.Tensor // f32[]: total training loss and its cross-entropy
	Dropped  *tensor.Tensor // f32[]: dropped token choices, all layers
	Load     *tensor.Tensor // f32[layers, E]: choices routed to each expert
}

type stepOut struct {
	Params Model
	State  optim.State
	Stats  stats
}

type gradIn struct {
	Params Model
	X, Y   *tensor.Tensor
}

type gradOut struct {
	Stats stats
	Grads Model
}

type evalOut struct{ CE *tensor.Tensor }

// specs places the leaves of the step's trees: the batch over the token
// axes, everything else by the rules.
type specs struct{ t *trainer }

func (s specs) SpecFor(path pytree.Path, x *tensor.Tensor) (shard.Spec, error) {
	if len(path) > 0 && path[0].Kind == pytree.FieldElem && (path[0].Name == "X" || path[0].Name == "Y") {
		return shard.P([]string(s.t.ecfg.Tokens)), nil
	}
	if len(path) > 0 && path[0].Kind == pytree.FieldElem && path[0].Name == "Stats" {
		return shard.P(), nil
	}
	return s.t.rules.SpecFor(path, x)
}

// newTrainer places model for strategy s on mesh (nil for single). It
// returns an error for a mesh that does not fit the strategy or the model.
func newTrainer(model Model, s strategy, mesh *shard.Mesh, opt optim.Transform, senders int) (t *trainer, err error) {
	t = &trainer{strat: s, mesh: mesh, opt: opt, senders: senders, params: model}
	if s == single {
		t.state = opt.Init(model)
		return t, nil
	}
	names := mesh.AxisNames()
	if !slices.Contains(names, "ep") {
		return nil, fmt.Errorf("strategy %v needs a mesh axis named ep, got %v", s, mesh)
	}
	for _, n := range names {
		if n != "dp" && n != "ep" {
			return nil, fmt.Errorf("mesh %v: axis %q: strategy %v uses axes dp and ep only", mesh, n, s)
		}
	}
	if s == epOnly && len(names) != 1 {
		return nil, fmt.Errorf("strategy ep wants a mesh with the one axis ep, got %v (use dp_ep)", mesh)
	}
	if s == fsdpEP && !slices.Contains(names, "dp") {
		return nil, fmt.Errorf("strategy fsdp_ep needs a mesh axis dp, got %v", mesh)
	}
	E := model.Blocks[0].MoE.NumExperts()
	if ep := mesh.AxisSize("ep"); E%ep != 0 {
		return nil, fmt.Errorf("%d experts do not split over ep=%d", E, ep)
	}
	t.ecfg = expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes(names)}
	// Experts over ep; the other named dimensions replicated, or "embed"
	// split over dp for FSDP.
	t.rules = append(expert.Rules("ep"), shard.Rules{{nn.AxisVocab, nil}, {nn.AxisHeads, nil}, {nn.AxisMLP, nil}}...)
	if s == fsdpEP {
		t.rules = append(t.rules, shard.Rules{{nn.AxisEmbed, shard.Axes{"dp"}}}...)
		if d := model.Embed.W.Dim(1); d%mesh.AxisSize("dp") != 0 {
			return nil, fmt.Errorf("width %d does not split over dp=%d", d, mesh.AxisSize("dp"))
		}
	} else {
		t.rules = append(t.rules, shard.Rules{{nn.AxisEmbed, nil}}...)
	}
	if err := t.rules.Validate(model); err != nil {
		return nil, err
	}
	paths, leaves := pytree.LeavesWithPath(model)
	for i, p := range paths {
		sp, err := t.rules.SpecFor(p, leaves[i])
		if err != nil {
			return nil, err
		}
		t.specs = append(t.specs, sp)
	}
	t.params = shard.FilterShard(model, mesh, t.rules)
	t.state = shard.FilterShard(opt.Init(t.params), mesh, t.rules)
	sp := specs{t}
	t.step = shard.Map(mesh, sp, sp, func(c *shard.Ctx, in stepIn) stepOut {
		st, g := t.lossAndGrad(c, in.Params, in.X, in.Y)
		p, s := optim.Step(t.opt, in.Params, g, in.State)
		return stepOut{Params: p, State: s, Stats: st}
	}, shard.WithComm(&t.comm))
	t.grads = shard.Map(mesh, sp, sp, func(c *shard.Ctx, in gradIn) gradOut {
		st, g := t.lossAndGrad(c, in.Params, in.X, in.Y)
		return gradOut{Stats: st, Grads: g}
	}, shard.WithComm(&t.comm))
	t.eval = shard.Map(mesh, sp, sp, func(c *shard.Ctx, in gradIn) evalOut {
		_, st := t.loss(c, in.Params, in.X, in.Y)
		return evalOut{CE: st.CE}
	})
	return t, nil
}

// gather all-gathers the FSDP shards of p (dimensions split over dp) inside
// Map; its VJP reduce-scatters the gradients back to the shards.
func (t *trainer) gather(c *shard.Ctx, p Model) Model {
	if t.strat != fsdpEP {
		return p
	}
	leaves, st := pytree.Flatten(p)
	for i, x := range leaves {
		for d, ds := range t.specs[i] {
			if slices.Contains(ds, "dp") {
				x = c.AllGather(x, shard.Axes{"dp"}, d, true)
			}
		}
		leaves[i] = x
	}
	return pytree.Unflatten[Model](st, leaves)
}

// loss is the training loss of the whole batch computed on this device's
// rows (c nil: on one device), and the monitoring figures.
func (t *trainer) loss(c *shard.Ctx, p Model, x, y *tensor.Tensor) (*tensor.Tensor, stats) {
	var moe moeFunc
	if c == nil {
		moe = singleMoE(t.senders)
	} else {
		p = t.gather(c, p)
		moe = func(m nn.MoE, h *tensor.Tensor) nn.MoEOutput { return expert.Forward(c, m, h, t.ecfg) }
	}
	out := p.forward(x, moe)
	ce := tensor.Mean(tensor.SoftmaxCrossEntropy(out.Logits, y))
	dropped := 0
	for _, d := range out.Dropped {
		for _, b := range d.Bools() {
			if b {
				dropped++
			}
		}
	}
	drop := tensor.Scalar(float32(dropped))
	load := tensor.AsType(tensor.Stack(0, out.Load...), tensor.Float32)
	if c != nil {
		ce = c.Pmean(ce, t.ecfg.Tokens...)
		drop = c.Psum(drop, t.ecfg.Tokens...)
	}
	loss := tensor.Add(ce, out.Aux)
	return loss, stats{Loss: tensor.StopGradient(loss), CE: tensor.StopGradient(ce), Dropped: drop, Load: load}
}

func (t *trainer) lossAndGrad(c *shard.Ctx, p Model, x, y *tensor.Tensor) (stats, Model) {
	var st stats
	_, g := autodiff.ValueAndGrad(func(p Model) *tensor.Tensor {
		l, s := t.loss(c, p, x, y)
		st = s
		return l
	})(p)
	return st, g
}

// batchSharding is where batches go: rows over the token axes.
func (t *trainer) batchSharding() shard.Sharding {
	return shard.NewSharding(t.mesh, shard.P([]string(t.ecfg.Tokens)))
}

func (t *trainer) place(x *tensor.Tensor) *tensor.Tensor {
	if t.mesh == nil {
		return x
	}
	return shard.Put(x, t.batchSharding())
}

// trainStep runs one step on a batch and returns its statistics as host
// values.
func (t *trainer) trainStep(x, y *tensor.Tensor) stats {
	t.comm.Reset()
	if t.mesh == nil {
		st, g := t.lossAndGrad(nil, t.params, x, y)
		t.params, t.state = optim.Step(t.opt, t.params, g, t.state)
		return st
	}
	out := t.step(stepIn{Params: t.params, State: t.state, X: t.place(x), Y: t.place(y)})
	t.params, t.state = out.Params, out.State
	return gatherStats(out.Stats)
}

// lossAndGradients returns the statistics and the gradient of the current
// parameters on a batch, gathered to host tensors, without an update.
func (t *trainer) lossAndGradients(x, y *tensor.Tensor) (stats, Model) {
	t.comm.Reset()
	if t.mesh == nil {
		return t.lossAndGrad(nil, t.params, x, y)
	}
	out := t.grads(gradIn{Params: t.params, X: t.place(x), Y: t.place(y)})
	return gatherStats(out.Stats), pytree.Map(out.Grads, shard.Gather)
}

// evalCE is the mean cross-entropy (nats per character) on a batch.
func (t *trainer) evalCE(x, y *tensor.Tensor) float64 {
	if t.mesh == nil {
		_, st := t.loss(nil, t.params, x, y)
		return float64(st.CE.Item())
	}
	return float64(shard.Gather(t.eval(gradIn{Params: t.params, X: t.place(x), Y: t.place(y)}).CE).Item())
}

// hostParams returns the parameters as host tensors.
func (t *trainer) hostParams() Model { return pytree.Map(t.params, shard.Gather) }

// setState replaces parameters and optimizer state (from a checkpoint),
// placing them as the strategy does.
func (t *trainer) setState(p Model, s optim.State) {
	if t.mesh == nil {
		t.params, t.state = pytree.Map(p, shard.Gather), pytree.Map(s, shard.Gather)
		return
	}
	t.params = shard.FilterShard(p, t.mesh, t.rules)
	t.state = shard.FilterShard(s, t.mesh, t.rules)
}

func gatherStats(s stats) stats {
	return stats{Loss: shard.Gather(s.Loss), CE: shard.Gather(s.CE), Dropped: shard.Gather(s.Dropped), Load: shard.Gather(s.Load)}
}
