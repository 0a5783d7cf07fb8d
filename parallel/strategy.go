package parallel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
)

// Strategy says how a model is spread over a mesh.
type Strategy int

const (
	// Single trains on the host, without a mesh.
	Single Strategy = iota
	// DP replicates the parameters and splits each batch over every mesh
	// axis; gradients are summed over the devices (one all-reduce per
	// parameter) and the optimizer runs once, on the host.
	DP
	// FSDP shards parameters and optimizer state over every mesh axis.
	// Each layer all-gathers its weights just before use, inside a
	// checkpoint that keeps the sharded weights but not the gathered ones,
	// so backward gathers them again; gradients are reduce-scattered back
	// to their shards, where the optimizer updates them.
	FSDP
	// TP splits the hidden dimension of the MLP over the mesh axis "tp"
	// (Megatron-LM: a column-parallel layer followed by a row-parallel one,
	// one all-reduce per pair) and each batch over the other axes.
	TP
	// FSDPTP combines FSDP over the data axes with TP over "tp".
	FSDPTP
)

// TPAxis is the mesh axis tensor-parallel strategies split layers over;
// every other mesh axis holds data.
const TPAxis = "tp"

var strategyNames = []string{"single", "dp", "fsdp", "tp", "fsdp_tp"}

// String returns the strategy's flag name: "single", "dp", "fsdp", "tp" or
// "fsdp_tp".
func (s Strategy) String() string {
	if s >= 0 && int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy parses a strategy name as printed by String.
func ParseStrategy(name string) (Strategy, error) {
	i := slices.Index(strategyNames, strings.ToLower(name))
	if i < 0 {
		return 0, fmt.Errorf("parallel: unknown strategy %q (want one of %s)", name, strings.Join(strategyNames, ", "))
	}
	return Strategy(i), nil
}

// Strategies lists every strategy.
func Strategies() []Strategy { return []Strategy{Single, DP, FSDP, TP, FSDPTP} }

// DataAxes returns the mesh axes a batch is split over.
func (s Strategy) DataAxes(mesh *shard.Mesh) []string {
	var out []string
	for _, a := range mesh.AxisNames() {
		if a != TPAxis || s == DP || s == FSDP {
			out = append(out, a)
		}
	}
	return out
}

// Logical axis names of MLP parameters (see Annotate).
const (
	AxisEmbed   = nn.AxisEmbed
	AxisMLP     = nn.AxisMLP
	AxisClasses = "classes"
)

// Rules returns the logical-axis rules that place the parameters (and the
// optimizer state, which carries the same names) of an MLP annotated by
// Annotate for the strategy on mesh.
func (s Strategy) Rules(mesh *shard.Mesh) shard.Rules {
	data := shard.Axes(s.DataAxes(mesh))
	hasTP := slices.Contains(mesh.AxisNames(), TPAxis)
	var embed, mlp shard.Axes // nil: replicated
	switch s {
	case FSDP:
		mlp = data
	case TP, FSDPTP:
		if !hasTP {
			panic(fmt.Sprintf("parallel: strategy %v needs a mesh axis %q, mesh is %v", s, TPAxis, mesh))
		}
		mlp = shard.Axes{TPAxis}
		if s == FSDPTP {
			embed = data
		}
	}
	return shard.Rules{
		{Logical: AxisEmbed, Mesh: embed},
		{Logical: AxisMLP, Mesh: mlp},
		{Logical: AxisClasses, Mesh: nil},
	}
}

// Annotate names the dimensions of an MLP's parameters for the rules:
// layers alternate (embed, mlp) and (mlp, embed) as nn.MegatronAxes does, so
// with "mlp" split over "tp" a column-parallel layer feeds a row-parallel
// one, and the output dimension of the last layer is "classes", which no
// rule splits.
func Annotate(m nn.MLP) nn.MLP {
	axes := nn.MegatronAxes(len(m.Layers))
	axes[len(axes)-1][1] = AxisClasses
	out := m
	out.Layers = make([]nn.Linear, len(m.Layers))
	for i, l := range m.Layers {
		out.Layers[i] = nn.Linear{W: withAxes(l.W, axes[i][0], axes[i][1])}
		if l.B != nil {
			out.Layers[i].B = withAxes(l.B, axes[i][1])
		}
	}
	return out
}
