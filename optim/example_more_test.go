package optim_test

import (
	"fmt"
	"strings"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// LBFGS fits the line of the package example in full batch. The line
// search evaluates the loss itself through Extra.ValueAndGrad, and leaves
// the loss and gradient at the new parameters in the state for the next
// step.
func ExampleLBFGS() {
	x := tensor.FromFloat32([]float32{-1, 0, 1, 2}, 4)
	y := tensor.FromFloat32([]float32{-1, 1, 3, 5}, 4) // y = 2x + 1
	vg := autodiff.ValueAndGrad(func(m Line) *tensor.Tensor {
		return tensor.MSE(tensor.Add(tensor.Mul(m.W, x), m.B), y)
	})
	calls := 0
	counted := func(m Line) (*tensor.Tensor, Line) { calls++; return vg(m) }

	model := Line{W: tensor.Scalar(0), B: tensor.Scalar(0)}
	opt := optim.LBFGS()
	state := opt.Init(model)
	for range 5 {
		value, grads := optim.ValueAndGradFromState(counted, model, state)
		model, state = optim.StepExtra(opt, model, grads, state,
			optim.Extra{Value: value, ValueAndGrad: optim.ValueAndGradOf(counted)})
	}
	fmt.Printf("W %.3f  B %.3f  after %d evaluations of the loss\n", model.W.Item(), model.B.Item(), calls)
	// Output:
	// W 2.000  B 1.000  after 6 evaluations of the loss
}

// Partition gives each group of parameters its own optimizer, by a label
// function of the path and value of each parameter.
func ExamplePartition() {
	type Net struct {
		Embed, W, B *tensor.Tensor
	}
	net := Net{Embed: tensor.Ones(tensor.Float32, 10, 4), W: tensor.Ones(tensor.Float32, 4, 4), B: tensor.Ones(tensor.Float32, 4)}
	lr := optim.Constant(0.01)
	opt := optim.Partition(map[string]optim.Transform{
		"frozen": optim.SetToZero(),
		"muon":   optim.Chain(optim.ScaleByMuon(), optim.ScaleByLearningRate(lr)),
		"adam":   optim.Adam(lr),
	}, func(path pytree.Path, x *tensor.Tensor) string {
		switch {
		case strings.HasPrefix(path.String(), "Embed"):
			return "frozen"
		case x.Rank() == 2:
			return "muon"
		}
		return "adam"
	})
	state := opt.Init(net)
	fmt.Println(pytree.FormatWidth(state, 120))
	// Output:
	// PartitionState{
	//   Inner: {
	//     "adam": AdamState{Count: i32[], Mu: Net{Embed: nil, W: nil, B: f32[4]}, Nu: Net{Embed: nil, W: nil, B: f32[4]}},
	//     "frozen": EmptyState{},
	//     "muon": [MuonState{Count: i32[], Mu: Net{Embed: nil, W: f32[4,4], B: nil}}, ScheduleState{Count: i32[]}],
	//   },
	// }
}

// The hyperparameters of an optimizer made by InjectHyperparams live in
// its state: readable, changeable between steps, saved by checkpoints.
func ExampleInjectHyperparams() {
	type hp struct {
		LR optim.Schedule // scheduled: recorded at each step
		B1 float64        // numeric: settable
	}
	opt := optim.InjectHyperparams(func(h hp) optim.Transform {
		return optim.Adam(h.LR, optim.AdamOptions{B1: h.B1})
	}, hp{LR: optim.Linear(1e-3, 1e-4, 10, 0), B1: 0.9})

	params := Line{W: tensor.Scalar(1), B: tensor.Scalar(0)}
	grads := Line{W: tensor.Scalar(0.5), B: tensor.Scalar(-0.5)}
	state := opt.Init(params)
	for range 5 {
		params, state = optim.Step(opt, params, grads, state)
	}
	st := state.(optim.InjectHyperparamsState[hp])
	fmt.Printf("learning rate of the last step %.2e, B1 %.2f\n", st.Hyperparams().LR(0), st.Hyperparams().B1)

	h := st.Hyperparams()
	h.B1 = 0.5
	state = st.WithHyperparams(h)
	fmt.Printf("B1 from now on %.2f\n", state.(optim.InjectHyperparamsState[hp]).Hyperparams().B1)
	// Output:
	// learning rate of the last step 6.40e-04, B1 0.90
	// B1 from now on 0.50
}
