package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gonox/gonox/expert"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// strategy says where the model lives.
type strategy int

const (
	single    strategy = iota // one device
	epOnly                    // experts over ep, tokens over ep, the rest replicated
	dpEP                      // tokens over dp×ep, experts over ep, the rest replicated
	fsdpEP                    // dpEP with every parameter also split over dp (FSDP)
	dpDense                   // -ffn dense: parallel.DP over dp
	fsdpDense                 // -ffn dense: parallel.FSDP over dp
)

var strategyNames = []string{"single", "ep", "dp_ep", "fsdp_ep", "dp", "fsdp"}

// dense reports whether the strategy trains dense models only (-ffn
// dense): parallel.DP and parallel.FSDP by sharding propagation, on a mesh
// with the one axis dp.
func (s strategy) dense() bool { return s == dpDense || s == fsdpDense }

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
	case dpDense, fsdpDense:
		return fmt.Sprintf("dp=%d", n)
	}
	return ""
}

// batch is what a step trains on: character ids and their successors.
type batch struct{ X, Y *tensor.Tensor }

// stats are the monitoring figures of a step or an evaluation.
type stats struct {
	Loss    float64   // total training loss (cross-entropy + auxiliary)
	CE      float64   // cross-entropy, nats per character
	Dropped float64   // dropped token choices, all layers and devices
	Load    []float64 // [layers·E]: token choices routed to each expert
}

// monitor collects the routing statistics the loss sees. The devices of a
// step run the loss concurrently, in this process and (under mpirun) in
// others. On a mesh within one process each device records its own
// figures and result sums them as a Psum over the devices would, bit for
// bit (shard.SumLikePsum), so the devices do not meet for them; on a mesh
// spanning processes each records figures already combined over every
// device of the mesh (a Psum), so any one device's record is the step's,
// in every process. A step's first record of a device is kept (the
// backward pass of a checkpoint recomputes the loss and records again).
type monitor struct {
	mu      sync.Mutex
	seen    bool
	ce      float64
	dropped float64
	load    []float64
	// figs are, by the device's index over the token axes, its
	// [cross-entropy, dropped choices of each layer] (recordDevice).
	figs [][]float32
}

func (m *monitor) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen, m.ce, m.dropped, m.load = false, 0, 0, nil
	clear(m.figs)
}

// record keeps the first figures of a step: the mean cross-entropy over
// all devices, the dropped token choices of all devices and the global
// per-expert load.
func (m *monitor) record(ce, dropped float64, load []float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen {
		return
	}
	m.seen, m.ce, m.dropped, m.load = true, ce, dropped, load
}

// recordDevice keeps the first figures of device dev of n (its index over
// the token axes) in a step: fig is its [cross-entropy, dropped choices of
// each layer], load the global per-expert load. result sums them.
func (m *monitor) recordDevice(dev, n int, fig []float32, load []float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.figs) != n {
		m.figs = make([][]float32, n)
	}
	if m.figs[dev] != nil {
		return
	}
	m.figs[dev] = fig
	if dev == 0 {
		m.load = load
	}
}

// result returns the recorded figures with the step's loss.
func (m *monitor) result(loss float64) stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.seen && len(m.figs) > 0 && !slices.ContainsFunc(m.figs, func(f []float32) bool { return f == nil }) {
		f := make([]float32, len(m.figs[0]))
		shard.SumLikePsum(f, m.figs)
		m.ce, m.dropped = figures(f, len(m.figs))
		m.seen = true
	}
	return stats{Loss: loss, CE: m.ce, Dropped: m.dropped, Load: m.load}
}

// figures returns the mean cross-entropy and the dropped choices from f,
// the [cross-entropy, dropped choices of each layer] summed over devices.
func figures(f []float32, devices int) (ce, dropped float64) {
	for _, v := range f[1:] {
		dropped += float64(v)
	}
	return float64(f[0]) / float64(devices), dropped
}

// trainer trains a Model with one strategy on parallel.Trainer: Single on
// the host, EP (ep, dp_ep) or FSDPEP (fsdp_ep) on a mesh with a DeviceLoss
// that runs every MoE layer with expert.Forward, or a dense model with DP
// or FSDP (dp, fsdp) by sharding propagation.
type trainer struct {
	strat   strategy
	mesh    *shard.Mesh
	tr      *parallel.Trainer[Model, batch]
	senders int  // single: the capacity rule (0: global)
	spans   bool // the mesh spans processes (mpirun)
	ecfg    expert.Config
	mon     monitor
	policy  nn.Policy // mixed precision (-dtype); the zero Policy: none
}

// newTrainer places model for strategy s on mesh (nil for single). It
// returns an error for a mesh that does not fit the strategy or the model.
func newTrainer(model Model, s strategy, mesh *shard.Mesh, opt optim.Transform, senders int) (*trainer, error) {
	t := &trainer{strat: s, mesh: mesh, senders: senders}
	if mesh != nil {
		t.spans = slices.ContainsFunc(mesh.Devices(), func(d *shard.Device) bool { return !d.IsLocal() })
	}
	cfg := parallel.Config[Model, batch]{Optimizer: opt}
	if s == single {
		cfg.Loss = func(m Model, b batch) *tensor.Tensor { return t.loss(nil, m, b) }
		tr, err := parallel.New(model, cfg)
		t.tr = tr
		return t, err
	}
	names := mesh.AxisNames()
	if s.dense() {
		if len(names) != 1 || names[0] != "dp" {
			return nil, fmt.Errorf("strategy %v wants a mesh with the one axis dp, got %v", s, mesh)
		}
		cfg.Mesh, cfg.Strategy = mesh, parallel.FSDP
		// FSDP runs the loss on the whole placed batch (propagation);
		// DP runs it on each device's rows inside shard.Map, where the
		// statistics are summed over dp.
		cfg.Loss = func(m Model, b batch) *tensor.Tensor { return t.loss(nil, m, b) }
		if s == dpDense {
			t.ecfg.Tokens = shard.Axes{"dp"}
			cfg.Strategy, cfg.Loss = parallel.DP, nil
			cfg.DeviceLoss = func(c *shard.Ctx, m Model, b batch, _ tensor.Key) *tensor.Tensor { return t.loss(c, m, b) }
		}
		tr, err := parallel.New(model, cfg)
		t.tr = tr
		return t, err
	}
	for _, n := range names {
		if n != "dp" && n != "ep" {
			return nil, fmt.Errorf("mesh %v: axis %q: strategy %v uses axes dp and ep only", mesh, n, s)
		}
	}
	if s == epOnly && len(names) != 1 {
		return nil, fmt.Errorf("strategy ep wants a mesh with the one axis ep, got %v (use dp_ep)", mesh)
	}
	t.ecfg = expert.Config{Experts: shard.Axes{parallel.EPAxis}, Tokens: shard.Axes(names)}
	cfg.Mesh, cfg.Strategy = mesh, parallel.EP
	if s == fsdpEP {
		cfg.Strategy = parallel.FSDPEP
	}
	cfg.DeviceLoss = func(c *shard.Ctx, m Model, b batch, _ tensor.Key) *tensor.Tensor { return t.loss(c, m, b) }
	tr, err := parallel.New(model, cfg)
	t.tr = tr
	return t, err
}

// loss is the mean loss of the rows of b (this device's inside shard.Map,
// c nil on the host): cross-entropy plus the MoE layers' auxiliary losses.
// It records the routing statistics.
func (t *trainer) loss(c *shard.Ctx, p Model, b batch) *tensor.Tensor {
	moe := singleMoE(t.senders)
	if c != nil {
		moe = func(m nn.MoE, h *tensor.Tensor) nn.MoEOutput { return expert.Forward(c, m, h, t.ecfg) }
	}
	if t.policy != (nn.Policy{}) && t.policy != nn.Float32Policy {
		// Automatic mixed precision: float32 master weights, the
		// products of attention, the experts (or dense FFN) and the head
		// in bf16 from them, everything else and every gradient float32.
		p = nn.WithPolicy(p, t.policy)
	}
	out := p.forward(b.X, moe)
	ce := tensor.Mean(tensor.SoftmaxCrossEntropy(out.Logits, b.Y))
	// [cross-entropy, dropped choices] of this device. On a mesh spanning
	// processes, the mean cross-entropy and the total dropped over the
	// token axes (one Psum of a few numbers, which crosses processes), so
	// the statistics do not depend on which devices this process holds;
	// in one process the monitor sums the devices' figures itself, the
	// same bits without a meeting of every device after the forward pass.
	// The counts are exact in float32, as the Psum has them.
	fig := []float32{tensor.StopGradient(ce).Float32s()[0]}
	for _, d := range out.Dropped {
		n := 0
		for _, v := range d.Bools() {
			if v {
				n++
			}
		}
		fig = append(fig, float32(n))
	}
	var load []float64
	for _, l := range out.Load {
		for _, v := range l.Ints() {
			load = append(load, float64(v))
		}
	}
	switch {
	case c == nil: // on the host, or by propagation: the loss of the whole batch
		ce, dropped := figures(fig, 1)
		t.mon.record(ce, dropped, load)
	case t.spans:
		f := c.Psum(tensor.FromFloat32(fig), t.ecfg.Tokens...).Float32s()
		ce, dropped := figures(f, t.devices())
		t.mon.record(ce, dropped, load)
	default:
		t.mon.recordDevice(c.AxisIndex(t.ecfg.Tokens...), c.AxisSize(t.ecfg.Tokens...), fig, load)
	}
	return tensor.Add(ce, out.Aux)
}

// devices is the number of devices a step's batch is split over.
func (t *trainer) devices() int {
	if t.mesh == nil {
		return 1
	}
	return t.mesh.Size()
}

// trainStep runs one step on a batch and returns its statistics.
func (t *trainer) trainStep(x, y *tensor.Tensor) (stats, error) {
	t.mon.reset()
	l, err := t.tr.Step(batch{X: x, Y: y})
	return t.mon.result(l), err
}

// lossAndGradients returns the statistics and the gradient of the current
// parameters on a batch, as host tensors, without an update.
func (t *trainer) lossAndGradients(x, y *tensor.Tensor) (stats, Model, error) {
	t.mon.reset()
	l, g, err := t.tr.LossAndGrad(batch{X: x, Y: y})
	return t.mon.result(l), g, err
}

// evalCE is the mean cross-entropy (nats per character) on a batch.
func (t *trainer) evalCE(x, y *tensor.Tensor) (float64, error) {
	t.mon.reset()
	l, err := t.tr.Eval(batch{X: x, Y: y})
	return t.mon.result(l).CE, err
}

// hostParams returns the parameters as host tensors.
func (t *trainer) hostParams() Model { return t.tr.Params() }

// bytesPerDevice is the parameter and optimizer-state bytes device 0 holds.
func (t *trainer) bytesPerDevice() int64 {
	var n int64
	for _, x := range append(pytree.Leaves(t.tr.PlacedParams()), pytree.Leaves(t.tr.State())...) {
		b := int64(x.Bytes())
		if sh, ok := shard.ShardingOf(x); ok && t.mesh != nil {
			for _, a := range sh.Spec().Axes() {
				b /= int64(t.mesh.AxisSize(a))
			}
		}
		n += b
	}
	return n
}
