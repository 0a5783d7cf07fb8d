package parallel

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
)

// EPAxis is the mesh axis the expert-parallel strategies split experts
// over.
const EPAxis = "ep"

// EP is expert parallelism (package expert): the experts of every
// mixture-of-experts layer — the dimension named nn.AxisExpert — are split
// over the mesh axis "ep", every other parameter is replicated, and each
// batch is split over every mesh axis, so on a dp×ep mesh EP is combined
// with data parallelism. The step is one shard.Map in which the experts
// stay split while the loss runs: the loss must be a Config.DeviceLoss that
// runs its MoE layers with expert.Forward, with expert.Config{Experts:
// {"ep"}, Tokens: Trainer.DataAxes()}, which sends each token choice to the
// device holding its expert. (With an ordinary Loss the trainer gathers
// the experts, and each device computes every expert on its own rows.)
// The mesh must have an "ep" axis dividing the number of experts. With an
// elementwise optimizer (optim.Elementwise) the update is sharded as DP's
// is: each device updates its block of every replicated parameter and
// holds that block of its optimizer state, split over every mesh axis,
// and its part of its experts, their state split over "ep" and the other
// axes.
var EP Strategy = ep{}

// FSDPEP is EP with every parameter also split over the other (data) axes
// along another dimension, as FSDP does (ZeRO-3): the Map step all-gathers
// those shards inside a checkpoint before the loss runs and
// reduce-scatters the gradients back; experts stay split over "ep".
var FSDPEP Strategy = ep{fsdp: true}

// EPRules are the logical-axis rules of EP: experts over "ep", every other
// dimension nn constructors name kept whole.
func EPRules() shard.Rules {
	return shard.Rules{
		{Logical: nn.AxisExpert, Mesh: shard.Axes{EPAxis}},
		{Logical: nn.AxisEmbed, Mesh: nil},
		{Logical: nn.AxisMLP, Mesh: nil},
		{Logical: nn.AxisHeads, Mesh: nil},
		{Logical: nn.AxisLength, Mesh: nil},
		{Logical: nn.AxisVocab, Mesh: nil},
		{Logical: nn.AxisBatch, Mesh: nil},
	}
}

type ep struct{ fsdp bool }

func (s ep) String() string {
	if s.fsdp {
		return "fsdp_ep"
	}
	return "ep"
}

func (s ep) Place(mesh *shard.Mesh, params any) (Placement, error) {
	if err := needMesh(s.String(), mesh); err != nil {
		return Placement{}, err
	}
	if !slices.Contains(mesh.AxisNames(), EPAxis) {
		return Placement{}, fmt.Errorf("parallel: strategy %v needs a mesh axis %q; mesh is %v", s, EPAxis, mesh)
	}
	rules := EPRules()
	if err := rules.Validate(params); err != nil {
		return Placement{}, fmt.Errorf("parallel: strategy %v: %w", s, err)
	}
	var data []string
	for _, a := range mesh.AxisNames() {
		if a != EPAxis {
			data = append(data, a)
		}
	}
	var specs shard.SpecTree = rules
	if s.fsdp {
		if len(data) == 0 {
			return Placement{}, fmt.Errorf("parallel: strategy %v needs a data axis besides %q to shard parameters over; mesh is %v", s, EPAxis, mesh)
		}
		specs = zeroSpecs(params, rules, data, mesh.AxisSize(data...))
	}
	return Placement{Params: specs, DataAxes: mesh.AxisNames(), MapStep: true, Compute: rules}, nil
}
