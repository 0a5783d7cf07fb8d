package parallel_test

import (
	"fmt"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Model is a model of the user's own: any struct of layers.
type Model struct {
	In, Out nn.Linear
	Norm    nn.LayerNorm
}

// Batch is a batch of the user's own: inputs and class labels.
type Batch struct{ X, Y *tensor.Tensor }

func (m Model) Loss(b Batch) *tensor.Tensor {
	h := m.Norm.Forward(tensor.Gelu(m.In.Forward(b.X)))
	return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Out.Forward(h), b.Y))
}

// Train a custom model with FSDP on eight devices; the losses are those of
// training on one device.
func Example() {
	ks := tensor.NewKey(0).Split(4)
	model := Model{
		In:   nn.NewLinear(ks[0], 16, 64, nn.LinearOptions{}),
		Out:  nn.NewLinear(ks[1], 64, 3, nn.LinearOptions{}),
		Norm: nn.NewLayerNorm(64, nn.LayerNormOptions{}),
	}
	batch := Batch{X: tensor.Normal(ks[2], 32, 16), Y: tensor.RandInt(ks[3], 0, 3, 32)}

	for _, mesh := range []*shard.Mesh{nil, shard.NewMesh([]int{8}, []string{"dp"})} {
		strategy := parallel.Single
		if mesh != nil {
			strategy = parallel.FSDP
		}
		tr, err := parallel.New(model, parallel.Config[Model, Batch]{
			Loss:      Model.Loss,
			Optimizer: optim.Adam(optim.Constant(1e-2)),
			Mesh:      mesh,
			Strategy:  strategy,
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%-6v", strategy)
		for range 3 {
			l, err := tr.Step(batch)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Printf(" %.4f", l)
		}
		fmt.Println()
	}
	// Output:
	// single 1.1502 0.8985 0.7208
	// fsdp   1.1502 0.8985 0.7208
}

// A strategy of your own from logical-axis rules: the hidden dimension of
// the MLP split over "tp", batches over "dp".
func ExampleRules() {
	model := nn.NewMLP(tensor.NewKey(0), []int{8, 32, 2}, nn.MLPOptions{Axes: nn.MegatronAxes(2)})
	mesh := shard.NewMesh([]int{2, 4}, []string{"dp", "tp"})
	tr, err := parallel.New(model, parallel.Config[nn.MLP, Batch]{
		Loss: func(m nn.MLP, b Batch) *tensor.Tensor {
			return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(b.X), b.Y))
		},
		Optimizer: optim.SGD(optim.Constant(0.1)),
		Mesh:      mesh,
		Strategy: parallel.Rules(shard.Rules{
			{Logical: nn.AxisBatch, Mesh: shard.Axes{"dp"}},
			{Logical: nn.AxisMLP, Mesh: shard.Axes{"tp"}},
			{Logical: nn.AxisEmbed, Mesh: nil},
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tr.PlacedParams().Layers[0].W)
	fmt.Println(tr.DataAxes())

	// A name no rule covers is an error naming the parameter.
	_, err = parallel.New(model, parallel.Config[nn.MLP, Batch]{
		Loss:      func(nn.MLP, Batch) *tensor.Tensor { return nil },
		Optimizer: optim.SGD(optim.Constant(0.1)),
		Mesh:      mesh,
		Strategy:  parallel.Rules(shard.Rules{{Logical: nn.AxisMLP, Mesh: shard.Axes{"tp"}}}),
	})
	fmt.Println(err)
	// Output:
	// f32[8,32@tp]
	// [dp]
	// parallel: shard.Rules: no rule for logical axes "embed" (on Layers[0].W)
}

// Parse a strategy from a flag.
func ExampleParseStrategy() {
	s, err := parallel.ParseStrategy("fsdp_tp")
	fmt.Println(s, err)
	_, err = parallel.ParseStrategy("zero")
	fmt.Println(err)
	// Output:
	// fsdp_tp <nil>
	// parallel: unknown strategy "zero" (want one of single, dp, fsdp, tp, fsdp_tp)
}
