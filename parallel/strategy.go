package parallel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
)

// A Strategy says how a model is spread over a mesh: where its parameters
// live, where the optimizer state lives, which mesh axes split a batch, and
// what each device holds of a parameter while the loss runs. It is a value,
// like optax's GradientTransformation or gonum's optimize.Method: the
// Trainer asks it for a Placement and runs every strategy the same way, so
// a new strategy is a new type in its own file, with no switch to extend.
type Strategy interface {
	// String returns the strategy's name ("dp", "fsdp", ...), as ParseStrategy
	// reads it for the strategies this package ships.
	String() string
	// Place returns where the parameters params (a pytree of tensors, on the
	// host) go on mesh, or an error naming what in the mesh or the model
	// does not fit the strategy. mesh is nil for single-device training.
	Place(mesh *shard.Mesh, params any) (Placement, error)
}

// Placement is a strategy's answer for one model on one mesh.
type Placement struct {
	// Params gives each parameter leaf its partition spec (where it is
	// stored between steps; gradients come out placed the same way). Nil
	// replicates every parameter.
	Params shard.SpecTree
	// State places the optimizer state; nil places each state leaf like
	// the parameter it belongs to (shard.LikeParams over Params), as ZeRO
	// does.
	State shard.SpecTree
	// DataAxes are the mesh axes the leading dimension of every batch leaf
	// is split over; none keeps the whole batch on every device.
	DataAxes []string
	// MapStep runs each step as one shard.Map, the hand-written fast path:
	// every device all-gathers the parameters it holds shards of (to their
	// Compute specs) inside a checkpoint, so that the backward pass gathers
	// them again instead of keeping the gathered copies and the gradients
	// are reduce-scattered back to the shards, then runs the loss on its
	// rows of the batch. Without MapStep the loss runs on the placed
	// parameters and batch, and sharding propagation computes every op
	// blockwise with the collectives its rule inserts (package shard);
	// gradients come out placed like their parameters.
	MapStep bool
	// Compute gives the spec each parameter has while the loss runs on the
	// MapStep path; nil gathers every parameter in full. The loss sees
	// blocks of the parameters it leaves sharded, so it only makes sense
	// with Config.DeviceLoss, a loss that calls collectives itself (expert
	// parallelism, say).
	Compute shard.SpecTree
}

// TPAxis is the mesh axis the tensor-parallel strategies split layers over;
// every other mesh axis holds data.
const TPAxis = "tp"

// Single trains on the host, without a mesh (pass a nil Mesh).
var Single Strategy = single{}

// DP is data parallelism: every device holds a replica of the parameters,
// each batch is split over every mesh axis, and the gradients are summed
// over the devices. With an elementwise optimizer (optim.Elementwise) the
// update is sharded (ZeRO-1/2): the gradients are reduce-scattered, each
// device updates its block of each parameter with the optimizer state of
// that block alone (stored split over the mesh axes) and the parameters
// are all-gathered, the bytes of one all-reduce. With another optimizer the
// gradients are all-reduced and the replicated state is updated once.
var DP Strategy = dp{}

// FSDP is fully-sharded data parallelism (ZeRO-3): each parameter with a
// dimension divisible by the mesh size is split along the first such
// dimension over every mesh axis, and so are its gradient and its
// optimizer state; each batch is split over every mesh axis. An op
// gathers a weight just before use and keeps only the shard for the
// backward pass, which gathers again where it needs the weight and
// reduce-scatters the gradients (the residual report of Trainer.Stats
// shows no all_gather kept).
var FSDP Strategy = fsdp{}

// TP is Megatron tensor parallelism from the model's logical axes (those nn
// constructors set through their options' Axes fields): the dimensions
// named nn.AxisMLP and nn.AxisHeads are split over the mesh axis "tp" (see
// TPRules), so a column-parallel layer feeds a row-parallel one; each batch
// is split over the other mesh axes. The mesh must have a "tp" axis and the
// model at least one parameter with such a name.
var TP Strategy = tp{fsdp: false}

// FSDPTP combines TP over "tp" with FSDP over the other (data) axes: each
// parameter is split by the TP rules, then along another dimension
// divisible by the data axes' size over those axes.
var FSDPTP Strategy = tp{fsdp: true}

// Strategies lists the strategies ParseStrategy knows, in the order
// examples/mlp -strategy compare prints them.
func Strategies() []Strategy { return []Strategy{Single, DP, FSDP, TP, FSDPTP} }

// ParseStrategy returns the shipped strategy whose String is name (case
// insensitive): "single", "dp", "fsdp", "tp" or "fsdp_tp".
func ParseStrategy(name string) (Strategy, error) {
	var names []string
	for _, s := range Strategies() {
		if strings.EqualFold(s.String(), name) {
			return s, nil
		}
		names = append(names, s.String())
	}
	return nil, fmt.Errorf("parallel: unknown strategy %q (want one of %s)", name, strings.Join(names, ", "))
}

// TPRules are the logical-axis rules of TP: the hidden dimension of
// feed-forward blocks and the attention heads are split over "tp"; the
// model dimension, sequence positions, vocabulary and batch dimensions of
// parameters stay whole. A parameter with a logical name not listed here is
// an error under TP (use Rules with your own list).
func TPRules() shard.Rules {
	return shard.Rules{
		{Logical: nn.AxisMLP, Mesh: shard.Axes{TPAxis}},
		{Logical: nn.AxisHeads, Mesh: shard.Axes{TPAxis}},
		{Logical: nn.AxisEmbed, Mesh: nil},
		{Logical: nn.AxisLength, Mesh: nil},
		{Logical: nn.AxisVocab, Mesh: nil},
		{Logical: nn.AxisBatch, Mesh: nil},
		{Logical: nn.AxisExpert, Mesh: nil},
	}
}

// Rules returns a strategy that places parameters by the user's
// logical-axis rules (Flax's logical_axis_rules). The rule for the logical
// name "batch" (nn.AxisBatch), if any, gives the mesh axes batches are
// split over; without it every device sees the whole batch. Every logical
// name on a parameter needs a rule: a name without one is an error naming
// the parameter, which catches typos that would replicate silently.
func Rules(rules shard.Rules) Strategy { return ruleStrategy{rules: slices.Clone(rules)} }

type single struct{}

func (single) String() string { return "single" }

func (single) Place(mesh *shard.Mesh, _ any) (Placement, error) {
	if mesh != nil {
		return Placement{}, fmt.Errorf("parallel: strategy single trains on the host and takes no mesh (got %v)", mesh)
	}
	return Placement{}, nil
}

type dp struct{}

func (dp) String() string { return "dp" }

func (dp) Place(mesh *shard.Mesh, _ any) (Placement, error) {
	if err := needMesh("dp", mesh); err != nil {
		return Placement{}, err
	}
	// Both paths send the same bytes (one all-reduce of the gradients);
	// the Map step is faster (BenchmarkStep in this package).
	return Placement{Params: shard.P(), DataAxes: mesh.AxisNames(), MapStep: true}, nil
}

type fsdp struct{}

func (fsdp) String() string { return "fsdp" }

func (fsdp) Place(mesh *shard.Mesh, params any) (Placement, error) {
	if err := needMesh("fsdp", mesh); err != nil {
		return Placement{}, err
	}
	data := mesh.AxisNames()
	specs := zeroSpecs(params, nil, data, mesh.Size())
	// Propagation gathers a weight where an op needs it, in forward and
	// again in backward (the matmul keeps only the shard it was given),
	// and only where the backward pass needs it: fewer bytes than the Map
	// step, which gathers every parameter in both passes
	// (BenchmarkStep).
	return Placement{Params: specs, DataAxes: data}, nil
}

// tp is TP, or FSDPTP with fsdp set.
type tp struct{ fsdp bool }

func (s tp) String() string {
	if s.fsdp {
		return "fsdp_tp"
	}
	return "tp"
}

func (s tp) Place(mesh *shard.Mesh, params any) (Placement, error) {
	if err := needMesh(s.String(), mesh); err != nil {
		return Placement{}, err
	}
	if !slices.Contains(mesh.AxisNames(), TPAxis) {
		return Placement{}, fmt.Errorf("parallel: strategy %v needs a mesh axis %q; mesh is %v", s, TPAxis, mesh)
	}
	rules := TPRules()
	if err := rules.Validate(params); err != nil {
		return Placement{}, fmt.Errorf("parallel: strategy %v: %w", s, err)
	}
	split := false
	paths, leaves := pytree.LeavesWithPath(params)
	for i, x := range leaves {
		sp, err := rules.SpecFor(paths[i], x)
		if err != nil {
			return Placement{}, fmt.Errorf("parallel: strategy %v: %w", s, err)
		}
		split = split || len(sp.Axes()) > 0
	}
	if !split {
		return Placement{}, fmt.Errorf("parallel: strategy %v: no parameter has a logical axis (%q or %q) that TP splits; name the model's axes (the Axes field of nn's options, nn.MegatronAxes)",
			s, nn.AxisMLP, nn.AxisHeads)
	}
	var data []string
	for _, a := range mesh.AxisNames() {
		if a != TPAxis {
			data = append(data, a)
		}
	}
	var specs shard.SpecTree = rules
	if s.fsdp && len(data) > 0 {
		specs = zeroSpecs(params, rules, data, mesh.AxisSize(data...))
	}
	return Placement{Params: specs, DataAxes: data}, nil
}

type ruleStrategy struct{ rules shard.Rules }

func (s ruleStrategy) String() string { return "rules" + s.rules.String() }

func (s ruleStrategy) Place(mesh *shard.Mesh, params any) (Placement, error) {
	if err := needMesh("rules", mesh); err != nil {
		return Placement{}, err
	}
	if err := s.rules.Validate(params); err != nil {
		return Placement{}, fmt.Errorf("parallel: %w", err)
	}
	var data []string
	for _, r := range s.rules {
		if r.Logical == nn.AxisBatch {
			data = slices.Clone(r.Mesh)
		}
	}
	for _, r := range s.rules {
		for _, a := range r.Mesh {
			if !slices.Contains(mesh.AxisNames(), a) {
				return Placement{}, fmt.Errorf("parallel: rule %q names mesh axis %q; mesh is %v", r.Logical, a, mesh)
			}
		}
	}
	return Placement{Params: s.rules, DataAxes: data}, nil
}

func needMesh(name string, mesh *shard.Mesh) error {
	if mesh == nil {
		return fmt.Errorf("parallel: strategy %s needs a mesh", name)
	}
	return nil
}

// zeroSpecs returns the ZeRO placement of params: each leaf gets the spec
// of base (nil: replicated) and is split in addition over the mesh axes
// data (n devices in all) along its first dimension that base leaves whole
// and n divides; a leaf without such a dimension keeps the base spec.
func zeroSpecs(params any, base shard.SpecTree, data []string, n int) shard.SpecTree {
	paths, leaves := pytree.LeavesWithPath(params)
	out := make(pathSpecs, len(leaves))
	for i, x := range leaves {
		var spec shard.Spec
		if base != nil {
			// Errors were reported by the caller's validation.
			spec, _ = base.SpecFor(paths[i], x)
		}
		out[paths[i].String()] = zeroSpec(x.Shape(), spec, data, n)
	}
	return out
}

// zeroSpec adds the data axes to spec on the first dimension of shape that
// spec leaves whole and n divides (with at least n elements).
func zeroSpec(shape []int, spec shard.Spec, data []string, n int) shard.Spec {
	out := make(shard.Spec, len(shape))
	copy(out, spec)
	if n <= 1 {
		return out
	}
	for d, size := range shape {
		if len(out[d]) == 0 && size >= n && size%n == 0 {
			out[d] = shard.DimSpec(slices.Clone(data))
			return out
		}
	}
	return out
}

func leafName(p pytree.Path) string {
	if len(p) == 0 {
		return "(root)"
	}
	return p.String()
}
