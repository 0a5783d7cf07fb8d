package shard_test

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// The propagation tests place an MLP by logical-axis rules for the four
// classic strategies. They spell the rules out here rather than take them
// from package parallel, which builds on shard: these tests check that
// placement alone (FilterShard + rules) is enough.

// mlpStrategy names a placement of an MLP's parameters.
type mlpStrategy int

const (
	stDP mlpStrategy = iota
	stFSDP
	stTP
	stFSDPTP
)

func (s mlpStrategy) String() string { return [...]string{"dp", "fsdp", "tp", "fsdp_tp"}[s] }

// DataAxes returns the mesh axes a batch is split over: every axis but
// "tp" under TP and FSDP+TP, every axis otherwise.
func (s mlpStrategy) DataAxes(mesh *shard.Mesh) []string {
	var data []string
	for _, a := range mesh.AxisNames() {
		if a != "tp" || s == stDP || s == stFSDP {
			data = append(data, a)
		}
	}
	return data
}

// axisClasses names the output dimension of the last layer, which no rule
// splits.
const axisClasses = "classes"

// rules returns the logical-axis rules of the strategy on mesh: DP
// replicates; FSDP splits the "mlp" dimension over every axis; TP splits it
// over "tp" (Megatron: column- then row-parallel); FSDP+TP also splits
// "embed" over the other axes.
func (s mlpStrategy) rules(mesh *shard.Mesh) shard.Rules {
	hasTP := slices.Contains(mesh.AxisNames(), "tp")
	data := shard.Axes(s.DataAxes(mesh))
	var embed, mlp shard.Axes
	switch s {
	case stFSDP:
		mlp = data
	case stTP, stFSDPTP:
		if !hasTP {
			panic(fmt.Sprintf("strategy %v needs a mesh axis \"tp\", mesh is %v", s, mesh))
		}
		mlp = shard.Axes{"tp"}
		if s == stFSDPTP {
			embed = data
		}
	}
	return shard.Rules{
		{Logical: nn.AxisEmbed, Mesh: embed},
		{Logical: nn.AxisMLP, Mesh: mlp},
		{Logical: axisClasses, Mesh: nil},
	}
}

// annotateMLP names the dimensions of an MLP's parameters: layers
// alternate (embed, mlp) and (mlp, embed) as nn.MegatronAxes does, and the
// last layer's output is "classes".
func annotateMLP(m nn.MLP) nn.MLP {
	axes := nn.MegatronAxes(len(m.Layers))
	axes[len(axes)-1][1] = axisClasses
	out := m
	out.Layers = make([]nn.Linear, len(m.Layers))
	for i, l := range m.Layers {
		out.Layers[i] = nn.Linear{W: tensor.WithLogicalAxes(l.W, axes[i][0], axes[i][1])}
		if l.B != nil {
			out.Layers[i].B = tensor.WithLogicalAxes(l.B, axes[i][1])
		}
	}
	return out
}

// mse is the per-example sum of squared errors over the last axis.
func mse(pred, target *tensor.Tensor) *tensor.Tensor {
	return tensor.Sum(tensor.Square(tensor.Sub(pred, target)), -1)
}
